package wrap

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// result is what one in-process Run returned.
type result struct {
	code int
	err  error
}

// start runs Run in the background with a signal channel the test controls.
func (p pod) start(ctx context.Context, command []string, stderr *bytes.Buffer) (chan<- os.Signal, <-chan result) {
	sigs := make(chan os.Signal, 4)
	done := make(chan result, 1)
	o := Options{StateDir: p.state, TerminationLog: p.termLog, Command: command, Stdout: stderr, Stderr: stderr, Signals: sigs}
	go func() {
		code, err := Run(ctx, o)
		done <- result{code, err}
	}()
	return sigs, done
}

// run runs Run to the end.
func (p pod) run(t *testing.T, command []string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	_, done := p.start(context.Background(), command, &out)
	r := await(t, done, 20*time.Second)
	if r.err != nil {
		t.Fatalf("Run: %v", r.err)
	}
	return r.code, out.String()
}

func await(t *testing.T, done <-chan result, limit time.Duration) result {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(limit):
		t.Fatalf("Run did not return within %v", limit)
		return result{}
	}
}

func TestRunRecordsAndReturnsTheChildsExitCode(t *testing.T) {
	for _, code := range []int{0, 1, 3, 42, 255} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			p := newPod(t)
			got, _ := p.run(t, child(t, "exit", strconv.Itoa(code), p.side))
			if got != code {
				t.Errorf("Run returned %d, want %d", got, code)
			}
			if rec, msg := p.recorded(t); rec != code {
				t.Errorf("recorded %d (%q), want %d", rec, msg, code)
			} else if stopped, known := StopOf(msg); stopped || !known {
				t.Errorf("StopOf(%q) = %v, %v; want an end by itself", msg, stopped, known)
			}
			if n := p.runs(t); n != 1 {
				t.Errorf("child ran %d times, want 1", n)
			}
		})
	}
}

func TestRunRecordsSignalDeathAs128PlusN(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(unixName(sig), func(t *testing.T) {
			p := newPod(t)
			want := 128 + int(sig)
			got, stderr := p.run(t, child(t, "selfkill", unixName(sig), p.side))
			if got != want {
				t.Errorf("Run returned %d, want %d; stderr:\n%s", got, want, stderr)
			}
			if rec, msg := p.recorded(t); rec != want || !strings.Contains(msg, "killed by signal "+strconv.Itoa(int(sig))) {
				t.Errorf("recorded %q, want code %d and the signal named", msg, want)
			}
		})
	}
}

func TestRunForwardsSignalsToTheChild(t *testing.T) {
	for i, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2} {
		t.Run(unixName(sig), func(t *testing.T) {
			p := newPod(t)
			code := 40 + i // chosen by the child, so that only the child can have produced it
			var out bytes.Buffer
			sigs, done := p.start(context.Background(), child(t, "trap", unixName(sig), strconv.Itoa(code), p.side), &out)
			waitFile(t, filepath.Join(p.side, "ready"))
			sigs <- sig
			r := await(t, done, 10*time.Second)
			if r.err != nil || r.code != code {
				t.Fatalf("Run = %d, %v; want %d; output:\n%s", r.code, r.err, code, out.String())
			}
			if got := waitFile(t, filepath.Join(p.side, "got")); got != sig.String() {
				t.Errorf("child received %q, want %q", got, sig.String())
			}
			rec, msg := p.recorded(t)
			if rec != code {
				t.Errorf("recorded %d, want %d", rec, code)
			}
			// SIGTERM and SIGINT stop a pod (a deletion, a node's shutdown, an eviction): the
			// record says the driver ended after one. The others (SIGQUIT: a JVM's thread dump) do not.
			want := sig == syscall.SIGTERM || sig == syscall.SIGINT
			if stopped, known := StopOf(msg); !known || stopped != want {
				t.Errorf("StopOf(%q) = %v, %v; want %v, true", msg, stopped, known, want)
			}
		})
	}
}

