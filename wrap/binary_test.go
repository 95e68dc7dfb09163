package wrap

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests run wrap as its own process, as the kubelet does, and send it real signals.

// startWrap starts `driverset wrap` (the test binary in the wrap role) for pod p.
func startWrap(t *testing.T, p pod, command []string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	args := append([]string{"wrap", "--state-dir", p.state, "--termination-log=" + p.termLog, "--"}, command...)
	cmd := exec.Command(self(t), args...)
	// Under -race a process sleeps atexit_sleep_ms (1 s by default) before exiting, which would
	// hide how promptly wrap itself exits.
	cmd.Env = append(os.Environ(), "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	// A child that outlives wrap keeps the output pipe open; do not let that hang Wait.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, &stderr
}

// exitOf waits for cmd and returns its exit code (-1 when killed by a signal).
func exitOf(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("wrap did not exit")
	}
	return cmd.ProcessState.ExitCode()
}

func TestBinaryForwardsSIGTERMAndExitsWithTheChildsCode(t *testing.T) {
	p := newPod(t)
	cmd, out := startWrap(t, p, child(t, "trap", "SIGTERM", "42", p.side))
	waitFile(t, filepath.Join(p.side, "ready"))
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := exitOf(t, cmd); code != 42 {
		t.Fatalf("wrap exited %d, want 42 (the child's answer to SIGTERM); output:\n%s", code, out)
	}
	if got := waitFile(t, filepath.Join(p.side, "got")); got != syscall.SIGTERM.String() {
		t.Errorf("child received %q", got)
	}
	if rec, _ := p.recorded(t); rec != 42 {
		t.Errorf("recorded %d, want 42", rec)
	}
}

func TestBinaryIdlesOnRestartWithoutCPUAndStopsPromptly(t *testing.T) {
	p := newPod(t)
	command := child(t, "exit", "3", p.side)
	first, out := startWrap(t, p, command)
	if code := exitOf(t, first); code != 3 {
		t.Fatalf("first start exited %d, want 3; output:\n%s", code, out)
	}
	if err := os.Remove(p.termLog); err != nil {
		t.Fatal(err)
	}

	second, out := startWrap(t, p, command)
	// The termination log is rewritten after wrap subscribed to signals: it is idling now.
	waitFile(t, p.termLog)
	before := cpuTicks(t, second.Process.Pid)
	time.Sleep(time.Second)
	if used := cpuTicks(t, second.Process.Pid) - before; used > 5 {
		t.Errorf("idling wrap used %d clock ticks of CPU in 1s, want ~0", used)
	}

	begin := time.Now()
	if err := second.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code := exitOf(t, second)
	if took := time.Since(begin); took > time.Second {
		t.Errorf("wrap took %v to exit after SIGTERM, want < 1s", took)
	}
	if code != 0 {
		t.Errorf("idling wrap exited %d after SIGTERM, want 0; output:\n%s", code, out)
	}
	if n := p.runs(t); n != 1 {
		t.Errorf("child ran %d times, want 1", n)
	}
	if rec, _ := p.recorded(t); rec != 3 {
		t.Errorf("termination message says %d, want 3", rec)
	}
	if !strings.Contains(out.String(), "already ran in this pod and exited with code 3; idling until the pod is stopped") {
		t.Errorf("output does not explain the idling:\n%s", out)
	}
}

func TestBinaryKilledMidRunTakesTheChildAlongAndRecordsLostOnRestart(t *testing.T) {
	p := newPod(t)
	command := child(t, "sleep", p.side)
	cmd, _ := startWrap(t, p, command)
	childPid, err := strconv.Atoi(waitFile(t, filepath.Join(p.side, "ready")))
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Kill(); err != nil { // as the OOM killer would
		t.Fatal(err)
	}
	if code := exitOf(t, cmd); code != -1 {
		t.Fatalf("wrap exited %d, want killed", code)
	}
	// The child must not outlive wrap (Pdeathsig): nobody could record it any more.
	deadline := time.Now().Add(5 * time.Second)
	for alive(childPid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(childPid, syscall.SIGKILL)
			t.Fatalf("child %d outlived wrap", childPid)
		}
		time.Sleep(10 * time.Millisecond)
	}

	restarted, out := startWrap(t, p, command)
	if code := exitOf(t, restarted); code != ExitOutcomeLost {
		t.Errorf("restarted wrap exited %d, want %d; output:\n%s", code, ExitOutcomeLost, out)
	}
	if n := p.runs(t); n != 1 {
		t.Errorf("child ran %d times, want 1", n)
	}
	if rec, msg := p.recorded(t); rec != ExitOutcomeLost || !strings.Contains(msg, "outcome was lost") {
		t.Errorf("recorded %q, want %d and why", msg, ExitOutcomeLost)
	}
}

func TestBinaryReportsBadArguments(t *testing.T) {
	cmd := exec.Command(self(t), "wrap", "--state-dir", t.TempDir())
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "driverset wrap: no command") {
		t.Errorf("got %v, output %q; want exit 2 and the reason", err, out)
	}
}

// cpuTicks is the user+system CPU time of process pid, in clock ticks (/proc/PID/stat fields 14, 15).
func cpuTicks(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name, which is in parentheses and may hold spaces: state is 3rd.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	utime, err1 := strconv.Atoi(f[11])
	stime, err2 := strconv.Atoi(f[12])
	if err1 != nil || err2 != nil {
		t.Fatalf("cannot parse %s", b)
	}
	return utime + stime
}

// alive reports whether pid is a process that is not a zombie (an orphan's zombie may linger when
// nothing reaps it).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// A leftover that ignores SIGTERM is killed with SIGKILL after the grace, and only then does wrap
// record the driver's exit and end: the driver's process tree never outlives what wrap reports.
func TestBinaryKillsALeftoverThatIgnoresSIGTERMAfterTheGrace(t *testing.T) {
	p := newPod(t)
	begin := time.Now()
	cmd, out := startWrap(t, p, child(t, "spawn", "ignore", p.side, "0"))
	grandchild := p.lingering(t)
	if code := exitOf(t, cmd); code != 0 {
		t.Fatalf("wrap exited %d, want 0 (the driver's code); output:\n%s", code, out)
	}
	if took := time.Since(begin); took < DefaultLeftoverGrace {
		t.Errorf("wrap ended after %v, before the grace of %v for the leftover", took, DefaultLeftoverGrace)
	}
	if alive(grandchild) {
		t.Errorf("the leftover %d that ignores SIGTERM still runs after wrap ended", grandchild)
	}
	if rec, _ := p.recorded(t); rec != 0 {
		t.Errorf("recorded %d, want 0", rec)
	}
	if !strings.Contains(out.String(), "SIGKILL") {
		t.Errorf("output does not say the leftover was killed:\n%s", out)
	}
}
