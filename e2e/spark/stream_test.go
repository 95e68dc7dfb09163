package spark

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// sinkRows and sinkBatches shape the synthetic file sinks: 12 batches, so that the log has
// 9.compact (Spark compacts every 10 batches) and deltas after it.
const sinkRows, sinkBatches = 4, 12

// writeFile writes name below dir, making its folders.
func writeFile(t *testing.T, dir, name, data string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fileSink writes what the stateless query leaves after a run of sinkBatches batches with a
// lost driver: per batch, two part files (one a partition); a log of 9.compact (batches 0 to
// 9; the deltas before it deleted, as Spark does after compaction) and 10, 11, recorded by a
// driver that had the output mounted at another path; orphans of a killed attempt at batch 5,
// unlisted, holding batch 5's values again and a value past the input; an orphan that the log
// adds, then deletes; checksums and a temp file in the log's dir.
func fileSink(t *testing.T) string {
	t.Helper()
	out := t.TempDir()
	entry := func(name, action string) string {
		return fmt.Sprintf(`{"path":"file:///elsewhere/out/%s","size":8,"isDir":false,"modificationTime":1,"blockReplication":1,"blockSize":33554432,"action":"%s"}`, name, action)
	}
	compact := []string{"v1"}
	for b := range int64(sinkBatches) {
		var entries []string
		for part := range int64(2) {
			name := fmt.Sprintf("part-%05d-b%d-c000.txt", part, b)
			var lines string
			for v := b*sinkRows + part*sinkRows/2; v < b*sinkRows+(part+1)*sinkRows/2; v++ {
				lines += strconv.FormatInt(v, 10) + "\n"
			}
			writeFile(t, out, name, lines)
			entries = append(entries, entry(name, "add"))
		}
		if b == 3 {
			writeFile(t, out, "part-00000-gone-c000.txt", "12\n")
			entries = append(entries, entry("part-00000-gone-c000.txt", "add"))
		}
		if b == 4 {
			entries = append(entries, entry("part-00000-gone-c000.txt", "delete"))
		}
		if b <= 9 {
			compact = append(compact, entries...)
		}
		if b > 9 {
			// Spark ends a log file without a newline.
			writeFile(t, out, fmt.Sprintf("_spark_metadata/%d", b), "v1\n"+strings.Join(entries, "\n"))
			writeFile(t, out, fmt.Sprintf("_spark_metadata/.%d.crc", b), "crc")
		}
	}
	writeFile(t, out, "_spark_metadata/9.compact", strings.Join(compact, "\n"))
	writeFile(t, out, "_spark_metadata/.12.0f3a.tmp", "v1\n"+entry("part-00000-orphan-c000.txt", "add"))
	writeFile(t, out, "part-00000-orphan-c000.txt", "20\n21\n48\n")
	writeFile(t, out, "part-00001-orphan-c000.txt", "22\n23\n")
	return out
}

func TestCheckFileSink(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, out string)
		want   []string // what the error must say; none: no error
	}{
		{name: "a run with losses that lost nothing", tamper: func(*testing.T, string) {}},
		{name: "a value missing",
			tamper: func(t *testing.T, out string) { writeFile(t, out, "part-00001-b2-c000.txt", "10\n") },
			want:   []string{"batch 2 lacks 1 of its 4 values: 11"}},
		{name: "a value twice, in two committed files",
			tamper: func(t *testing.T, out string) { writeFile(t, out, "part-00001-b7-c000.txt", "30\n31\n5\n") },
			want:   []string{"value 5 (batch 1) twice: part-00000-b1-c000.txt line 2 and part-00001-b7-c000.txt line 3"}},
		{name: "a value twice in one file",
			tamper: func(t *testing.T, out string) { writeFile(t, out, "part-00000-b11-c000.txt", "44\n45\n44\n") },
			want:   []string{"value 44 (batch 11) twice: part-00000-b11-c000.txt line 1 and part-00000-b11-c000.txt line 3"}},
		{name: "a value not from the input",
			tamper: func(t *testing.T, out string) { writeFile(t, out, "part-00000-b11-c000.txt", "44\n45\n48\n") },
			want:   []string{"part-00000-b11-c000.txt line 3: 48 is not from the input (values 0 to 47)"}},
		{name: "a line that is no value",
			tamper: func(t *testing.T, out string) { writeFile(t, out, "part-00000-b0-c000.txt", "0\n1\n\n") },
			want:   []string{`part-00000-b0-c000.txt line 3: "" is not a value`}},
		{name: "a committed file missing, from the compacted log",
			tamper: func(t *testing.T, out string) { rm(t, out, "part-00000-b6-c000.txt") },
			want: []string{"part-00000-b6-c000.txt, committed by _spark_metadata/9.compact, is missing",
				"batch 6 lacks 2 of its 4 values: 24, 25"}},
		{name: "a committed file missing, from a delta",
			tamper: func(t *testing.T, out string) { rm(t, out, "part-00001-b10-c000.txt") },
			want:   []string{"part-00001-b10-c000.txt, committed by _spark_metadata/10, is missing"}},
		{name: "a log file missing between the compaction and the last batch",
			tamper: func(t *testing.T, out string) { rm(t, out, "_spark_metadata/10") },
			want:   []string{"lacks batch 10 (it has batches up to 11)"}},
		{name: "the log ends before the last batch",
			tamper: func(t *testing.T, out string) {
				rm(t, out, "_spark_metadata/11")
				rm(t, out, "part-00000-b11-c000.txt")
				rm(t, out, "part-00001-b11-c000.txt")
			},
			want: []string{"the file sink's log ends at batch 10, want batches up to 11", "batch 11 lacks 4 of its 4 values: 44, 45, 46, 47"}},
		{name: "no log",
			tamper: func(t *testing.T, out string) { rmAll(t, out, "_spark_metadata") },
			want:   []string{"the file sink's log: open"}},
		{name: "a log file of another version",
			tamper: func(t *testing.T, out string) {
				writeFile(t, out, "_spark_metadata/11", "v2\n")
			},
			want: []string{`_spark_metadata/11: first line "v2", want the log's version v1`}},
		{name: "an unknown action",
			tamper: func(t *testing.T, out string) {
				writeFile(t, out, "_spark_metadata/11", `v1`+"\n"+`{"path":"file:///out/part-00000-b11-c000.txt","action":"rename"}`)
			},
			want: []string{`_spark_metadata/11 line 2: action "rename", want add or delete`}},
		{name: "many problems: the first 20, and a count",
			tamper: func(t *testing.T, out string) {
				for b := range 11 {
					rm(t, out, fmt.Sprintf("part-00000-b%d-c000.txt", b))
				}
			},
			want: []string{"… and 2 more"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := fileSink(t)
			tc.tamper(t, out)
			err := CheckFileSink(out, sinkRows, sinkBatches)
			checkErr(t, err, tc.want)
		})
	}
}

