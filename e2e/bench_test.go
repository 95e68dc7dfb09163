//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/harness"
)

// Benchmark knobs (environment, so that `make bench` needs no flags):
//   - DRIVERSET_BENCH_SAMPLES: samples per path and workload (default 3);
//   - DRIVERSET_BENCH_DRIVERS: drivers on the one node of the many-drivers row (default 50);
//   - DRIVERSET_BENCH_ROUNDS: rounds of the admission latency benchmark (default 20, 1,000
//     creates of each kind; four times as many halve its intervals at about 7 minutes more);
//   - DRIVERSET_BENCH_INJECT_DELAY: a test-only regression, e.g. 2s: the harness stops the
//     driverset process for that long right after the proof of a node's loss (the deletion, the
//     taint), as a driverset that reacts that much later would. It shows that the benchmark sees
//     a regression of that size; the product has no such setting.
const (
	envBenchSamples = "DRIVERSET_BENCH_SAMPLES"
	envBenchDrivers = "DRIVERSET_BENCH_DRIVERS"
	envBenchRounds  = "DRIVERSET_BENCH_ROUNDS"
	envBenchDelay   = "DRIVERSET_BENCH_INJECT_DELAY"
)

// benchExecutors is how many executors each driverset app runs: its next incarnation is held
// until the old ones are gone (the stale-executor gate), and that wait is in the measured time.
const benchExecutors = 1

// benchSelfFenceT is the self-fence row's T (the admin's default floor).
const benchSelfFenceT = 10 * time.Second

// lossPath is one way a node is lost. lose returns once the loss is proven to Kubernetes (the
// Node deleted, the taint applied) or, for a silent death, once the node is dead.
type lossPath struct {
	name   string
	silent bool // nobody proves the loss: a plain StatefulSet never recovers
	lose   func(ctx context.Context, node string) error
	// annotations of the driverset app on this path (fence-after, self-fence).
	annotations map[string]string
}

func nodeDeleted() lossPath {
	return lossPath{name: "node deleted", lose: func(ctx context.Context, node string) error { return bed.cluster.DeleteNode(ctx, node) }}
}

func outOfService() lossPath {
	return lossPath{name: "node dies, out-of-service taint once NotReady", lose: func(ctx context.Context, node string) error {
		if err := bed.cluster.KillNode(ctx, node); err != nil {
			return err
		}
		if err := waitNodeCondition(ctx, node, corev1.ConditionTrue, false); err != nil {
			return err
		}
		return bed.cluster.TaintOutOfService(ctx, node)
	}}
}

func silentDeath(name string, annotations map[string]string) lossPath {
	return lossPath{name: name, silent: true, annotations: annotations,
		lose: func(ctx context.Context, node string) error { return bed.cluster.KillNode(ctx, node) }}
}

// BenchmarkRecovery measures, on each path of losing a node under a running driver, the time
// from the loss to the replacement Running on another node: samples of a driverset app (a driver
// with executors) and, interleaved in the same run, of a plain StatefulSet of one. Each row
// reports the medians with their spread and the ratio of the medians on the same path; a path
// on which a plain StatefulSet never recovers shows that by a bounded wait, and driverset's time
// alone. The last row puts many drivers on one node that dies and compares the time to the last
// one's recovery with one driver's on the same path. It prints the table of docs/measurements.md#recovery-after-node-loss-kwok at the end.
//
//	make bench   (go test -tags testbed -run '^$' -bench Recovery -benchtime 1x ./e2e/)
func BenchmarkRecovery(b *testing.B) {
	samples := benchEnvInt(b, envBenchSamples, 3)
	drivers := benchEnvInt(b, envBenchDrivers, 50)
	var delay time.Duration
	if v := os.Getenv(envBenchDelay); v != "" {
		var err error
		if delay, err = time.ParseDuration(v); err != nil {
			b.Fatalf("%s=%q: %v", envBenchDelay, v, err)
		}
	}
	r := &benchRun{samples: samples, delay: delay}
	b.Cleanup(func() {
		fmt.Printf("\nBenchmarkRecovery: %s, %d samples per path and workload, injected delay %s\n\n%s\n",
			time.Now().UTC().Format("2006-01-02 15:04 MST"), samples, delay, r.table())
	})
	b.Run("node-deleted", func(b *testing.B) { r.pairedRow(b, nodeDeleted()) })
	b.Run("out-of-service", func(b *testing.B) { r.pairedRow(b, outOfService()) })
	b.Run("silent-fence-after-30s", func(b *testing.B) {
		r.silentRow(b, silentDeath("node dies silently, `fence-after: 30s`", map[string]string{contract.AnnotationFenceAfter: "30s"}))
	})
	b.Run("silent-self-fence-10s", func(b *testing.B) {
		r.silentRow(b, silentDeath("node dies silently, `self-fence: 10s`", map[string]string{contract.AnnotationSelfFence: benchSelfFenceT.String()}))
	})
	b.Run(fmt.Sprintf("%d-drivers-out-of-service", drivers), func(b *testing.B) { r.manyRow(b, outOfService(), drivers) })
}

