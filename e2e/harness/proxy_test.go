package harness

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// backend is a tiny server: for each connection it writes its name, then echoes what it reads
// until the client's end of input.
type backend struct {
	name  string
	l     net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func startBackend(t *testing.T, name string) *backend {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{name: name, l: l}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.conns = append(b.conns, c)
			b.mu.Unlock()
			go func() {
				defer c.Close()
				if _, err := io.WriteString(c, name+"\n"); err != nil {
					return
				}
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return b
}

func (b *backend) addr() string { return b.l.Addr().String() }

// kill ends the backend as a crash does: no more listener, every connection closed.
func (b *backend) kill() {
	b.l.Close()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		c.Close()
	}
}

// call connects through the proxy, sends msg, ends its input and returns the backend's name
// and the echo; empty name when the proxy had no backend to give.
func call(t *testing.T, p *Proxy, msg string) (name, echo string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(p.Port), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, msg); err != nil {
		return "", "" // cut while sending: no backend
	}
	_ = c.(*net.TCPConn).CloseWrite()
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", "" // cut without a byte: no backend
	}
	rest, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("reading the echo: %v", err)
	}
	return strings.TrimSuffix(line, "\n"), string(rest)
}

// The proxy hands connections to its backends in turn, passes bytes both ways untouched
// (half-close included), skips a backend that refuses, and cuts a client it cannot place.
func TestProxyRoundRobinSkipsDeadBackends(t *testing.T) {
	dead := func() string { // a port nobody listens on
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}
	a, b := startBackend(t, "a"), startBackend(t, "b")
	cases := []struct {
		name     string
		backends []string
		want     []string // the backend of each of four calls in a row; "" is refused
	}{
		{"both alive: in turn", []string{a.addr(), b.addr()}, []string{"a", "b", "a", "b"}},
		{"first dead: all to the second", []string{dead(), b.addr()}, []string{"b", "b", "b", "b"}},
		{"second dead: all to the first", []string{a.addr(), dead()}, []string{"a", "a", "a", "a"}},
		{"both dead: cut", []string{dead(), dead()}, []string{"", "", "", ""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := StartProxy(tc.backends...)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = p.Close() }()
			for i, want := range tc.want {
				msg := strings.Repeat("x", 100000) + strconv.Itoa(i)
				got, echo := call(t, p, msg)
				if got != want {
					t.Errorf("call %d went to %q, want %q", i, got, want)
				}
				if want != "" && echo != msg {
					t.Errorf("call %d: echo of %d bytes, want the %d sent", i, len(echo), len(msg))
				}
			}
			served, placed := 0, 0
			for _, n := range p.Served() {
				served += n
			}
			for _, w := range tc.want {
				if w != "" {
					placed++
				}
			}
			if served != placed {
				t.Errorf("Served() = %v, want %d connections in all", p.Served(), placed)
			}
		})
	}
}

// A backend that dies takes its open connections with it; the next connection goes to the
// survivor. Close stops the proxy: nothing listens on its port any more.
func TestProxyBackendDeathAndClose(t *testing.T) {
	a, b := startBackend(t, "a"), startBackend(t, "b")
	p, err := StartProxy(a.addr(), b.addr())
	if err != nil {
		t.Fatal(err)
	}
	// An open connection to a, then a dies with it.
	held, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(p.Port))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	r := bufio.NewReader(held)
	if line, _ := r.ReadString('\n'); line != "a\n" {
		t.Fatalf("first connection went to %q, want a", line)
	}
	a.kill()
	_ = held.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.ReadByte(); err != io.EOF {
		t.Errorf("the held connection after its backend ended: %v, want EOF", err)
	}
	for i := range 3 {
		if got, _ := call(t, p, "ping"); got != "b" {
			t.Errorf("call %d after a died went to %q, want b", i, got)
		}
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(p.Port), time.Second); err == nil {
		c.Close()
		t.Error("the proxy still accepts after Close")
	}
}