func TestReadFileSinkLog(t *testing.T) {
	out := fileSink(t)
	log, err := ReadFileSinkLog(out)
	if err != nil {
		t.Fatal(err)
	}
	if log.LastBatch != 11 || len(log.Files) != 2*sinkBatches {
		t.Errorf("last batch %d, %d files; want 11, %d", log.LastBatch, len(log.Files), 2*sinkBatches)
	}
	want := map[string]string{"part-00000-b0-c000.txt": "9.compact", "part-00001-b9-c000.txt": "9.compact", "part-00000-b10-c000.txt": "10"}
	for _, f := range log.Files {
		if w, ok := want[f.Name]; ok && w != f.Log {
			t.Errorf("%s from %s, want %s", f.Name, f.Log, w)
		}
		if strings.Contains(f.Name, "orphan") || strings.Contains(f.Name, "gone") {
			t.Errorf("%s is not committed", f.Name)
		}
	}
	// The deltas that compaction replaced may still be there: the compaction alone counts.
	writeFile(t, out, "_spark_metadata/3", "v1\n"+`{"path":"file:///out/part-00000-orphan-c000.txt","action":"add"}`)
	if err := CheckFileSink(out, sinkRows, sinkBatches); err != nil {
		t.Errorf("a delta before the compaction counted: %v", err)
	}
	// Without compaction, the deltas from 0.
	out = t.TempDir()
	writeFile(t, out, "_spark_metadata/0", "v1\n"+`{"path":"file:///o/a","action":"add"}`+"\n")
	writeFile(t, out, "_spark_metadata/1", "v1\n"+`{"path":"file:///o/b","action":"add"}`+"\n"+`{"path":"file:///o/a","action":"delete"}`)
	log, err = ReadFileSinkLog(out)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(log, FileSinkLog{LastBatch: 1, Files: []SinkFile{{Name: "b", Log: "1"}}}) {
		t.Errorf("got %+v", log)
	}
	rm(t, out, "_spark_metadata/0")
	if _, err := ReadFileSinkLog(out); err == nil || !strings.Contains(err.Error(), "lacks batch 0") {
		t.Errorf("a log without batch 0: %v", err)
	}
}