// benchRun holds the rows measured so far, for the table.
type benchRun struct {
	samples int
	delay   time.Duration
	rows    []benchRow
	// plainSilent is the one bounded wait for a plain StatefulSet on a silent death, shared by
	// the silent rows (the same plain path).
	plainSilent *time.Duration
}

// benchRow is one line of the table: what is measured against what, on one path.
type benchRow struct {
	path, baselineName, subjectName string
	baseline, subject               harness.Samples
	never                           time.Duration // >0: the baseline never recovered within it
	ratio                           float64
}

// pairedRow measures a plain StatefulSet and a driverset app on path, one sample of each in
// turn, so that both see the same machine.
func (r *benchRun) pairedRow(b *testing.B, path lossPath) {
	row := benchRow{path: path.name, baselineName: "plain StatefulSet", subjectName: "driverset"}
	for i := range r.samples {
		row.baseline = append(row.baseline, r.sample(b, path, i, false, 1))
		row.subject = append(row.subject, r.sample(b, path, i, true, 1))
	}
	r.finish(b, row)
}

// silentRow measures driverset alone on a silent death, and shows once, by a bounded wait, that a
// plain StatefulSet does not recover there.
func (r *benchRun) silentRow(b *testing.B, path lossPath) {
	row := benchRow{path: path.name, baselineName: "plain StatefulSet", subjectName: "driverset"}
	for i := range r.samples {
		row.subject = append(row.subject, r.sample(b, path, i, true, 1))
	}
	if r.plainSilent == nil {
		// Twice driverset's slowest recovery, and at least a minute.
		bound := max(time.Minute, time.Duration(2*row.subject.Max()*float64(time.Second))).Round(time.Second)
		r.plainNever(b, path, bound)
		r.plainSilent = &bound
	}
	row.never = *r.plainSilent
	r.rows = append(r.rows, row)
	b.ReportMetric(row.subject.Median(), "driverset-s")
	b.ReportMetric(row.subject.Spread(), "driverset-spread")
}

// manyRow measures n driverset apps on one node against one app on the same path: the time to
// the last one's recovery.
func (r *benchRun) manyRow(b *testing.B, path lossPath, n int) {
	row := benchRow{path: fmt.Sprintf("%s, %d drivers on the node (time to the last)", path.name, n),
		baselineName: "1 driver", subjectName: fmt.Sprintf("%d drivers", n)}
	for i := range r.samples {
		row.baseline = append(row.baseline, r.sample(b, path, i, true, 1))
		row.subject = append(row.subject, r.sample(b, path, i, true, n))
	}
	r.finish(b, row)
	if row := r.rows[len(r.rows)-1]; row.ratio > 1.5 {
		b.Errorf("%d drivers on one lost node took %.2fx the time of one (%s vs %s): the target is 1.5x", n, row.ratio, row.subject, row.baseline)
	}
}

// finish computes the row's ratio (a missing baseline fails the benchmark) and reports it.
func (r *benchRun) finish(b *testing.B, row benchRow) {
	ratio, err := harness.Ratio(row.subject, row.baseline)
	if err != nil {
		b.Fatalf("%s: %v", row.path, err)
	}
	row.ratio = ratio
	r.rows = append(r.rows, row)
	b.ReportMetric(row.baseline.Median(), "baseline-s")
	b.ReportMetric(row.subject.Median(), "driverset-s")
	b.ReportMetric(row.baseline.Spread(), "baseline-spread")
	b.ReportMetric(row.subject.Spread(), "driverset-spread")
	b.ReportMetric(ratio, "x-baseline")
	b.Logf("%s: %s %s, %s %s, ratio of medians %.2fx", row.path, row.baselineName, row.baseline, row.subjectName, row.subject, ratio)
}

