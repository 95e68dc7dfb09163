//go:build testbed

package testbed

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// envChild makes the test binary act as a program that holds a test bed (see TestMain).
const envChild = "DRIVERSET_TESTBED_CHILD"

// TestMain: besides running the tests, the test binary doubles as the "test process that gets
// killed" for TestNoOrphans, the way a TestMain using Start + StopOnSignal would.
func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		os.Exit(holdTestbed())
	}
	os.Exit(m.Run())
}

// childReport is what the child prints once its test bed is up.
type childReport struct {
	PIDs map[string]int
	Dir  string
}

func holdTestbed() int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{Nodes: 1, Log: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c.StopOnSignal()
	b, _ := json.Marshal(childReport{PIDs: c.PIDs(), Dir: c.Dir})
	fmt.Printf("READY %s\n", b)
	select {} // until a signal ends the process
}

// alive: the pid exists and is not a zombie waiting for a reaper.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// Format: pid (comm) state ...; comm may contain spaces, so look after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || !strings.HasPrefix(s[i+1:], " Z")
}

func waitGone(t *testing.T, pids map[string]int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var left []string
		for name, pid := range pids {
			if alive(pid) {
				left = append(left, fmt.Sprintf("%s(%d)", name, pid))
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still running %v after %v: %v", within, within, left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestStopLeavesNothing: Stop ends every process and removes Dir; it is idempotent, and a
// stopped test bed refuses new nodes.
func TestStopLeavesNothing(t *testing.T) {
	t.Parallel()
	c, err := Start(t.Context(), Options{Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	pids := c.PIDs()
	if len(pids) != 5 {
		t.Fatalf("PIDs %v, want etcd, apiserver, controller-manager, scheduler and one kwok", pids)
	}
	for name, pid := range pids {
		if !alive(pid) {
			t.Fatalf("%s (%d) is not running", name, pid)
		}
	}
	logs := c.LogPaths()
	for name := range pids {
		if st, err := os.Stat(logs[name]); err != nil || st.Size() == 0 {
			t.Errorf("log of %s (%q): %v, %v", name, logs[name], st, err)
		}
	}
	start := time.Now()
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Stop took %.1fs", time.Since(start).Seconds())
	waitGone(t, pids, time.Second)
	if _, err := os.Stat(c.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Dir %s still there: %v", c.Dir, err)
	}
	if err := c.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if err := c.AddNode(context.Background(), "late"); err == nil {
		t.Error("AddNode on a stopped test bed succeeded")
	}
}

// TestNoOrphans kills a process that holds a test bed, as a developer's Ctrl-C or CI's timeout
// would, and checks that no component outlives it.
func TestNoOrphans(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sig        syscall.Signal
		dirRemoved bool // SIGTERM/SIGINT run Stop; SIGKILL leaves only Pdeathsig to act
	}{
		{syscall.SIGINT, true},
		{syscall.SIGKILL, false},
	} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			t.Parallel()
			self, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(self)
			cmd.Env = append(os.Environ(), envChild+"=1")
			cmd.Stderr = &prefixWriter{t: t}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var waitErr error
			exited := make(chan struct{}) // closed once the child is reaped and its output drained
			reports := make(chan childReport, 1)
			go func() {
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					if rest, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
						var r childReport
						if json.Unmarshal([]byte(rest), &r) == nil {
							reports <- r
						}
					}
				}
				waitErr = cmd.Wait()
				close(exited)
			}()
			// Whatever happens, the child is gone before the test ends (its stderr goes to t.Log).
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-exited
			})
			var r childReport
			select {
			case r = <-reports:
			case <-exited:
				t.Fatalf("child exited before its test bed was up: %v", waitErr)
			case <-time.After(5 * time.Minute):
				t.Fatal("child's test bed not up in 5 minutes")
			}
			t.Cleanup(func() { _ = os.RemoveAll(r.Dir) })
			if len(r.PIDs) != 5 {
				t.Fatalf("child reported %v", r.PIDs)
			}

			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-exited:
				var ee *exec.ExitError
				if !errors.As(waitErr, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != tc.sig {
					t.Errorf("child ended with %v, want death by %v", waitErr, tc.sig)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("child still running 30s after %v", tc.sig)
			}
			waitGone(t, r.PIDs, 5*time.Second)
			_, err = os.Stat(r.Dir)
			if removed := errors.Is(err, os.ErrNotExist); removed != tc.dirRemoved {
				t.Errorf("Dir removed: %v, want %v", removed, tc.dirRemoved)
			}
		})
	}
}

// prefixWriter forwards the child's progress lines to the test log.
type prefixWriter struct{ t *testing.T }

func (w *prefixWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w.t.Log("child: " + line)
	}
	return len(p), nil
}
