package spark

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The streaming jobs (job/DriversetStream.java, job/DriversetStreamState.java,
// job/driverset_stream.py) read rate-micro-batch, whose batch b is exactly the values
// [b·R, (b+1)·R) for R rows per batch. What they wrote after any number of lost drivers is
// checked here against what a run without losses writes: every value once, or each batch's
// state as if no batch had been lost or applied twice.

// StateGroups is the number of groups of the stateful query (value % StateGroups):
// DriversetStream.java's GROUPS.
const StateGroups = 3

// maxProblems is how many problems an error lists before it only counts the rest.
const maxProblems = 20

// problems collects what is wrong, in order, the first maxProblems in full.
type problems struct {
	list []string
	more int
}

func (p *problems) add(format string, args ...any) {
	if len(p.list) == maxProblems {
		p.more++
		return
	}
	p.list = append(p.list, fmt.Sprintf(format, args...))
}

func (p *problems) err(what string) error {
	if len(p.list) == 0 {
		return nil
	}
	s := what + ":\n  " + strings.Join(p.list, "\n  ")
	if p.more > 0 {
		s += fmt.Sprintf("\n  … and %d more", p.more)
	}
	return errors.New(s)
}

// FileSinkLog is what a file sink's log (<output>/_spark_metadata) says is committed.
type FileSinkLog struct {
	// LastBatch is the latest batch the log has; -1 when it has none.
	LastBatch int64
	// Files are the committed files' names (the sink writes them at the output's top level),
	// each with the log file that added it ("3", "9.compact"), sorted by name.
	Files []SinkFile
}

// SinkFile is one file that a file sink's log commits.
type SinkFile struct {
	Name string // its name in the output dir
	Log  string // the log file that lists it: "3", "9.compact"
}

var (
	sinkLogName   = regexp.MustCompile(`^([0-9]+)(\.compact)?$`)
	batchFileName = regexp.MustCompile(`^[0-9]+$`)
)

// ReadFileSinkLog reads the log of the file sink that writes into out, as Spark's readers do:
// the latest N.compact (all that batches up to N added, less what they deleted) and each batch
// after it, which must follow one another. Other files in the log's dir (checksums, the temp
// file of a batch being written) are not part of it.
func ReadFileSinkLog(out string) (FileSinkLog, error) {
	dir := filepath.Join(out, "_spark_metadata")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return FileSinkLog{}, fmt.Errorf("the file sink's log: %w", err)
	}
	compact := int64(-1)
	deltas := map[int64]bool{}
	for _, e := range entries {
		m := sinkLogName.FindStringSubmatch(e.Name())
		if m == nil || e.IsDir() {
			continue
		}
		id, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil {
			return FileSinkLog{}, fmt.Errorf("%s: %w", filepath.Join(dir, e.Name()), err)
		}
		if m[2] != "" {
			compact = max(compact, id)
		} else {
			deltas[id] = true
		}
	}
	log := FileSinkLog{LastBatch: compact}
	files := map[string]string{}
	var names []string // the log files to read, in order
	if compact >= 0 {
		names = append(names, strconv.FormatInt(compact, 10)+".compact")
	}
	for id := range deltas {
		log.LastBatch = max(log.LastBatch, id)
	}
	for id := compact + 1; id <= log.LastBatch; id++ {
		if !deltas[id] {
			return FileSinkLog{}, fmt.Errorf("the file sink's log %s lacks batch %d (it has batches up to %d)", dir, id, log.LastBatch)
		}
		names = append(names, strconv.FormatInt(id, 10))
	}
	for _, name := range names {
		if err := readSinkLogFile(filepath.Join(dir, name), name, files); err != nil {
			return FileSinkLog{}, err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		log.Files = append(log.Files, SinkFile{Name: name, Log: files[name]})
	}
	return log, nil
}

// readSinkLogFile applies one log file to files: a "v1" line, then one JSON object a line
// whose path (a URI) names a file and action says whether it is added or deleted.
func readSinkLogFile(file, name string, files map[string]string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("the file sink's log: %w", err)
	}
	lines := strings.Split(string(b), "\n")
	if lines[0] != "v1" {
		return fmt.Errorf("%s: first line %q, want the log's version v1", file, lines[0])
	}
	for i, line := range lines[1:] {
		if line == "" {
			continue
		}
		var e struct{ Path, Action string }
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			return fmt.Errorf("%s line %d: %w", file, i+2, err)
		}
		u, err := url.Parse(e.Path)
		if err != nil || e.Path == "" {
			return fmt.Errorf("%s line %d: path %q is not a file's URI", file, i+2, e.Path)
		}
		// By name: the driver that wrote the log may have had the output mounted elsewhere.
		base := path.Base(u.Path)
		switch e.Action {
		case "add":
			files[base] = name
		case "delete":
			delete(files, base)
		default:
			return fmt.Errorf("%s line %d: action %q, want add or delete", file, i+2, e.Action)
		}
	}
	return nil
}