func TestStateAfter(t *testing.T) {
	// Batch 0 of 4 rows: 0, 1, 2, 3; batch 1 adds 4 to 7.
	if got, want := StateAfter(0, 4), []StateRow{{0, 2, 3}, {1, 1, 1}, {2, 1, 2}}; !reflect.DeepEqual(got, want) {
		t.Errorf("batch 0: %v, want %v", got, want)
	}
	if got, want := StateAfter(1, 4), []StateRow{{0, 3, 9}, {1, 3, 12}, {2, 2, 7}}; !reflect.DeepEqual(got, want) {
		t.Errorf("batch 1: %v, want %v", got, want)
	}
	// What a real run of 10 rows a batch wrote for batch 3 (Spark 3.5.6, DriversetStreamState).
	if got, want := StateAfter(3, 10), []StateRow{{0, 14, 273}, {1, 13, 247}, {2, 13, 260}}; !reflect.DeepEqual(got, want) {
		t.Errorf("batch 3 of 10 rows: %v, want %v", got, want)
	}
	// Fewer rows than groups: only the groups that the batch's values fall in (update mode).
	if got, want := StateAfter(1, 2), []StateRow{{0, 2, 3}, {2, 1, 2}}; !reflect.DeepEqual(got, want) {
		t.Errorf("batch 1 of 2 rows: %v, want %v", got, want)
	}
}

// stateOut writes what the stateful query leaves after batches batches of rows each.
func stateOut(t *testing.T, rows, batches int64) string {
	t.Helper()
	out := t.TempDir()
	for b := range batches {
		writeFile(t, out, fmt.Sprintf("batch-%d", b), stateFile(StateAfter(b, rows)))
	}
	// A write cut short by a lost driver.
	writeFile(t, out, ".batch-3.1b2c.tmp", `{"key":0,`)
	return out
}

func stateFile(rs []StateRow) string {
	var s string
	for _, r := range rs {
		s += fmt.Sprintf(`{"key":%d,"count":%d,"sum":%d}`+"\n", r.Key, r.Count, r.Sum)
	}
	return s
}

