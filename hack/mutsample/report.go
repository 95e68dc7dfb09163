package main

import (
	"fmt"
	"io"
	"math"
	"time"
)

// row is one package's result.
type row struct {
	pkg                                string
	sites, covered                     int // every mutant of the package; those on lines its tests run
	sampled                            int
	killed, timedOut, lived, notViable int
	testTime                           time.Duration // the run (not the build) of the coverage binary; it sets the timeout
}

// score is the share of the sampled mutants that the tests detected (a timeout is a
// detection); a package with nothing to score scores 1.
func (r row) score() float64 {
	detected := r.killed + r.timedOut
	if detected+r.lived == 0 {
		return 1
	}
	return float64(detected) / float64(detected+r.lived)
}

// interval is the Wilson 95% interval of the score: the range the package's score over all
// its covered mutants lies in, given this sample (it stays inside [0, 1] and is not empty when
// every sampled mutant died, unlike the normal approximation).
func (r row) interval() (lo, hi float64) {
	n := float64(r.killed + r.timedOut + r.lived)
	if n == 0 {
		return 0, 1
	}
	const z = 1.959964
	p := r.score()
	denom := 1 + z*z/n
	center := (p + z*z/(2*n)) / denom
	half := z / denom * math.Sqrt(p*(1-p)/n+z*z/(4*n*n))
	return math.Max(0, center-half), math.Min(1, center+half)
}

// outcome is one sampled mutant and what became of it.
type outcome struct {
	site   site
	status status
}

// writeReport writes every mutant that was not killed outright (lived first), then the table
// in hack/mutation-score's style; it reports whether one lived.
func writeReport(w io.Writer, rows []row, outcomes []outcome, took time.Duration) (anyLived bool) {
	for _, want := range []status{lived, timedOut, notViable} {
		for _, o := range outcomes {
			if o.status == want {
				s := o.site
				fmt.Fprintf(w, "%s %s:%d:%d %s -> %s (%s)\n", o.status, s.file, s.line, s.col, s.old, s.new, s.operator)
				anyLived = anyLived || want == lived
			}
		}
	}
	fmt.Fprintln(w, "| package | mutants | on covered lines | sampled | killed | timed out | lived | not viable | score | 95% interval | test time |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		lo, hi := r.interval()
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %d | %d | %.0f %% | %.0f–%.0f %% | %.1f s |\n",
			r.pkg, r.sites, r.covered, r.sampled, r.killed, r.timedOut, r.lived, r.notViable,
			100*r.score(), 100*lo, 100*hi, r.testTime.Seconds())
	}
	fmt.Fprintf(w, "total time %s\n", took.Round(time.Second))
	return anyLived
}
