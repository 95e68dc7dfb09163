package testbed

import (
	"context"
	"time"
)

// The controller-manager and the scheduler exit on purpose when they can no longer trust their
// state: the scheduler calls klog.FlushAndExit when an informer shows a pod on another node than
// its cache holds (pkg/scheduler/backend/cache, seen in CI after an apiserver restart), and with
// leader election (off in the test bed) both exit when they lose the lease. A real cluster restarts them (the kubelet restarts a static
// pod, systemd a unit), so the test bed does too; without it, every pod after such an exit stays
// Pending and each later test times out. etcd and the apiserver are not restarted: neither
// exits by design, so their exit is reported (CheckAlive) with the end of their log.
func restartsOnExit(name string) bool {
	return name == ComponentControllerManager || name == ComponentScheduler
}

// downForGood says whether component name, found exited, will not run again by itself: a
// component the supervisor does not restart, or one it gave up on (givenUp). One it restarts is
// down only until it has: supervise takes it out of the books a moment after its exit.
func downForGood(name string, givenUp bool) bool {
	return !restartsOnExit(name) || givenUp
}

// Crash-loop bounds: a component that exited unasked crashLoopExits times within crashLoopWindow
// is broken (a bad flag, a taken port), not unlucky; it stays down and CheckAlive reports it.
const (
	crashLoopExits  = 3
	crashLoopWindow = 2 * time.Minute
	// restartDelay is the pause before a restart, as the kubelet's first restart of a container.
	restartDelay = time.Second
)

// crashLooping is the supervisor's decision: whether exits (the times a component exited
// although nobody stopped it, the latest included) say that it is crash-looping at now.
func crashLooping(exits []time.Time, now time.Time) bool {
	recent := 0
	for _, t := range exits {
		if now.Sub(t) < crashLoopWindow {
			recent++
		}
	}
	return recent >= crashLoopExits
}

// supervise waits for p, component name's process, to exit, and restarts the component when
// nobody stopped it (Stop, or restart, which takes p out of c.procs first) and it is not
// crash-looping. The new process gets a supervisor of its own (startComponent).
func (c *Cluster) supervise(name string, p *process) {
	<-p.done
	// Serialized with restart: it cannot start a second copy while this one decides.
	c.lifecycle.Lock()
	defer c.lifecycle.Unlock()
	now := time.Now()
	c.mu.Lock()
	if c.stopped || c.procs[name] != p {
		c.mu.Unlock()
		return
	}
	c.exits[name] = append(c.exits[name], now)
	if crashLooping(c.exits[name], now) {
		c.givenUp[name] = true
		c.mu.Unlock()
		// Left in c.procs, exited: the next wait fails with the end of its log.
		c.logf("%s exited (%v) %d times within %s; crash-looping, not restarted", name, p.err, crashLoopExits, crashLoopWindow)
		return
	}
	// Out of the books while it is down, as in restart: a wait meanwhile is not failed by it.
	delete(c.procs, name)
	c.restarts[name]++
	n := c.restarts[name]
	c.mu.Unlock()
	c.logf("%s exited (%v) although nobody stopped it; restarting it in %s (restart %d), as its kubelet would", name, p.err, restartDelay, n)
	time.Sleep(restartDelay)
	// serve, as restart does: one place says how a component is started.
	if err := c.serve(context.Background(), name); err != nil {
		c.logf("%s not restarted: %v", name, err)
		c.mu.Lock()
		if !c.stopped {
			c.procs[name] = p // exited: the next wait fails with the end of its log
			c.givenUp[name] = true
		}
		c.mu.Unlock()
	}
}

// Restarts says how many times each control-plane component was restarted because it exited
// although nobody stopped it (restarts the tests asked for are not counted).
func (c *Cluster) Restarts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string]int{}
	for name, n := range c.restarts {
		m[name] = n
	}
	return m
}
