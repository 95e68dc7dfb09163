package main

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestInterval: the Wilson 95% interval, checked against published values (9 of 10:
// 0.596–0.982; 0 of n: 0 to z²/(n+z²)).
func TestInterval(t *testing.T) {
	for _, tc := range []struct {
		r             row
		score, lo, hi string
	}{
		{row{killed: 10}, "1.000", "0.722", "1.000"},
		{row{killed: 8, timedOut: 1, lived: 1}, "0.900", "0.596", "0.982"},
		{row{killed: 5, lived: 5}, "0.500", "0.237", "0.763"},
		{row{lived: 3}, "0.000", "0.000", "0.561"},
		{row{notViable: 2}, "1.000", "0.000", "1.000"}, // nothing scored: nothing known
	} {
		lo, hi := tc.r.interval()
		got := fmt.Sprintf("%.3f %.3f %.3f", tc.r.score(), lo, hi)
		if want := tc.score + " " + tc.lo + " " + tc.hi; got != want {
			t.Errorf("%+v: score, interval %s, want %s", tc.r, got, want)
		}
	}
}

// TestClassify: what the build and the run of a mutant's test binary say about it.
func TestClassify(t *testing.T) {
	failed := errors.New("exit status 1")
	for _, tc := range []struct {
		name       string
		build, run error
		expired    bool
		want       status
	}{
		{"the tests pass", nil, nil, false, lived},
		{"a test fails or panics", nil, failed, false, killed},
		{"it does not build", failed, nil, false, notViable},
		{"the timeout ended the tests", nil, errors.New("signal: killed"), true, timedOut},
	} {
		if got := classify(tc.build, tc.run, tc.expired); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestWriteReport: lived mutants are listed first and make the run fail; timeouts and
// mutants that did not build are listed too, but do not.
func TestWriteReport(t *testing.T) {
	rows := []row{{pkg: "wrap", sites: 50, covered: 40, sampled: 3, killed: 1, timedOut: 1, lived: 1, testTime: 19 * time.Second}}
	outcomes := []outcome{
		{site{file: "wrap/run.go", line: 3, col: 7, old: "<", new: "<=", operator: boundary}, timedOut},
		{site{file: "wrap/run.go", line: 9, col: 2, old: "+", new: "-", operator: arith}, lived},
		{site{file: "wrap/run.go", line: 12, col: 2, old: "==", new: "!=", operator: negation}, killed},
	}
	var out bytes.Buffer
	if !writeReport(&out, rows, outcomes, 95*time.Second) {
		t.Error("a lived mutant did not fail the run")
	}
	want := `LIVED wrap/run.go:9:2 + -> - (ARITHMETIC_BASE)
TIMED OUT wrap/run.go:3:7 < -> <= (CONDITIONALS_BOUNDARY)
| package | mutants | on covered lines | sampled | killed | timed out | lived | not viable | score | 95% interval | test time |
|---|---|---|---|---|---|---|---|---|---|---|
| wrap | 50 | 40 | 3 | 1 | 1 | 1 | 0 | 67 % | 21–94 % | 19.0 s |
total time 1m35s
`
	if out.String() != want {
		t.Errorf("report:\n%s\nwant:\n%s", out.String(), want)
	}
	outcomes[1].status = notViable
	if writeReport(&bytes.Buffer{}, rows, outcomes, time.Second) {
		t.Error("a run where nothing lived failed")
	}
}
