package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// coveredLines reads a coverage profile (go test -coverprofile) and returns, per file as the
// profile names it (import path/file.go), the lines that a block run at least once touches.
// The cover tool's blocks do not overlap, so a line inside a branch no test took is in no run
// block, and a line holding a run and an unrun block counts as covered.
func coveredLines(r io.Reader) (map[string]map[int]bool, error) {
	covered := map[string]map[int]bool{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "mode:") {
			continue
		}
		// name.go:startLine.startCol,endLine.endCol statements count
		colon := strings.LastIndex(line, ":")
		f := strings.Fields(line[colon+1:])
		if colon < 0 || len(f) != 3 {
			return nil, fmt.Errorf("coverage profile: bad line %q", line)
		}
		start, end, ok := strings.Cut(f[0], ",")
		startLine, err1 := strconv.Atoi(strings.Split(start, ".")[0])
		endLine, err2 := strconv.Atoi(strings.Split(end, ".")[0])
		count, err3 := strconv.Atoi(f[2])
		if !ok || err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("coverage profile: bad line %q", line)
		}
		if count == 0 {
			continue
		}
		name := line[:colon]
		if covered[name] == nil {
			covered[name] = map[int]bool{}
		}
		for l := startLine; l <= endLine; l++ {
			covered[name][l] = true
		}
	}
	return covered, sc.Err()
}
