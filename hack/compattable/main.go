// Command compattable serves make compat (hack/compat.sh): it reads the scenarios of
// hack/compat-tests.txt and prints the go test packages and -run pattern that run them, or reads
// each Kubernetes version's `go test -json` output and prints one Markdown table of the scenarios
// by version, exiting 1 when any scenario failed or did not run on any version.
//
//	go run ./hack/compattable -tests hack/compat-tests.txt -pattern
//	go run ./hack/compattable -tests hack/compat-tests.txt v1.30.14=run-1.30.json v1.37.2=run-1.37.json
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

func main() {
	tests := flag.String("tests", "hack/compat-tests.txt", "the scenarios, one a line: package test covers")
	pattern := flag.Bool("pattern", false, "print the packages on the first line and the -run pattern on the second, and exit")
	flag.Parse()
	if err := compat(*tests, *pattern, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "compattable:", err)
		os.Exit(1)
	}
}

func compat(tests string, pattern bool, args []string) error {
	f, err := os.Open(tests)
	if err != nil {
		return err
	}
	defer f.Close()
	list, err := parseList(f)
	if err != nil {
		return fmt.Errorf("%s: %w", tests, err)
	}
	if pattern {
		pkgs, p := runPattern(list)
		fmt.Println(strings.Join(pkgs, " "))
		fmt.Println(p)
		return nil
	}
	module, err := modulePath("go.mod")
	if err != nil {
		return err
	}
	var runs []versionRun
	for _, a := range args {
		version, file, ok := strings.Cut(a, "=")
		if !ok {
			return fmt.Errorf("argument %q: want VERSION=FILE.json", a)
		}
		r, err := readRunFile(file)
		if err != nil {
			return err
		}
		runs = append(runs, versionRun{Version: version, Results: r})
	}
	if n := writeTable(os.Stdout, module, list, runs); n > 0 {
		return fmt.Errorf("%d scenario runs failed or did not run", n)
	}
	return nil
}

func readRunFile(name string) (*goTestRun, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := readRun(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return r, nil
}

// modulePath is the module line of go.mod: the JSON names packages by import path.
func modulePath(gomod string) (string, error) {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.TrimSpace(m), nil
		}
	}
	return "", errors.New("go.mod has no module line")
}

// scenario is one line of the list.
type scenario struct {
	Pkg, Test, Covers string
}

var testName = regexp.MustCompile(`^Test[A-Z0-9_]\w*$`)

// parseList reads "package test covers…" lines; # starts a comment line.
func parseList(r io.Reader) ([]scenario, error) {
	var list []scenario
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 || !strings.HasPrefix(f[0], "./") || !testName.MatchString(f[1]) {
			return nil, fmt.Errorf("line %d: want ./package TestName what-it-covers, got %q", n, line)
		}
		list = append(list, scenario{Pkg: f[0], Test: f[1], Covers: strings.Join(f[2:], " ")})
	}
	return list, sc.Err()
}

// runPattern is the packages (in the list's order) and the -run pattern of every scenario. One
// pattern for all packages: a test's name selects it in its own package alone, since the list
// names each test once.
func runPattern(list []scenario) (pkgs []string, pattern string) {
	seen := map[string]bool{}
	names := make([]string, 0, len(list))
	for _, s := range list {
		if !seen[s.Pkg] {
			seen[s.Pkg] = true
			pkgs = append(pkgs, s.Pkg)
		}
		names = append(names, s.Test)
	}
	return pkgs, "^(" + strings.Join(names, "|") + ")$"
}

// event is one line of `go test -json` (test2json).
type event struct {
	Action, Package, Test, Output string
	Elapsed                       float64
}

// result is how one top-level test ended.
type result struct {
	Action  string // pass, fail, skip
	Elapsed float64
	Note    string // for fail and skip: the test's last line logged from a _test.go file
}

// goTestRun is one version's go test output, by package: its tests' results, how the package ended,
// and its last line of output outside any test (why a package that failed before its tests did).
type goTestRun struct {
	Tests    map[string]map[string]result
	Packages map[string]result
	lastLine map[string]string
	lastLog  map[string]map[string]string
}

type versionRun struct {
	Version string
	Results *goTestRun
}

