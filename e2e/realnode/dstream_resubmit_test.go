//go:build testbed

package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/spark"
)

// dstreamResubmitBatches is the DStream's length in this test. A DStream generates its batches by
// the clock from its checkpoint's zero time, and a recovered driver runs every batch that fell due
// while none ran: the stream must outlast the first app, its deletion, the second app's start and
// a node loss, or the second app's first driver would write the last batch before its node dies.
const dstreamResubmitBatches = 70

// executorAntiAffinity is an executor pod template that keeps executors off every node running a
// driver: the test needs the second app's executor to outlive its driver's node, on a live node
// where only driverset (or the garbage collector) removes it.
const executorAntiAffinity = `apiVersion: v1
kind: Pod
spec:
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector:
          matchLabels:
            spark-role: driver
        topologyKey: kubernetes.io/hostname
`

// TestDStreamResubmittedUnderAnotherNameThenItsNodeIsLost (issue 33, "a DStream app resubmitted
// onto its checkpoint"): Spark 3.5.6's StreamingContext.getOrCreate restores the whole SparkConf
// from its checkpoint but for a reload list (host, ports, the driver's pod name, the executor
// prefix), so a DStream app submitted again under another name onto an old checkpoint makes
// executors that carry the old app's driverset.dev/driver label and app id. App A runs a few
// batches and is deleted (`kubectl delete pod` waits until its placeholder is gone); app B, under
// another name, is submitted onto the same checkpoint and resumes it; then B's driver's node is
// killed and proven dead with the out-of-service taint. B's first incarnation's executor, labelled
// as A's and kept off the drivers' nodes, must be gone before B's next incarnation is scheduled
// (driverset finds it by its owner, B's S-0, and deletes it, and the incarnation gate holds the
// next S-0 while it exists; the pods' watch says in which order things happened), B ends
// Succeeded, and every batch is written once. make e2e-streams only.
func TestDStreamResubmittedUnderAnotherNameThenItsNodeIsLost(t *testing.T) {
	if os.Getenv(streamsEnv) != "all" {
		t.Skipf("a make e2e-streams case (%s=all)", streamsEnv)
	}
	d, err := spark.Find(bed.images.spark, "3.5.6")
	if err == nil {
		if has, herr := d.HasDStreams(); herr != nil || !has {
			err = fmt.Errorf("no spark-streaming in Spark %s's jars (%v)", d.Version, herr)
		}
	}
	if err != nil {
		t.Skipf("Spark 3.5.6 with DStreams is not among the images: %v", err)
	}
	shared := newSharedStorage(t)
	ns := namespace(t, nil)
	template := filepath.Join(t.TempDir(), "executor.yaml")
	if err := os.WriteFile(template, []byte(executorAntiAffinity), 0o644); err != nil {
		t.Fatal(err)
	}
	job := sparkJob{
		resilient: true, namespace: ns, class: spark.DStreamClass, conf: shared.conf(),
		args: []string{"/shared/checkpoint", "/shared/out", fmt.Sprint(streamRows), fmt.Sprint(dstreamResubmitBatches), fmt.Sprint(streamBatchMillis)},
	}
	job.conf["spark.executor.instances"] = "1"
	job.conf["spark.kubernetes.executor.podTemplateFile"] = template

	// App A: a few batches, then deleted as a user deletes an app, waiting until it is gone.
	a := runSparkJob(t, d, job, func(t *testing.T, r *sparkRun) {
		waitDriverLog(t, r, reStreamCommitted, streamKillAfter)
		deleteApp(t, ns, r.app.Name+"-driver")
	})
	aStarted := startedIDs(a)
	t.Logf("app A (%s) deleted after %d batches; its spark-submit returned %d, phases %v; app ids %v",
		a.names.StatefulSet, streamKillAfter, a.code, a.phases(), aStarted)

	// App B: another name, the same checkpoint; its node killed once it has written a few batches.
	pods := watchPods(t, ns)
	job.name = "pi2"
	var lostNode string
	var tainted time.Time
	b := runSparkJob(t, d, job, func(t *testing.T, r *sparkRun) {
		_, tainted, _ = killDriverNodeAfter(t, r, reStreamCommitted, streamKillAfter, reStreamStarted)
		lostNode = r.driverLogs()[0].node
	})
	pods.stop()
	if b.code != 0 || last(b.phases()) != "Succeeded" {
		t.Errorf("app B: spark-submit exited %d, phases %v; want 0 and Succeeded", b.code, b.phases())
	}
	bStarted := startedIDs(b)
	t.Logf("app ids: A's driver %v, B's drivers %v (restored from the checkpoint when equal)", aStarted, bStarted)
	if len(bStarted) != 2 {
		b.logDrivers(t)
		t.Fatalf("want B's driver started twice (before and after its node's loss), saw %v", bStarted)
	}
	for i, dl := range b.driverLogs() {
		resumed, err := spark.ResumedAt([]byte(dl.log))
		if err != nil {
			t.Errorf("B's driver %d (%s on %s): %v", i, dl.pod, dl.node, err)
			continue
		}
		t.Logf("B's driver %d on %s resumed at batch %d", i, dl.node, resumed)
		if resumed == 0 {
			t.Errorf("B's driver %d on %s started the stream over at batch 0: the checkpoint was not used", i, dl.node)
		}
	}

	checkResubmittedExecutorsHeld(t, pods, a.names.StatefulSet, b.names, lostNode, tainted)
	logDriversetDecisions(t, ns)

	if err := spark.CheckValueBatches(shared.host("/shared/out"), streamRows, dstreamResubmitBatches); err != nil {
		t.Errorf("exactly once: %v", err)
	} else {
		t.Logf("exactly once: every one of the %d batch files holds its %d values once", dstreamResubmitBatches, streamRows)
	}
}

