package harness

import (
	"os"
	"strings"
	"testing"
	"time"
)

// supervised runs script under supervise as Start would, once ready when ready is set.
func supervised(t *testing.T, script string, restart, ready bool) (*Driverset, string) {
	t.Helper()
	log := t.TempDir() + "/driverset.log"
	logf, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	d := &Driverset{binary: "/bin/sh", args: []string{"-c", script}, done: make(chan struct{}), ready: ready}
	if d.cmd, err = d.launch(logf); err != nil {
		t.Fatal(err)
	}
	go d.supervise(restart, logf)
	t.Cleanup(d.Kill)
	return d, log
}

func TestSuperviseRestartsAnExitUntilKilled(t *testing.T) {
	d, log := supervised(t, "sleep 0.2; exit 3", true, true)
	deadline := time.Now().Add(20 * time.Second)
	for d.Restarts() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("restarted %d times in 20s, want 2", d.Restarts())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if d.Exited() {
		t.Fatal("Exited while it is being restarted")
	}
	d.Kill()
	if !d.Exited() {
		t.Fatal("not Exited after Kill")
	}
	n := d.Restarts()
	time.Sleep(1500 * time.Millisecond)
	if d.Restarts() != n {
		t.Errorf("started again after Kill (%d restarts, then %d)", n, d.Restarts())
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "driverset exited on its own (exit status 3)") {
		t.Errorf("the log does not say why it was restarted:\n%s", b)
	}
}

func TestSuperviseLeavesAnExitAlone(t *testing.T) {
	for _, c := range []struct {
		name           string
		restart, ready bool
	}{
		{"Restart not asked", false, true},
		{"exited before it was ever ready", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, _ := supervised(t, "exit 3", c.restart, c.ready)
			select {
			case <-d.done:
			case <-time.After(10 * time.Second):
				t.Fatal("not ended 10s after the process exited")
			}
			if d.Restarts() != 0 {
				t.Errorf("restarted %d times", d.Restarts())
			}
		})
	}
}
