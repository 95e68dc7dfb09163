package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"
)

// The registration protocol, a stand-in for Spark's RPC RegisterExecutor: the executor opens a
// connection to the driver, sends one line "register <executor-id> <pod-name> <app-id>", and the
// driver answers "ok". The connection then stays open for the executor's life; an executor whose
// connection ends has lost its driver.

// registration is one executor's register line.
type registration struct{ ID, Pod, App string }

func (r registration) line() string { return fmt.Sprintf("register %s %s %s\n", r.ID, r.Pod, r.App) }

func parseRegistration(line string) (registration, error) {
	f := strings.Fields(line)
	if len(f) != 4 || f[0] != "register" {
		return registration{}, fmt.Errorf("bad register line %q", strings.TrimSpace(line))
	}
	return registration{ID: f[1], Pod: f[2], App: f[3]}, nil
}

// registrationTimeout bounds how long the driver waits for a new connection's register line.
const registrationTimeout = 10 * time.Second

// serveExecutors accepts executors on ln until ctx ends, then closes ln and every executor's
// connection (as a driver that ends drops its executors) and returns. Each registration is logged
// and passed to registered, if not nil.
func serveExecutors(ctx context.Context, ln net.Listener, logf func(string, ...any), registered func(registration)) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]bool{}
	)
	wg.Go(func() {
		<-ctx.Done()
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for c := range conns {
			_ = c.Close()
		}
	})
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() == nil {
				logf("simspark: accepting executors: %v", err)
			}
			break
		}
		mu.Lock()
		if ctx.Err() != nil {
			mu.Unlock()
			_ = c.Close()
			break
		}
		conns[c] = true
		mu.Unlock()
		wg.Go(func() {
			_ = c.SetReadDeadline(time.Now().Add(registrationTimeout))
			line, err := bufio.NewReader(c).ReadString('\n')
			reg, perr := parseRegistration(line)
			if err != nil || perr != nil {
				logf("simspark: connection from %s is no executor: %v", c.RemoteAddr(), errors.Join(err, perr))
				mu.Lock()
				delete(conns, c)
				mu.Unlock()
				_ = c.Close()
				return
			}
			_ = c.SetReadDeadline(time.Time{})
			if _, err := c.Write([]byte("ok\n")); err != nil {
				logf("simspark: answering executor %s: %v", reg.ID, err)
				return
			}
			logf("simspark: executor %s registered from %s (app %s)", reg.ID, reg.Pod, reg.App)
			if registered != nil {
				registered(reg)
			}
		})
	}
	<-ctx.Done()
	wg.Wait()
}

// dialDriver resolves host with r and connects to its port, retrying every interval until ctx
// ends or retryFor has passed. It returns the connection and the address dialled.
func dialDriver(ctx context.Context, r *net.Resolver, host, port string, retryFor, interval time.Duration) (net.Conn, string, error) {
	ctx, cancel := context.WithTimeout(ctx, retryFor)
	defer cancel()
	var last error
	for {
		ips, err := r.LookupHost(ctx, host)
		if err == nil {
			for _, ip := range ips {
				d := net.Dialer{Timeout: 2 * time.Second}
				c, derr := d.DialContext(ctx, "tcp", net.JoinHostPort(ip, port))
				if derr == nil {
					return c, ip, nil
				}
				err = derr
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, "", fmt.Errorf("no driver at %s:%s after %v: %w", host, port, retryFor, last)
		case <-time.After(interval):
		}
	}
}

// register sends reg's line on c and waits for the driver's answer.
func register(c net.Conn, reg registration) error {
	_ = c.SetDeadline(time.Now().Add(registrationTimeout))
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	if _, err := c.Write([]byte(reg.line())); err != nil {
		return err
	}
	answer, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return fmt.Errorf("driver did not answer the registration: %w", err)
	}
	if strings.TrimSpace(answer) != "ok" {
		return fmt.Errorf("driver refused the registration: %q", strings.TrimSpace(answer))
	}
	return nil
}
