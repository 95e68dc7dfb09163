package controller

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// SetupWithManager registers the placeholder reconciler: it runs for placeholder pods (from
// placeholders, the placeholder cache, see CacheOptions), for the StatefulSets and Services they
// own, and for the StatefulSets' driver pods. workers placeholders are reconciled at once (one
// app's slow step does not hold the others'); 0 means 1.
func (r *Placeholder) SetupWithManager(ctx context.Context, mgr ctrl.Manager, placeholders cache.Cache, workers int) error {
	// Driver pods by node, so that a node's change reaches the drivers on it. Reads list pods from
	// both caches (Pods), so both have the index.
	for _, c := range []cache.Cache{mgr.GetCache(), placeholders} {
		if err := c.IndexField(ctx, &corev1.Pod{}, indexNodeName, driverNode); err != nil {
			return err
		}
	}
	// StatefulSets by the placeholder that controls them: S is found by whose it is (namesOf).
	if err := mgr.GetCache().IndexField(ctx, &appsv1.StatefulSet{}, indexController, controllerUID); err != nil {
		return err
	}
	if err := r.watchHeartbeats(ctx, mgr); err != nil {
		return err
	}
	isPlaceholder := predicate.NewTypedPredicateFuncs(convert.IsPlaceholder)
	isDriverPod := predicate.NewPredicateFuncs(func(o client.Object) bool {
		l := o.GetLabels()
		return l[contract.LabelDriver] != "" && l[contract.LabelSparkRole] == contract.RoleDriver
	})
	// An executor's deletion may be the last stale one a new incarnation waits for.
	executorGone := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		DeleteFunc: func(e event.DeleteEvent) bool {
			l := e.Object.GetLabels()
			return l[contract.LabelDriver] != "" && l[contract.LabelSparkRole] == contract.RoleExecutor
		},
	}
	ownedByPod := handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &corev1.Pod{}, handler.OnlyControllerOwner())
	b := ctrl.NewControllerManagedBy(mgr)
	if sets, ok := r.ExecutorSets.(cache.Cache); ok {
		// A Spark executor StatefulSet's deletion, or an executor claim's, may be the last thing a
		// new incarnation waits for.
		b = b.WatchesRawSource(source.Kind(sets, convert.ExecutorSetObject(),
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, o *metav1.PartialObjectMetadata) []reconcile.Request {
				return r.placeholderOfExecutorSet(ctx, o)
			}), onlyDeletions(executorSetGone))).
			WatchesRawSource(source.Kind(sets, convert.ExecutorClaimObject(),
				handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, o *metav1.PartialObjectMetadata) []reconcile.Request {
					return r.placeholderOfDriverOwned(ctx, o)
				}), onlyDeletions(func(event.TypedDeleteEvent[*metav1.PartialObjectMetadata]) bool { return true })))
	}
	return b.
		Named("placeholder").
		WithOptions(crcontroller.Options{MaxConcurrentReconciles: max(workers, 1)}).
		WatchesRawSource(source.Kind(placeholders, &corev1.Pod{}, &handler.TypedEnqueueRequestForObject[*corev1.Pod]{}, isPlaceholder)).
		Watches(&appsv1.StatefulSet{}, ownedByPod, builder.WithPredicates(statefulSetChanged())).
		Watches(&corev1.Service{}, ownedByPod).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.placeholderOfDriverPod), builder.WithPredicates(isDriverPod)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.placeholderOfExecutor), builder.WithPredicates(executorGone)).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.placeholdersOnNode), builder.WithPredicates(nodeHealthChanged())).
		Complete(watchRetries{r})
}

// onlyDeletions passes the deletions gone passes, and no other event.
func onlyDeletions(gone func(event.TypedDeleteEvent[*metav1.PartialObjectMetadata]) bool) predicate.TypedPredicate[*metav1.PartialObjectMetadata] {
	return predicate.TypedFuncs[*metav1.PartialObjectMetadata]{DeleteFunc: gone,
		CreateFunc:  func(event.TypedCreateEvent[*metav1.PartialObjectMetadata]) bool { return false },
		UpdateFunc:  func(event.TypedUpdateEvent[*metav1.PartialObjectMetadata]) bool { return false },
		GenericFunc: func(event.TypedGenericEvent[*metav1.PartialObjectMetadata]) bool { return false }}
}

// statefulSetChanged passes the StatefulSet events the placeholder reconciler decides on: its
// creation and deletion, and a change to its spec (generation), labels, annotations or owner. Its
// status, the StatefulSet controller's account of S-0, which the reconciler watches itself, changes
// two or three times per app on a node loss; each would be a reconcile that finds nothing new,
// and on a node that held many drivers those delay the ones that matter.
func statefulSetChanged() predicate.Predicate {
	ownerChanged := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return !equality.Semantic.DeepEqual(e.ObjectOld.GetOwnerReferences(), e.ObjectNew.GetOwnerReferences())
	}}
	return predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{},
		predicate.AnnotationChangedPredicate{}, ownerChanged)
}

// nodeHealthChanged passes the Node events that the node-loss decision (assessNode) reads: a
// Node made or deleted, its Ready condition's status, its taints. A kubelet's status heartbeat
// changes none of them, and each would reconcile every driver on the node.
func nodeHealthChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		old, oldOK := e.ObjectOld.(*corev1.Node)
		now, nowOK := e.ObjectNew.(*corev1.Node)
		if !oldOK || !nowOK {
			return true
		}
		return readyStatus(old) != readyStatus(now) || !equality.Semantic.DeepEqual(old.Spec.Taints, now.Spec.Taints)
	}}
}

func readyStatus(n *corev1.Node) corev1.ConditionStatus {
	if c := nodeReady(n); c != nil {
		return c.Status
	}
	return ""
}

const indexNodeName = "spec.nodeName"

// driverNode indexes driverset's driver pods by the node they run on.
func driverNode(o client.Object) []string {
	p := o.(*corev1.Pod)
	if p.Spec.NodeName == "" || p.Labels[contract.LabelDriver] == "" {
		return nil
	}
	return []string{p.Spec.NodeName}
}

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
	ref := controllerOfKind(o, "StatefulSet")
	if ref == nil {
		return nil
	}
	return r.placeholderOfStatefulSet(ctx, o.GetNamespace(), ref.Name)
}

// controllerOfKind is o's controller reference when its controller is of kind (S-0's a
// StatefulSet, S's a Pod: the links from a driver pod to its placeholder), else nil.
func controllerOfKind(o metav1.Object, kind string) *metav1.OwnerReference {
	if ref := metav1.GetControllerOf(o); ref != nil && ref.Kind == kind {
		return ref
	}
	return nil
}

// placeholderOfExecutor maps an executor that driverset tied to a driver to that driver's
// placeholder, through the StatefulSet its label names (S → P).
func (r *Placeholder) placeholderOfExecutor(ctx context.Context, o client.Object) []reconcile.Request {
	return r.placeholderOfStatefulSet(ctx, o.GetNamespace(), o.GetLabels()[contract.LabelDriver])
}

// placeholderOfStatefulSet maps StatefulSet ns/name to the pod that controls it.
func (r *Placeholder) placeholderOfStatefulSet(ctx context.Context, ns, name string) []reconcile.Request {
	var sts appsv1.StatefulSet
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &sts); err != nil {
		return nil
	}
	owner := controllerOfKind(&sts, "Pod")
	if owner == nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: owner.Name}}}
}
