package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// clearStaleExecutors removes the executors that earlier incarnations of the driver left (their
// names collide with the ones the new driver makes, which reuses the executor name prefix on Spark
// 2.4/3.0; a driver of a template without an app id of its own per incarnation would also count
// them as its own failed executors; and they may still run tasks for a driver that is gone), then
// lifts the gate that holds the new incarnation. It returns a note for the placeholder's status while executors remain.
func (r *Placeholder) clearStaleExecutors(ctx context.Context, p, driver *corev1.Pod) (string, error) {
	var list corev1.PodList
	err := r.Client.List(ctx, &list, executorsOf(driver)...)
	if err != nil {
		return "", err
	}
	n, forced := 0, 0
	live := map[string]*corev1.Node{}
	for i := range list.Items {
		e := &list.Items[i]
		if !stale(e, p, driver) {
			continue
		}
		n++
		force, err := r.deleteExecutor(ctx, e, live)
		if err != nil {
			return "", err
		}
		if force {
			forced++
		}
	}
	if n > 0 && forced == n {
		// Each one was force-deleted: do not wait a requeue for the cache to say so, but make sure
		// from the apiserver (a finalizer may keep one).
		if n, err = r.staleExecutorsLive(ctx, p, driver); err != nil {
			return "", err
		}
	}
	if n > 0 {
		return fmt.Sprintf("driver pod %s waits for %d executor(s) of the previous driver to be removed", podRef(driver), n), nil
	}
	// Under an optimistic lock: the decision is for this incarnation as read. Applied by name
	// alone, a decision made on a stale cache would lift the gate of the next incarnation, which
	// the earlier one's executors (not stale for it) must still hold.
	patch := client.MergeFromWithOptions(driver.DeepCopy(), client.MergeFromWithOptimisticLock{})
	convert.RemoveGate(&driver.Spec, contract.GateStaleExecutors)
	if err := r.Client.Patch(ctx, driver, patch); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return fmt.Sprintf("driver pod %s changed; looking again", podRef(driver)), nil
		}
		return "", err
	}
	r.event(p, driver, corev1.EventTypeNormal, "ExecutorsCleared", "no executor of an earlier driver remains; driver pod %s may be scheduled", podRef(driver))
	return "", nil
}

// deleteExecutor deletes e and reports whether it force-deleted it. One on a node proven down
// (provenDown, read live: deleted, or out of service) is force-deleted at once, as the driver pod
// there; one that is already terminating on a node that is gone or not Ready is force-deleted,
// since no kubelet will ever confirm its end. live keeps the Nodes read live in this pass.
func (r *Placeholder) deleteExecutor(ctx context.Context, e *corev1.Pod, live map[string]*corev1.Node) (bool, error) {
	uid := e.UID
	opts := []client.DeleteOption{client.Preconditions{UID: &uid}}
	force, err := r.onProvenDownNode(ctx, e, live)
	if err != nil {
		return false, err
	}
	if !force && e.DeletionTimestamp != nil {
		if !r.deadNodeLetsGo(ctx, e, false) {
			return false, nil
		}
		force = true
	}
	if force {
		opts = append(opts, client.GracePeriodSeconds(0))
	}
	err = r.Client.Delete(ctx, e, opts...)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return force, nil
	}
	return force, err
}

// onProvenDownNode reports whether e's node is proven down: first on the cache, then, since a
// force-delete cannot be undone, on the Node as the apiserver has it now.
func (r *Placeholder) onProvenDownNode(ctx context.Context, e *corev1.Pod, live map[string]*corev1.Node) (bool, error) {
	name := e.Spec.NodeName
	if name == "" {
		return false, nil // not scheduled: a graceful delete removes it at once
	}
	cached := &corev1.Node{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, cached); err != nil {
		if !apierrors.IsNotFound(err) {
			return false, nil
		}
		cached = nil
	}
	if provenDown(e, cached) == "" {
		return false, nil
	}
	node, read := live[name]
	if !read {
		var err error
		if node, err = r.liveNode(ctx, name); err != nil {
			return false, err
		}
		live[name] = node
	}
	return provenDown(e, node) != "", nil
}

