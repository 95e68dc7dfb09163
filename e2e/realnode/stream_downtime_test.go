//go:build testbed

package realnode

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/e2e/spark"
)

// streamDowntime is what one stream's recovery was made of, each moment on the test's clock: the
// node's loss and its proof (the test's own acts; the proof when the taint was asked for), the old
// driver's JVM gone (the host's process table; partitions only), the new driver pod and its first
// executor pod made (first seen by the test's watch of the namespace's pods, which comes after
// their creation and, for the pod, after the proof: never before it, unlike their whole-second
// creationTimestamps), the new driver starting the query and committing its first batch (its log,
// within the 1 s poll). leaderElected is when a driverset replica took the leader's lease after
// the loss (the lease's acquireTime, to the microsecond): when the leader ran on the lost node,
// nothing of driverset acts until then. Zero: not seen, or not part of this kind of loss.
type streamDowntime struct {
	lost, confirmed, oldJVMGone, podMade, executorMade, queryStarted, committed time.Time
	leaderElected                                                               time.Time
}

// total is the stream's downtime: from the node's loss to the new driver's first committed batch.
func (d streamDowntime) total() time.Duration { return d.committed.Sub(d.lost) }

// driversetShare is the part of the downtime that is driverset's to make small: from the moment
// nothing more was needed of anyone (the proof; for a partition, the loss itself, since
// self-fencing needs nobody) to the new driver pod. The rest is the kubelet's, the JVM's,
// Spark's and the stream's.
func (d streamDowntime) driversetShare() time.Duration {
	from := d.lost
	if !d.confirmed.IsZero() {
		from = d.confirmed
	}
	return d.podMade.Sub(from)
}

// timeline says when each step came, in seconds after the loss, in the order they came.
func (d streamDowntime) timeline() string {
	type step struct {
		what string
		at   time.Time
	}
	steps := []step{
		{"proof (the taint)", d.confirmed}, {"old JVM gone", d.oldJVMGone},
		{"driverset's leader elected again (the lease's acquireTime)", d.leaderElected}, {"new driver pod made", d.podMade},
		{"first executor pod made", d.executorMade}, {"query started", d.queryStarted}, {"first batch committed", d.committed},
	}
	steps = slices.DeleteFunc(steps, func(s step) bool { return s.at.IsZero() })
	slices.SortStableFunc(steps, func(a, b step) int { return a.at.Compare(b.at) })
	parts := make([]string, 0, len(steps))
	for _, s := range steps {
		parts = append(parts, fmt.Sprintf("%s +%.1fs", s.what, s.at.Sub(d.lost).Seconds()))
	}
	return strings.Join(parts, ", ")
}

// measureDowntime waits for the first batch that the new driver (second) commits, reads from the
// pods' watch when its pod and its first executor pod were first seen, logs the timeline and
// returns it.
func measureDowntime(t *testing.T, r *sparkRun, pods *podWatch, second *seenDriver, lost, confirmed time.Time) streamDowntime {
	t.Helper()
	d := streamDowntime{lost: lost, confirmed: confirmed, queryStarted: second.startedSeen}
	waitFor(t, 3*time.Minute, "the new driver's first committed batch", func(context.Context) (bool, error) {
		for _, dl := range r.driverLogs() {
			if dl.pod == second.pod && dl.created.Equal(second.created) && reStreamCommitted.MatchString(dl.log) {
				d.committed = time.Now()
				return true, nil
			}
		}
		return false, nil
	})
	// The new driver pod: the first of its name made after the loss.
	var uid string
	for _, p := range pods.named(second.pod) {
		if p.added.at.After(lost) {
			d.podMade, uid = p.added.at, p.uid
			break
		}
	}
	if uid == "" {
		t.Errorf("the pods' watch saw no pod %s made after the loss", second.pod)
	}
	for _, e := range pods.executors() {
		if e.ownerUID == uid && (d.executorMade.IsZero() || e.added.at.Before(d.executorMade)) {
			d.executorMade = e.added.at
		}
	}
	d.leaderElected = leaderElectedAfter(t, lost)
	t.Logf("stream down %.1fs, from the node's loss to the new driver's first committed batch: %s; driverset's share (to the new pod, from %s) %.2fs",
		d.total().Seconds(), d.timeline(), map[bool]string{true: "the proof", false: "the loss"}[!confirmed.IsZero()], d.driversetShare().Seconds())
	if !d.podMade.IsZero() && d.driversetShare() < 0 {
		t.Errorf("the new driver pod was seen %.3fs before the moment it was waiting for: the measurement is wrong", -d.driversetShare().Seconds())
	}
	return d
}

// streamBenchWindow is how long the stream without driverset is watched after its node's loss and
// proof for a sign that it resumes: several times what driverset's recoveries take here.
const streamBenchWindow = 150 * time.Second

