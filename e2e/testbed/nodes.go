package testbed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// Errors of the node operations, for errors.Is.
var (
	// ErrNodeDead: KillNode of a node that is already dead.
	ErrNodeDead = errors.New("the node is already dead")
	// ErrNodeAlive: ReviveNode of a node that runs; KillNode it first.
	ErrNodeAlive = errors.New("the node is alive; KillNode it first")
)

// Node metadata that kwok and the scheduler look at.
const (
	// AnnotationKwokNode marks a Node as fake; kwok only plays kubelet for such nodes.
	AnnotationKwokNode = "kwok.x-k8s.io/node"
	// TaintOutOfServiceKey is what an admin sets on a node that is known to be shut down, so
	// that its pods are deleted and replaced at once (non-graceful node shutdown).
	TaintOutOfServiceKey   = "node.kubernetes.io/out-of-service"
	TaintOutOfServiceValue = "nodeshutdown"
	labelHostname          = "kubernetes.io/hostname"
)

// newNodeObject is the Node a kubelet would register: fake, roomy, with its own pod /24.
func newNodeObject(name string, index int) *corev1.Node {
	cidr := fmt.Sprintf(podCIDRFormat, index)
	room := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				labelHostname:             name,
				"kubernetes.io/os":        "linux",
				"kubernetes.io/arch":      "amd64",
				"type":                    "kwok",
				"node.kubernetes.io/kwok": "true",
			},
			Annotations: map[string]string{AnnotationKwokNode: "fake"},
		},
		Spec: corev1.NodeSpec{PodCIDR: cidr, PodCIDRs: []string{cidr}},
		// A kubelet registers with its capacity; the node stage keeps whatever is here.
		Status: corev1.NodeStatus{Capacity: room, Allocatable: room.DeepCopy()},
	}
}

// AddNode creates a new KWOK node with its own kwok process and pod /24, and waits until it is
// Ready and schedulable.
func (c *Cluster) AddNode(ctx context.Context, name string) error {
	err := c.createNode(ctx, name)
	if err == nil {
		err = c.waitNodeReady(ctx, name, "")
	}
	if err != nil {
		// Nothing is left half made (a Node whose creation's answer was lost while the apiserver
		// restarted, a kwok for a node that never turned Ready): the caller may try again under
		// another name.
		c.discardNode(name)
	}
	return err
}

// discardNode stops the node's kwok, if any, and deletes its Node object, if any, retrying for a
// while an apiserver that is away, and forgets it.
func (c *Cluster) discardNode(name string) {
	if p, err := c.detachKwok(name); err == nil && p != nil {
		p.stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		return client404(c.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})) == nil, nil
	})
	c.forgetNode(name)
}

// createNode registers the Node object and starts its kwok.
func (c *Cluster) createNode(ctx context.Context, name string) error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return fmt.Errorf("testbed: stopped")
	}
	if _, ok := c.nodes[name]; ok {
		c.mu.Unlock()
		return fmt.Errorf("testbed: node %s already exists", name)
	}
	if c.nextIndex > maxNodeIndex {
		c.mu.Unlock()
		return fmt.Errorf("testbed: out of pod /24s after %d nodes", maxNodeIndex)
	}
	n := &kwokNode{name: name, index: c.nextIndex}
	c.nextIndex++
	c.nodes[name] = n
	c.mu.Unlock()

	if _, err := c.Client.CoreV1().Nodes().Create(ctx, newNodeObject(name, n.index), metav1.CreateOptions{}); err != nil {
		c.forgetNode(name)
		return fmt.Errorf("testbed: create node %s: %w", name, err)
	}
	if err := c.startKwok(n); err != nil {
		return err
	}
	return nil
}

func (c *Cluster) startKwok(n *kwokNode) error {
	// kwok also reads ~/.kwok/kwok.yaml when it exists; a private HOME keeps a developer's own
	// kwok settings out of the test bed.
	env := append(os.Environ(), "HOME="+filepath.Join(c.Dir, "kwok-home"))
	p, err := c.spawn.startProcess(kwokPrefix+n.name, filepath.Join(c.BinDir, "kwok"),
		kwokArgs(c.lay, n.name, n.index), c.logPath(kwokPrefix+n.name), env)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		go p.stop() // Stop already ran and did not see this process
		return fmt.Errorf("testbed: stopped")
	}
	n.proc = p
	c.logged[kwokPrefix+n.name] = true
	return nil
}

func (c *Cluster) forgetNode(name string) {
	c.mu.Lock()
	delete(c.nodes, name)
	c.mu.Unlock()
}

// node returns the named node, or an error that says which nodes exist.
func (c *Cluster) node(name string) (*kwokNode, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.nodes[name]
	if !ok {
		return nil, fmt.Errorf("testbed: no node %s (the test bed made %d)", name, len(c.nodes))
	}
	return n, nil
}

