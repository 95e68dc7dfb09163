package testbed

import (
	"context"
	"fmt"
	"time"
)

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
	if err := c.startComponent(ComponentAPIServer, "kube-apiserver", apiserverArgs(c.lay)); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "kube-apiserver /readyz", c.apiserverReady); err != nil {
		return err
	}
	c.logf("kube-apiserver ready again in %.1fs", time.Since(step).Seconds())
	return nil
}
