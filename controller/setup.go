package controller

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// SetupWithManager registers the placeholder reconciler: it runs for placeholder pods, for the
// StatefulSets and Services they own, and for the StatefulSets' driver pods.
func (r *Placeholder) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	// Driver pods by node, so that a node's change reaches the drivers on it.
	err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, indexNodeName, func(o client.Object) []string {
		p := o.(*corev1.Pod)
		if p.Spec.NodeName == "" || p.Labels[contract.LabelDriver] == "" {
			return nil
		}
		return []string{p.Spec.NodeName}
	})
	if err != nil {
		return err
	}
	if err := r.watchHeartbeats(ctx, mgr); err != nil {
		return err
	}
	isPlaceholder := predicate.NewPredicateFuncs(func(o client.Object) bool {
		p, ok := o.(*corev1.Pod)
		return ok && convert.IsPlaceholder(p)
	})
	isDriverPod := predicate.NewPredicateFuncs(func(o client.Object) bool {
		l := o.GetLabels()
		return l[contract.LabelDriver] != "" && l[contract.LabelSparkRole] == contract.RoleDriver
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("placeholder").
		For(&corev1.Pod{}, builder.WithPredicates(isPlaceholder)).
		Owns(&appsv1.StatefulSet{}).
		Owns(&corev1.Service{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.placeholderOfDriverPod), builder.WithPredicates(isDriverPod)).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.placeholdersOnNode)).
		Complete(r)
}

const indexNodeName = "spec.nodeName"

// placeholdersOnNode maps a node to the placeholders whose driver runs on it.
func (r *Placeholder) placeholdersOnNode(ctx context.Context, o client.Object) []reconcile.Request {
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.MatchingFields{indexNodeName: o.GetName()}); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range pods.Items {
		out = append(out, r.placeholderOfDriverPod(ctx, &pods.Items[i])...)
	}
	return out
}

// placeholderOfDriverPod maps S-0 to P through their controller references (S-0 → S → P); S's
// name cannot be mapped back to P's name, which NamesFor may have shortened.
func (r *Placeholder) placeholderOfDriverPod(ctx context.Context, o client.Object) []reconcile.Request {
	ref := metav1.GetControllerOf(o)
	if ref == nil || ref.Kind != "StatefulSet" {
		return nil
	}
	var sts appsv1.StatefulSet
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: o.GetNamespace(), Name: ref.Name}, &sts); err != nil {
		return nil
	}
	owner := metav1.GetControllerOf(&sts)
	if owner == nil || owner.Kind != "Pod" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: owner.Name}}}
}
