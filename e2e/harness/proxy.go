package harness

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy is a TCP load balancer on 127.0.0.1 in front of several webhook replicas: what a
// Service is to the apiserver in a cluster. It passes bytes through untouched, so TLS ends at the
// replicas. Each accepted connection goes to the next backend in turn; a backend that refuses
// the dial (a dead replica) is skipped for the next one, as kube-proxy stops routing to a pod
// that is gone.
type Proxy struct {
	// Port is where the proxy listens on 127.0.0.1.
	Port int

	backends []string
	l        net.Listener
	next     atomic.Uint64
	wg       sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	served map[string]int
	closed bool
}

// proxyDialTimeout bounds one backend dial; loopback refuses a dead port at once, so this only
// matters for a backend that hangs.
const proxyDialTimeout = 2 * time.Second

// StartProxy listens on a free port of 127.0.0.1 and forwards to backends ("host:port").
func StartProxy(backends ...string) (*Proxy, error) {
	if len(backends) == 0 {
		return nil, errors.New("proxy: no backends")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		Port:     l.Addr().(*net.TCPAddr).Port,
		backends: append([]string(nil), backends...),
		l:        l,
		conns:    map[net.Conn]struct{}{},
		served:   map[string]int{},
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Served is how many connections each backend has been given so far.
func (p *Proxy) Served() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.served))
	for b, n := range p.served {
		out[b] = n
	}
	return out
}

// Close stops listening, cuts every open connection and waits for the proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	err := p.l.Close()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return // closed
		}
		if !p.track(c) {
			c.Close()
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve connects c to a backend and copies both ways until either side ends.
func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	defer p.untrack(c)
	b, err := p.dial()
	if err != nil {
		c.Close()
		return
	}
	if !p.track(b) {
		b.Close()
		c.Close()
		return
	}
	defer p.untrack(b)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		defer func() { done <- struct{}{} }()
		if _, err := io.Copy(dst, src); err != nil {
			// A reset or a cut: the other side loses its connection too, as a client of a
			// crashed pod does, and opens a new one.
			dst.Close()
			src.Close()
			return
		}
		// A clean end of one direction (EOF): pass it on and let the other direction finish.
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}
	go pipe(b, c)
	go pipe(c, b)
	<-done
	<-done
	c.Close()
	b.Close()
}

// dial tries each backend once, starting with the next in turn.
func (p *Proxy) dial() (net.Conn, error) {
	start := p.next.Add(1) - 1
	var errs []error
	for i := range uint64(len(p.backends)) {
		addr := p.backends[(start+i)%uint64(len(p.backends))]
		c, err := net.DialTimeout("tcp", addr, proxyDialTimeout)
		if err == nil {
			p.mu.Lock()
			p.served[addr]++
			p.mu.Unlock()
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("proxy: no backend answered: %w", errors.Join(errs...))
}

// track records c so that Close can cut it; false once the proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}
