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
	return d.memory("VmRSS")
}

// RSSParts are the anonymous (heap, stacks) and file-backed (the binary's pages) parts of the
// driverset process's resident set, in bytes.
func (d *Driverset) RSSParts() (anon, file int64, err error) {
	if anon, err = d.memory("RssAnon"); err != nil {
		return 0, 0, err
	}
	file, err = d.memory("RssFile")
	return anon, file, err
}

func (d *Driverset) memory(field string) (int64, error) {
	p := d.process()
	if p == nil {
		return 0, errors.New("driverset is not running")
	}
	return processMemory(fmt.Sprintf("/proc/%d/status", p.Pid), field)
}

// processRSS reads VmRSS from a /proc/<pid>/status file, in bytes.
func processRSS(status string) (int64, error) { return processMemory(status, "VmRSS") }

// processMemory reads field (VmRSS, RssAnon, RssFile: in kB) from a /proc/<pid>/status file, in
// bytes.
func processMemory(status, field string) (int64, error) {
	f, err := os.Open(status)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		rest, ok := strings.CutPrefix(s.Text(), field+":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %s %q: %w", status, field, rest, err)
		}
		return kb * 1024, nil
	}
	if err := s.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s has no %s", status, field)
}