func TestCheckStateBatches(t *testing.T) {
	const rows, batches = 4, 5
	// Batch 2 applied twice: its values counted again from batch 2 on.
	twice := func(b int64) []StateRow {
		rs := StateAfter(b, rows)
		for v := int64(2 * rows); v < 3*rows; v++ {
			rs[v%StateGroups].Count++
			rs[v%StateGroups].Sum += v
		}
		return rs
	}
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, out string)
		want   []string
	}{
		{name: "a run with losses that lost nothing", tamper: func(*testing.T, string) {}},
		{name: "a batch's file missing",
			tamper: func(t *testing.T, out string) { rm(t, out, "batch-2") },
			want:   []string{"batch-2 is missing"}},
		{name: "a batch applied twice to the state",
			tamper: func(t *testing.T, out string) {
				for b := int64(2); b < batches; b++ {
					writeFile(t, out, fmt.Sprintf("batch-%d", b), stateFile(twice(b)))
				}
			},
			// Batch 2's values 8 to 11: 9 in group 0, 10 in group 1, 8 and 11 in group 2.
			want: []string{"batch-2: key 0: count 5 sum 27, want count 4 sum 18", "batch-4: key 2: count 8 sum 76, want count 6 sum 57"}},
		{name: "the state lost: a restart that began again from nothing at batch 3",
			tamper: func(t *testing.T, out string) {
				writeFile(t, out, "batch-3", `{"key":0,"count":2,"sum":27}`+"\n"+`{"key":1,"count":1,"sum":13}`+"\n"+`{"key":2,"count":1,"sum":14}`+"\n")
			},
			want: []string{"batch-3: key 0: count 2 sum 27, want count 6 sum 45"}},
		{name: "a group missing",
			tamper: func(t *testing.T, out string) { writeFile(t, out, "batch-0", stateFile(StateAfter(0, rows)[:2])) },
			want:   []string{"batch-0: key 2 is missing (want count 1 sum 2)"}},
		{name: "a group twice",
			tamper: func(t *testing.T, out string) {
				writeFile(t, out, "batch-1", stateFile(append(StateAfter(1, rows), StateAfter(1, rows)[2])))
			},
			want: []string{"batch-1: key 2 has 2 rows"}},
		{name: "a key that is no group",
			tamper: func(t *testing.T, out string) {
				writeFile(t, out, "batch-1", stateFile(append(StateAfter(1, rows), StateRow{Key: 3, Count: 1, Sum: 3})))
			},
			want: []string{"batch-1: key 3 is not a group"}},
		{name: "rows out of order",
			tamper: func(t *testing.T, out string) {
				rs := StateAfter(1, rows)
				rs[0], rs[1] = rs[1], rs[0]
				writeFile(t, out, "batch-1", stateFile(rs))
			},
			want: []string{"batch-1: rows not sorted by key"}},
		{name: "a line that is no row",
			tamper: func(t *testing.T, out string) { writeFile(t, out, "batch-4", `{"key":0,"count":7,"total":66}`+"\n") },
			want:   []string{`batch-4: line 1: "{\"key\":0,\"count\":7,\"total\":66}" is not a group's row`}},
		{name: "a batch past the last",
			tamper: func(t *testing.T, out string) { writeFile(t, out, "batch-5", stateFile(StateAfter(5, rows))) },
			want:   []string{"batch-5: past the last batch, 4"}},
		{name: "a stray file",
			tamper: func(t *testing.T, out string) { writeFile(t, out, "part-00000", "") },
			want:   []string{"part-00000 is not a batch's file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := stateOut(t, rows, batches)
			tc.tamper(t, out)
			checkErr(t, CheckStateBatches(out, rows, batches), tc.want)
		})
	}
	// Fewer rows than groups: a group that the batch's values miss has no row.
	out := stateOut(t, 2, 3)
	if err := CheckStateBatches(out, 2, 3); err != nil {
		t.Errorf("2 rows a batch: %v", err)
	}
	writeFile(t, out, "batch-1", stateFile([]StateRow{{0, 2, 3}, {1, 1, 1}, {2, 1, 2}}))
	checkErr(t, CheckStateBatches(out, 2, 3), []string{"batch-1: key 1: count 1 sum 1, want no row"})
}

func TestCheckValueBatches(t *testing.T) {
	const rows, batches = 4, 5
	good := func(t *testing.T) string {
		out := t.TempDir()
		for b := range int64(batches) {
			var s string
			for v := b * rows; v < (b+1)*rows; v++ {
				s += strconv.FormatInt(v, 10) + "\n"
			}
			writeFile(t, out, fmt.Sprintf("batch-%d", b), s)
		}
		writeFile(t, out, ".batch-4.9e1f.tmp", "16\n")
		return out
	}
	for _, tc := range []struct {
		name, file, data string
		want             []string
	}{
		{name: "a run with losses that lost nothing"},
		{name: "a value missing", file: "batch-1", data: "4\n5\n7\n", want: []string{"batch-1: lacks 1 of its 4 values: 6"}},
		{name: "a value twice", file: "batch-1", data: "4\n5\n6\n6\n7\n", want: []string{"batch-1: line 4: 6 twice"}},
		{name: "another batch's value", file: "batch-1", data: "4\n5\n6\n7\n8\n", want: []string{"batch-1: line 5: 8 is not one of the batch's values (4 to 7)"}},
		{name: "out of order", file: "batch-1", data: "4\n6\n5\n7\n", want: []string{"batch-1: line 3: 5 after 6, not in order"}},
		{name: "no value", file: "batch-1", data: "4\n5\nsix\n7\n", want: []string{`batch-1: line 3: "six" is not a value`, "lacks 1 of its 4 values: 6"}},
		{name: "a batch past the last", file: "batch-5", data: "20\n21\n22\n23\n", want: []string{"batch-5: past the last batch, 4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := good(t)
			if tc.file != "" {
				writeFile(t, out, tc.file, tc.data)
			}
			checkErr(t, CheckValueBatches(out, rows, batches), tc.want)
		})
	}
	out := good(t)
	rm(t, out, "batch-3")
	checkErr(t, CheckValueBatches(out, rows, batches), []string{"DStream output " + out + " (4 rows a batch, 5 batches):\n  batch-3 is missing"})
}