// CheckFileSink checks what the stateless query wrote into out with rows per batch: the files
// that its log commits hold every value of batches 0 to batches-1 exactly once, one decimal
// value a line, and nothing else; the log reaches batch batches-1. Files that the log does not
// list (a killed batch's) do not count. The error lists what is wrong.
func CheckFileSink(out string, rows, batches int64) error {
	_, err := CountFileSink(out, rows, batches)
	return err
}

// SinkCounts is what the files that a file sink's log commits hold, counted: what
// CheckFileSink's verdict rests on, and what the streaming demo tells.
type SinkCounts struct {
	Batches     int64 // batches the log commits: its last batch + 1
	Files       int   // files it commits
	Values      int64 // lines of those files that are values, read in all
	Distinct    int64 // input values read at least once
	Twice       int64 // reads of a value after its first
	Foreign     int64 // values that are not from the input
	Missing     int64 // input values read in no committed file
	Uncommitted int   // data files in out that the log does not list (an attempt cut short), ignored
}

// CountFileSink counts what the stateless query wrote into out with rows per batch, and
// returns CheckFileSink's verdict with the counts.
func CountFileSink(out string, rows, batches int64) (SinkCounts, error) {
	log, err := ReadFileSinkLog(out)
	if err != nil {
		return SinkCounts{}, err
	}
	c := SinkCounts{Batches: log.LastBatch + 1, Files: len(log.Files)}
	if c.Uncommitted, err = uncommitted(out, log); err != nil {
		return c, err
	}
	var p problems
	if log.LastBatch < batches-1 {
		p.add("the file sink's log ends at batch %d, want batches up to %d", log.LastBatch, batches-1)
	}
	seen := make(map[int64]string, rows*batches)
	for _, f := range log.Files {
		b, err := os.ReadFile(filepath.Join(out, f.Name))
		if errors.Is(err, os.ErrNotExist) {
			p.add("%s, committed by _spark_metadata/%s, is missing", f.Name, f.Log)
			continue
		}
		if err != nil {
			return c, err
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for n := 1; sc.Scan(); n++ {
			at := fmt.Sprintf("%s line %d", f.Name, n)
			v, err := strconv.ParseInt(sc.Text(), 10, 64)
			if err == nil {
				c.Values++
			}
			switch {
			case err != nil:
				p.add("%s: %q is not a value", at, sc.Text())
			case v < 0 || v >= rows*batches:
				c.Foreign++
				p.add("%s: %d is not from the input (values 0 to %d)", at, v, rows*batches-1)
			case seen[v] != "":
				c.Twice++
				p.add("value %d (batch %d) twice: %s and %s", v, v/rows, seen[v], at)
			default:
				c.Distinct++
				seen[v] = at
			}
		}
		if err := sc.Err(); err != nil {
			return c, fmt.Errorf("%s: %w", f.Name, err)
		}
	}
	for b := range batches {
		var missing []int64
		for v := b * rows; v < (b+1)*rows; v++ {
			if seen[v] == "" {
				missing = append(missing, v)
			}
		}
		c.Missing += int64(len(missing))
		if len(missing) > 0 {
			p.add("batch %d lacks %d of its %d values: %s", b, len(missing), rows, listValues(missing))
		}
	}
	return c, p.err(fmt.Sprintf("file sink %s (%d rows a batch, %d batches)", out, rows, batches))
}

// uncommitted counts the data files in out (not the log's folder, not hidden) that log does
// not list: what an attempt cut short left, which readers of the sink ignore.
func uncommitted(out string, log FileSinkLog) (int, error) {
	entries, err := os.ReadDir(out)
	if err != nil {
		return 0, err
	}
	listed := map[string]bool{}
	for _, f := range log.Files {
		listed[f.Name] = true
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() && !strings.HasPrefix(e.Name(), "_") && !strings.HasPrefix(e.Name(), ".") && !listed[e.Name()] {
			n++
		}
	}
	return n, nil
}

// listValues names the first few of vs.
func listValues(vs []int64) string {
	var s []string
	for _, v := range vs[:min(len(vs), 5)] {
		s = append(s, strconv.FormatInt(v, 10))
	}
	if len(vs) > 5 {
		s = append(s, fmt.Sprintf("… (%d more)", len(vs)-5))
	}
	return strings.Join(s, ", ")
}

// StateRow is one group of the stateful query's output: the running count and sum of the
// values v with v % StateGroups == Key.
type StateRow struct {
	Key   int64 `json:"key"`
	Count int64 `json:"count"`
	Sum   int64 `json:"sum"`
}

// StateAfter is what the stateful query writes for batch (output mode update) with rows per
// batch, run without losses: the totals of the groups that the batch's values fall in, over
// batches 0 to batch, sorted by key.
func StateAfter(batch, rows int64) []StateRow {
	totals := make([]StateRow, StateGroups)
	in := make([]bool, StateGroups) // the groups that the batch's own values fall in
	for v := range (batch + 1) * rows {
		t := &totals[v%StateGroups]
		t.Key, t.Count, t.Sum = v%StateGroups, t.Count+1, t.Sum+v
		if v >= batch*rows {
			in[v%StateGroups] = true
		}
	}
	var out []StateRow
	for k, t := range totals {
		if in[k] {
			out = append(out, t)
		}
	}
	return out
}

var stateFileName = regexp.MustCompile(`^batch-([0-9]+)$`)

// CheckStateBatches checks what the stateful query wrote into out with rows per batch:
// batch-0 to batch-<batches-1>, each one JSON object a line sorted by key, equal to StateAfter
// its batch; no other batch. Hidden files (a write that was cut short) do not count.
func CheckStateBatches(out string, rows, batches int64) error {
	return checkBatchFiles(out, batches, "stateful output", func(b int64, data []byte) []string {
		return diffState(data, StateAfter(b, rows))
	}, fmt.Sprintf("%d rows a batch", rows))
}

// CheckValueBatches checks what the DStream job wrote into out with rows per batch: batch-0
// to batch-<batches-1>, each the batch's values [b·rows, (b+1)·rows), one a line in order; no
// other batch. Hidden files (a write that was cut short) do not count.
func CheckValueBatches(out string, rows, batches int64) error {
	return checkBatchFiles(out, batches, "DStream output", func(b int64, data []byte) []string {
		return diffValues(data, b, rows)
	}, fmt.Sprintf("%d rows a batch", rows))
}

// checkBatchFiles checks that out holds batch-0 to batch-<batches-1> and nothing else but
// hidden files, and what diff says of each batch's content.
func checkBatchFiles(out string, batches int64, what string, diff func(b int64, data []byte) []string, shape string) error {
	entries, err := os.ReadDir(out)
	if err != nil {
		return fmt.Errorf("the %s: %w", what, err)
	}
	var p problems
	have := map[int64]bool{}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		m := stateFileName.FindStringSubmatch(e.Name())
		if m == nil {
			p.add("%s is not a batch's file", e.Name())
			continue
		}
		id, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil || id >= batches {
			p.add("%s: past the last batch, %d", e.Name(), batches-1)
			continue
		}
		have[id] = true
	}
	for b := range batches {
		if !have[b] {
			p.add("batch-%d is missing", b)
			continue
		}
		data, err := os.ReadFile(filepath.Join(out, fmt.Sprintf("batch-%d", b)))
		if err != nil {
			return err
		}
		for _, d := range diff(b, data) {
			p.add("batch-%d: %s", b, d)
		}
	}
	return p.err(fmt.Sprintf("%s %s (%s, %d batches)", what, out, shape, batches))
}

