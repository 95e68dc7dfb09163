package wrap

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// TestEndLeftoversWithNothingLeftSaysNothing: a driver that left nothing behind gets no
// sentence in the exit detail and no line in wrap's log.
func TestEndLeftoversWithNothingLeftSaysNothing(t *testing.T) {
	var logged []string
	r := &reaper{sigchld: make(chan os.Signal, 1)}
	got := r.endLeftovers(time.Second, func(format string, args ...any) { logged = append(logged, fmt.Sprintf(format, args...)) })
	if got != "" || len(logged) != 0 {
		t.Errorf("endLeftovers = %q, logged %q; want nothing", got, logged)
	}
}
