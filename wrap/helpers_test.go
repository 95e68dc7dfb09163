package wrap

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the programs the tests run, as real processes: when roleEnv is set,
// its first argument picks one.
//
//	wrap ARGS...             what cmd/driverset does for `driverset wrap ARGS...`
//	child exit CODE DIR      appends to DIR/runs, exits CODE
//	child trap SIG CODE DIR  appends to DIR/runs, announces DIR/ready, waits for SIG, writes
//	                         its name to DIR/got, exits CODE
//	child sleep DIR          appends to DIR/runs, announces DIR/ready, sleeps
//	child selfkill SIG DIR   appends to DIR/runs, kills itself with SIG
//	child echo               copies stdin to stdout, writes $probeEnv to stderr
//	child args DIR ARGS...   writes ARGS, one per line, to DIR/args
//	child spawn MODE DIR CODE  appends to DIR/runs, starts a daemonized grandchild (`linger MODE`,
//	                         its own session, not waited for, holding the output), waits until it
//	                         runs, exits CODE
//	child tree DIR           appends to DIR/runs, starts a `linger ignore` grandchild (its own
//	                         session), announces DIR/ready once it runs, sleeps
//	child linger MODE DIR    announces its pid in DIR/linger and sleeps; MODE "ignore" ignores
//	                         SIGTERM, "term" dies of it
const (
	roleEnv  = "DRIVERSET_WRAP_TEST_ROLE"
	probeEnv = "DRIVERSET_WRAP_TEST_PROBE"
)

func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) != "" && len(os.Args) > 1 {
		switch os.Args[1] {
		case "wrap":
			os.Exit(wrapMain(os.Args[2:]))
		case "child":
			os.Exit(childMain(os.Args[2:]))
		}
	}
	// Children inherit the environment: this makes every re-exec of the test binary a role.
	_ = os.Setenv(roleEnv, "1")
	// Under nohup the test starts with SIGHUP ignored, and an ignored signal stays ignored in
	// every child it execs. In-process Run tests inject their signal channel, so nothing else
	// installs a handler here: do it, so that children start with the default action, as they
	// do under the real `driverset wrap` (which handles every signal it forwards).
	signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP)
	os.Exit(m.Run())
}

// wrapMain is the whole of `driverset wrap` as the lead's cmd/driverset is expected to write it.
func wrapMain(args []string) int {
	o, err := ParseArgs(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	code, err := Run(context.Background(), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return code
}

func childMain(args []string) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "child:", err); return 90 }
	ran := func(dir string) error {
		f, err := os.OpenFile(filepath.Join(dir, "runs"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = fmt.Fprintf(f, "pid %d\n", os.Getpid())
		return err
	}
	ready := func(dir string) error { return writeAtomic(dir, "ready", strconv.Itoa(os.Getpid())) }
	switch {
	case len(args) == 3 && args[0] == "exit":
		code, _ := strconv.Atoi(args[1])
		if err := ran(args[2]); err != nil {
			return fail(err)
		}
		return code
	case len(args) == 4 && args[0] == "trap":
		sig, code, dir := signalNamed(args[1]), args[2], args[3]
		got := make(chan os.Signal, 1)
		signal.Notify(got, sig)
		if err := ran(dir); err != nil {
			return fail(err)
		}
		if err := ready(dir); err != nil {
			return fail(err)
		}
		select {
		case s := <-got:
			if err := os.WriteFile(filepath.Join(dir, "got"), []byte(s.String()), 0o644); err != nil {
				return fail(err)
			}
			n, _ := strconv.Atoi(code)
			return n
		case <-time.After(20 * time.Second):
			return fail(fmt.Errorf("no %v arrived", sig))
		}
	case len(args) == 2 && args[0] == "sleep":
		if err := ran(args[1]); err != nil {
			return fail(err)
		}
		if err := ready(args[1]); err != nil {
			return fail(err)
		}
		time.Sleep(30 * time.Second)
		return fail(fmt.Errorf("was not killed"))
	case len(args) == 3 && args[0] == "selfkill":
		if err := ran(args[2]); err != nil {
			return fail(err)
		}
		_ = syscall.Kill(os.Getpid(), signalNamed(args[1]))
		time.Sleep(10 * time.Second)
		return fail(fmt.Errorf("survived %s", args[1]))
	case len(args) == 4 && args[0] == "spawn":
		mode, dir, code := args[1], args[2], args[3]
		if err := ran(dir); err != nil {
			return fail(err)
		}
		exe, err := os.Executable()
		if err != nil {
			return fail(err)
		}
		gc := exec.Command(exe, "child", "linger", mode, dir)
		gc.Stdout, gc.Stderr = os.Stdout, os.Stderr
		gc.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := gc.Start(); err != nil {
			return fail(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, err := os.Stat(filepath.Join(dir, "linger")); err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fail(fmt.Errorf("the grandchild did not start"))
			}
			time.Sleep(10 * time.Millisecond)
		}
		n, _ := strconv.Atoi(code)
		return n
	case len(args) == 2 && args[0] == "tree":
		dir := args[1]
		if err := ran(dir); err != nil {
			return fail(err)
		}
		exe, err := os.Executable()
		if err != nil {
			return fail(err)
		}
		gc := exec.Command(exe, "child", "linger", "ignore", dir)
		gc.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := gc.Start(); err != nil {
			return fail(err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(filepath.Join(dir, "linger")); err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fail(fmt.Errorf("the grandchild did not start"))
			}
		}
		if err := ready(dir); err != nil {
			return fail(err)
		}
		time.Sleep(30 * time.Second)
		return fail(fmt.Errorf("was not killed"))
	case len(args) == 3 && args[0] == "linger":
		if args[1] == "ignore" {
			signal.Ignore(syscall.SIGTERM)
		}
		if err := writeAtomic(args[2], "linger", strconv.Itoa(os.Getpid())); err != nil {
			return fail(err)
		}
		time.Sleep(30 * time.Second)
		return fail(fmt.Errorf("was not killed"))
	case len(args) >= 2 && args[0] == "args":
		var b strings.Builder
		for _, a := range args[2:] {
			b.WriteString(a + "\n")
		}
		if err := os.WriteFile(filepath.Join(args[1], "args"), []byte(b.String()), 0o644); err != nil {
			return fail(err)
		}
		return 0
	case len(args) == 1 && args[0] == "echo":
		if _, err := io.Copy(os.Stdout, os.Stdin); err != nil {
			return fail(err)
		}
		fmt.Fprint(os.Stderr, os.Getenv(probeEnv))
		return 0
	}
	return fail(fmt.Errorf("bad arguments %q", args))
}

func signalNamed(name string) syscall.Signal {
	for _, s := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGKILL} {
		if unixName(s) == name {
			return s
		}
	}
	panic("unknown signal " + name)
}

