package harness

import (
	"bufio"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// panicMarks are how a panic shows in driverset's log: the line apimachinery's panic handler
// writes when controller-runtime recovers a reconciler's or a webhook's panic ("Observed a
// panic"), and the Go runtime's own ("panic: ...", also in the error controller-runtime then logs).
var panicMarks = []string{"Observed a panic", "panic:"} //nolint:gochecknoglobals // constant list

// RecoveredPanics returns every line of a driverset log under dir (driverset-*.log, at any depth:
// scenarios start replicas in their own directories) that shows a panic, as "path:line: text".
// controller-runtime recovers panics and carries on, so a run passes unless someone looks.
func RecoveredPanics(dir string) ([]string, error) {
	return logLines(dir, panicMarks)
}

// restartMark is the line supervise writes before it starts an exited driverset again.
const restartMark = "harness: driverset exited on its own"

// Restarts returns every line of a driverset log under dir where the harness started an exited
// driverset again (Options.Restart), as "path:line: text": rare and expected (a leader lease
// lost while the apiserver restarted), but a run says how often.
func Restarts(dir string) ([]string, error) {
	return logLines(dir, []string{restartMark})
}

// logLines returns the lines of the driverset logs under dir that contain one of marks.
func logLines(dir string, marks []string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasPrefix(d.Name(), "driverset-") || !strings.HasSuffix(d.Name(), ".log") {
			return nil
		}
		found, err := linesOf(path, marks)
		out = append(out, found...)
		return err
	})
	return out, err
}

func linesOf(path string, marks []string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return scanLines(f, path, marks)
}

// PanicsIn returns every line of log r, named where in what it returns, that shows a panic: for
// a driverset that logs elsewhere than a file under the run's folder (a pod on a real node).
func PanicsIn(r io.Reader, where string) ([]string, error) {
	return scanLines(r, where, panicMarks)
}

func scanLines(r io.Reader, where string, marks []string) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024) // a panic's stack trace is one long line
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		for _, mark := range marks {
			if strings.Contains(line, mark) {
				out = append(out, where+":"+strconv.Itoa(n)+": "+truncate(line, 300))
				break
			}
		}
	}
	return out, sc.Err()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
