package harness

import (
	"fmt"
	"os"
	"testing"
)

// The test process's own RSS is read, and is more than nothing.
func TestProcessRSS(t *testing.T) {
	rss, err := processRSS(fmt.Sprintf("/proc/%d/status", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	if rss < 1<<20 {
		t.Errorf("RSS %d bytes: want at least 1 MiB for a Go test binary", rss)
	}
}