// checkResubmittedExecutorsHeld holds B's recovery to its promise, from the pods' watch: B's first
// incarnation's executors carry A's label (the premise: if not, Spark now reloads the labels), at
// least one ran on a live node, and every one of them was found by driverset (deleted before its
// owner, B's first S-0, was gone, or the next S-0 held by the gate) and gone before B's next S-0
// was scheduled.
func checkResubmittedExecutorsHeld(t *testing.T, pods *podWatch, aSTS string, b contract.Names, lostNode string, tainted time.Time) {
	t.Helper()
	drivers := pods.named(b.DriverPodName())
	if len(drivers) < 2 {
		t.Fatalf("want two incarnations of %s in the pods' watch, saw %d", b.DriverPodName(), len(drivers))
	}
	first, next := drivers[0], drivers[1]
	at := func(s seen) string {
		if s.zero() {
			return "never"
		}
		return fmt.Sprintf("%+.1fs", s.at.Sub(tainted).Seconds())
	}
	t.Logf("B's first S-0 %s on %s: delete seen %s, gone %s (times from the taint)", first.uid, first.node, at(first.deleting), at(first.gone))
	t.Logf("B's next S-0 %s: made %s (gated by %s at admission: %v), scheduled on %s %s, driver running %s",
		next.uid, at(next.added), contract.GateStaleExecutors, next.gatedAtAdmission, next.node, at(next.scheduled), at(next.running))
	var old []*podRecord
	for _, e := range pods.executors() {
		if e.ownerUID == first.uid {
			old = append(old, e)
		}
	}
	if len(old) == 0 {
		t.Fatalf("B's first incarnation made no executor seen by the watch")
	}
	onLive, lastGone := 0, seen{}
	for _, e := range old {
		t.Logf("B's first incarnation's executor %s on %s, labelled %s=%s, app %s: delete seen %s (watch #%d; phase %s, container running %v), gone %s (#%d); its owner, B's first S-0, gone #%d",
			e.name, e.node, contract.LabelDriver, e.driverLabel, e.appID, at(e.deleting), e.deleting.seq, e.phaseAtDelete, e.runningAtDelete,
			at(e.gone), e.gone.seq, first.gone.seq)
		// Who removed it: the garbage collector deletes a pod's dependents only once the pod is
		// gone (driverset force-deletes S-0 in the background); driverset deletes a lost
		// incarnation's executors before S-0, in the same pass (dropExecutorsOf), or the
		// incarnation gate holds the next S-0 for them.
		byDriverset := !e.deleting.zero() && (first.gone.zero() || e.deleting.seq < first.gone.seq)
		if !byDriverset && !next.gatedAtAdmission {
			t.Errorf("executor %s of B's lost incarnation was neither deleted by driverset before its owner went (deleted #%d, owner gone #%d) nor held for by the incarnation gate: driverset did not find it",
				e.name, e.deleting.seq, first.gone.seq)
		}
		if e.driverLabel != aSTS {
			t.Errorf("executor %s is labelled %s=%q, not A's %q: Spark now reloads the executor labels from the submission (update docs/limits.md and design.md)",
				e.name, contract.LabelDriver, e.driverLabel, aSTS)
		}
		if e.node != lostNode {
			onLive++
		}
		switch {
		case e.gone.zero():
			t.Errorf("executor %s of B's lost incarnation was never removed (delete seen %s)", e.name, at(e.deleting))
		case lastGone.zero() || e.gone.seq > lastGone.seq:
			lastGone = e.gone
		}
	}
	if onLive == 0 {
		t.Errorf("no executor of B's first incarnation ran on a live node (all on %s): nothing shown", lostNode)
	}
	switch {
	case next.scheduled.zero():
		t.Errorf("B's next S-0 was never scheduled")
	case lastGone.zero():
	case next.scheduled.seq < lastGone.seq:
		t.Errorf("B's next S-0 was scheduled (%s) while an executor of its lost incarnation, labelled as A's, still existed (gone %s)",
			at(next.scheduled), at(lastGone))
	default:
		t.Logf("B's next S-0 scheduled %s, after its lost incarnation's last executor was gone (%s)", at(next.scheduled), at(lastGone))
	}
}

