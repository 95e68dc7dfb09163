package harness

import (
	"bufio"
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
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasPrefix(d.Name(), "driverset-") || !strings.HasSuffix(d.Name(), ".log") {
			return nil
		}
		found, err := panicLines(path)
		out = append(out, found...)
		return err
	})
	return out, err
}

func panicLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024) // a panic's stack trace is one long line
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		for _, mark := range panicMarks {
			if strings.Contains(line, mark) {
				out = append(out, path+":"+strconv.Itoa(n)+": "+truncate(line, 300))
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