func TestRunOnCancelTerminatesTheChildAndStillRecords(t *testing.T) {
	p := newPod(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer
	_, done := p.start(ctx, child(t, "trap", "SIGTERM", "21", p.side), &out)
	waitFile(t, filepath.Join(p.side, "ready"))
	cancel()
	if r := await(t, done, 10*time.Second); r.code != 21 || r.err != nil {
		t.Fatalf("Run = %d, %v; want 21 (the child's answer to SIGTERM)", r.code, r.err)
	}
	rec, msg := p.recorded(t)
	if rec != 21 {
		t.Errorf("recorded %d, want 21", rec)
	}
	if stopped, known := StopOf(msg); !stopped || !known {
		t.Errorf("StopOf(%q) = %v, %v; want a stop from outside", msg, stopped, known)
	}
}

func TestRunAgainIdlesWithoutRerunningTheChild(t *testing.T) {
	stops := []struct {
		name string
		stop func(chan<- os.Signal, context.CancelFunc)
	}{
		{"SIGTERM", func(s chan<- os.Signal, _ context.CancelFunc) { s <- syscall.SIGTERM }},
		{"SIGINT", func(s chan<- os.Signal, _ context.CancelFunc) { s <- syscall.SIGINT }},
		{"context cancelled", func(_ chan<- os.Signal, cancel context.CancelFunc) { cancel() }},
	}
	for _, tc := range stops {
		t.Run(tc.name, func(t *testing.T) {
			p := newPod(t)
			command := child(t, "exit", "7", p.side)
			if code, _ := p.run(t, command); code != 7 {
				t.Fatalf("first run returned %d, want 7", code)
			}
			// The kubelet gives the restarted container a fresh termination log.
			if err := os.Remove(p.termLog); err != nil {
				t.Fatal(err)
			}

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var out bytes.Buffer
			sigs, done := p.start(ctx, command, &out)
			waitFile(t, p.termLog)
			// Signals that do not stop a pod do not end the idling either.
			sigs <- syscall.SIGHUP
			sigs <- syscall.SIGUSR1
			select {
			case r := <-done:
				t.Fatalf("Run returned %d, %v while it should idle", r.code, r.err)
			case <-time.After(200 * time.Millisecond):
			}

			begin := time.Now()
			tc.stop(sigs, cancel)
			r := await(t, done, 5*time.Second)
			if took := time.Since(begin); took > time.Second {
				t.Errorf("idling ended %v after the stop, want < 1s", took)
			}
			if r.code != 0 || r.err != nil {
				t.Errorf("Run = %d, %v; want 0, nil", r.code, r.err)
			}
			if n := p.runs(t); n != 1 {
				t.Errorf("child ran %d times, want 1", n)
			}
			if rec, _ := p.recorded(t); rec != 7 {
				t.Errorf("termination message rewritten with %d, want 7", rec)
			}
			want := "driverset wrap: the driver already ran in this pod and exited with code 7; idling until the pod is stopped\n"
			if out.String() != want {
				t.Errorf("stderr = %q, want %q", out.String(), want)
			}
		})
	}
}

func TestRunStartedWithoutRecordIsLostAndNotRerun(t *testing.T) {
	p := newPod(t)
	if err := (state{p.state}).markStarted("started 2026-01-02T03:04:05Z by pid 1"); err != nil {
		t.Fatal(err)
	}
	command := child(t, "exit", "0", p.side)
	code, stderr := p.run(t, command)
	if code != 137 {
		t.Errorf("Run returned %d, want ExitOutcomeLost (137)", code)
	}
	rec, msg := p.recorded(t)
	if rec != 137 || !strings.Contains(msg, "outcome was lost") || !strings.Contains(msg, "2026-01-02T03:04:05Z") {
		t.Errorf("recorded %q, want 137, the word lost and the start time", msg)
	}
	if !strings.Contains(stderr, "outcome was lost") {
		t.Errorf("stderr does not say the outcome was lost: %q", stderr)
	}
	if n := p.runs(t); n != 0 {
		t.Errorf("child ran %d times, want 0", n)
	}

	// Once recorded, the next start idles.
	var out bytes.Buffer
	sigs, done := p.start(context.Background(), command, &out)
	sigs <- syscall.SIGTERM
	if r := await(t, done, 5*time.Second); r.code != 0 || !strings.Contains(out.String(), "exited with code 137; idling") {
		t.Errorf("third start = %d, stderr %q; want an idle that exits 0", r.code, out.String())
	}
	if n := p.runs(t); n != 0 {
		t.Errorf("child ran %d times, want 0", n)
	}
}

func TestRunCorruptRecordIsLost(t *testing.T) {
	p := newPod(t)
	if err := os.MkdirAll(p.state, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.state, exitFile), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _ := p.run(t, child(t, "exit", "0", p.side)); code != ExitOutcomeLost {
		t.Errorf("Run returned %d, want %d", code, ExitOutcomeLost)
	}
	if rec, msg := p.recorded(t); rec != ExitOutcomeLost || !strings.Contains(msg, "(start time unknown) but its outcome was lost") {
		t.Errorf("recorded %q, want %d and that the start time is unknown", msg, ExitOutcomeLost)
	}
	if n := p.runs(t); n != 0 {
		t.Errorf("child ran %d times, want 0", n)
	}
}

func TestRunCommandThatCannotStart(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "script")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\nexit 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		command string
		want    int
	}{
		{"not in PATH", "driverset-no-such-command", ExitNotFound},
		{"no such path", filepath.Join(dir, "missing"), ExitNotFound},
		{"not executable", notExec, ExitCannotExecute},
		{"a directory", dir, ExitCannotExecute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPod(t)
			code, stderr := p.run(t, []string{tc.command, "arg"})
			if code != tc.want {
				t.Errorf("Run returned %d, want %d; stderr %q", code, tc.want, stderr)
			}
			rec, msg := p.recorded(t)
			if rec != tc.want || !strings.Contains(msg, "cannot run the driver command "+tc.command) {
				t.Errorf("recorded %q, want %d and the command named", msg, tc.want)
			}
		})
	}
}