func TestStateGroupsIsTheJobs(t *testing.T) {
	src, err := jobSources.ReadFile("job/DriversetStream.java")
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`static final int GROUPS = (\d+);`).FindSubmatch(src); m == nil || string(m[1]) != strconv.Itoa(StateGroups) {
		t.Errorf("DriversetStream.java's GROUPS is %q, StateGroups %d", m, StateGroups)
	}
}

func TestResumedAt(t *testing.T) {
	const spark356 = "26/12/04 21:41:01 INFO MicroBatchExecution: Resuming at batch 4 with committed offsets {RatePerMicroBatchStream[rowsPerBatch=10]: {\"offset\":40}} and available offsets {}\n"
	for _, tc := range []struct {
		name, log string
		want      int64
		err       string
	}{
		{name: "ours and Spark's agree", log: "driverset-stream: resume batch=4\n" + spark356, want: 4},
		{name: "a new query", log: "driverset-stream: resume batch=0\n26/12/04 INFO MicroBatchExecution: Starting new streaming query.\n", want: 0},
		{name: "done already: Spark never started the query", log: "driverset-stream: resume batch=12\ndriverset-stream: done batches=12\n", want: 12},
		{name: "Spark's alone", log: spark356, want: 4},
		{name: "they disagree", log: "driverset-stream: resume batch=3\n" + spark356, err: "the job says it resumes at batch 3, Spark that it resumes at batch 4"},
		{name: "Spark started twice", log: spark356 + "INFO MicroBatchExecution: Starting new streaming query.\n", err: "more than once"},
		{name: "two drivers' logs", log: "driverset-stream: resume batch=3\ndriverset-stream: resume batch=5\n", err: "2 drivers' resume lines"},
		{name: "no line", log: "driverset-stream: app local-1 started\n", err: "says no batch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResumedAt([]byte(tc.log))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %d, %v; want an error saying %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestCheckpointResume(t *testing.T) {
	ckpt := t.TempDir()
	for _, step := range []struct {
		file string
		want int64
	}{
		{"", 0}, // a new checkpoint
		{"metadata", 0},
		{"offsets/0", 0}, // batch 0 planned, not committed: run again
		{"commits/0", 1},
		{"offsets/1", 1},
		{"offsets/.2.4f1d.tmp", 1}, // batch 2's offsets cut short: not planned
		{"offsets/.1.crc", 1},
		{"commits/1", 2},
		{"offsets/10", 10}, // by number, not by name
	} {
		if step.file != "" {
			writeFile(t, ckpt, step.file, "v1\n")
		}
		if got, err := CheckpointResume(ckpt); err != nil || got != step.want {
			t.Errorf("after %s: %d, %v; want %d", step.file, got, err, step.want)
		}
	}
}

func TestCommittedBatches(t *testing.T) {
	log := "driverset-stream: resume batch=3\ndriverset-stream: committed batch=3\nx driverset-stream: committed batch=9\ndriverset-stream: committed batch=4\n"
	if got := CommittedBatches([]byte(log)); !reflect.DeepEqual(got, []int64{3, 4}) {
		t.Errorf("got %v", got)
	}
}

// checkErr fails t unless err says each of want (none: err is nil).
func checkErr(t *testing.T, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no error; want one saying %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the error does not say %q:\n%v", w, err)
		}
	}
}

