//go:build testbed

package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/spark"
)

// executorBesideDriver keeps a stream's executors on the node of its driver (the pods labelled
// spark-role=driver in the test's namespace): the old incarnation's executor is on the node that
// is cut off, and the next incarnation's follow the next driver.
const executorBesideDriver = `apiVersion: v1
kind: Pod
spec:
  affinity:
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector:
          matchLabels:
            spark-role: driver
        topologyKey: kubernetes.io/hostname
`

// streamExecutorBatchMillis is this test's trigger: the first row of each batch sleeps half of
// it in a task, so the executor is in a task about half of the time, the cut and the fence
// included, and a batch's files are written at the end of a long task.
const streamExecutorBatchMillis = 6000

// TestStreamExecutorOnTheCutOffNodeOfItsDriver is issue 34's executor bullet shown rather than
// argued: driverset holds a driver for proof, not the executors of a node that is only NotReady
// (docs/design.md). A Structured Streaming job (Spark 4.1.1's file sink on shared storage,
// self-fence T 15 s, the first row of each batch 3 s in its task) runs its executor where each
// case puts it (the host's process tables say where each JVM ran), and after a few batches its
// nodes are cut off from the control plane: the JVMs keep running and keep reaching the shared
// storage. The driver self-fences, driverset brings the next incarnation up on the node left,
// and the test follows the old executor's JVM in its node's process table: when it ended against
// the old driver's end and the new driver's start.
//   - beside its driver: both on one node, the node cut off. The executor ends with its driver
//     (its connection to it closes), or outlives it; either way it is reported.
//   - on another cut-off node: the driver on one node, the executor on a second, both cut off (a
//     zone's partition); the third node holds a driverset replica. The executor cannot see its
//     driver end, so it must still run when the new driver's JVM starts (asserted: that is the
//     case the design argues about); the partition heals while the new incarnation runs, so the
//     stale executor meets the network again (its driver's stable name now names the new driver)
//     until its kubelet stops it.
//
// In both, the output must be exactly once (every value once, in the files that the sink's log
// commits), and no file that existed on the storage when the new driver's JVM started (the old
// incarnation's, its stale executor's included) may be committed by a sink log entry written after
// the old driver's JVM ended. make e2e-streams only.
func TestStreamExecutorOnTheCutOffNodeOfItsDriver(t *testing.T) {
	if os.Getenv(streamsEnv) != "all" {
		t.Skipf("a make e2e-streams case (%s=all)", streamsEnv)
	}
	d, err := spark.Find(bed.images.spark, "4.1.1")
	if err != nil {
		t.Skipf("Spark 4.1.1 is not among the images: %v", err)
	}
	t.Run("beside-its-driver", func(t *testing.T) { runExecutorCut(t, d, false) })
	t.Run("on-another-cut-off-node", func(t *testing.T) { runExecutorCut(t, d, true) })
}

// placement is where a case's pods go: the first driver on node driver, the first executor on
// executor, and the next incarnation on spare (the one node left uncut).
type placement struct{ driver, executor, spare string }

