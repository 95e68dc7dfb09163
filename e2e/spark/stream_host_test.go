package spark

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStreamOnHost runs the streaming jobs of every Spark version in local mode on the host,
// through the real spark-submit (SparkSubmit), into folders below $DRIVERSET_STREAM_HOST (kept
// for a look; unset: the test is skipped; it takes five to six minutes). Per job:
//
//   - lost: a driver killed (SIGKILL) in the middle of a batch after some are committed, then a
//     driver on the same checkpoint that resumes at the killed batch and finishes;
//   - fail-once: a driver that throws after some batches are committed (it must exit non-zero),
//     then one that finishes.
//
// The jobs: DriversetStream, DriversetStreamState, driverset_stream.py and, where the jars have
// DStreams, DriversetDStream. Each output must pass its check, and must fail it once tampered
// with (a committed value written twice, a committed file or a batch's file deleted).
func TestStreamOnHost(t *testing.T) {
	base := os.Getenv("DRIVERSET_STREAM_HOST")
	if base == "" {
		t.Skip("DRIVERSET_STREAM_HOST (a folder for the runs) is unset")
	}
	ctx := context.Background()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dists, err := Artifacts(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	const rows, batches, millis = 10, 8, 2000
	for _, d := range dists {
		jar, err := CompileJob(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(base, d.Version)
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		jarPath := filepath.Join(dir, "job.jar")
		if err := os.WriteFile(jarPath, jar, 0o644); err != nil {
			t.Fatal(err)
		}
		pyFile := ""
		if d.Python != "" {
			// What the image has at /opt/spark/python, for the driver and its Python workers.
			py := filepath.Join(dir, "pyspark")
			if err := os.MkdirAll(py, 0o755); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command("tar", "-xf", d.Python, "-C", py).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", d.Python, err, out)
			}
			t.Setenv("PYTHONPATH", filepath.Join(py, "opt", "spark", "python"))
			t.Setenv("PYSPARK_PYTHON", "python3")
			pyFile = filepath.Join(dir, "driverset_stream.py")
			if err := os.WriteFile(pyFile, pyStreamJob, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		dstreams, err := d.HasDStreams()
		if err != nil {
			t.Fatal(err)
		}
		for _, job := range []struct {
			name    string
			primary []string // spark-submit's args for the job
			check   func(out string, rows, batches int64) error
		}{
			{name: "stateless", primary: []string{"--class", StreamClass, jarPath}, check: CheckFileSink},
			{name: "stateful", primary: []string{"--class", StreamStateClass, jarPath}, check: CheckStateBatches},
			{name: "python", primary: []string{pyFile}, check: CheckFileSink},
			{name: "dstream", primary: []string{"--class", DStreamClass, jarPath}, check: CheckValueBatches},
		} {
			if job.name == "python" && pyFile == "" || job.name == "dstream" && !dstreams {
				continue
			}
			dstream := job.name == "dstream"
			for _, how := range []string{"lost", "fail-once"} {
				t.Run(d.Version+"/"+job.name+"/"+how, func(t *testing.T) {
					run := filepath.Join(dir, job.name+"-"+how)
					ckpt, out := filepath.Join(run, "ckpt"), filepath.Join(run, "out")
					if err := os.MkdirAll(run, 0o755); err != nil {
						t.Fatal(err)
					}
					args := func(extra ...string) []string {
						a := append([]string{"--master", "local[2]", "--driver-memory", "512m", "--conf", "spark.ui.enabled=false"}, job.primary...)
						return append(append(a, ckpt, out, strconv.Itoa(rows), strconv.Itoa(batches), strconv.Itoa(millis)), extra...)
					}
					var extra []string
					if how == "lost" {
						// In the middle of batch 4: its offsets are written, its sink's commit not.
						// A DStream's batch 4 sleeps from a second after batch-3 is written.
						until, delay := filepath.Join(ckpt, "offsets", "4"), millis/4*time.Millisecond
						if dstream {
							until, delay = filepath.Join(out, "batch-3"), 3*millis/4*time.Millisecond
						}
						killLocal(t, d, filepath.Join(run, "driver-1.log"), func() bool { return exists(until) }, delay, args()...)
						if dstream {
							// Down long enough for the next driver to generate batches 5 to 7 at once.
							time.Sleep(3 * millis * time.Millisecond)
						}
					} else {
						extra = []string{"fail-once"}
						code, log := submitLocalCode(t, d, filepath.Join(run, "driver-1.log"), args(extra...)...)
						if code == 0 || !bytes.Contains(log, []byte("driverset-stream: failing once after batch=3, as asked")) {
							t.Fatalf("the first driver exited %d, want it to fail after batch 3:\n%s", code, tail(log))
						}
						t.Logf("the first driver failed once, as asked: exit code %d", code)
					}
					// A DStream's checkpoint is its graph, pending batches included: the batch
					// whose file was written last may be run again (its output is idempotent).
					want := int64(4)
					if !dstream {
						if want, err = CheckpointResume(ckpt); err != nil {
							t.Fatal(err)
						}
						t.Logf("the first driver left batch %d to do", want)
					}
					code, log := submitLocalCode(t, d, filepath.Join(run, "driver-2.log"), args(extra...)...)
					if code != 0 {
						t.Fatalf("the second driver exited %d:\n%s", code, tail(log))
					}
					got, err := ResumedAt(log)
					t.Logf("the second driver resumed at batch %d", got)
					switch {
					case err != nil:
						t.Error(err)
					case dstream && (got < 3 || got > 4):
						t.Errorf("the second driver resumed at %d, want batch 3 (written, not known done) or 4", got)
					case !dstream && got != want:
						t.Errorf("the second driver resumed at %d, the checkpoint says %d", got, want)
					case !dstream && how == "lost" && want != 4:
						t.Errorf("killed in batch 4, the second driver resumes at %d", want)
					}
					want = got
					var wantCommits []int64
					for b := want; b < batches; b++ {
						wantCommits = append(wantCommits, b)
					}
					if c := CommittedBatches(log); fmt.Sprint(c) != fmt.Sprint(wantCommits) {
						t.Errorf("the second driver committed %v, want %v", c, wantCommits)
					}
					check := func(out string) error { return job.check(out, rows, batches) }
					if err := check(out); err != nil {
						t.Fatal(err)
					}
					for _, tamper := range tampers(t, out, job.name) {
						copied := filepath.Join(run, "tampered-"+tamper.name)
						if b, err := exec.Command("cp", "-a", out, copied).CombinedOutput(); err != nil {
							t.Fatalf("cp: %v\n%s", err, b)
						}
						tamper.do(t, copied)
						err := check(copied)
						if err == nil || !strings.Contains(err.Error(), tamper.says) {
							t.Errorf("%s: the check says %v, want %q", tamper.name, err, tamper.says)
						} else {
							t.Logf("%s: %v", tamper.name, err)
						}
					}
				})
			}
		}
	}
}

type tamper struct {
	name, says string
	do         func(t *testing.T, out string)
}

// tampers are ways to break a real output, each with what the check must then say.
func tampers(t *testing.T, out, job string) []tamper {
	switch job {
	case "dstream":
		return []tamper{
			{name: "batch-5-deleted", says: "batch-5 is missing", do: func(t *testing.T, out string) { rm(t, out, "batch-5") }},
			{name: "value-duplicated", says: "batch-2: line 11: 29 twice", do: func(t *testing.T, out string) {
				writeFile(t, out, "batch-2", "20\n21\n22\n23\n24\n25\n26\n27\n28\n29\n29\n")
			}},
		}
	case "stateful":
		return []tamper{
			{name: "batch-5-deleted", says: "batch-5 is missing", do: func(t *testing.T, out string) { rm(t, out, "batch-5") }},
			{name: "batch-2-counted-again", says: "batch-2: key 0: count", do: func(t *testing.T, out string) {
				writeFile(t, out, "batch-2", stateFile([]StateRow{{0, 20, 300}, {1, 10, 145}, {2, 10, 155}}))
			}},
		}
	}
	log, err := ReadFileSinkLog(out)
	if err != nil {
		t.Fatal(err)
	}
	var nonEmpty []SinkFile
	for _, f := range log.Files {
		if b, err := os.ReadFile(filepath.Join(out, f.Name)); err == nil && len(b) > 0 {
			nonEmpty = append(nonEmpty, f)
		}
	}
	if len(nonEmpty) < 2 {
		t.Fatalf("the file sink committed %d files with values", len(nonEmpty))
	}
	first, second := nonEmpty[0], nonEmpty[1]
	return []tamper{
		{name: "line-duplicated", says: "twice", do: func(t *testing.T, out string) {
			b, err := os.ReadFile(filepath.Join(out, first.Name))
			if err != nil {
				t.Fatal(err)
			}
			line, _, _ := bytes.Cut(b, []byte("\n"))
			f, err := os.OpenFile(filepath.Join(out, second.Name), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.Write(append(line, '\n')); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "file-deleted", says: first.Name + ", committed by _spark_metadata/" + first.Log + ", is missing", do: func(t *testing.T, out string) {
			rm(t, out, first.Name)
		}},
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// submitLocalCode runs spark-submit of d with args to its end, its output in logFile, and
// returns its exit code and output.
func submitLocalCode(t *testing.T, d Dist, logFile string, args ...string) (int, []byte) {
	t.Helper()
	f, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	code, err := SparkSubmit(ctx, d, "", f, args...)
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	return code, log
}

// killLocal runs spark-submit of d with args until until says so, waits for delay and kills
// the driver's JVM (SIGKILL: SparkSubmit's context does). It fails t if the driver ends first.
func killLocal(t *testing.T, d Dist, logFile string, until func() bool, delay time.Duration, args ...string) {
	t.Helper()
	f, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		code, err := SparkSubmit(ctx, d, "", f, args...)
		if err == nil {
			err = fmt.Errorf("exit code %d", code)
		}
		done <- err
	}()
	deadline := time.After(3 * time.Minute)
	for {
		select {
		case err := <-done:
			log, _ := os.ReadFile(logFile)
			t.Fatalf("the driver ended before it was killed: %v\n%s", err, tail(log))
		case <-deadline:
			t.Fatal("the driver never got to where it is killed")
		case <-time.After(20 * time.Millisecond):
			if until() {
				time.Sleep(delay)
				cancel()
				t.Logf("killed the driver: %v", <-done)
				return
			}
		}
	}
}

// tail is the end of a log, for a failure's message.
func tail(log []byte) []byte {
	const n = 6000
	if len(log) > n {
		return log[len(log)-n:]
	}
	return log
}
