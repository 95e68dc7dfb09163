package testbed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KubeletSettings are what a test may change in one real node's kubelet, on top of the test
// bed's configuration (kubeletConfig); the zero value is that configuration alone.
type KubeletSettings struct {
	// ShutdownGracePeriod turns the kubelet's graceful node shutdown on: it then holds a
	// logind inhibitor lock on the node's system bus (StartLogind, which must run first) and
	// stops every pod when logind announces a shutdown. Regular pods get ShutdownGracePeriod
	// minus ShutdownGracePeriodCriticalPods.
	ShutdownGracePeriod             time.Duration
	ShutdownGracePeriodCriticalPods time.Duration
	// EvictionSoft adds soft eviction thresholds (signal → threshold, e.g. "memory.available" →
	// "24Gi"), each met for EvictionSoftGracePeriod before the kubelet evicts, a pod at a time,
	// with at most EvictionMaxPodGracePeriodSeconds of grace. Soft thresholds, unlike hard ones,
	// leave the node's allocatable as it is: a restarted kubelet re-admits its running pods.
	EvictionSoft                     map[string]string
	EvictionSoftGracePeriod          time.Duration
	EvictionMaxPodGracePeriodSeconds int
}

// kubeletStopGrace is how long a kubelet asked to stop (SIGTERM) gets before SIGKILL.
const kubeletStopGrace = 10 * time.Second

// RestartKubelet stops the kubelet of real node name and starts it again with settings, as an
// admin changing a node's configuration would: containerd and every container keep running,
// and the new kubelet takes its pods over. It returns once the new kubelet has renewed the
// node's Lease and reports the node Ready (other conditions, such as memory pressure, may hold).
func (c *Cluster) RestartKubelet(ctx context.Context, name string, settings KubeletSettings) error {
	n, ok := c.realNode(name)
	if !ok {
		return fmt.Errorf("testbed: %s is not a real node", name)
	}
	c.mu.Lock()
	alive := n.proc != nil
	n.kubelet = settings
	c.mu.Unlock()
	if !alive {
		return fmt.Errorf("testbed: node %s: %w", name, ErrNodeDead)
	}
	p, err := c.realNodeParams(n)
	if err != nil {
		return err
	}
	conf, err := renderTemplate("kubelet.yaml", kubeletConfig, p)
	if err != nil {
		return err
	}
	if err := os.WriteFile(n.files.KubeletConfig, conf, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(n.files.KubeletRestart, nil, 0o600); err != nil {
		return err
	}
	pid, err := c.kubeletPID(name)
	if err != nil {
		return err
	}
	since := time.Now()
	if err := stopHostProcess(ctx, pid, kubeletStopGrace); err != nil {
		return fmt.Errorf("testbed: node %s's kubelet: %w", name, err)
	}
	c.logf("node %s: kubelet (pid %d) stopped for a new configuration", name, pid)
	return c.waitFor(ctx, "node "+name+"'s restarted kubelet Ready", func(ctx context.Context) (bool, error) {
		if _, err := os.Stat(n.files.KubeletRestart); err == nil {
			return false, nil // the node script has not started the new kubelet yet
		}
		l, err := c.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
		if err != nil || l.Spec.RenewTime == nil || !l.Spec.RenewTime.After(since) {
			return false, nil //nolint:nilerr // not yet
		}
		node, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not yet
		}
		return NodeReady(node) == corev1.ConditionTrue, nil
	})
}

// kubeletPID is the host PID of the kubelet running on real node name.
func (c *Cluster) kubeletPID(name string) (int, error) {
	procs, err := c.NodeProcesses(name)
	if err != nil {
		return 0, err
	}
	bin := filepath.Join(c.BinDir, "kubelet")
	for _, p := range procs {
		if len(p.Cmdline) > 0 && p.Cmdline[0] == bin && p.State != "Z" {
			return p.PID, nil
		}
	}
	return 0, fmt.Errorf("testbed: no kubelet runs on node %s", name)
}

// stopHostProcess sends pid SIGTERM, then SIGKILL after grace, and waits until it is gone. pid is
// not our child (the node script is its parent): it is gone once /proc no longer lists it alive.
func stopHostProcess(ctx context.Context, pid int, grace time.Duration) error {
	gone := func() bool {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		return err != nil || statState(string(stat)) == "Z"
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for !gone() {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			deadline = time.Now().Add(grace)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}
