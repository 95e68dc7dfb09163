package main

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestWeakFixture runs the tool on testdata/weak, whose test never tries a score of exactly
// 50: of its five mutants on covered lines, exactly `>=` -> `>` must live, the loop that never
// ends must time out (and count as killed), and the five mutants of the untested function must
// not be drawn.
func TestWeakFixture(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test six times")
	}
	var out bytes.Buffer
	cfg := config{moduleDir: "testdata/weak", pkgs: []string{"."}, n: 15, seed: 1, workers: 2, timeoutFactor: 3,
		minTimeout: 5 * time.Second, progress: io.Discard}
	anyLived, err := mutateAll(context.Background(), cfg, &out)
	if err != nil {
		t.Fatal(err)
	}
	report := out.String()
	if !anyLived {
		t.Errorf("the weak test's mutant was not reported as lived:\n%s", report)
	}
	notKilled := regexp.MustCompile(`(?m)^(LIVED|TIMED OUT|NOT VIABLE) .*$`).FindAllString(report, -1)
	want := []string{
		"LIVED weak.go:6:15 >= -> > (CONDITIONALS_BOUNDARY)",
		"TIMED OUT weak.go:12:22 ++ -> -- (INCREMENT_DECREMENT)",
	}
	if strings.Join(notKilled, "\n") != strings.Join(want, "\n") {
		t.Errorf("mutants not killed:\n%s\nwant:\n%s", strings.Join(notKilled, "\n"), strings.Join(want, "\n"))
	}
	if row := "| . | 10 | 5 | 5 | 3 | 1 | 1 | 0 | 80 % | 38–96 % |"; !strings.Contains(report, row) {
		t.Errorf("report has no row %q:\n%s", row, report)
	}
}
