//go:build testbed

package realnode

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/driverset/driverset/e2e/spark"
)

// eventLogs is a folder of the host that every real node mounts into the driver by hostPath,
// standing in for the shared store (HDFS, S3, NFS) a History Server reads, and the Spark
// settings that make the driver write its event log there.
type eventLogs struct {
	dir  string
	conf map[string]string
}

// newEventLogs makes the folder (removed when the test ends) and the settings; rolling asks for
// Spark's rolling event log (the default from 4.0) rather than the single file.
func newEventLogs(t *testing.T, rolling bool) eventLogs {
	t.Helper()
	dir, err := os.MkdirTemp("", "driverset-e2e-eventlogs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	_ = os.Chmod(dir, 0o777) // the spark user (185) writes there
	const vol = "spark.kubernetes.driver.volumes.hostPath.eventlogs."
	return eventLogs{dir: dir, conf: map[string]string{
		"spark.eventLog.enabled":         "true",
		"spark.eventLog.dir":             "file:/eventlogs",
		"spark.eventLog.rolling.enabled": map[bool]string{true: "true", false: "false"}[rolling],
		vol + "mount.path":               "/eventlogs",
		vol + "options.path":             dir,
	}}
}

// with is conf and the event-log settings.
func (e eventLogs) with(conf map[string]string) map[string]string {
	out := maps.Clone(e.conf)
	maps.Copy(out, conf)
	return out
}

// expect checks that the driver JVM of every incarnation (its app ids, in order) kept an event
// log of its own, finished for each but those in unfinished (an incarnation whose node was
// killed never closes its log), and that Spark's History Server of d lists each of them, the
// last one completed.
func (e eventLogs) expect(t *testing.T, d spark.Dist, ids []string, unfinished ...string) {
	t.Helper()
	entries, err := os.ReadDir(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, en := range entries {
		names = append(names, en.Name())
	}
	t.Logf("event logs of app ids %v: %v", ids, names)
	for _, id := range ids {
		done := !slices.Contains(unfinished, id)
		if !e.finished(names, id) && done {
			t.Errorf("incarnation %s left no finished event log: %v", id, names)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	hs, err := spark.StartHistoryServer(ctx, d, e.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Stop()
	var listed map[string]spark.HistoryApp
	waitFor(t, time.Minute, "the History Server to list every incarnation", func(ctx context.Context) (bool, error) {
		apps, err := hs.Applications(ctx)
		if err != nil {
			return false, nil
		}
		listed = map[string]spark.HistoryApp{}
		for _, a := range apps {
			listed[a.ID] = a
		}
		for _, id := range ids {
			if _, ok := listed[id]; !ok {
				return false, nil
			}
		}
		return true, nil
	})
	last := listed[ids[len(ids)-1]]
	if len(last.Attempts) == 0 || !last.Attempts[0].Completed {
		t.Errorf("the History Server does not show the last incarnation %s completed: %+v", last.ID, last)
	}
	t.Logf("the History Server lists %d app(s): %v", len(listed), slices.Sorted(maps.Keys(listed)))
}

// finished reports whether names (the event-log folder's entries) hold a finished log of app id:
// a rolling log's folder eventlog_v2_<id> whose appstatus file no longer ends in .inprogress,
// or the single file <id> (an unfinished one is <id>.inprogress).
func (e eventLogs) finished(names []string, id string) bool {
	if slices.Contains(names, id) {
		return true
	}
	dir := "eventlog_v2_" + id
	if !slices.Contains(names, dir) {
		return false
	}
	inner, err := os.ReadDir(filepath.Join(e.dir, dir))
	if err != nil {
		return false
	}
	for _, f := range inner {
		if strings.HasPrefix(f.Name(), "appstatus_") {
			return !strings.HasSuffix(f.Name(), ".inprogress")
		}
	}
	return false
}

// listing is every file of the folder, with its size, for the log: what a History Server would read.
func (e eventLogs) listing(t *testing.T) string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(e.dir, func(path string, de os.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		info, err := de.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(e.dir, path)
		out = append(out, fmt.Sprintf("%s (%d bytes)", rel, info.Size()))
		return nil
	})
	if err != nil {
		t.Errorf("listing the event-log folder: %v", err)
	}
	return strings.Join(out, ", ")
}