// A line a test logged from its own file: "    file_test.go:12: message". go test does not tell
// an error from a log line; the last one is the failure for t.Fatal and t.Skip, and most often
// for t.Error (the scenarios log progress before they check). Helpers' lines (the harness's
// files) say what happened around it, not what failed.
var logLine = regexp.MustCompile(`^\s+\S+_test\.go:\d+: `)

func readRun(r io.Reader) (*goTestRun, error) {
	out := &goTestRun{Tests: map[string]map[string]result{}, Packages: map[string]result{},
		lastLine: map[string]string{}, lastLog: map[string]map[string]string{}}
	dec := json.NewDecoder(r)
	for {
		var e event
		if err := dec.Decode(&e); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		top, _, sub := strings.Cut(e.Test, "/")
		switch {
		case e.Action == "output" && e.Test == "":
			if l := strings.TrimSpace(e.Output); l != "" && !boilerplate(l) {
				out.lastLine[e.Package] = l
			}
		case e.Action == "output" && logLine.MatchString(e.Output):
			if out.lastLog[e.Package] == nil {
				out.lastLog[e.Package] = map[string]string{}
			}
			out.lastLog[e.Package][top] = strings.TrimSpace(e.Output)
		case e.Action != "pass" && e.Action != "fail" && e.Action != "skip":
		case e.Test == "":
			out.Packages[e.Package] = result{Action: e.Action, Elapsed: e.Elapsed, Note: out.lastLine[e.Package]}
		case !sub:
			if out.Tests[e.Package] == nil {
				out.Tests[e.Package] = map[string]result{}
			}
			res := result{Action: e.Action, Elapsed: e.Elapsed}
			if e.Action != "pass" {
				res.Note = out.lastLog[e.Package][top]
			}
			out.Tests[e.Package][top] = res
		}
	}
}

// boilerplate is go test's own summary lines, which say nothing about why.
func boilerplate(l string) bool {
	for _, p := range []string{"FAIL", "PASS", "ok ", "ok\t", "exit status", "=== ", "--- "} {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return false
}

// writeTable prints the scenarios by version and returns how many cells failed or did not run.
func writeTable(w io.Writer, module string, list []scenario, runs []versionRun) int {
	failed := 0
	fmt.Fprint(w, "| scenario | covers |")
	for _, r := range runs {
		fmt.Fprintf(w, " %s |", r.Version)
	}
	fmt.Fprint(w, "\n|---|---|"+strings.Repeat("---|", len(runs))+"\n")
	for _, s := range list {
		fmt.Fprintf(w, "| %s | %s |", s.Test, cell(s.Covers))
		for _, r := range runs {
			text, ok := outcome(r.Results, module+"/"+strings.TrimPrefix(s.Pkg, "./"), s.Test)
			if !ok {
				failed++
			}
			fmt.Fprintf(w, " %s |", text)
		}
		fmt.Fprintln(w)
	}
	pkgs, _ := runPattern(list)
	fmt.Fprint(w, "| go test, wall time | |")
	for _, r := range runs {
		var parts []string
		for _, p := range pkgs {
			rel := strings.TrimPrefix(p, "./")
			if res, ok := r.Results.Packages[module+"/"+rel]; ok {
				parts = append(parts, fmt.Sprintf("%s %.1f s", rel, res.Elapsed))
			}
		}
		fmt.Fprintf(w, " %s |", strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
	return failed
}

// outcome is one cell, and whether it counts as passed (a skip does: the test says why).
func outcome(r *goTestRun, pkg, test string) (string, bool) {
	res, ran := r.Tests[pkg][test]
	switch {
	case ran && res.Action == "pass":
		return fmt.Sprintf("pass (%.1f s)", res.Elapsed), true
	case ran && res.Action == "skip":
		return "skipped: " + cell(res.Note), true
	case ran:
		return fmt.Sprintf("**FAIL** (%.1f s): %s", res.Elapsed, cell(res.Note)), false
	}
	if p, ok := r.Packages[pkg]; ok && p.Action == "fail" && len(r.Tests[pkg]) == 0 && p.Note != "" {
		return "**not run**: " + cell(p.Note), false
	}
	return "**not run**: no such test in its package", false
}

// cell makes text fit a Markdown table cell: one line, no pipes, not too long.
func cell(s string) string {
	s = strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "|", `\|`)
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
