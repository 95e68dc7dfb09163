package main

import (
	"fmt"
	"reflect"
	"testing"
)

func manySites(file string, n int) []site {
	var out []site
	for i := range n {
		out = append(out, site{file: file, line: i + 1, offset: 10 * i, old: "<", new: "<="})
	}
	return out
}

// TestSample: the same seed draws the same mutants (so SEED replays a run), another seed or
// package draws others, a package's draw does not depend on the other packages of the run,
// and a package with fewer sites than n has all of them drawn, in source order.
func TestSample(t *testing.T) {
	sites := manySites("convert/x.go", 200)
	a := sample(sites, 10, 7, "convert")
	if len(a) != 10 {
		t.Fatalf("drew %d, want 10", len(a))
	}
	if b := sample(sites, 10, 7, "convert"); !reflect.DeepEqual(a, b) {
		t.Errorf("seed 7 drew %v, then %v", a, b)
	}
	if c := sample(sites, 10, 8, "convert"); reflect.DeepEqual(a, c) {
		t.Error("seeds 7 and 8 drew the same mutants")
	}
	if d := sample(sites, 10, 7, "webhook"); reflect.DeepEqual(a, d) {
		t.Error("two packages with the same sites drew the same mutants")
	}
	seen := map[string]bool{}
	for i, s := range a {
		key := fmt.Sprint(s.file, s.offset)
		if seen[key] {
			t.Errorf("%v drawn twice", s)
		}
		seen[key] = true
		if i > 0 && a[i-1].offset > s.offset {
			t.Errorf("not in source order: %v", a)
		}
	}
	few := manySites("wrap/run.go", 3)
	if got := sample(few, 10, 7, "wrap"); !reflect.DeepEqual(got, few) {
		t.Errorf("3 sites drew %v, want all three", got)
	}
}
