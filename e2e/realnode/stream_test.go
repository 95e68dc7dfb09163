//go:build testbed

package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/spark"
)

// The stream's size: batches of streamRows values, one every streamBatchMillis, streamBatches in
// all: long enough to lose the driver's node after a few, short enough for 2 cores.
const (
	streamRows        = 10
	streamBatches     = 14
	streamBatchMillis = 2000
	// streamKillAfter is how many batches the first driver commits before its node is lost.
	streamKillAfter = 4
	// streamSelfFence is the partitioned stream's T: wrap stops its driver when the heartbeat
	// could not be renewed for that long, and driverset lets the next one start after T and a margin.
	streamSelfFence = 15 * time.Second
)

var ( //nolint:gochecknoglobals // constant patterns
	reStreamStarted   = regexp.MustCompile(`driverset-stream: app (\S+) started: `)
	reStreamCommitted = regexp.MustCompile(`driverset-stream: committed batch=\d+`)
)

// sharedStorage is a folder of the host that every real node mounts into the driver and every
// executor by hostPath at /shared, standing in for the NFS, EFS or Filestore mount that a
// stream's checkpoint and output live on. Removed when the test ends.
type sharedStorage struct{ dir string }

func newSharedStorage(t *testing.T) sharedStorage {
	t.Helper()
	dir, err := os.MkdirTemp("", "driverset-e2e-shared-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	_ = os.Chmod(dir, 0o777) // the spark user (185) writes there
	return sharedStorage{dir: dir}
}

// conf mounts the folder at /shared in the driver and the executors.
func (s sharedStorage) conf() map[string]string {
	out := map[string]string{}
	for _, role := range []string{"driver", "executor"} {
		p := "spark.kubernetes." + role + ".volumes.hostPath.shared."
		out[p+"mount.path"] = "/shared"
		out[p+"options.path"] = s.dir
	}
	return out
}

// host is the host's path of a path under /shared.
func (s sharedStorage) host(path string) string {
	return filepath.Join(s.dir, strings.TrimPrefix(path, "/shared"))
}

// TestStreamThroughTheLossOfItsDriversNode is what driverset exists for (issue 33): a Structured
// Streaming query with its checkpoint and output on shared storage, the event log on, its driver's
// node lost after a few batches: on 3.5.6 killed hard, then confirmed dead with the out-of-service
// taint; on 4.1.1 cut off from the control plane with nobody acting, its driver still running and
// the shared storage still reachable from it, where self-fencing (T 15 s) must stop the old JVM
// before the new one starts (the host's process table says when each ran). The new
// driver, on another node and with an app id of its own, resumes from the checkpoint (its first
// batch is not batch 0) and the stream ends by itself after its last batch: spark-submit, watching
// throughout, ends Succeeded. Exactly once: the output that the file sink's log commits holds every
// input value once and nothing else (stateless), or each batch's state is what a run without loss
// gives (stateful, foreachBatch written idempotently per batch id); each incarnation's event log is
// kept and listed by Spark's History Server. Spark 3.5.6 runs the stateful query, 4.1.1 the
// stateless one: each version, kind of query and kind of loss once, within CI's time;
// DRIVERSET_STREAMS=all (make e2e-streams) runs the other combinations, PySpark's query and a
// driver that throws once (restarted from its checkpoint, the event log on) as well.
func TestStreamThroughTheLossOfItsDriversNode(t *testing.T) {
	if len(bed.images.spark) == 0 {
		t.Skipf("no real Spark version chosen (%s=none)", sparkVersionsEnv)
	}
	all := os.Getenv(streamsEnv) == "all"
	for _, c := range streamCases {
		if !c.ci && !all {
			continue
		}
		d, err := spark.Find(bed.images.spark, c.version)
		if err == nil && c.query == streamDStream {
			if has, herr := d.HasDStreams(); herr != nil || !has {
				err = fmt.Errorf("no spark-streaming in Spark %s's jars (%v)", d.Version, herr)
			}
		}
		if err != nil || (c.query == streamPython && d.Python == "") {
			// A case CI counts on must not vanish because its version was not built (unless
			// someone chose the versions by hand).
			if c.ci && os.Getenv(sparkVersionsEnv) == "" {
				t.Errorf("stream case %+v cannot run: Spark %s (PySpark %v) is not among the images: %v", c, c.version, c.query == streamPython, err)
			}
			continue
		}
		t.Run(strings.TrimSuffix(c.version+"-"+c.query+"-"+c.loss+"-"+c.events, "-"), func(t *testing.T) { runStream(t, d, c, nil) })
	}
}

// streamsEnv=all runs every case of streamCases (make e2e-streams), not only those for CI.
const streamsEnv = "DRIVERSET_STREAMS"

// The streaming jobs (e2e/spark) and the ways a stream's driver is lost.
const (
	streamStateless = "stateless" // DriversetStream: the file sink
	streamStateful  = "stateful"  // DriversetStreamState: state, written by foreachBatch
	streamPython    = "python"    // driverset_stream.py: PySpark's file sink
	streamDStream   = "dstream"   // DriversetDStream: Spark Streaming (DStreams), 3.5.6 only
	lossKilled      = "killed"    // the node killed hard, then the out-of-service taint
	lossPartitioned = "partitioned"
	lossThrows      = "throws" // the driver throws once after some batches (not a node loss)
)

// streamCase is one stream run: a Spark version, a query, a loss; ci when make test runs it.
// events is for DStream apps alone (every other query runs with the event log on): "" leaves the
// event log off, eventsSingle or eventsRolling turns it on, with spark.eventLog.overwrite=true.
type streamCase struct {
	version, query, loss string
	ci                   bool
	events               string
}

// A DStream app's event log (streamCase.events).
const (
	eventsSingle  = "eventlog-single"  // one file per app id (3.5's default)
	eventsRolling = "eventlog-rolling" // a folder per app id (4.x's default)
)

// streamCases: in CI each version, kind of query and kind of node loss once; the rest under
// make e2e-streams.
var streamCases = []streamCase{ //nolint:gochecknoglobals // a table
	{version: "3.5.6", query: streamStateful, loss: lossKilled, ci: true},
	{version: "4.1.1", query: streamStateless, loss: lossPartitioned, ci: true},
	{version: "3.5.6", query: streamStateless, loss: lossPartitioned},
	{version: "4.1.1", query: streamStateful, loss: lossKilled},
	{version: "3.5.6", query: streamPython, loss: lossKilled},
	{version: "4.1.1", query: streamPython, loss: lossPartitioned},
	{version: "3.5.6", query: streamStateless, loss: lossThrows},
	{version: "4.1.1", query: streamStateful, loss: lossThrows},
	{version: "3.5.6", query: streamDStream, loss: lossKilled},
	{version: "3.5.6", query: streamDStream, loss: lossKilled, events: eventsSingle},
	{version: "3.5.6", query: streamDStream, loss: lossKilled, events: eventsRolling},
}

// runStream runs case c on Spark d, checks every promise of TestStreamThroughTheLossOfItsDriversNode,
// and returns what the stream's recovery was made of (zero when c loses no node). s, when not nil,
// is told each step (TestDemoStream).
func runStream(t *testing.T, d spark.Dist, c streamCase, s *story) streamDowntime {
	shared := newSharedStorage(t)
	rolling := !strings.HasPrefix(d.Version, "3.")
	if c.events != "" {
		rolling = c.events == eventsRolling
	}
	events := newEventLogs(t, rolling)
	args := []string{"/shared/checkpoint", "/shared/out", fmt.Sprint(streamRows), fmt.Sprint(streamBatches), fmt.Sprint(streamBatchMillis)}
	if c.loss == lossThrows {
		args = append(args, "fail-once")
	}
	conf := shared.conf()
	switch {
	case c.query != streamDStream:
		conf = events.with(conf)
	case c.events != "":
		// A DStream app runs with the app id of the incarnation that wrote its checkpoint (below):
		// its later incarnations find that one's log in the way, unless told to overwrite it.
		conf = events.with(conf)
		conf["spark.eventLog.overwrite"] = "true"
	}
	job := sparkJob{resilient: true, args: args, conf: conf}
	switch c.query {
	case streamStateless:
		job.class = spark.StreamClass
	case streamStateful:
		job.class = spark.StreamStateClass
	case streamPython:
		job.python, job.pyFile = true, spark.PyStreamPath
	case streamDStream:
		job.class = spark.DStreamClass
	}
	job.conf["spark.executor.instances"] = "1"
	job.conf["spark.sql.shuffle.partitions"] = "2"
	var fenced fence
	var down streamDowntime
	if c.loss == lossPartitioned {
		job.conf["spark.kubernetes.driver.annotation."+contract.AnnotationSelfFence] = streamSelfFence.String()
		job.prepare = func(t *testing.T, ns string) { bindHeartbeat(t, ns, "default") }
	}
	// The pods' watch, from before spark-submit: when the new driver pod and its first executor
	// were made, on the test's clock to the nanosecond (their creationTimestamps are whole seconds).
	var pods *podWatch
	prepare := job.prepare
	job.prepare = func(t *testing.T, ns string) {
		if prepare != nil {
			prepare(t, ns)
		}
		pods = watchPods(t, ns)
	}
	r := runSparkJob(t, d, job, func(t *testing.T, r *sparkRun) {
		var lost, confirmed time.Time
		var second *seenDriver
		switch c.loss {
		case lossPartitioned:
			fenced, second = partitionDriverNodeAfter(t, r, reStreamCommitted, streamKillAfter, reStreamStarted)
			lost = fenced.at
		case lossKilled:
			s.running(t, r)
			lost, confirmed, second = killDriverNodeAfter(t, r, reStreamCommitted, streamKillAfter, reStreamStarted)
			s.killed(t, lost, confirmed, second)
		default:
			return
		}
		down = measureDowntime(t, r, pods, second, lost, confirmed)
		s.recovered(down)
	})
	s.finished(r)
	if c.loss != lossThrows {
		// What driverset decided and when, beside the timeline above (docs/measurements.md).
		logDriversetDecisions(t, r.app.Namespace)
	}
	if c.loss == lossPartitioned {
		fenced.expect(t)
		down.oldJVMGone = fenced.oldExit
	}
	if r.code != 0 || last(r.phases()) != "Succeeded" {
		t.Errorf("spark-submit exited %d, phases %v; want 0 and Succeeded", r.code, r.phases())
	}
	drivers := r.driverLogs()
	var started []string
	for _, dl := range drivers {
		if m := reStreamStarted.FindStringSubmatch(dl.log); m != nil {
			started = append(started, m[1])
		}
	}
	if len(started) != 2 {
		r.logDrivers(t)
		t.Fatalf("want the stream's driver started twice (before and after its loss), saw %v", started)
	}
	newest := drivers[len(drivers)-1]
	resumed, err := spark.ResumedAt([]byte(newest.log))
	switch {
	case err != nil:
		t.Errorf("the new driver's resume: %v", err)
	// A DStream driver runs again the batches its checkpoint had pending (at least once; each
	// batch's file is replaced whole), so it may resume a batch before the last one committed.
	case resumed == 0 || (c.loss != lossThrows && c.query != streamDStream && resumed < streamKillAfter):
		t.Errorf("the new driver resumed at batch %d; the first had committed at least %d batches", resumed, streamKillAfter)
	}
	t.Logf("the new driver on %s resumed at batch %d (the first one had committed at least %d before it was lost)", newest.node, resumed, streamKillAfter)
	if err == nil {
		s.resumed(resumed)
	}
	out := shared.host("/shared/out")
	switch c.query {
	case streamStateful:
		err = spark.CheckStateBatches(out, streamRows, streamBatches)
	case streamDStream:
		err = spark.CheckValueBatches(out, streamRows, streamBatches)
	default:
		var counts spark.SinkCounts
		counts, err = spark.CountFileSink(out, streamRows, streamBatches)
		s.checked(counts, err, down)
	}
	if err != nil {
		t.Errorf("exactly once: %v", err)
	} else {
		t.Logf("exactly once: the %s output of %d batches of %d values is what a run without loss gives", c.query, streamBatches, streamRows)
	}
	if c.query == streamDStream {
		// StreamingContext.getOrCreate restores the whole SparkConf of the checkpoint but a
		// reload list (Spark's Checkpoint.createSparkConf), and spark.app.id is not on it: the
		// later incarnation runs with the id of the one that wrote the checkpoint, whatever
		// driverset gives it (docs/limits.md). Should Spark ever reload it, this says so.
		if started[1] != started[0] {
			t.Errorf("the recovered DStream driver ran with app id %s, the first with %s: Spark now reloads spark.app.id (update docs/limits.md)", started[1], started[0])
		}
		t.Logf("the DStream app's two incarnations ran with app ids %v (restored from the checkpoint)", started)
		if c.events != "" {
			// One app id, so one log: the later incarnation's, finished, written over the
			// killed one's (spark.eventLog.overwrite); the History Server lists the app once.
			t.Logf("the event-log folder after the run: %s", events.listing(t))
			events.expect(t, d, started[:1])
		}
		return down
	}
	expectOwnAppIDs(t, started)
	if c.loss == lossThrows {
		events.expect(t, d, started) // a driver that throws stops its SparkContext: its log is finished
	} else {
		events.expect(t, d, started, started[0])
	}
	return down
}

// fence is what the host's process table showed of a partition: when the cut was made, when the
// old driver's JVM ended, when the new one's started, and whether both ever ran at once.
type fence struct {
	node              string
	at                time.Time
	oldExit, newStart time.Time
	overlap           bool
}

// partitionDriverNodeAfter cuts the driver's node off from the control plane once its log matches
// re n times (its containers keep running; the shared storage stays reachable from it, as an NFS
// server on another network would), watches the drivers' JVMs in the host's process table, and
// waits until a new driver has printed started. The node is healed before it returns.
func partitionDriverNodeAfter(t *testing.T, r *sparkRun, re *regexp.Regexp, n int, started *regexp.Regexp) (fence, *seenDriver) {
	t.Helper()
	first := waitDriverLog(t, r, re, n)
	f := fence{node: first.node}
	if len(appDrivers(t, f.node, r.app.Namespace)) != 1 {
		t.Fatalf("want the driver's JVM on %s, got %+v", f.node, processes(t, f.node))
	}
	w := watchDrivers(t, r.app.Namespace, f.node)
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
	t.Logf("cut %s, the driver's node, off the control plane with the stream running", f.node)
	second := waitNewDriver(t, r, first, started)
	waitFor(t, 30*time.Second, "the new driver's JVM on "+second.node, func(context.Context) (bool, error) {
		return !w.started().IsZero(), nil
	})
	f.oldExit, f.newStart, f.overlap = w.stop()
	if err := bed.cluster.HealNode(f.node); err != nil {
		t.Fatal(err)
	}
	healed = true
	if second.node == f.node {
		t.Errorf("the new driver runs on the cut-off node %s", f.node)
	}
	return f, second
}

// expect: the old driver's JVM ended (wrap's self-fencing) before the new one started, as the
// host's process table shows: never two writers of the checkpoint.
func (f fence) expect(t *testing.T) {
	t.Helper()
	t.Logf("cut off %s; the old driver's JVM gone %.1fs after the cut (T %s), the new one started %.1fs after it; overlap: %v",
		f.node, f.oldExit.Sub(f.at).Seconds(), streamSelfFence, f.newStart.Sub(f.at).Seconds(), f.overlap)
	if f.oldExit.IsZero() {
		t.Errorf("the old driver's JVM still runs on the cut-off node %s", f.node)
	}
	if f.overlap || !f.newStart.After(f.oldExit) {
		t.Errorf("the new driver's JVM started (%s) before the old one ended (%s)", f.newStart.Format(time.StampMilli), f.oldExit.Format(time.StampMilli))
	}
}
