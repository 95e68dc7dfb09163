package controller

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/driverset/driverset/contract"
)

// Orphans stops the StatefulSets that driverset made and whose placeholder is gone while they
// stayed: `kubectl delete pod <placeholder> --cascade=orphan` has the garbage collector remove the
// ownerReference instead of the StatefulSet, which would otherwise run its driver, and make it
// again after every node loss, with nothing left to stop it. It scales such a StatefulSet to 0,
// which stops the driver (and with it its executors) with the permissions driverset already has:
// the StatefulSet, its Service and Spark's objects stay for the namespace's owner to delete.
type Orphans struct {
	Client client.Client
	// APIReader confirms, on the apiserver, what the cache says before anything is stopped.
	APIReader client.Reader
}

// SetupWithManager registers the orphan reconciler for driverset's StatefulSets.
func (o *Orphans) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("orphans").
		For(&appsv1.StatefulSet{}, builder.WithPredicates(predicate.NewTypedPredicateFuncs(func(c client.Object) bool {
			s, ok := c.(*appsv1.StatefulSet)
			return ok && orphanedAndRunning(s)
		}))).
		Complete(o)
}

// orphanedAndRunning is the decision: s is driverset's (labelled contract.LabelDriver), has no
// controller (every StatefulSet driverset makes is created with its placeholder as controller,
// so only an orphaning deletion takes it away), and still asks for a replica.
func orphanedAndRunning(s *appsv1.StatefulSet) bool {
	return s.Labels[contract.LabelDriver] != "" && metav1.GetControllerOf(s) == nil &&
		(s.Spec.Replicas == nil || *s.Spec.Replicas > 0)
}

// Reconcile scales an orphaned StatefulSet to 0, after reading it live.
func (o *Orphans) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var s appsv1.StatefulSet
	if err := o.APIReader.Get(ctx, req.NamespacedName, &s); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !orphanedAndRunning(&s) {
		return ctrl.Result{}, nil
	}
	log.FromContext(ctx).Info("scaling to 0 a driverset StatefulSet whose placeholder was deleted without it", "statefulset", req.String())
	patch := client.MergeFromWithOptions(s.DeepCopy(), client.MergeFromWithOptimisticLock{})
	s.Spec.Replicas = new(int32)
	return ctrl.Result{}, client.IgnoreNotFound(o.Client.Patch(ctx, &s, patch))
}