func TestRunWithoutUsableStateDirDoesNotStartTheChild(t *testing.T) {
	p := newPod(t)
	// A regular file where the state directory should be: unusable, even for root.
	if err := os.WriteFile(p.state, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	_, done := p.start(context.Background(), child(t, "exit", "0", p.side), &out)
	r := await(t, done, 10*time.Second)
	if r.code != ExitWrapFailed || r.err == nil {
		t.Errorf("Run = %d, %v; want %d and an error", r.code, r.err, ExitWrapFailed)
	}
	if n := p.runs(t); n != 0 {
		t.Errorf("child ran %d times, want 0", n)
	}
	msg, _ := os.ReadFile(p.termLog)
	if code, ok := ParseTerminationMessage(string(msg)); !ok || code != ExitWrapFailed || !DriverNotStarted(string(msg)) {
		t.Errorf("termination message %q, want code %d, saying the driver did not start", msg, ExitWrapFailed)
	}
}

func TestRunPassesStdioAndEnvironmentThrough(t *testing.T) {
	t.Setenv(probeEnv, "value with spaces=and equals")
	p := newPod(t)
	var stdout, stderr bytes.Buffer
	o := Options{StateDir: p.state, TerminationLog: p.termLog, Command: child(t, "echo"),
		Stdin: strings.NewReader("hello\nworld\n"), Stdout: &stdout, Stderr: &stderr, Signals: make(chan os.Signal)}
	code, err := Run(context.Background(), o)
	if code != 0 || err != nil {
		t.Fatalf("Run = %d, %v", code, err)
	}
	if stdout.String() != "hello\nworld\n" {
		t.Errorf("stdout = %q", stdout.String())
	}
	if !strings.HasPrefix(stderr.String(), "value with spaces=and equals") {
		t.Errorf("stderr = %q, want the probe variable first", stderr.String())
	}
}

func TestRunRejectsMissingCommandOrState(t *testing.T) {
	for _, o := range []Options{{StateDir: t.TempDir()}, {StateDir: t.TempDir(), Command: []string{""}}, {Command: []string{"true"}}} {
		if code, err := Run(context.Background(), o); code != ExitWrapFailed || err == nil {
			t.Errorf("Run(%+v) = %d, %v; want %d and an error", o, code, err, ExitWrapFailed)
		}
	}
}

// When the driver exits, nothing it started may run on: wrap ends every process left under it
// (here a daemon in its own session, which no signal to the driver reaches), reaps it so that no
// zombie stays, and records the driver's own exit code.
func TestRunEndsTheDriversLeftoversAndReapsThem(t *testing.T) {
	p := newPod(t)
	var out bytes.Buffer
	_, done := p.start(context.Background(), child(t, "spawn", "term", p.side, "7"), &out)
	grandchild := p.lingering(t)
	r := await(t, done, 20*time.Second)
	if r.err != nil || r.code != 7 {
		t.Fatalf("Run = %d, %v; want 7, the driver's code; output:\n%s", r.code, r.err, out.String())
	}
	// Run is this test process: a grandchild it killed but did not reap would be its zombie.
	if st := processState(grandchild); st != "" {
		t.Errorf("the driver's grandchild %d is still there after Run returned: state %s", grandchild, st)
	}
	if rec, msg := p.recorded(t); rec != 7 {
		t.Errorf("recorded %q, want the driver's code 7", msg)
	}
	if !strings.Contains(out.String(), "1 process") {
		t.Errorf("output does not say that a leftover process was stopped:\n%s", out.String())
	}
}

// An idling wrap (PID 1 of the restarted container) still reaps what ends under it: the orphans
// of a `kubectl exec` session are re-parented to it.
func TestRunIdlingReapsOrphans(t *testing.T) {
	p := newPod(t)
	if code, _ := p.run(t, child(t, "exit", "0", p.side)); code != 0 {
		t.Fatalf("first run exited %d", code)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer
	_, done := p.start(ctx, child(t, "exit", "0", p.side), &out)
	waitFile(t, p.termLog) // rewritten once idling
	// A child of this process that nobody waits for: only the idling Run can reap it.
	proc, err := os.StartProcess(self(t), child(t, "exit", "0", t.TempDir()), &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for processState(proc.Pid) != "" {
		if time.Now().After(deadline) {
			st := processState(proc.Pid)
			_, _ = proc.Wait()
			t.Fatalf("process %d that ended under an idling wrap was not reaped: state %s", proc.Pid, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if r := await(t, done, 5*time.Second); r.code != 0 {
		t.Errorf("idling Run returned %d, want 0", r.code)
	}
}

// What wrap logs when the driver ends names the code it records: the log says how the driver
// ended when the pod's termination message is gone (LoggedExit), for every kind of end.
func TestLoggedExitIsTheRecordedExit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		command func(p pod) []string
	}{
		{"exit 0", func(p pod) []string { return child(t, "exit", "0", p.side) }},
		{"exit 42", func(p pod) []string { return child(t, "exit", "42", p.side) }},
		{"killed by SIGTERM", func(p pod) []string { return child(t, "selfkill", "SIGTERM", p.side) }},
		{"killed by SIGKILL", func(p pod) []string { return child(t, "selfkill", "SIGKILL", p.side) }},
		{"cannot start", func(pod) []string { return []string{"driverset-no-such-command"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPod(t)
			_, stderr := p.run(t, tc.command(p))
			rec, msg := p.recorded(t)
			// The driver's own output is in the same log: a line of its naming a code is not wrap's.
			logged, ok := LoggedExit("exit code 7\n" + stderr + "the driver said: exited with code 9\n")
			if !ok || logged != rec {
				t.Errorf("LoggedExit = %d, %v; want %d, the code recorded (%q); stderr:\n%s", logged, ok, rec, msg, stderr)
			}
		})
	}
	if code, ok := LoggedExit("exit code 7\nsome output\n"); ok {
		t.Errorf("LoggedExit of a log without wrap's line = %d, true; want false", code)
	}
}
