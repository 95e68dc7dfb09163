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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/e2e/spark"
)

// TestDemoStream is `make demo-stream` (DRIVERSET_STREAMS=demo; skipped otherwise, so that CI
// does not run it twice): what driverset exists for, told to a newcomer one plain line a step.
// A Structured Streaming query of real Spark on the real nodes, its checkpoint and output on a
// folder every node mounts; its driver's node killed after a few batches and proven dead with
// the out-of-service taint; driverset's new driver on another node resuming from the checkpoint;
// the stream finishing; every input record in the committed output exactly once. The run is
// runStream's, held to every promise of TestStreamThroughTheLossOfItsDriversNode: the demo fails
// when the story breaks (no new driver, a resume from batch 0, a record lost or twice, the app
// not Succeeded). The story says only what runStream saw and checked.
func TestDemoStream(t *testing.T) {
	if os.Getenv(streamsEnv) != "demo" {
		t.Skipf("a demo: %s=demo (make demo-stream)", streamsEnv)
	}
	if len(bed.images.spark) == 0 {
		t.Skipf("no real Spark version chosen (%s=none)", sparkVersionsEnv)
	}
	d := bed.images.spark[0] // make demo-stream builds one version
	s := &story{t: t, start: time.Now()}
	s.say(s.start, "spark-submit --deploy-mode cluster a Structured Streaming query, opted in to driverset (real Spark %s on %d real nodes): %d batches of %d records, one batch every %.0f s; its checkpoint and output on /shared, a folder every node mounts (an NFS share's stand-in)",
		d.Version, realNodes, streamBatches, streamRows, (time.Duration(streamBatchMillis) * time.Millisecond).Seconds())
	runStream(t, d, streamCase{version: d.Version, query: streamStateless, loss: lossKilled}, s)
	s.end()
}

// story tells a stream's run as runStream sees it, one plain line a step, each timed from the
// story's start; at the end, the whole story again in the order things happened. A nil story
// (every other caller of runStream) tells nothing and costs nothing.
type story struct {
	t     *testing.T
	start time.Time
	lines []storyLine
	// first is the driver that ran before the loss, second the one driverset started after it.
	first, second *seenDriver
}

type storyLine struct {
	at   time.Time
	line string
}

// say tells one step, which happened at at.
func (s *story) say(at time.Time, format string, args ...any) {
	if s == nil {
		return
	}
	l := storyLine{at: at, line: fmt.Sprintf("[%6.1fs] ", at.Sub(s.start).Seconds()) + fmt.Sprintf(format, args...)}
	s.lines = append(s.lines, l)
	s.t.Log("STORY " + l.line)
}

// running waits for the batches the first driver commits before its node is lost, and tells them.
func (s *story) running(t *testing.T, r *sparkRun) {
	if s == nil {
		return
	}
	t.Helper()
	s.first = waitDriverLog(t, r, reStreamCommitted, streamKillAfter)
	batches := spark.CommittedBatches([]byte(s.first.log))
	s.say(time.Now(), "records going in: the driver runs in pod %s on node %s (driverset's StatefulSet; spark-submit watches the placeholder %s) and has committed batches %s: %d records",
		s.first.pod, s.first.node, r.app.Conf["spark.kubernetes.driver.pod.name"], spanOf(batches), int64(len(batches))*streamRows)
}

// spanOf writes batches 0, 1, 2, 3 as 0–3 (one span: what a stream commits).
func spanOf(bs []int64) string {
	if len(bs) == 0 {
		return "none"
	}
	return fmt.Sprintf("%d–%d", slices.Min(bs), slices.Max(bs))
}