// table is the table of docs/measurements.md#recovery-after-node-loss-kwok: median (min–max) per path and workload, and the ratio of medians.
func (r *benchRun) table() string {
	var s strings.Builder
	s.WriteString("| path | baseline | baseline: median (min–max) | driverset: median (min–max) | ratio of medians |\n|---|---|---|---|---|\n")
	for _, row := range r.rows {
		base, ratio := spread(row.baseline), fmt.Sprintf("%.2f×", row.ratio)
		if row.never > 0 {
			base, ratio = fmt.Sprintf("never (not within %s)", row.never), "— (absolute)"
		}
		subject := spread(row.subject)
		if row.subjectName != "driverset" {
			subject = row.subjectName + ": " + subject
		}
		fmt.Fprintf(&s, "| %s | %s | %s | %s | %s |\n", row.path, row.baselineName, base, subject, ratio)
	}
	return s.String()
}

func spread(s harness.Samples) string {
	return fmt.Sprintf("%.1f s (%.1f–%.1f)", s.Median(), s.Min(), s.Max())
}

// sample runs one workload (a plain StatefulSet, or n driverset apps on one node) on a node,
// loses that node on path and returns the seconds from the loss until every pod of the workload
// was replaced by one Running on another node.
func (r *benchRun) sample(b *testing.B, path lossPath, i int, driverset bool, n int) float64 {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := benchNamespace(b, ctx)
	var w *workload
	if driverset {
		w = startDriversetApps(b, ctx, ns, n, path.annotations)
	} else {
		w = startPlain(b, ctx, ns)
	}
	// A spare node takes the workload; the lost one is removed afterwards, so that dead nodes do
	// not pile up into a disrupted zone (in which nothing is fenced or evicted).
	bed.spareNode(b, ctx)
	defer bed.forgetNode(ctx, w.node)

	var counters map[string]float64
	if n > 1 {
		counters = controllerCounters(b)
	}
	b.StartTimer()
	lost := time.Now()
	if w.atLoss != nil {
		w.atLoss()
	}
	if err := path.lose(ctx, w.node); err != nil {
		b.Fatal(err)
	}
	proven := time.Now()
	if driverset && r.delay > 0 && !path.silent {
		if err := bed.driverset.Pause(r.delay); err != nil {
			b.Fatal(err)
		}
	}
	replaced, err := w.waitReplaced(ctx, 4*time.Minute)
	if err != nil {
		b.Fatalf("%s, sample %d: %v", path.name, i+1, err)
	}
	took := time.Since(lost)
	b.StopTimer()
	what := "plain StatefulSet"
	if driverset {
		what = fmt.Sprintf("%d driverset app(s)", n)
	}
	b.Logf("%s, sample %d, %s: replaced %.2fs after the loss of %s (%.2fs after it was proven)",
		path.name, i+1, what, took.Seconds(), w.node, (took - proven.Sub(lost)).Seconds())
	if n > 1 {
		b.Logf("%d drivers: %s", n, stages(replaced, proven))
		b.Logf("%d drivers: driverset's Events after the proof: %s", n, decisions(ctx, ns, proven))
		b.Logf("%d drivers: driverset's placeholder controller and client meanwhile: %s", n, counterDeltas(counters, controllerCounters(b)))
	}
	_ = kube().CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	return took.Seconds()
}

// plainNever shows that a plain StatefulSet is not replaced within bound on path.
func (r *benchRun) plainNever(b *testing.B, path lossPath, bound time.Duration) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := benchNamespace(b, ctx)
	w := startPlain(b, ctx, ns)
	bed.spareNode(b, ctx)
	defer bed.forgetNode(ctx, w.node)
	if err := path.lose(ctx, w.node); err != nil {
		b.Fatal(err)
	}
	if _, err := w.waitReplaced(ctx, bound); err == nil {
		b.Fatalf("a plain StatefulSet recovered on %q, which the row says it never does", path.name)
	}
	b.Logf("%s: a plain StatefulSet was not replaced within %s", path.name, bound)
	_ = kube().CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
}

func benchEnvInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// poll waits for cond as waitFor does: a test-bed component down for good ends it at once, named.
func poll(ctx context.Context, timeout time.Duration, cond func() bool) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true,
		bed.cluster.Alive(func(context.Context) (bool, error) { return cond(), nil }))
}

// waitNodeCondition waits until node's Ready condition is (or, with is false, is not) status.
func waitNodeCondition(ctx context.Context, node string, status corev1.ConditionStatus, is bool) error {
	return poll(ctx, 2*time.Minute, func() bool {
		n, err := kube().CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return (c.Status == status) == is
			}
		}
		return false
	})
}
