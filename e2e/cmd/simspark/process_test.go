package main

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/driverset/driverset/e2e/images"
)

// binary builds simspark as the image gets it (static, stripped).
func binary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds simspark")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute) // a cold build cache on 2 shared cores is slow
	defer cancel()
	bin, err := images.GoBinary(ctx, "./e2e/cmd/simspark")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "simspark")
	if err := os.WriteFile(path, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// proc is a running simspark whose stdout lines arrive on lines.
type proc struct {
	cmd   *exec.Cmd
	lines chan string
}

func startProc(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, lines: make(chan string, 64)}
	go func() {
		defer close(p.lines)
		s := bufio.NewScanner(out)
		for s.Scan() {
			p.lines <- s.Text()
		}
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return p
}

func (p *proc) expect(t *testing.T, line string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("output ended before %q", line)
			}
			if l == line {
				return
			}
			t.Logf("simspark: %s", l)
		case <-timeout:
			t.Fatalf("no line %q", line)
		}
	}
}

func (p *proc) exitCode(t *testing.T) int {
	t.Helper()
	for range p.lines { // drain, so Wait can finish
	}
	err := p.cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	t.Fatal(err)
	return -1
}

// TestExecutorProcess runs the executor binary against a driver served by this test on
// loopback, as a pod would: by DNS name, with Spark's env.
func TestExecutorProcess(t *testing.T) {
	bin := binary(t)
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, p *proc, stopDriver func())
		want int
	}{
		{"the driver goes away: exit 1", func(t *testing.T, p *proc, stopDriver func()) {
			stopDriver()
			p.expect(t, "simspark: executor 4 lost its driver localhost:"+"PORT")
		}, 1},
		{"SIGTERM: exit 143", func(t *testing.T, p *proc, _ func()) {
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			p.expect(t, "simspark: SIGTERM, shutting down")
		}, 143},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, regs, log, stop := startServer(t)
			port := addr[strings.LastIndexByte(addr, ':')+1:]
			p := startProc(t, bin, []string{
				"SPARK_DRIVER_URL=spark://CoarseGrainedScheduler@localhost:" + port,
				"SPARK_EXECUTOR_ID=4", "SPARK_APPLICATION_ID=spark-0123", "SPARK_EXECUTOR_POD_NAME=pi-exec-4",
			}, "executor")
			p.expect(t, "simspark: executor 4 registered with localhost:"+port+" (127.0.0.1)")
			if r := <-regs; r != (registration{ID: "4", Pod: "pi-exec-4", App: "spark-0123"}) {
				t.Errorf("registered %+v", r)
			}
			if !log.has("simspark: executor 4 registered from pi-exec-4 (app spark-0123)") {
				t.Errorf("driver log:\n%s", log)
			}
			tc.end(t, &proc{cmd: p.cmd, lines: replacePort(p.lines, port)}, stop)
			if code := p.exitCode(t); code != tc.want {
				t.Errorf("exit %d, want %d", code, tc.want)
			}
		})
	}
}

// replacePort passes lines on with the port written as PORT, so expectations can name it.
func replacePort(in <-chan string, port string) chan string {
	out := make(chan string, 64)
	go func() {
		defer close(out)
		for l := range in {
			out <- strings.ReplaceAll(l, ":"+port, ":PORT")
		}
	}()
	return out
}

func TestExecutorProcessRefusesABadURL(t *testing.T) {
	p := startProc(t, binary(t), []string{"SPARK_DRIVER_URL=http://x:1", "SPARK_EXECUTOR_ID=1"}, "executor")
	if code := p.exitCode(t); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
}

func TestDriverProcessOutsideAPod(t *testing.T) {
	p := startProc(t, binary(t), nil, "driver", "--class", "x")
	if code := p.exitCode(t); code != 1 {
		t.Errorf("exit %d, want 1 (no in-cluster config)", code)
	}
}

// TestOrphanProcess: `orphan --detach` leaves a sleeping process in a session of its own, whose
// parent is no longer the one that started it.
func TestOrphanProcess(t *testing.T) {
	bin := binary(t)
	start := time.Now()
	pid, err := spawnOrphan(bin)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("spawning took %v: the detaching child waited", d)
	}
	defer func() { _ = syscall.Kill(pid, syscall.SIGKILL) }()
	stat := func() []string {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			t.Fatalf("orphan %d: %v", pid, err)
		}
		s := string(b)
		return strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // state ppid pgrp session …
	}
	time.Sleep(200 * time.Millisecond)
	f := stat()
	if f[0] == "Z" || f[0] == "X" {
		t.Fatalf("orphan is %s", f[0])
	}
	if f[1] == strconv.Itoa(os.Getpid()) {
		t.Error("the orphan is still this process's child")
	}
	if f[3] != strconv.Itoa(pid) {
		t.Errorf("orphan's session %s, want its own (%d)", f[3], pid)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}
