package controller

import (
	"context"

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
//     and the executors the executor webhook tied to them;
//   - a placeholder cache: pods labelled contract.LabelPlaceholder=true.
//
// Both strip managedFields, which nothing in driverset reads.

// CacheOptions are the manager's cache: driverset's pods, StatefulSets and Services (labelled
// contract.LabelDriver), self-fencing drivers' heartbeat Leases (contract.LabelHeartbeat), and
// whole Nodes and LimitRanges.
func CacheOptions() cache.Options {
	ours := labels.NewSelector().Add(requirement(contract.LabelDriver, selection.Exists))
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:         {Label: ours},
			&appsv1.StatefulSet{}: {Label: ours},
			&corev1.Service{}:     {Label: ours},
			&coordinationv1.Lease{}: {
				Label: labels.NewSelector().Add(requirement(contract.LabelHeartbeat, selection.Exists)),
			},
		},
	}
}

// PlaceholderCacheOptions are the placeholder cache's: only placeholder pods, and nothing else is
// ever read from it.
func PlaceholderCacheOptions() cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Label: labels.SelectorFromSet(labels.Set{contract.LabelPlaceholder: "true"})},
		},
	}
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