// deleteApp deletes an app's placeholder and waits until it is gone, as `kubectl delete pod` does.
func deleteApp(t *testing.T, ns, placeholder string) {
	t.Helper()
	if err := kube().CoreV1().Pods(ns).Delete(context.Background(), placeholder, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Minute, "the deleted placeholder "+placeholder+" gone", func(ctx context.Context) (bool, error) {
		_, err := kube().CoreV1().Pods(ns).Get(ctx, placeholder, metav1.GetOptions{})
		return err != nil, notGoneErr(err)
	})
}

// startedIDs is the app id each driver of r printed when it started the stream, in order.
func startedIDs(r *sparkRun) []string {
	var out []string
	for _, dl := range r.driverLogs() {
		if m := reStreamStarted.FindStringSubmatch(dl.log); m != nil {
			out = append(out, m[1])
		}
	}
	return out
}

// logDriversetDecisions logs driverset's own lines about namespace ns (its controller's decisions,
// its webhooks' answers), and the namespace's Events.
func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

func logDriversetDecisions(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	if evs, err := kube().CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
		slices.SortStableFunc(evs.Items, func(a, b corev1.Event) int { return eventTime(a).Compare(eventTime(b)) })
		for _, e := range evs.Items {
			if e.Source.Component == "default-scheduler" || strings.HasPrefix(e.Reason, "Pull") {
				continue
			}
			t.Logf("event %s %s/%s %s: %s", eventTime(e).Format("15:04:05.000"), e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	pods, err := kube().CoreV1().Pods(driversetNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=driverset"})
	if err != nil {
		t.Logf("driverset's pods: %v", err)
		return
	}
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			raw, err := kube().CoreV1().Pods(driversetNamespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name}).DoRaw(ctx)
			if err != nil {
				continue
			}
			for _, l := range strings.Split(string(raw), "\n") {
				if strings.Contains(l, ns) {
					t.Logf("driverset %s: %s", p.Name, l)
				}
			}
		}
	}
}