// diffValues says how a DStream batch file's content differs from the values of batch b.
func diffValues(data []byte, b, rows int64) []string {
	var diffs []string
	seen := map[int64]bool{}
	prev := int64(-1)
	for n, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		v, err := strconv.ParseInt(line, 10, 64)
		switch {
		case err != nil:
			diffs = append(diffs, fmt.Sprintf("line %d: %q is not a value", n+1, line))
		case v < b*rows || v >= (b+1)*rows:
			diffs = append(diffs, fmt.Sprintf("line %d: %d is not one of the batch's values (%d to %d)", n+1, v, b*rows, (b+1)*rows-1))
		case seen[v]:
			diffs = append(diffs, fmt.Sprintf("line %d: %d twice", n+1, v))
		case v < prev:
			diffs = append(diffs, fmt.Sprintf("line %d: %d after %d, not in order", n+1, v, prev))
		}
		if err == nil {
			seen[v] = true
			prev = max(prev, v)
		}
	}
	var missing []int64
	for v := b * rows; v < (b+1)*rows; v++ {
		if !seen[v] {
			missing = append(missing, v)
		}
	}
	if len(missing) > 0 {
		diffs = append(diffs, fmt.Sprintf("lacks %d of its %d values: %s", len(missing), rows, listValues(missing)))
	}
	return diffs
}