// killed tells the node's loss, its proof as the Node object shows it, and driverset's new driver.
func (s *story) killed(t *testing.T, killed, tainted time.Time, second *seenDriver) {
	if s == nil {
		return
	}
	t.Helper()
	s.second = second
	s.say(killed, "the driver's node %s is killed: its kubelet, containers and the driver's JVM stop at once, nothing told to anyone", s.first.node)
	node, err := kube().CoreV1().Nodes().Get(context.Background(), s.first.node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready := "?"
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = string(c.Status)
		}
	}
	proof := slices.ContainsFunc(node.Spec.Taints, func(tn corev1.Taint) bool {
		return tn.Key == corev1.TaintNodeOutOfService && tn.Effect == corev1.TaintEffectNoExecute
	})
	if !proof {
		t.Errorf("node %s carries no %s:NoExecute taint after the admin's proof: %v", node.Name, corev1.TaintNodeOutOfService, node.Spec.Taints)
	}
	s.say(tainted, "the proof: %s's Ready is %s (its kubelet silent), and the admin taints it %s:NoExecute (on the node now: %v); until such a proof driverset starts no second driver",
		node.Name, ready, corev1.TaintNodeOutOfService, proof)
	made := second.created
	if made.Before(tainted) {
		made = tainted // in the proof's second (afterProof): told after it
	}
	s.say(made, "driverset's new driver pod %s on node %s, %s; the old one was on %s", second.pod, second.node,
		afterProof(second.created.Sub(tainted)), s.first.node)
}

// afterProof says how long after the proof driverset made the new pod. The apiserver stamps a
// pod's creation to the whole second, and the proof's time is when the taint's update returned:
// a pod made in the proof's second can seem made before it.
func afterProof(d time.Duration) string {
	if d < time.Second {
		return "within a second of the proof"
	}
	return fmt.Sprintf("%.1f s after the proof", d.Seconds())
}

// recovered tells the new driver's first committed batch: the stream's downtime.
func (s *story) recovered(d streamDowntime) {
	if s == nil {
		return
	}
	s.say(d.committed, "the stream is back: the new driver committed its first batch %.1f s after the kill (driverset's share: the new pod %s)",
		d.total().Seconds(), afterProof(d.driversetShare()))
}

// resumed tells the batch the new driver ran first, when it started the query.
func (s *story) resumed(batch int64) {
	if s == nil || s.second == nil {
		return
	}
	if batch == 0 {
		s.say(s.second.startedSeen, "the new driver starts the stream over at batch 0: its checkpoint was not used")
		return
	}
	s.say(s.second.startedSeen, "the new driver resumes from the checkpoint at batch %d, not 0: batches 0–%d are not run again", batch, batch-1)
}

// finished tells how spark-submit, which watched throughout, saw the app end.
func (s *story) finished(r *sparkRun) {
	if s == nil {
		return
	}
	s.say(time.Now(), "the stream finished: spark-submit, watching all along, returned %d; the driver pod's phases it saw: %s", r.code, strings.Join(r.phases(), ", "))
}

// checked tells what the committed output holds, counted, against the input.
func (s *story) checked(c spark.SinkCounts, err error, d streamDowntime) {
	if s == nil {
		return
	}
	verdict := "exactly once"
	if err != nil {
		verdict = "NOT exactly once"
	}
	ignored := ""
	if c.Uncommitted > 0 {
		ignored = fmt.Sprintf("; %d files of a batch cut short lie there uncommitted, ignored as Spark's readers ignore them", c.Uncommitted)
	}
	s.say(time.Now(), "the check, %s: %d input records; the sink's log commits %d batches in %d files holding %d records: %d distinct input records, %d read twice, %d missing, %d not from the input%s; the stream was down %.1f s",
		verdict, streamRows*streamBatches, c.Batches, c.Files, c.Values, c.Distinct, c.Twice, c.Missing, c.Foreign, ignored, d.total().Seconds())
}

// end tells the whole story again, in the order things happened.
func (s *story) end() {
	if s == nil {
		return
	}
	lines := slices.Clone(s.lines)
	slices.SortStableFunc(lines, func(a, b storyLine) int { return a.at.Compare(b.at) })
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("\n  " + l.line)
	}
	verdict := "the story held"
	if s.t.Failed() {
		verdict = "the story broke (FAIL above)"
	}
	s.t.Logf("the story, in order (%s):%s", verdict, b.String())
}