// KillNode kills the node's kwok with SIGKILL, like a kubelet whose machine lost power: the
// Lease is no longer renewed, the node turns Unknown after NodeMonitorGracePeriod, its pods
// are evicted after PodEvictionTimeout and then stay Terminating, since nobody confirms that
// their containers stopped.
func (c *Cluster) KillNode(ctx context.Context, name string) error {
	if n, ok := c.realNode(name); ok {
		return c.killRealNode(n)
	}
	p, err := c.detachKwok(name)
	if err != nil {
		return err
	}
	if p == nil {
		return fmt.Errorf("testbed: node %s: %w", name, ErrNodeDead)
	}
	p.kill()
	return nil
}

// ReviveNode starts the node's kwok again and waits until the new kwok holds the node's Lease
// and the node is Ready and schedulable. Pods left Terminating on it are then finalized.
func (c *Cluster) ReviveNode(ctx context.Context, name string) error {
	if n, ok := c.realNode(name); ok {
		return c.reviveRealNode(ctx, n)
	}
	n, err := c.node(name)
	if err != nil {
		return err
	}
	c.mu.Lock()
	alive := n.proc != nil
	c.mu.Unlock()
	if alive {
		return fmt.Errorf("testbed: node %s: %w", name, ErrNodeAlive)
	}
	// The dead kwok's Lease names it; a new kwok takes the Lease over once it expires.
	oldHolder := ""
	if l, err := c.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{}); err == nil && l.Spec.HolderIdentity != nil {
		oldHolder = *l.Spec.HolderIdentity
	}
	if err := c.startKwok(n); err != nil {
		return err
	}
	return c.waitNodeReady(ctx, name, oldHolder)
}

// DeleteNode stops the node's kwok (if alive) and deletes the Node object, as a cluster
// autoscaler or node auto-repair would. Pods bound to it are left to PodGC.
func (c *Cluster) DeleteNode(ctx context.Context, name string) error {
	if n, ok := c.realNode(name); ok {
		// The machine goes away with its Node object: kill it if it still runs.
		if err := c.killRealNode(n); err != nil && !errors.Is(err, ErrNodeDead) {
			return err
		}
		return client404(c.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}))
	}
	p, err := c.detachKwok(name)
	if err != nil {
		return err
	}
	if p != nil {
		p.stop()
	}
	err = c.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("testbed: delete node %s: %w", name, err)
	}
	c.forgetNode(name)
	return nil
}

// TaintOutOfService adds node.kubernetes.io/out-of-service=nodeshutdown:NoExecute, an admin's
// statement that the node is shut down: pods on it that do not tolerate the taint are deleted
// for good, and PodGC removes them while the node is not Ready.
func (c *Cluster) TaintOutOfService(ctx context.Context, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, t := range node.Spec.Taints {
			if t.Key == TaintOutOfServiceKey && t.Effect == corev1.TaintEffectNoExecute {
				return nil
			}
		}
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{
			Key: TaintOutOfServiceKey, Value: TaintOutOfServiceValue, Effect: corev1.TaintEffectNoExecute,
		})
		_, err = c.Client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
}

// waitNodeReady waits until the node is Ready, carries none of the taints the node lifecycle
// controller puts on unready nodes, and (when notHolder is set) its Lease is held by someone
// other than notHolder, i.e. the new kwok.
func (c *Cluster) waitNodeReady(ctx context.Context, name, notHolder string) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	return c.waitFor(ctx, "node "+name+" Ready", func(ctx context.Context) (bool, error) {
		c.mu.Lock()
		p := n.proc
		c.mu.Unlock()
		if p != nil && p.exited() {
			path := c.logPath(kwokPrefix + name)
			return false, fmt.Errorf("kwok for %s exited (%v); end of %s:\n%s", name, p.err, path, tail(path, 2000))
		}
		if notHolder != "" {
			l, err := c.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == notHolder {
				return false, nil
			}
		}
		node, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return NodeSchedulable(node), nil
	})
}

// NodeReady reports the node's Ready condition.
func NodeReady(node *corev1.Node) corev1.ConditionStatus {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status
		}
	}
	return corev1.ConditionUnknown
}

// NodeSchedulable reports whether node is Ready and the node lifecycle controller has lifted
// its not-ready and unreachable taints (until then new pods would wait in Pending).
func NodeSchedulable(node *corev1.Node) bool {
	if NodeReady(node) != corev1.ConditionTrue || node.Spec.Unschedulable {
		return false
	}
	for _, t := range node.Spec.Taints {
		switch t.Key {
		case corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable:
			return false
		}
	}
	return true
}

// detachKwok takes the node's kwok process out of the cluster's books (nil when it is dead
// already), for the caller to stop or kill.
func (c *Cluster) detachKwok(name string) (*process, error) {
	n, err := c.node(name)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p := n.proc
	n.proc = nil
	return p, nil
}

// client404 treats NotFound as success.
func client404(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
