package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// logBuffer collects log lines from several goroutines.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *logBuffer) logf(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, fmt.Sprintf(format, args...))
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for l := range strings.Lines(string(p)) {
		b.lines = append(b.lines, strings.TrimSuffix(l, "\n"))
	}
	return len(p), nil
}

func (b *logBuffer) has(line string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.lines {
		if l == line {
			return true
		}
	}
	return false
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}

// startServer serves executors on a loopback port; stop ends the server and waits for it.
func startServer(t *testing.T) (addr string, regs chan registration, log *logBuffer, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	regs, log = make(chan registration, 8), &logBuffer{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		serveExecutors(ctx, ln, log.logf, func(r registration) { regs <- r })
	}()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return ln.Addr().String(), regs, log, stop
}

func TestRegistrationOverLoopback(t *testing.T) {
	addr, regs, log, stop := startServer(t)
	_, port, _ := net.SplitHostPort(addr)
	c, ip, err := dialDriver(context.Background(), net.DefaultResolver, "localhost", port, 5*time.Second, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if ip != "127.0.0.1" {
		t.Errorf("dialled %s", ip)
	}
	want := registration{ID: "1", Pod: "pi-exec-1", App: "spark-abc"}
	if err := register(c, want); err != nil {
		t.Fatal(err)
	}
	if got := <-regs; got != want {
		t.Errorf("registered %+v", got)
	}
	if line := "simspark: executor 1 registered from pi-exec-1 (app spark-abc)"; !log.has(line) {
		t.Errorf("log lacks %q:\n%s", line, log)
	}
	// The connection stays open while the driver lives, and ends when it stops.
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := c.Read(make([]byte, 1)); !isTimeout(err) {
		t.Errorf("read on a live driver: %v, want a timeout", err)
	}
	stop()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("read after the driver stopped: %v, want EOF", err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func TestServerDropsWhatIsNoExecutor(t *testing.T) {
	addr, regs, log, _ := startServer(t)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if _, err := c.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("read: %v, want EOF", err)
	}
	select {
	case r := <-regs:
		t.Errorf("registered %+v", r)
	default:
	}
	if !strings.Contains(log.String(), "is no executor") {
		t.Errorf("log:\n%s", log)
	}
}

// TestDialRetriesUntilTheDriverListens: executors often start before their driver listens.
func TestDialRetriesUntilTheDriverListens(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	type result struct {
		c   net.Conn
		err error
	}
	got := make(chan result, 1)
	go func() {
		c, _, err := dialDriver(context.Background(), net.DefaultResolver, "127.0.0.1", port, 10*time.Second, 50*time.Millisecond)
		got <- result{c, err}
	}()
	time.Sleep(300 * time.Millisecond)
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("port %s taken meanwhile: %v", port, err)
	}
	defer func() { _ = ln.Close() }()
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	_ = r.c.Close()
}

func TestDialGivesUp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	_ = ln.Close()
	start := time.Now()
	if _, _, err := dialDriver(context.Background(), net.DefaultResolver, "127.0.0.1", port, 300*time.Millisecond, 50*time.Millisecond); err == nil {
		t.Fatal("connected to nothing")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("gave up after %v", d)
	}
}
