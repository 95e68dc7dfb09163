//go:build testbed

package testbed

import (
	"context"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// podGCQuarantine is PodGC's wait before it deletes a pod whose node object is gone, and
// podGCPeriod how often it looks (kube-controller-manager constants, not flags).
const (
	podGCQuarantine = 40 * time.Second
	podGCPeriod     = 20 * time.Second
)

// testStatefulSet is the "must show 1": what a plain StatefulSet of one replica does
// when its node goes away in each of the ways driverset cares about.
func testStatefulSet(t *testing.T, c *Cluster) {
	t.Run("pod runs", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t, c, "sts-run")
		nodes := []string{"kwok-node-1", "kwok-node-2"} // the ones Start made
		p, took := createAndRun(t, c, ns, "driver", nodes)
		t.Logf("pod Running in %.1fs on %s, IP %s", took.Seconds(), p.Spec.NodeName, p.Status.PodIP)
		if p.Status.PodIP == "" || p.Status.HostIP == "" {
			t.Errorf("pod has no IPs: podIP %q hostIP %q", p.Status.PodIP, p.Status.HostIP)
		}
		node, err := c.Client.CoreV1().Nodes().Get(t.Context(), p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !cidrContains(node.Spec.PodCIDR, p.Status.PodIP) {
			t.Errorf("pod IP %s is outside its node's pod CIDR %s", p.Status.PodIP, node.Spec.PodCIDR)
		}
	})

	t.Run("node deleted: replaced on another node", func(t *testing.T) {
		t.Parallel()
		nodes := []string{"sts-del-a", "sts-del-b"}
		addNodes(t, c, nodes...)
		ns := newNamespace(t, c, "sts-del")
		old, _ := createAndRun(t, c, ns, "driver", nodes)

		start := time.Now()
		if err := c.DeleteNode(t.Context(), old.Spec.NodeName); err != nil {
			t.Fatal(err)
		}
		limit := podGCQuarantine + 2*podGCPeriod + 30*time.Second
		repl := waitForPod(t, c, ns, "driver", limit, "a replacement pod Running", replacementOf(old))
		t.Logf("replaced %.1fs after node deletion (%s on %s -> %s on %s)",
			time.Since(start).Seconds(), old.UID, old.Spec.NodeName, repl.UID, repl.Spec.NodeName)
		if want := other(nodes, old.Spec.NodeName); repl.Spec.NodeName != want {
			t.Errorf("replacement on %s, want %s", repl.Spec.NodeName, want)
		}
	})

	t.Run("out-of-service taint on a dead node: replaced within seconds", func(t *testing.T) {
		t.Parallel()
		nodes := []string{"sts-oos-a", "sts-oos-b"}
		addNodes(t, c, nodes...)
		ns := newNamespace(t, c, "sts-oos")
		old, _ := createAndRun(t, c, ns, "driver", nodes)

		killed := time.Now()
		if err := c.KillNode(t.Context(), old.Spec.NodeName); err != nil {
			t.Fatal(err)
		}
		waitForNodeReady(t, c, old.Spec.NodeName, corev1.ConditionUnknown, 3*c.opts.NodeMonitorGracePeriod+10*time.Second)
		t.Logf("node %s Unknown %.1fs after its kubelet died", old.Spec.NodeName, time.Since(killed).Seconds())

		tainted := time.Now()
		if err := c.TaintOutOfService(t.Context(), old.Spec.NodeName); err != nil {
			t.Fatal(err)
		}
		// PodGC force-deletes terminating pods on out-of-service nodes on its next pass.
		repl := waitForPod(t, c, ns, "driver", podGCPeriod+c.opts.PodEvictionTimeout+20*time.Second,
			"a replacement pod Running", replacementOf(old))
		t.Logf("replaced %.1fs after the out-of-service taint (%.1fs after the node died), on %s",
			time.Since(tainted).Seconds(), time.Since(killed).Seconds(), repl.Spec.NodeName)
	})

	t.Run("node killed: old pod stays Terminating, not replaced, until the node returns", func(t *testing.T) {
		t.Parallel()
		nodes := []string{"sts-kill-a", "sts-kill-b"}
		addNodes(t, c, nodes...)
		ns := newNamespace(t, c, "sts-kill")
		old, _ := createAndRun(t, c, ns, "driver", nodes)

		killed := time.Now()
		if err := c.KillNode(t.Context(), old.Spec.NodeName); err != nil {
			t.Fatal(err)
		}
		// Twice everything that could possibly replace it: grace period, toleration, and a
		// full PodGC cycle.
		hold := 2*(c.opts.NodeMonitorGracePeriod+c.opts.PodEvictionTimeout) + podGCQuarantine
		var evicted time.Duration
		err := wait.PollUntilContextTimeout(t.Context(), pollInterval, hold, true, func(ctx context.Context) (bool, error) {
			ps, err := pods(ctx, c, ns, "driver")
			if err != nil {
				return false, nil // a transient API error is not the thing under test
			}
			if len(ps) != 1 || ps[0].UID != old.UID {
				t.Fatalf("%.1fs after the node died the pods are %s, want only the old %s",
					time.Since(killed).Seconds(), describePods(ps), old.UID)
			}
			if evicted == 0 && ps[0].DeletionTimestamp != nil {
				evicted = time.Since(killed)
				t.Logf("old pod Terminating %.1fs after its node died", evicted.Seconds())
			}
			return false, nil
		})
		if !wait.Interrupted(err) {
			t.Fatal(err)
		}
		if evicted == 0 {
			t.Fatalf("the old pod was never evicted in %v", hold)
		}
		t.Logf("after %.0fs: still only the old pod, Terminating, not replaced", hold.Seconds())

		revived := time.Now()
		if err := c.ReviveNode(t.Context(), old.Spec.NodeName); err != nil {
			t.Fatal(err)
		}
		t.Logf("node %s Ready %.1fs after revive", old.Spec.NodeName, time.Since(revived).Seconds())
		repl := waitForPod(t, c, ns, "driver", 60*time.Second, "a replacement pod Running", replacementOf(old))
		ps, err := pods(t.Context(), c, ns, "driver")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if p.UID == old.UID {
				t.Errorf("old pod %s still exists next to its replacement", old.UID)
			}
		}
		t.Logf("recovered %.1fs after the node came back: %s on %s", time.Since(revived).Seconds(), repl.UID, repl.Spec.NodeName)
	})
}

// createAndRun creates the StatefulSet and waits for its pod to run; it returns the pod and
// how long that took.
func createAndRun(t *testing.T, c *Cluster, ns, name string, nodes []string) (*corev1.Pod, time.Duration) {
	t.Helper()
	start := time.Now()
	if _, err := c.Client.AppsV1().StatefulSets(ns).Create(t.Context(), newStatefulSet(name, nodes), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := waitForPod(t, c, ns, name, 60*time.Second, "the pod Running", podRunning)
	return p, time.Since(start)
}

// replacementOf matches a running pod that is not old.
func replacementOf(old *corev1.Pod) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool { return p.UID != old.UID && podRunning(p) }
}

func cidrContains(cidr, ip string) bool {
	_, n, err := net.ParseCIDR(cidr)
	return err == nil && n.Contains(net.ParseIP(ip))
}
