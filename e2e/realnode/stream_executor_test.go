//go:build testbed

package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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
// self-fence T 15 s) runs its driver and its executor on one node (the executor's pod template
// asks for the driver's node; the host's process tables say where each JVM ran). After a few
// batches the node is cut off from the control plane: both JVMs keep running and keep reaching
// the shared storage. The driver self-fences, driverset brings the next incarnation up on another
// node, and the test follows the old executor's JVM in the cut-off node's process table: when it
// ended against the old driver's end and the new driver's start. Whatever it did meanwhile, the
// output must be exactly once (every value once, in the files that the sink's log commits), and
// no file that existed on the storage when the old executor's JVM ended may be committed for a
// batch that the old driver had not committed: the stale executor's leftovers stay out of the
// committed output. make e2e-streams only.
func TestStreamExecutorOnTheCutOffNodeOfItsDriver(t *testing.T) {
	if os.Getenv(streamsEnv) != "all" {
		t.Skipf("a make e2e-streams case (%s=all)", streamsEnv)
	}
	d, err := spark.Find(bed.images.spark, "4.1.1")
	if err != nil {
		t.Skipf("Spark 4.1.1 is not among the images: %v", err)
	}
	shared := newSharedStorage(t)
	template := filepath.Join(t.TempDir(), "executor.yaml")
	if err := os.WriteFile(template, []byte(executorBesideDriver), 0o644); err != nil {
		t.Fatal(err)
	}
	const batches = 12
	job := sparkJob{
		resilient: true, class: spark.StreamClass, conf: shared.conf(),
		args: []string{"/shared/checkpoint", "/shared/out", fmt.Sprint(streamRows), fmt.Sprint(batches), fmt.Sprint(streamExecutorBatchMillis)},
	}
	job.conf["spark.executor.instances"] = "1"
	job.conf["spark.sql.shuffle.partitions"] = "2"
	job.conf["spark.kubernetes.executor.podTemplateFile"] = template
	// No compaction of the sink's log: each committed file stays listed by its own batch's entry.
	job.conf["spark.sql.streaming.fileSink.log.compactInterval"] = "1000"
	job.conf["spark.kubernetes.driver.annotation."+contract.AnnotationSelfFence] = streamSelfFence.String()
	job.prepare = func(t *testing.T, ns string) { bindHeartbeat(t, ns, "default") }
	out := shared.host("/shared/out")

	var f fence
	var execs executorLife
	var atExecExit []string // the output's data files when the old executor's JVM was gone
	r := runSparkJob(t, d, job, func(t *testing.T, r *sparkRun) {
		ns := r.app.Namespace
		first := waitDriverLog(t, r, reStreamCommitted, streamKillAfter)
		f.node = first.node
		if n := len(appDrivers(t, f.node, ns)); n != 1 {
			t.Fatalf("want the driver's JVM on %s, got %d", f.node, n)
		}
		ew := watchExecutors(t, ns, f.node)
		dw := watchDrivers(t, ns, f.node)
		f.at = time.Now()
		if err := bed.cluster.PartitionNode(f.node); err != nil {
			t.Fatal(err)
		}
		healed := false
		t.Cleanup(func() {
			if !healed {
				_ = bed.cluster.HealNode(f.node)
			}
		})
		t.Logf("cut %s off the control plane, the driver and executor JVMs %v running there", f.node, ew.first())
		if len(ew.first()) == 0 {
			t.Fatalf("no executor JVM of the app beside its driver on %s: %+v", f.node, processes(t, f.node, "java"))
		}
		second := waitNewDriver(t, r, first, reStreamStarted)
		waitFor(t, 30*time.Second, "the new driver's JVM on "+second.node, func(context.Context) (bool, error) {
			return !dw.started().IsZero(), nil
		})
		f.oldExit, f.newStart, f.overlap = dw.stop()
		// The old executor may outlive the new driver: follow it (the node still cut off) until
		// it ends, at most two minutes (Spark's default network timeout), then heal.
		waitFor(t, 2*time.Minute, "the old executor's JVM gone from "+f.node, func(context.Context) (bool, error) {
			return !ew.life().exit.IsZero(), nil
		})
		execs = ew.stop()
		atExecExit = dataFiles(t, out)
		if err := bed.cluster.HealNode(f.node); err != nil {
			t.Fatal(err)
		}
		healed = true
		if second.node == f.node {
			t.Errorf("the new driver runs on the cut-off node %s", f.node)
		}
	})
	f.expect(t)
	t.Logf("the old executor's JVM (pids %v on %s) ended %.1fs after the cut: %.1fs after the old driver's JVM, %.1fs after the new driver's started; last seen in a task-running state %v",
		execs.pids, f.node, execs.exit.Sub(f.at).Seconds(), execs.exit.Sub(f.oldExit).Seconds(), execs.exit.Sub(f.newStart).Seconds(), execs.states)
	if r.code != 0 || last(r.phases()) != "Succeeded" {
		t.Errorf("spark-submit exited %d, phases %v; want 0 and Succeeded", r.code, r.phases())
	}
	drivers := r.driverLogs()
	if len(drivers) < 2 {
		r.logDrivers(t)
		t.Fatalf("want two drivers (before and after the cut), saw %d", len(drivers))
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
	// files it commits may be one that was there when the old executor ended (the old
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
		if slices.Contains(atExecExit, sf.Name) {
			stale++
			t.Errorf("%s, on the storage when the old executor ended, is committed by the new driver's batch %s", sf.Name, sf.Log)
		}
	}
	t.Logf("%d data files on the storage when the old executor ended; %d uncommitted at the end; the new driver committed %d files, %d of them the old incarnation's",
		len(atExecExit), counts.Uncommitted, byNew, stale)
	if byNew == 0 {
		t.Errorf("the new driver committed no file: nothing shows what it did with the old executor's leftovers")
	}
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
