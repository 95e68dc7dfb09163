package wrap

import (
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"
)

// TestDescendantsLeaveOutZombies: a child that ended and is not reaped yet is not a process to
// stop; a child that runs is.
func TestDescendantsLeaveOutZombies(t *testing.T) {
	self := os.Getpid()
	ended := exec.Command("true")
	running := exec.Command("sleep", "60")
	for _, c := range []*exec.Cmd{ended, running} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		_ = running.Process.Kill()
		_ = running.Wait()
		_ = ended.Wait()
	}()
	deadline := time.Now().Add(5 * time.Second)
	for before := 0; zombieChildren(self) <= before; {
		if time.Now().After(deadline) {
			t.Fatalf("child %d never ended", ended.Process.Pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	got := descendants(self)
	if slices.Contains(got, ended.Process.Pid) {
		t.Errorf("descendants %v list the ended child %d", got, ended.Process.Pid)
	}
	if !slices.Contains(got, running.Process.Pid) {
		t.Errorf("descendants %v leave out the running child %d", got, running.Process.Pid)
	}
}
