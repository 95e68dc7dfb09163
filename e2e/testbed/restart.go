package testbed

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// RestartComponent crashes one control-plane component (SIGKILL, as an OOM kill or a node
// reboot would) and starts it again with the same flags and data, then waits until it serves:
// etcd healthy, the apiserver ready; the controller-manager and the scheduler are only started
// (they have no readiness the test bed reads). It returns how long the component was down.
func (c *Cluster) RestartComponent(ctx context.Context, name string) (time.Duration, error) {
	return c.restart(ctx, name, (*process).kill, 0)
}

// RestartAPIServer stops the kube-apiserver (SIGTERM, as a control-plane upgrade does), keeps it
// down for down, then starts it again with the same flags and waits until it is ready. Every
// client loses its connections and watches meanwhile; etcd keeps the state.
func (c *Cluster) RestartAPIServer(ctx context.Context, down time.Duration) error {
	_, err := c.restart(ctx, ComponentAPIServer, (*process).stop, down)
	return err
}

// restart ends component name with end, waits down, starts it again as the test bed started it
// and waits until it serves; it returns how long the component was away.
func (c *Cluster) restart(ctx context.Context, name string, end func(*process), down time.Duration) (time.Duration, error) {
	if _, _, _, err := c.component(name); err != nil {
		return 0, err
	}
	c.lifecycle.Lock()
	defer c.lifecycle.Unlock()
	c.mu.Lock()
	p := c.procs[name]
	// Out of the books while it is down: CheckAlive must not take the stop for a failure.
	delete(c.procs, name)
	stopped := c.stopped
	c.mu.Unlock()
	if stopped {
		return 0, fmt.Errorf("testbed: stopped")
	}
	start := time.Now()
	if p != nil {
		end(p)
	}
	c.logf("%s stopped; down for %s", name, down)
	select {
	case <-ctx.Done():
		return time.Since(start), ctx.Err()
	case <-time.After(down):
	}
	if err := c.serve(ctx, name); err != nil {
		return time.Since(start), err
	}
	c.logf("%s serving again %.1fs after it stopped", name, time.Since(start).Seconds())
	return time.Since(start), nil
}

// serve starts control-plane component name as component says, and waits until it serves.
func (c *Cluster) serve(ctx context.Context, name string) error {
	bin, args, ready, err := c.component(name)
	if err != nil {
		return err
	}
	if err := c.startComponent(name, bin, args); err != nil {
		return err
	}
	if ready == nil {
		return nil
	}
	return c.waitFor(ctx, name+" serving", ready)
}

// component is how the test bed runs a control-plane component: its binary, its flags and what
// says it serves (nil: nothing to wait for).
func (c *Cluster) component(name string) (string, []string, func(context.Context) (bool, error), error) {
	switch name {
	case ComponentEtcd:
		return "etcd", etcdArgs(c.lay, filepath.Join(c.Dir, "etcd")), c.etcdHealthy, nil
	case ComponentAPIServer:
		return "kube-apiserver", apiserverArgs(c.lay), c.apiserverReady, nil
	case ComponentControllerManager:
		return "kube-controller-manager", controllerManagerArgs(c.lay), nil, nil
	case ComponentScheduler:
		return "kube-scheduler", schedulerArgs(c.lay), nil, nil
	}
	return "", nil, nil, fmt.Errorf("testbed: no control-plane component %q", name)
}
