package controller

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestReconcileLeavesAStatefulSetAtZeroAlone: once a finished app's StatefulSet is at 0, later
// looks at the placeholder (every resync, every event of its pods) do not patch it again: each
// would be a write to the apiserver for nothing.
func TestReconcileLeavesAStatefulSetAtZeroAlone(t *testing.T) {
	h := runningCluster(t, nil, nil)
	h.now = t0.Add(time.Hour)
	h.setDriverStatus(exitedStatus(0, h.now.Add(-time.Second)))
	h.reconcile()
	if s := h.statefulSet(); *s.Spec.Replicas != 0 {
		t.Fatalf("StatefulSet replicas = %d after success, want 0", *s.Spec.Replicas)
	}
	patches := 0
	h.r.Client = interceptor.NewClient(h.c.(client.WithWatch), interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, ok := obj.(*appsv1.StatefulSet); ok {
				patches++
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	h.reconcile()
	h.reconcile()
	if patches != 0 {
		t.Errorf("%d patches of a StatefulSet already at 0, want none", patches)
	}
}
