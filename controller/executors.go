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

// clearStaleExecutors removes the executors that earlier incarnations of the driver left (they
// carry the same app id, so the new driver would count them as its own failed executors, and on
// Spark 2.4/3.0 their names collide with the ones it makes), then lifts the gate that holds the
// new incarnation. It returns a note for the placeholder's status while executors remain.
func (r *Placeholder) clearStaleExecutors(ctx context.Context, p, driver *corev1.Pod) (string, error) {
	var list corev1.PodList
	err := r.Client.List(ctx, &list, client.InNamespace(p.Namespace), client.MatchingLabels{
		contract.LabelSparkAppSelector: p.Labels[contract.LabelSparkAppSelector],
		contract.LabelSparkRole:        contract.RoleExecutor,
	})
	if err != nil {
		return "", err
	}
	stale := 0
	for i := range list.Items {
		e := &list.Items[i]
		if ref := metav1.GetControllerOf(e); ref != nil && ref.UID == driver.UID {
			continue
		}
		stale++
		if err := r.deleteExecutor(ctx, e); err != nil {
			return "", err
		}
	}
	if stale > 0 {
		return fmt.Sprintf("driver pod %s waits for %d executor(s) of the previous driver to be removed", podRef(driver), stale), nil
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

// deleteExecutor deletes e; one that is already terminating on a node that is gone or not Ready
// is force-deleted, since no kubelet will ever confirm its end.
func (r *Placeholder) deleteExecutor(ctx context.Context, e *corev1.Pod) error {
	uid := e.UID
	opts := []client.DeleteOption{client.Preconditions{UID: &uid}}
	if e.DeletionTimestamp != nil {
		if !r.nodeGoneOrNotReady(ctx, e.Spec.NodeName) {
			return nil
		}
		opts = append(opts, client.GracePeriodSeconds(0))
	}
	err := r.Client.Delete(ctx, e, opts...)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

func (r *Placeholder) nodeGoneOrNotReady(ctx context.Context, name string) bool {
	if name == "" {
		return true
	}
	var n corev1.Node
	if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, &n); err != nil {
		return apierrors.IsNotFound(err)
	}
	c := nodeReady(&n)
	return c == nil || c.Status != corev1.ConditionTrue
}