// executorsOf selects the executors of the app whose driver pod (any incarnation) is driver: those
// labelled with its StatefulSet (driverset.dev/driver, given at birth by DriverConf or by the
// executor patch). Not by app id: every incarnation runs with an app id of its own
// (wrap.IncarnationAppID), so an earlier one's executors carry another. The label is
// self-declared, as the app id was: stale and ofApp decide by owner.
func executorsOf(driver *corev1.Pod) []client.ListOption {
	return []client.ListOption{client.InNamespace(driver.Namespace), client.MatchingLabels{
		contract.LabelDriver:    driver.Labels[contract.LabelDriver],
		contract.LabelSparkRole: contract.RoleExecutor,
	}}
}

// stale reports whether executor e was made by an earlier incarnation than driver, of the app of
// placeholder p. The app id label is self-declared, so an executor counts only when its controller
// is that app's driver pod: a pod of driver's name (an earlier incarnation had it; a reference to a
// pod that no longer exists is one the garbage collector removes anyway) or p itself (Spark's own
// reference, before the executors webhook moved it; checked by UID). Another app's executor that
// shares the namespace and claims the app id is neither deleted nor waited for.
func stale(e, p, driver *corev1.Pod) bool {
	return ofApp(e, p, driver.Name) && metav1.GetControllerOf(e).UID != driver.UID
}

// ofApp reports whether executor e belongs to the app of placeholder p: its controller is a driver
// pod of that app's driver pod name (any incarnation), or p itself.
func ofApp(e, p *corev1.Pod, driverName string) bool {
	ref := metav1.GetControllerOf(e)
	if ref == nil || ref.APIVersion != "v1" || ref.Kind != "Pod" {
		return false
	}
	return ref.Name == driverName || ref.UID == p.UID
}

// dropExecutorsOf deletes the executors of driver, an incarnation about to be force-deleted on
// its lost node, and of the incarnations before it, as clearStaleExecutors would for the next
// one: done first, in the same pass, the next incarnation usually finds none left when it is
// admitted and is not held by the stale-executor gate at all, rather than waiting for a pass of
// its own (on a node that held many drivers, that pass is what the last one waits for).
// Whatever fails here is left to the gate, which holds the next incarnation until they are gone.
// live holds the Nodes read from the apiserver in this pass.
func (r *Placeholder) dropExecutorsOf(ctx context.Context, p, driver *corev1.Pod, live map[string]*corev1.Node) {
	var list corev1.PodList
	if err := r.Client.List(ctx, &list, executorsOf(driver)...); err != nil {
		return
	}
	for i := range list.Items {
		if e := &list.Items[i]; ofApp(e, p, driver.Name) {
			_, _ = r.deleteExecutor(ctx, e, live)
		}
	}
}

// staleExecutorsLive counts, on the apiserver, the executors of p's app that driver does not own.
func (r *Placeholder) staleExecutorsLive(ctx context.Context, p, driver *corev1.Pod) (int, error) {
	var list corev1.PodList
	err := r.apiReader().List(ctx, &list, executorsOf(driver)...)
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range list.Items {
		if stale(&list.Items[i], p, driver) {
			n++
		}
	}
	return n, nil
}

// deadNodeLetsGo reports whether pod, Terminating on its node, may be force-deleted as far as the
// node goes: the node is gone or not Ready, so no kubelet will confirm the deletion. When a
// successor takes its place (the StatefulSet's next incarnation), the scheduler must also keep
// that one off the node first (deadAndAvoided); a stale executor has none. The Node is read from
// the cache.
func (r *Placeholder) deadNodeLetsGo(ctx context.Context, pod *corev1.Pod, successor bool) bool {
	if pod.Spec.NodeName == "" {
		return true
	}
	var n corev1.Node
	if err := r.Client.Get(ctx, types.NamespacedName{Name: pod.Spec.NodeName}, &n); err != nil {
		return apierrors.IsNotFound(err)
	}
	if successor {
		return deadAndAvoided(&n, pod.Spec.Tolerations)
	}
	c := nodeReady(&n)
	return c == nil || c.Status != corev1.ConditionTrue
}
