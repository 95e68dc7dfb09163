package main

import (
	"context"
	"io"
	"net"
	"time"
)

// executor is one run of the simulated executor JVM, from its pod's env.
type executor struct {
	driverURL string // SPARK_DRIVER_URL
	reg       registration
	resolver  *net.Resolver
	retryFor  time.Duration
	logf      func(string, ...any)
}

// run registers with the driver and holds the connection: it returns 1 when the driver drops it
// (an executor that lost its driver) or cannot be reached, 143 when term ends (SIGTERM).
func (e executor) run(term context.Context) int {
	host, port, err := parseDriverURL(e.driverURL)
	if err != nil {
		e.logf("simspark: executor %s: %v", e.reg.ID, err)
		return exitFailed
	}
	c, ip, err := dialDriver(term, e.resolver, host, port, e.retryFor, time.Second)
	if err != nil {
		if term.Err() != nil {
			e.logf("simspark: SIGTERM, shutting down")
			return exitSIGTERM
		}
		e.logf("simspark: executor %s: %v", e.reg.ID, err)
		return exitFailed
	}
	defer func() { _ = c.Close() }()
	if err := register(c, e.reg); err != nil {
		e.logf("simspark: executor %s: %v", e.reg.ID, err)
		return exitFailed
	}
	e.logf("simspark: executor %s registered with %s:%s (%s)", e.reg.ID, host, port, ip)
	lost := make(chan struct{})
	go func() {
		defer close(lost)
		_, _ = io.Copy(io.Discard, c)
	}()
	select {
	case <-lost:
		e.logf("simspark: executor %s lost its driver %s:%s", e.reg.ID, host, port)
		return exitFailed
	case <-term.Done():
		e.logf("simspark: SIGTERM, shutting down")
		return exitSIGTERM
	}
}