func rm(t *testing.T, dir, name string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

func rmAll(t *testing.T, dir, name string) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

func TestHasDStreams(t *testing.T) {
	home := t.TempDir()
	d := Dist{Version: "3.5.6", Scala: "2.12", Home: home}
	writeFile(t, home, "jars/spark-core_2.12-3.5.6.jar", "")
	writeFile(t, home, "jars/spark-streaming_2.13-3.5.6.jar", "") // another Scala's
	if has, err := d.HasDStreams(); err != nil || has {
		t.Errorf("without spark-streaming_2.12: %v, %v", has, err)
	}
	writeFile(t, home, "jars/spark-streaming_2.12-3.5.6.jar", "")
	if has, err := d.HasDStreams(); err != nil || !has {
		t.Errorf("with spark-streaming_2.12: %v, %v", has, err)
	}
	// CompileJob leaves the DStream job out by this line alone.
	src, err := jobSources.ReadFile("job/" + DStreamClass + ".java")
	if err != nil {
		t.Fatal(err)
	}
	if m := needs.FindSubmatch(src); m == nil || string(m[1]) != "spark-streaming" {
		t.Errorf("%s.java does not say it needs spark-streaming", DStreamClass)
	}
	for _, name := range []string{JobClass, StreamClass, StreamStateClass} {
		src, err := jobSources.ReadFile("job/" + name + ".java")
		if err != nil {
			t.Fatal(err)
		}
		if needs.Match(src) {
			t.Errorf("%s.java needs a jar: 4.1.1 would lack it", name)
		}
	}
}

// TestCountFileSink: the counts behind CheckFileSink's verdict, which the streaming demo prints:
// what the sink's log commits, read value by value, and the files it leaves out.
func TestCountFileSink(t *testing.T) {
	clean := SinkCounts{Batches: sinkBatches, Files: 2 * sinkBatches, Values: sinkRows * sinkBatches,
		Distinct: sinkRows * sinkBatches, Uncommitted: 3}
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, out string)
		want   func(c SinkCounts) SinkCounts // from clean
	}{
		{name: "every value once; the orphans of a killed attempt and a deleted file not counted",
			tamper: func(*testing.T, string) {}, want: func(c SinkCounts) SinkCounts { return c }},
		{name: "a value twice",
			tamper: func(t *testing.T, out string) { writeFile(t, out, "part-00001-b7-c000.txt", "30\n31\n5\n") },
			want:   func(c SinkCounts) SinkCounts { c.Values++; c.Twice++; return c }},
		{name: "a value missing",
			tamper: func(t *testing.T, out string) { writeFile(t, out, "part-00001-b2-c000.txt", "10\n") },
			want:   func(c SinkCounts) SinkCounts { c.Values--; c.Distinct--; c.Missing++; return c }},
		{name: "a value not from the input",
			tamper: func(t *testing.T, out string) { writeFile(t, out, "part-00000-b11-c000.txt", "44\n45\n48\n") },
			want:   func(c SinkCounts) SinkCounts { c.Values++; c.Foreign++; return c }},
		{name: "the log ends a batch early",
			tamper: func(t *testing.T, out string) { rm(t, out, "_spark_metadata/11") },
			want: func(c SinkCounts) SinkCounts {
				c.Batches--
				c.Files -= 2
				c.Values -= sinkRows
				c.Distinct -= sinkRows
				c.Missing += sinkRows
				c.Uncommitted += 2
				return c
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := fileSink(t)
			tc.tamper(t, out)
			got, err := CountFileSink(out, sinkRows, sinkBatches)
			if want := tc.want(clean); got != want {
				t.Errorf("counts %+v, want %+v", got, want)
			}
			if check := CheckFileSink(out, sinkRows, sinkBatches); fmt.Sprint(err) != fmt.Sprint(check) {
				t.Errorf("CountFileSink's verdict %v, CheckFileSink's %v", err, check)
			}
			if (err == nil) != (got.Twice == 0 && got.Missing == 0 && got.Foreign == 0 && got.Batches == sinkBatches) {
				t.Errorf("verdict %v for counts %+v", err, got)
			}
		})
	}
}