// diffState says how a batch file's content differs from want.
func diffState(data []byte, want []StateRow) []string {
	var diffs []string
	var got []StateRow
	for n, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		var r StateRow
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			diffs = append(diffs, fmt.Sprintf("line %d: %q is not a group's row (%v)", n+1, line, err))
			continue
		}
		got = append(got, r)
	}
	if len(diffs) > 0 {
		return diffs
	}
	if slices.Equal(got, want) {
		return nil
	}
	byKey := func(rs []StateRow) map[int64][]StateRow {
		m := map[int64][]StateRow{}
		for _, r := range rs {
			m[r.Key] = append(m[r.Key], r)
		}
		return m
	}
	g, w := byKey(got), byKey(want)
	for k := range int64(StateGroups) {
		switch {
		case len(g[k]) > 1:
			diffs = append(diffs, fmt.Sprintf("key %d has %d rows", k, len(g[k])))
		case len(g[k]) == 1 && len(w[k]) == 0:
			diffs = append(diffs, fmt.Sprintf("key %d: count %d sum %d, want no row (none of the batch's values)", k, g[k][0].Count, g[k][0].Sum))
		case len(g[k]) == 0 && len(w[k]) == 1:
			diffs = append(diffs, fmt.Sprintf("key %d is missing (want count %d sum %d)", k, w[k][0].Count, w[k][0].Sum))
		case len(g[k]) == 1 && g[k][0] != w[k][0]:
			diffs = append(diffs, fmt.Sprintf("key %d: count %d sum %d, want count %d sum %d", k, g[k][0].Count, g[k][0].Sum, w[k][0].Count, w[k][0].Sum))
		}
	}
	for k := range g {
		if k < 0 || k >= StateGroups {
			diffs = append(diffs, fmt.Sprintf("key %d is not a group", k))
		}
	}
	if len(diffs) == 0 {
		diffs = append(diffs, "rows not sorted by key")
	}
	return diffs
}

// CheckpointResume is the batch that a query started on checkpoint runs first, as Spark's
// MicroBatchExecution decides it (and the jobs print it): the latest offsets/B again unless
// commits/B exists, then B+1; 0 without offsets.
func CheckpointResume(checkpoint string) (int64, error) {
	last := int64(-1)
	entries, err := os.ReadDir(filepath.Join(checkpoint, "offsets"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	for _, e := range entries {
		if !batchFileName.MatchString(e.Name()) {
			continue
		}
		if id, err := strconv.ParseInt(e.Name(), 10, 64); err == nil {
			last = max(last, id)
		}
	}
	if last < 0 {
		return 0, nil
	}
	_, err = os.Stat(filepath.Join(checkpoint, "commits", strconv.FormatInt(last, 10)))
	switch {
	case err == nil:
		return last + 1, nil
	case errors.Is(err, os.ErrNotExist):
		return last, nil
	default:
		return 0, err
	}
}

var (
	ownResume   = regexp.MustCompile(`(?m)^driverset-stream: resume batch=([0-9]+)$`)
	sparkResume = regexp.MustCompile(`(?m)\bResuming at batch ([0-9]+)\b`)
	sparkNew    = regexp.MustCompile(`(?m)\bStarting new streaming query\.`)
	committed   = regexp.MustCompile(`(?m)^driverset-stream: committed batch=([0-9]+)$`)
)

// ResumedAt is the batch that a streaming job's driver, whose log (stdout and stderr) is log,
// ran first: what the job printed ("driverset-stream: resume batch=B", from the checkpoint it
// found), which must agree with what Spark logged when it started the query ("Resuming at
// batch B", or "Starting new streaming query." for 0) where it did.
func ResumedAt(log []byte) (int64, error) {
	ours := ownResume.FindAllSubmatch(log, -1)
	if len(ours) > 1 {
		return 0, fmt.Errorf("the log holds %d drivers' resume lines, want one", len(ours))
	}
	spark := int64(-1)
	if m := sparkResume.FindAllSubmatch(log, -1); len(m) > 0 {
		if len(m) > 1 || sparkNew.Match(log) {
			return 0, errors.New("the log has Spark start the query more than once")
		}
		spark, _ = strconv.ParseInt(string(m[0][1]), 10, 64)
	} else if sparkNew.Match(log) {
		spark = 0
	}
	if len(ours) == 0 {
		if spark < 0 {
			return 0, errors.New("the log says no batch it resumed at (no \"driverset-stream: resume batch=\", no \"Resuming at batch\")")
		}
		return spark, nil
	}
	b, err := strconv.ParseInt(string(ours[0][1]), 10, 64)
	if err != nil {
		return 0, err
	}
	if spark >= 0 && spark != b {
		return 0, fmt.Errorf("the job says it resumes at batch %d, Spark that it resumes at batch %d", b, spark)
	}
	return b, nil
}

// CommittedBatches are the batches that a streaming job's driver printed as committed
// ("driverset-stream: committed batch=B"), in order.
func CommittedBatches(log []byte) []int64 {
	var bs []int64
	for _, m := range committed.FindAllSubmatch(log, -1) {
		b, _ := strconv.ParseInt(string(m[1]), 10, 64)
		bs = append(bs, b)
	}
	return bs
}
