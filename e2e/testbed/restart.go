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
	bin, args, ready, err := c.component(name)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	p := c.procs[name]
	// Out of the books while it is down: checkAlive must not take the crash for a failure.
	delete(c.procs, name)
	stopped := c.stopped
	c.mu.Unlock()
	if stopped {
		return 0, fmt.Errorf("testbed: stopped")
	}
	start := time.Now()
	if p != nil {
		p.kill()
	}
	if err := c.startComponent(name, bin, args); err != nil {
		return time.Since(start), err
	}
	if ready != nil {
		if err := c.waitFor(ctx, name+" serving again", ready); err != nil {
			return time.Since(start), err
		}
	}
	return time.Since(start), nil
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

// RestartAPIServer stops the kube-apiserver (SIGTERM, as a control-plane upgrade does), keeps it
// down for down, then starts it again with the same flags and waits until it is ready. Every
// client loses its connections and watches meanwhile; etcd keeps the state.
func (c *Cluster) RestartAPIServer(ctx context.Context, down time.Duration) error {
	c.mu.Lock()
	p := c.procs[ComponentAPIServer]
	c.mu.Unlock()
	if p == nil {
		return fmt.Errorf("testbed: no kube-apiserver to restart")
	}
	p.stop()
	c.logf("kube-apiserver stopped; down for %s", down)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(down):
	}
	step := time.Now()
	bin, args, ready, err := c.component(ComponentAPIServer)
	if err != nil {
		return err
	}
	if err := c.startComponent(ComponentAPIServer, bin, args); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "kube-apiserver /readyz", ready); err != nil {
		return err
	}
	c.logf("kube-apiserver ready again in %.1fs", time.Since(step).Seconds())
	return nil
}
