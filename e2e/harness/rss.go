package harness

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// RSS is the resident set size, in bytes, of the driverset process, from /proc/<pid>/status.
func (d *Driverset) RSS() (int64, error) {
	if d == nil || d.cmd == nil || d.cmd.Process == nil {
		return 0, errors.New("driverset is not running")
	}
	return processRSS(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
}

// processRSS reads VmRSS (in kB) from a /proc/<pid>/status file.
func processRSS(status string) (int64, error) {
	f, err := os.Open(status)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		rest, ok := strings.CutPrefix(s.Text(), "VmRSS:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: VmRSS %q: %w", status, rest, err)
		}
		return kb * 1024, nil
	}
	if err := s.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s has no VmRSS", status)
}
