//go:build testbed

package e2e

import (
	"runtime"
	"strings"
	"testing"
)

// driverset, run as the harness builds it (plain go build, not stamped), serves
// driverset_build_info on its metrics endpoint: version "dev", the Go it was built with, value 1.
func TestBuildInfoIsServed(t *testing.T) {
	body, err := metricsOf(bed.driverset)
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, "driverset_build_info{") {
			continue
		}
		for _, want := range []string{`version="dev"`, `go_version="` + runtime.Version() + `"`, `revision="`} {
			if !strings.Contains(line, want) {
				t.Errorf("%s lacks %s", line, want)
			}
		}
		if !strings.HasSuffix(line, "} 1") {
			t.Errorf("%s: want the value 1", line)
		}
		return
	}
	t.Errorf("driverset_build_info is not served:\n%s", body)
}