// unixName is "SIGTERM" for syscall.SIGTERM.
func unixName(s syscall.Signal) string {
	return map[syscall.Signal]string{syscall.SIGTERM: "SIGTERM", syscall.SIGINT: "SIGINT", syscall.SIGHUP: "SIGHUP",
		syscall.SIGQUIT: "SIGQUIT", syscall.SIGUSR1: "SIGUSR1", syscall.SIGUSR2: "SIGUSR2", syscall.SIGKILL: "SIGKILL"}[s]
}

// self is the path of the test binary.
func self(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// child is the command line of a child role.
func child(t *testing.T, args ...string) []string {
	return append([]string{self(t), "child"}, args...)
}

// pod is one pod's worth of wrap's files: the state dir, the termination log and the directory
// where children leave their side effects.
type pod struct{ state, termLog, side string }

func newPod(t *testing.T) pod {
	dir := t.TempDir()
	p := pod{state: filepath.Join(dir, "state"), termLog: filepath.Join(dir, "termination-log"), side: filepath.Join(dir, "side")}
	if err := os.Mkdir(p.side, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// runs is how many times a child started in this pod.
func (p pod) runs(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(p.side, "runs"))
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// recorded returns the code in the exit record and in the termination log, failing the test if
// they are missing, not wrap's, or differ.
func (p pod) recorded(t *testing.T) (code int, termMsg string) {
	t.Helper()
	rec, err := os.ReadFile(filepath.Join(p.state, exitFile))
	if err != nil {
		t.Fatalf("exit record: %v", err)
	}
	msg, err := os.ReadFile(p.termLog)
	if err != nil {
		t.Fatalf("termination log: %v", err)
	}
	rc, ok1 := ParseTerminationMessage(string(rec))
	mc, ok2 := ParseTerminationMessage(string(msg))
	if !ok1 || !ok2 || rc != mc {
		t.Fatalf("exit record %q and termination message %q disagree or are not wrap's", rec, msg)
	}
	return mc, string(msg)
}

// waitFile waits for path to exist and returns its content.
func waitFile(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear: %v", path, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lingering returns the pid of the grandchild a `spawn` child left, and makes sure the test does
// not leave it behind either.
func (p pod) lingering(t *testing.T) int {
	t.Helper()
	pid, err := strconv.Atoi(waitFile(t, filepath.Join(p.side, "linger")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if processState(pid) != "" {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return pid
}

// processState is the State line of /proc/PID/status ("S (sleeping)", "Z (zombie)"), "" when
// there is no such process: it ended and was reaped.
func processState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "State:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
