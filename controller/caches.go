package controller

import (
	"context"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driverset/driverset/contract"
)

// driverset's memory must not grow with Spark apps that did not opt in (issue 11), so its
// informers hold only the pods it acts on. A label selector cannot say "this label or that one",
// so the pods come from two caches:
//   - the manager's cache: pods labelled contract.LabelDriver, i.e. the drivers driverset runs (S-0)
//     and their executors (labelled at birth by S-0's driver, convert.DriverConf, or by the
//     executor webhook for an S-0 of an earlier version);
//   - a placeholder cache: pods labelled contract.LabelPlaceholder=true.
//
// Both strip managedFields, which nothing in driverset reads, and every kind a tenant can label
// as driverset's is kept bounded (cachebound.go).

// CacheOptions are the manager's cache: driverset's pods, StatefulSets and Services (labelled
// contract.LabelDriver), self-fencing drivers' heartbeat Leases (contract.LabelHeartbeat), and
// whole Nodes and LimitRanges.
func CacheOptions() cache.Options {
	ours := labels.NewSelector().Add(requirement(contract.LabelDriver, selection.Exists))
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:         {Label: ours, Transform: driverPodTransform},
			&appsv1.StatefulSet{}: {Label: ours, Transform: statefulSetTransform},
			&corev1.Service{}:     {Label: ours, Transform: serviceTransform},
			&coordinationv1.Lease{}: {
				Label:     labels.NewSelector().Add(requirement(contract.LabelHeartbeat, selection.Exists)),
				Transform: leaseTransform,
			},
		},
	}
}

// statefulSetTransform is how a StatefulSet is kept in the cache: of its metadata driverset's
// labels and annotations (keepOurs; without managedFields), of its spec only the replicas, and no
// status; past cacheBudget, a stub (boundedMeta). The pod and claim templates, the copy of the
// driver's pod spec, are most of its size (a third of what each app costs the cache), and a tenant
// can label a StatefulSet of its own as driverset's. Nothing reads the rest from the cache: the
// controller reads a StatefulSet's identity, owner, driver label, admitted settings, generation
// and replicas (TestCachedKindsKeepWhatIsRead), and changes only replicas, by a patch of the
// difference (never an update, which would write the emptied spec back).
func statefulSetTransform(obj any) (any, error) {
	obj, err := cache.TransformStripManagedFields()(obj)
	if s, ok := obj.(*appsv1.StatefulSet); ok {
		s.Spec = appsv1.StatefulSetSpec{Replicas: s.Spec.Replicas}
		s.Status = appsv1.StatefulSetStatus{}
		keepOurs(&s.ObjectMeta)
		boundedMeta(&s.ObjectMeta)
	}
	return obj, err
}

// serviceTransform is how a headless Service H is kept in the cache: its metadata only, cut as a
// StatefulSet's is (keepOurs, boundedMeta). driverset reads no more of it than whose it is; it is
// never written back.
func serviceTransform(obj any) (any, error) {
	obj, err := cache.TransformStripManagedFields()(obj)
	if s, ok := obj.(*corev1.Service); ok {
		s.Spec, s.Status = corev1.ServiceSpec{}, corev1.ServiceStatus{}
		keepOurs(&s.ObjectMeta)
		boundedMeta(&s.ObjectMeta)
	}
	return obj, err
}

// leaseTransform is how a heartbeat Lease is kept in the cache: as its stub (stubMeta), always.
// Silence is counted from changes of its resourceVersion (Heartbeats), and nothing else of it is
// read from the cache: not its holder, renewal time or owners, which a tenant's Lease (any user
// who may write Leases can label one as a heartbeat) may make as large as the apiserver allows.
// It is never written: driverset only reads Leases.
func leaseTransform(obj any) (any, error) {
	if l, ok := obj.(*coordinationv1.Lease); ok {
		keepOurs(&l.ObjectMeta)
		*l = coordinationv1.Lease{TypeMeta: l.TypeMeta, ObjectMeta: stubMeta(&l.ObjectMeta)}
	}
	return obj, nil
}