// TestStreamDowntimeSideBySide (make bench-stream; DRIVERSET_STREAMS=bench) measures, in one
// run on the real nodes, the same stateless stream (file sink, checkpoint on shared storage)
// through the loss of its driver's node three ways: with driverset, the node killed then tainted
// out-of-service; with driverset and self-fence, the node cut off and nobody acting; and without
// driverset, killed then tainted. Each driverset run is held to every promise of
// TestStreamThroughTheLossOfItsDriversNode (resumed from the checkpoint, exactly once, no two
// JVMs) and says what its downtime was made of; the run without driverset must not resume within
// streamBenchWindow (Spark alone has nothing to start a driver again).
func TestStreamDowntimeSideBySide(t *testing.T) {
	if os.Getenv(streamsEnv) != "bench" {
		t.Skipf("a benchmark: %s=bench (make bench-stream)", streamsEnv)
	}
	if len(bed.images.spark) == 0 {
		t.Skipf("no real Spark version chosen (%s=none)", sparkVersionsEnv)
	}
	d := bed.images.spark[len(bed.images.spark)-1] // the newest version built
	var killed, cut streamDowntime
	t.Run("driverset-killed", func(t *testing.T) {
		killed = runStream(t, d, streamCase{version: d.Version, query: streamStateless, loss: lossKilled}, nil)
	})
	t.Run("driverset-partitioned", func(t *testing.T) {
		cut = runStream(t, d, streamCase{version: d.Version, query: streamStateless, loss: lossPartitioned}, nil)
	})
	var plain plainStreamLoss
	t.Run("without-driverset-killed", func(t *testing.T) { plain = runPlainStreamLoss(t, d) })
	t.Logf("Spark %s, %d batches of %d values every %d ms, side by side:", d.Version, streamBatches, streamRows, streamBatchMillis)
	for _, row := range []struct {
		name string
		d    streamDowntime
	}{{"driverset, killed + out-of-service taint", killed}, {"driverset, cut off, self-fence " + streamSelfFence.String(), cut}} {
		if row.d.committed.IsZero() {
			t.Logf("  %s: not measured (failed, or not run)", row.name)
			continue
		}
		t.Logf("  %s: down %.1fs (driverset's share %.1fs): %s", row.name, row.d.total().Seconds(), row.d.driversetShare().Seconds(), row.d.timeline())
	}
	t.Logf("  without driverset, killed + out-of-service taint: %s", plain)
}

// plainStreamLoss is what became of the stream without driverset after its node's loss.
type plainStreamLoss struct {
	watched                 time.Duration
	committedBefore, after  int // batches its driver committed before the loss, and after it
	driversAfter            int // driver pods that started the query after the loss
	submitCode              int
	submitPhases            []string
	submitReturned, checked bool
}

func (p plainStreamLoss) String() string {
	if !p.checked {
		return "not measured (failed, or not run)"
	}
	return fmt.Sprintf("not resumed: %d batches committed before the loss, %d after it, %d drivers started after it, watched %.0fs after the proof; spark-submit returned %v (exit %d, phases %v)",
		p.committedBefore, p.after, p.driversAfter, p.watched.Seconds(), p.submitReturned, p.submitCode, p.submitPhases)
}

// runPlainStreamLoss runs the stateless stream without driverset's opt-in, kills its driver's
// node after streamKillAfter committed batches, proves it dead with the out-of-service taint as
// for driverset, and watches for streamBenchWindow: no driver may start the query again.
func runPlainStreamLoss(t *testing.T, d spark.Dist) plainStreamLoss {
	shared := newSharedStorage(t)
	job := sparkJob{class: spark.StreamClass, conf: shared.conf(),
		args: []string{"/shared/checkpoint", "/shared/out", fmt.Sprint(streamRows), fmt.Sprint(streamBatches), fmt.Sprint(streamBatchMillis)}}
	job.conf["spark.executor.instances"] = "1"
	job.conf["spark.sql.shuffle.partitions"] = "2"
	var out plainStreamLoss
	r := runSparkJob(t, d, job, func(t *testing.T, r *sparkRun) {
		first := waitDriverLog(t, r, reStreamCommitted, streamKillAfter)
		out.committedBefore = len(reStreamCommitted.FindAllString(first.log, -1))
		if err := bed.cluster.KillNode(context.Background(), first.node); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { reviveIfDead(t, first.node) })
		waitNodeUnknown(t, first.node)
		if err := bed.cluster.TaintOutOfService(context.Background(), first.node); err != nil {
			t.Fatal(err)
		}
		proof := time.Now()
		for time.Since(proof) < streamBenchWindow {
			time.Sleep(5 * time.Second)
			for _, dl := range r.driverLogs() {
				if dl.created.After(first.created) && reStreamStarted.MatchString(dl.log) {
					t.Errorf("without driverset, a driver started the query again after its node's loss: %s on %s", dl.pod, dl.node)
					return
				}
			}
		}
		out.watched = time.Since(proof)
		for _, dl := range r.driverLogs() {
			if dl.created.After(first.created) && reStreamStarted.MatchString(dl.log) {
				out.driversAfter++
			}
		}
		out.submitReturned = !r.Running()
	})
	out.submitCode, out.submitPhases = r.code, r.phases()
	// What the sink committed: the stream stopped where its driver died.
	sink, err := spark.ReadFileSinkLog(shared.host("/shared/out"))
	if err != nil {
		t.Errorf("the sink's log: %v", err)
	}
	committed := int(sink.LastBatch + 1)
	out.after = max(committed-out.committedBefore, 0)
	if committed >= streamBatches {
		t.Errorf("without driverset, the stream committed all %d batches: it resumed", committed)
	}
	out.checked = !t.Failed()
	t.Logf("without driverset: %s", out)
	return out
}

// leaderElectedAfter is when a driverset replica acquired the leader's lease, if after t: the
// leader had run on the lost node, and its successor waited for the lease to expire.
func leaderElectedAfter(t *testing.T, after time.Time) time.Time {
	t.Helper()
	l, err := kube().CoordinationV1().Leases(driversetNamespace).Get(context.Background(), driversetLeaderLease, metav1.GetOptions{})
	if err != nil {
		t.Errorf("driverset's leader lease: %v", err)
		return time.Time{}
	}
	if l.Spec.AcquireTime == nil || !l.Spec.AcquireTime.After(after) {
		return time.Time{}
	}
	return l.Spec.AcquireTime.Time
}

// driversetLeaderLease is the Lease driverset's replicas elect their leader with (serve.go's LeaderElectionID).
const driversetLeaderLease = "driverset.driverset.dev"
