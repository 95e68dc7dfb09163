package controller

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func conflictOn(group, resource string) error {
	return apierrors.NewConflict(schema.GroupResource{Group: group, Resource: resource}, "x", errors.New("the object has been modified"))
}

func TestRetriedByWatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"a placeholder or driver pod changed since the cache's copy", conflictOn("", "pods"), true},
		// Its status changes (the StatefulSet controller's) bring no reconcile: retried as an error.
		{"a StatefulSet changed since the cache's copy", conflictOn("apps", "statefulsets"), false},
		{"wrapped, as the reconciler's steps return it", fmt.Errorf("restart: %w", conflictOn("", "pods")), true},
		{"a claim: not watched, so retried as an error", fmt.Errorf("keeping PersistentVolumeClaim c: %w", conflictOn("", "persistentvolumeclaims")), false},
		{"a Lease: not retried by the placeholder's watches", conflictOn("coordination.k8s.io", "leases"), false},
		{"another error", apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "x"), false},
		{"a plain error", errors.New("connection refused"), false},
		{"no error", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := retriedByWatch(tc.err); got != tc.want {
				t.Errorf("retriedByWatch(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

type reconcileReturning struct {
	res ctrl.Result
	err error
}

func (r reconcileReturning) Reconcile(context.Context, ctrl.Request) (ctrl.Result, error) {
	return r.res, r.err
}

func TestWatchRetries(t *testing.T) {
	later := ctrl.Result{RequeueAfter: time.Second}
	other := errors.New("connection refused")
	for _, tc := range []struct {
		name    string
		in      reconcileReturning
		wantRes ctrl.Result
		wantErr error
	}{
		{"a conflict on a pod ends without an error or a requeue", reconcileReturning{later, conflictOn("", "pods")}, ctrl.Result{}, nil},
		{"another error is returned as it is", reconcileReturning{ctrl.Result{}, other}, ctrl.Result{}, other},
		{"a result is kept", reconcileReturning{later, nil}, later, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r reconcile.Reconciler = watchRetries{tc.in}
			res, err := r.Reconcile(context.Background(), ctrl.Request{})
			if res != tc.wantRes || !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Errorf("Reconcile = %+v, %v; want %+v, %v", res, err, tc.wantRes, tc.wantErr)
			}
		})
	}
}
