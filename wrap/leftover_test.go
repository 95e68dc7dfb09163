package wrap

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestLeftoverSummary is the sentence added to the exit detail for what the driver left behind.
func TestLeftoverSummary(t *testing.T) {
	for _, tc := range []struct {
		found, killed, survived int
		want                    string
	}{
		{0, 0, 0, ""},
		{2, 0, 0, "; 2 process(es) the driver left behind were stopped"},
		{2, 1, 0, "; 2 process(es) the driver left behind were stopped (1 with SIGKILL after the grace period)"},
		{3, 1, 1, "; 3 process(es) the driver left behind were stopped (1 with SIGKILL after the grace period); 1 could not be killed"},
		{1, 0, 1, "; 1 process(es) the driver left behind were stopped; 1 could not be killed"},
	} {
		if got := leftoverSummary(tc.found, tc.killed, tc.survived); got != tc.want {
			t.Errorf("leftoverSummary(%d, %d, %d) = %q, want %q", tc.found, tc.killed, tc.survived, got, tc.want)
		}
	}
}

// TestZombieChildren: a child that ended and is not reaped yet is counted (endLeftovers waits
// for such a child to be reaped); once reaped, it is not.
func TestZombieChildren(t *testing.T) {
	self := os.Getpid()
	before := zombieChildren(self)
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for zombieChildren(self) <= before {
		if time.Now().After(deadline) {
			t.Fatalf("the ended, unreaped child %d was never counted (%d before)", cmd.Process.Pid, before)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if n := zombieChildren(self); n != before {
		t.Errorf("%d zombie children once reaped, want %d", n, before)
	}
}
