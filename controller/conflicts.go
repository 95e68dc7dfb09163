package controller

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// retriedByWatch reports whether err is a write refused for a stale resourceVersion (an
// optimistic lock, a status update from the cache) on an object of a watched kind. Such an
// object changed after the cache's copy was read, and that change's own event brings the app
// back, read afresh; retrying at once, through the rate limiter, would mostly read the same stale
// copy again. A claim's conflict is not: driverset does not watch claims.
func retriedByWatch(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsConflict(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	if d == nil {
		return false
	}
	// The kind whose every change reaches the placeholder controller through its watches: pods
	// (placeholders, their driver pods). Not StatefulSets: only a change to what driverset decides
	// on reaches it (statefulSetChanged), and the write a conflict stumbled on may have been the
	// StatefulSet controller's status. (A conflict's Details.Kind holds the resource.)
	return schema.GroupResource{Group: d.Group, Resource: d.Kind} == schema.GroupResource{Resource: "pods"}
}

// watchRetries runs the placeholder reconciler for the controller: a conflict that the watch
// retries ends the reconcile without an error. When a node with many drivers is lost, many apps
// conflict at once (each one's cache behind its own last write); as errors, their retries would
// crowd the queue and the rate limiter's shared budget ahead of the work that recovers them.
type watchRetries struct{ reconcile.Reconciler }

func (w watchRetries) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := w.Reconciler.Reconcile(ctx, req)
	if retriedByWatch(err) {
		log.FromContext(ctx).V(1).Info("the cache was behind a change; its event brings this app back", "conflict", err.Error())
		return ctrl.Result{}, nil
	}
	return res, err
}