// placeFor chooses the nodes of a case: the spare holds a driverset replica, so that one is left
// to act while the others are cut off.
func placeFor(t *testing.T, apart bool) placement {
	t.Helper()
	pods, err := kube().CoreV1().Pods(driversetNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=driverset"})
	if err != nil {
		t.Fatal(err)
	}
	nodes := bed.cluster.RealNodes()
	var p placement
	for _, pod := range pods.Items {
		if slices.Contains(nodes, pod.Spec.NodeName) {
			p.spare = pod.Spec.NodeName
			break
		}
	}
	if p.spare == "" {
		t.Fatalf("no driverset replica on a real node %v", nodes)
	}
	for _, n := range nodes {
		switch {
		case n == p.spare:
		case p.driver == "":
			p.driver = n
		case apart && p.executor == "":
			p.executor = n
		}
	}
	if !apart {
		p.executor = p.driver
	}
	return p
}

// nodeTemplate is a pod template that keeps a pod on the nodes in, preferring prefer.
func nodeTemplate(prefer string, in ...string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
spec:
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - {key: kubernetes.io/hostname, operator: In, values: [%s]}
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        preference:
          matchExpressions:
          - {key: kubernetes.io/hostname, operator: In, values: [%s]}
`, strings.Join(in, ", "), prefer)
}

func runExecutorCut(t *testing.T, d spark.Dist, apart bool) {
	shared := newSharedStorage(t)
	var template string
	job := sparkJob{resilient: true, class: spark.StreamClass, conf: shared.conf()}
	const batches = 12
	job.args = []string{"/shared/checkpoint", "/shared/out", fmt.Sprint(streamRows), fmt.Sprint(batches), fmt.Sprint(streamExecutorBatchMillis)}
	job.conf["spark.executor.instances"] = "1"
	job.conf["spark.sql.shuffle.partitions"] = "2"
	// No compaction of the sink's log: each committed file stays listed by its own batch's entry.
	job.conf["spark.sql.streaming.fileSink.log.compactInterval"] = "1000"
	job.conf["spark.kubernetes.driver.annotation."+contract.AnnotationSelfFence] = streamSelfFence.String()
	var place placement
	if apart {
		place = placeFor(t, true)
		dir := t.TempDir()
		for role, body := range map[string]string{
			"driver":   nodeTemplate(place.driver, place.driver, place.spare),
			"executor": nodeTemplate(place.executor, place.executor, place.spare),
		} {
			file := filepath.Join(dir, role+".yaml")
			if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			job.conf["spark.kubernetes."+role+".podTemplateFile"] = file
		}
	} else {
		template = filepath.Join(t.TempDir(), "executor.yaml")
		if err := os.WriteFile(template, []byte(executorBesideDriver), 0o644); err != nil {
			t.Fatal(err)
		}
		job.conf["spark.kubernetes.executor.podTemplateFile"] = template
	}
	job.prepare = func(t *testing.T, ns string) { bindHeartbeat(t, ns, "default") }
	out := shared.host("/shared/out")

	var f fence
	var execs executorLife
	var execNode string
	var atNewStart []string // the output's data files when the new driver's JVM started
	r := runSparkJob(t, d, job, func(t *testing.T, r *sparkRun) {
		ns := r.app.Namespace
		first := waitDriverLog(t, r, reStreamCommitted, streamKillAfter)
		f.node = first.node
		if n := len(appDrivers(t, f.node, ns)); n != 1 {
			t.Fatalf("want the driver's JVM on %s, got %d", f.node, n)
		}
		execNode = f.node
		if apart {
			if f.node != place.driver {
				t.Fatalf("the driver runs on %s, want %s (%+v)", f.node, place.driver, place)
			}
			execNode = place.executor
		}
		ew := watchExecutors(t, ns, execNode)
		if len(ew.first()) == 0 {
			t.Fatalf("no executor JVM of the app on %s: %+v", execNode, processes(t, execNode, "java"))
		}
		dw := watchDrivers(t, ns, f.node)
		// Cut with the executor in a task: the first row's 3 s sleep, seen in its log.
		tid := waitExecutorInTask(t, ns)
		cut := []string{f.node}
		if execNode != f.node {
			cut = append(cut, execNode)
		}
		healed := false
		t.Cleanup(func() {
			if !healed {
				for _, n := range cut {
					_ = bed.cluster.HealNode(n)
				}
			}
		})
		f.at = time.Now()
		for _, n := range cut {
			if err := bed.cluster.PartitionNode(n); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("cut %v off at %s (the driver's node %s, the executor JVMs %v on %s, its log showing TID %s running and not finished), the stream running",
			cut, f.at.UTC().Format(time.StampMilli), f.node, ew.first(), execNode, tid)
		second := waitNewDriver(t, r, first, reStreamStarted)
		waitFor(t, 30*time.Second, "the new driver's JVM on "+second.node, func(context.Context) (bool, error) {
			return !dw.started().IsZero(), nil
		})
		atNewStart = dataFiles(t, out)
		f.oldExit, f.newStart, f.overlap = dw.stop()
		if second.node == f.node || second.node == execNode {
			t.Errorf("the new driver runs on the cut-off node %s", second.node)
		}
		if apart {
			if l := ew.life(); !l.exit.IsZero() {
				t.Fatalf("the old executor's JVM on %s ended %.1fs after the cut, before the new driver's started: nothing shows a stale executor beside the next incarnation", execNode, l.exit.Sub(f.at).Seconds())
			}
			t.Logf("the old executor's JVM still runs on %s after the new driver's started on %s", execNode, second.node)
			// The partition heals with the new incarnation running: the stale executor meets the
			// network again until its kubelet stops it.
			waitFor(t, 3*time.Minute, "a batch committed by the new driver", func(context.Context) (bool, error) {
				for _, dl := range r.driverLogs() {
					if dl.pod == second.pod && dl.created.Equal(second.created) && reStreamCommitted.MatchString(dl.log) {
						return true, nil
					}
				}
				return false, nil
			})
		} else {
			waitFor(t, 2*time.Minute, "the old executor's JVM gone from "+execNode, func(context.Context) (bool, error) {
				return !ew.life().exit.IsZero(), nil
			})
		}
		if apart {
			logExecutorTail(t, ns)
		}
		for _, n := range cut {
			if err := bed.cluster.HealNode(n); err != nil {
				t.Fatal(err)
			}
		}
		healed = true
		t.Logf("healed %v %.1fs after the cut", cut, time.Since(f.at).Seconds())
		waitFor(t, 2*time.Minute, "the old executor's JVM gone from "+execNode, func(context.Context) (bool, error) {
			return !ew.life().exit.IsZero(), nil
		})
		execs = ew.stop()
	})
	f.expect(t)
	t.Logf("the old executor's JVM (pids %v on %s) ended %.1fs after the cut: %.1fs after the old driver's JVM, %.1fs after the new driver's started; states at its last poll %v",
		execs.pids, execNode, execs.exit.Sub(f.at).Seconds(), execs.exit.Sub(f.oldExit).Seconds(), execs.exit.Sub(f.newStart).Seconds(), execs.states)
	if r.code != 0 || last(r.phases()) != "Succeeded" {
		t.Errorf("spark-submit exited %d, phases %v; want 0 and Succeeded", r.code, r.phases())
	}
	counts, err := spark.CountFileSink(out, streamRows, batches)
	if err != nil {
		t.Errorf("exactly once: %v", err)
	}
	t.Logf("the sink: %+v", counts)
	log, err := spark.ReadFileSinkLog(out)
	if err != nil {
		t.Fatal(err)
	}
	// A sink log entry written after the old driver's JVM ended is the new driver's: none of the
	// files it commits may be one that was there when the new driver's JVM started (the old
	// incarnation's). Compaction is off, so each file is attributed to its batch's entry.
	stale, byNew := 0, 0
	for _, sf := range log.Files {
		fi, serr := os.Stat(filepath.Join(out, "_spark_metadata", sf.Log))
		if serr != nil {
			t.Fatal(serr)
		}
		if !fi.ModTime().After(f.oldExit) {
			continue
		}
		byNew++
		if slices.Contains(atNewStart, sf.Name) {
			stale++
			t.Errorf("%s, on the storage when the new driver's JVM started, is committed by the new driver's batch %s", sf.Name, sf.Log)
		}
	}
	t.Logf("%d data files on the storage when the new driver's JVM started; %d uncommitted at the end%s; the new driver committed %d files, %d of them the old incarnation's",
		len(atNewStart), counts.Uncommitted, leftovers(t, out, log), byNew, stale)
	if byNew == 0 {
		t.Errorf("the new driver committed no file: nothing shows what it did with the old incarnation's leftovers")
	}
}

var ( //nolint:gochecknoglobals // constant patterns
	reTaskRunning  = regexp.MustCompile(`Running task \S+ in stage \S+ \(TID (\d+)\)`)
	reTaskFinished = regexp.MustCompile(`Finished task \S+ in stage \S+ \(TID (\d+)\)`)
)

// waitExecutorInTask polls the log of ns's executor pod until a task it started has not
// finished, and returns its TID.
func waitExecutorInTask(t *testing.T, ns string) string {
	t.Helper()
	var tid string
	waitFor(t, time.Minute, "the executor in a task", func(ctx context.Context) (bool, error) {
		pods, err := kube().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "spark-role=executor"})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			raw, err := kube().CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
			if err != nil {
				continue
			}
			finished := map[string]bool{}
			for _, m := range reTaskFinished.FindAllStringSubmatch(string(raw), -1) {
				finished[m[1]] = true
			}
			for _, m := range reTaskRunning.FindAllStringSubmatch(string(raw), -1) {
				if !finished[m[1]] {
					tid = m[1]
					return true, nil
				}
			}
		}
		return false, nil
	})
	return tid
}

// logExecutorTail logs the end of ns's executor container logs as the cut-off node's kubelet
// wrote them (its pod-logs folder on the host): what the stale executor did, read while it runs.
func logExecutorTail(t *testing.T, ns string) {
	t.Helper()
	for _, pattern := range []string{"*", "*/*", "*/*/*"} {
		files, _ := filepath.Glob(filepath.Join(bed.dir, pattern, "pod-logs", ns+"_*exec*", "*", "*.log"))
		for _, file := range files {
			raw, err := os.ReadFile(file)
			if err != nil {
				continue
			}
			lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
			t.Logf("the end of %s:\n%s", file, strings.Join(lines[max(0, len(lines)-25):], "\n"))
		}
	}
}

// leftovers names the data files in out that log does not commit, with when each was written.
func leftovers(t *testing.T, out string, log spark.FileSinkLog) string {
	t.Helper()
	var s []string
	for _, name := range dataFiles(t, out) {
		if slices.ContainsFunc(log.Files, func(f spark.SinkFile) bool { return f.Name == name }) {
			continue
		}
		fi, err := os.Stat(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		s = append(s, fmt.Sprintf("%s (%d bytes, written %s)", name, fi.Size(), fi.ModTime().UTC().Format(time.StampMilli)))
	}
	if len(s) == 0 {
		return ""
	}
	return ": " + strings.Join(s, ", ")
}

// dataFiles are the names of the file sink's data files in out (not its log, not hidden).
func dataFiles(t *testing.T, out string) []string {
	t.Helper()
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && !strings.HasPrefix(e.Name(), "_") && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	return names
}

// isExecutorOf reports whether p is a Spark executor's JVM of namespace ns's app: java running
// an executor backend whose driver URL names the namespace's service.
func isExecutorOf(p []string, ns string) bool {
	if len(p) == 0 || filepath.Base(p[0]) != "java" {
		return false
	}
	line := strings.Join(p, " ")
	return strings.Contains(line, "ExecutorBackend") && strings.Contains(line, "."+ns+".svc")
}

// executorLife is what the process table showed of the executor JVMs seen at the cut.
type executorLife struct {
	pids   []int
	exit   time.Time // when none of them ran any more
	states []string  // their states (R, S …) at the last poll they ran
}

// executorWatch polls node's process table every 50 ms for the executor JVMs seen at its start.
type executorWatch struct {
	mu   sync.Mutex
	l    executorLife
	quit chan struct{}
	done chan struct{}
}

func watchExecutors(t *testing.T, ns, node string) *executorWatch {
	t.Helper()
	w := &executorWatch{quit: make(chan struct{}), done: make(chan struct{})}
	all, err := bed.cluster.NodeProcesses(node)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range all {
		if isExecutorOf(p.Cmdline, ns) && p.State != "Z" {
			w.l.pids = append(w.l.pids, p.PID)
		}
	}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			now := time.Now()
			all, err := bed.cluster.NodeProcesses(node)
			var states []string
			for _, p := range all {
				if slices.Contains(w.l.pids, p.PID) && p.State != "Z" {
					states = append(states, p.State)
				}
			}
			w.mu.Lock()
			switch {
			case err != nil: // unreadable: count it as still running
			case len(states) > 0:
				w.l.states = states
			case w.l.exit.IsZero():
				w.l.exit = now
			}
			w.mu.Unlock()
			select {
			case <-w.quit:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { w.stop() })
	return w
}

func (w *executorWatch) first() []int { return w.l.pids }

func (w *executorWatch) life() executorLife {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.l
}

func (w *executorWatch) stop() executorLife {
	select {
	case <-w.quit:
	default:
		close(w.quit)
	}
	<-w.done
	return w.life()
}
