package main

import (
	"reflect"
	"strings"
	"testing"
)

// TestCoveredLines: a line is covered when a block run at least once touches it; a block never
// run covers nothing, and a profile that is not one is an error.
func TestCoveredLines(t *testing.T) {
	profile := `mode: set
example.com/weak/weak.go:5.29,7.2 1 1
example.com/weak/weak.go:10.21,12.26 2 1
example.com/weak/weak.go:12.26,14.3 1 0
example.com/weak/other.go:3.1,3.9 1 4
`
	got, err := coveredLines(strings.NewReader(profile))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[int]bool{
		"example.com/weak/weak.go":  {5: true, 6: true, 7: true, 10: true, 11: true, 12: true},
		"example.com/weak/other.go": {3: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("covered lines %v, want %v", got, want)
	}
	for _, bad := range []string{"mode: set\nweak.go 1 1\n", "mode: set\nweak.go:5.29,x.2 1 1\n", "mode: set\nweak.go:5.29,7.2 1\n"} {
		if _, err := coveredLines(strings.NewReader(bad)); err == nil {
			t.Errorf("profile %q was read", bad)
		}
	}
}

// TestCoveredSites: the sites kept are those on a covered line of their own file, whatever
// folder the run named them from.
func TestCoveredSites(t *testing.T) {
	sites := []site{
		{file: "wrap/run.go", line: 3}, {file: "wrap/run.go", line: 4},
		{file: "wrap/lease.go", line: 3}, {file: "wrap/lease.go", line: 9},
	}
	covered := map[string]map[int]bool{
		"github.com/driverset/driverset/wrap/run.go":   {3: true},
		"github.com/driverset/driverset/wrap/lease.go": {9: true},
		"github.com/driverset/driverset/other/run.go":  {4: true},
	}
	got := coveredSites(sites, "github.com/driverset/driverset/wrap", covered)
	want := []site{{file: "wrap/run.go", line: 3}, {file: "wrap/lease.go", line: 9}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("covered sites %v, want %v", got, want)
	}
}
