// Command mutation-score reads the JSON results of gremlins (unleash -o) and prints the score of
// each package and every mutant that lived; it exits 1 when one lived.
//
// Usage: go run ./hack/mutation-score RESULT.json...
//
// A result names its files from the package folder when gremlins ran on one package (./wrap),
// and from the module root when it ran on the module (hack/mutate.sh's changed-lines mode); in
// the first case the package is the result file's own name (wrap.json).
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// result is the part of gremlins' output format that the score needs.
type result struct {
	Files []struct {
		Name      string     `json:"file_name"`
		Mutations []mutation `json:"mutations"`
	} `json:"files"`
}

type mutation struct {
	Type   string `json:"type"`
	Status string `json:"status"`
	Line   int    `json:"line"`
	Column int    `json:"column"`
}

// row is one package's score.
type row struct {
	pkg                                            string
	killed, timedOut, lived, notCovered, notViable int
	livedAt                                        []string // file:line:column type
}

// efficacy is the share of covered mutants the tests detected (a timeout is a detection).
func (r row) efficacy() float64 {
	detected := r.killed + r.timedOut
	if detected+r.lived == 0 {
		return 100
	}
	return 100 * float64(detected) / float64(detected+r.lived)
}

// coverage is the share of mutants that some test ran at all.
func (r row) coverage() float64 {
	ran := r.killed + r.timedOut + r.lived
	if ran+r.notCovered == 0 {
		return 100
	}
	return 100 * float64(ran) / float64(ran+r.notCovered)
}

// score groups the mutations of results (by the result file's name) per package.
func score(results map[string]result) []row {
	rows := map[string]*row{}
	for source, res := range results {
		for _, f := range res.Files {
			pkg, file := filepath.Dir(f.Name), f.Name
			if pkg == "." {
				pkg = strings.TrimSuffix(filepath.Base(source), filepath.Ext(source))
				file = filepath.Join(pkg, f.Name)
			}
			r := rows[pkg]
			if r == nil {
				r = &row{pkg: pkg}
				rows[pkg] = r
			}
			for _, m := range f.Mutations {
				switch m.Status {
				case "KILLED":
					r.killed++
				case "TIMED OUT":
					r.timedOut++
				case "LIVED":
					r.lived++
					r.livedAt = append(r.livedAt, fmt.Sprintf("%s:%d:%d %s", file, m.Line, m.Column, m.Type))
				case "NOT COVERED":
					r.notCovered++
				case "NOT VIABLE":
					r.notViable++
				}
			}
		}
	}
	out := make([]row, 0, len(rows))
	for _, r := range rows {
		sort.Strings(r.livedAt)
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pkg < out[j].pkg })
	return out
}

// writeReport writes the table and the mutants that lived; it reports whether any lived.
func writeReport(w io.Writer, rows []row) (lived bool) {
	fmt.Fprintln(w, "| package | killed | timed out | lived | not covered | not viable | efficacy | mutant coverage |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %.1f %% | %.1f %% |\n",
			r.pkg, r.killed, r.timedOut, r.lived, r.notCovered, r.notViable, r.efficacy(), r.coverage())
	}
	for _, r := range rows {
		for _, at := range r.livedAt {
			fmt.Fprintln(w, "LIVED", at)
			lived = true
		}
	}
	return lived
}

func main() {
	results := map[string]result{}
	for _, path := range os.Args[1:] {
		b, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			continue // gremlins writes no result when it found nothing to mutate
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		var res result
		if err := json.Unmarshal(b, &res); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			os.Exit(2)
		}
		results[path] = res
	}
	if writeReport(os.Stdout, score(results)) {
		os.Exit(1)
	}
}
