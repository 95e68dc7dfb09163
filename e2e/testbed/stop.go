package testbed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"sync"
	"syscall"
	"testing"
)

// Stop stops every process the test bed started, by process group: SIGTERM, then SIGKILL after
// a few seconds. Then it deletes Dir unless KeepLogs was called. Safe to call more than once
// and from several goroutines.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return c.stopErr
	}
	c.stopped = true
	var first, last []*process
	for name, p := range c.procs {
		if name == ComponentEtcd {
			last = append(last, p)
		} else {
			first = append(first, p)
		}
	}
	for _, n := range c.nodes {
		if n.proc != nil {
			first = append(first, n.proc)
			n.proc = nil
		}
	}
	keep := c.keep
	c.mu.Unlock()

	// Real nodes first, hard: their containers die with them, and their cgroups and network
	// can be removed only once nothing runs in them.
	err := c.stopRealNodes()

	// Clients and the apiserver together, then etcd, which they all need while they shut down.
	for _, wave := range [][]*process{first, last} {
		var wg sync.WaitGroup
		for _, p := range wave {
			wg.Go(p.stop)
		}
		wg.Wait()
	}
	for _, wave := range [][]*process{first, last} {
		for _, p := range wave {
			if !p.exited() {
				err = errors.Join(err, fmt.Errorf("testbed: %s (pid %d) survived SIGKILL", p.name, p.pid()))
			}
		}
	}
	if c.spawn != nil {
		c.spawn.close()
	}
	if !keep && err == nil {
		err = os.RemoveAll(c.Dir)
	}
	c.mu.Lock()
	c.stopErr = err
	c.mu.Unlock()
	return err
}

// StopOnSignal stops the cluster when the process gets SIGINT or SIGTERM, then lets the signal
// take its usual effect (the process ends). Children would die anyway (they get SIGKILL when
// the test process dies); this also stops etcd cleanly and removes Dir. Call the returned
// function to uninstall the handler. Use it with Start in TestMain; StartT does it itself.
func (c *Cluster) StopOnSignal() (cancel func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	var once sync.Once
	go func() {
		select {
		case sig := <-ch:
			c.logf("%v: stopping the test bed", sig)
			_ = c.Stop()
			// Hand the signal back to the default action so the process exits as it would have.
			signal.Reset(sig)
			_ = syscall.Kill(os.Getpid(), sig.(syscall.Signal))
		case <-done:
		}
	}()
	return func() {
		once.Do(func() {
			signal.Stop(ch)
			close(done)
		})
	}
}

// StartT starts a cluster for one test (or a group of subtests). t.Cleanup stops it. When the
// test failed, Dir is kept and the log paths are printed, so the failure can be investigated.
// A start failure (missing binaries included) fails the test; it is never skipped.
func StartT(t testing.TB, o Options) *Cluster {
	t.Helper()
	if o.Log == nil {
		o.Log = tLogWriter{t}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*startPhaseTimeout)
	defer cancel()
	c, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	uninstall := c.StopOnSignal()
	t.Cleanup(func() {
		uninstall()
		if t.Failed() {
			c.KeepLogs()
			paths := c.LogPaths()
			names := make([]string, 0, len(paths))
			for n := range paths {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				t.Logf("testbed log %s: %s", n, paths[n])
			}
			t.Logf("testbed kept in %s (KUBECONFIG=%s, processes stopped)", c.Dir, c.KubeconfigPath)
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stopping the test bed: %v", err)
		}
	})
	return c
}

// tLogWriter sends progress lines to the test log. t.Log after the test ends panics, so it is
// only used for the lifetime of StartT's test.
type tLogWriter struct{ t testing.TB }

func (w tLogWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(trimNewline(p)))
	return len(p), nil
}

func trimNewline(p []byte) []byte {
	if n := len(p); n > 0 && p[n-1] == '\n' {
		return p[:n-1]
	}
	return p
}