// driverPodTransform is how a pod of the manager's cache (an S-0, an executor tied to one) is kept:
// its metadata (without managedFields) and status whole, and of its spec only what driverset reads
// from the cache: the node, the tolerations (against the out-of-service taint), the scheduling
// gates, and each container's name and command (wrap's heartbeat flags). The rest (env, args,
// volumes, resources), most of a Spark pod's size, is read by no one here. Changes to such a pod
// are patches of the difference (gates, finalizers), never updates that would write the emptied
// spec back; the webhooks take the pod being admitted from the request, not from the cache.
//
// Of its metadata it keeps driverset's labels and annotations only, and a pod still over
// cacheBudget is kept as a stub (bounded): a tenant can label any pod as driverset's.
func driverPodTransform(obj any) (any, error) {
	obj, err := cache.TransformStripManagedFields()(obj)
	if p, ok := obj.(*corev1.Pod); ok {
		spec := corev1.PodSpec{NodeName: p.Spec.NodeName, Tolerations: p.Spec.Tolerations, SchedulingGates: p.Spec.SchedulingGates}
		for _, c := range p.Spec.Containers {
			spec.Containers = append(spec.Containers, corev1.Container{Name: c.Name, Command: c.Command})
		}
		p.Spec = spec
		keepOurs(&p.ObjectMeta)
		obj = bounded(p)
	}
	return obj, err
}

// PlaceholderCacheOptions are the placeholder cache's: only placeholder pods, and nothing else is
// ever read from it.
func PlaceholderCacheOptions() cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {
				Label:     labels.SelectorFromSet(labels.Set{contract.LabelPlaceholder: "true"}),
				Transform: placeholderTransform,
			},
		},
	}
}

// placeholderTransform is how a placeholder is kept in its cache: its status whole, of its
// metadata driverset's labels and annotations (keepOurs; without managedFields), and of its spec
// what a reconcile reads: each container's name and first arg (which one is the driver's), the
// volumes of claims (kept out of Spark's clean stop), the scheduling gates and the node; a pod
// still over cacheBudget is kept as a stub (bounded). The rest of a Spark driver's spec (env, volumes, resources,
// security contexts), most of a placeholder's size and so of what each app costs the cache, is read
// only to build the Service and the StatefulSet, once, from the placeholder as the apiserver has
// it (ensure). A placeholder's status is written by a patch of the difference, never an update
// that would send the emptied spec.
func placeholderTransform(obj any) (any, error) {
	obj, err := cache.TransformStripManagedFields()(obj)
	if p, ok := obj.(*corev1.Pod); ok {
		spec := corev1.PodSpec{NodeName: p.Spec.NodeName, SchedulingGates: p.Spec.SchedulingGates}
		for _, c := range p.Spec.Containers {
			// The first arg says whether the container is the driver's (convert.IsDriverEntry);
			// the rest is the application's, as long as its author likes. Copied, so that the
			// rest is not kept alive by the slice's array.
			spec.Containers = append(spec.Containers, corev1.Container{Name: c.Name, Args: slices.Clone(c.Args[:min(len(c.Args), 1)])})
		}
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				spec.Volumes = append(spec.Volumes, v)
			}
		}
		p.Spec = spec
		keepOurs(&p.ObjectMeta)
		obj = bounded(p)
	}
	return obj, err
}

func requirement(key string, op selection.Operator, values ...string) labels.Requirement {
	r, err := labels.NewRequirement(key, op, values)
	if err != nil {
		panic(err) // a constant key and operator: a programming error
	}
	return *r
}

// PlaceholderCache is the placeholder cache as a manager runnable: GetCache puts it among the
// manager's caches, which start (and sync) before the webhook server and the controller, on every
// replica.
type PlaceholderCache struct{ cache.Cache }

// GetCache returns the cache itself.
func (c PlaceholderCache) GetCache() cache.Cache { return c.Cache }

// Pods reads from the manager's cache and the placeholder cache as one: a pod is looked up in the
// first, then in the second; a pod list is the two lists together. Every other kind is the
// manager's cache's alone.
type Pods struct {
	Main         client.Reader
	Placeholders client.Reader
}

var _ client.Reader = Pods{}

// Get implements client.Reader.
func (u Pods) Get(ctx context.Context, key types.NamespacedName, obj client.Object, opts ...client.GetOption) error {
	err := u.Main.Get(ctx, key, obj, opts...)
	if _, pod := obj.(*corev1.Pod); !pod || !apierrors.IsNotFound(err) {
		return err
	}
	return u.Placeholders.Get(ctx, key, obj, opts...)
}

// List implements client.Reader.
func (u Pods) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	pods, ok := list.(*corev1.PodList)
	if !ok {
		return u.Main.List(ctx, list, opts...)
	}
	if err := u.Main.List(ctx, pods, opts...); err != nil {
		return err
	}
	var more corev1.PodList
	if err := u.Placeholders.List(ctx, &more, opts...); err != nil {
		return err
	}
	pods.Items = append(pods.Items, more.Items...)
	return nil
}
