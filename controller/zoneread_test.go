package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/driverset/driverset/contract"
)

// TestZoneReadFailureEndsThePass: fencing may follow (fence-after 2m, the driver's node not Ready)
// and the cache's Node list fails. The zone was not read, so the pass ends with that error (and
// is retried) and writes nothing: a fence decided on a zone never read could be one the node
// lifecycle controller holds back. Once the list works, the real zone decides: every node of it
// lost is a disruption, and the driver pod is not force-deleted past fence-after.
func TestZoneReadFailureEndsThePass(t *testing.T) {
	h := runningCluster(t, map[string]string{contract.AnnotationFenceAfter: "2m"}, nil)
	lost := t0.Add(10 * time.Minute)
	h.setNode("node-b", corev1.ConditionTrue, t0)
	h.setNode("node-a", corev1.ConditionUnknown, lost, unreachableTaints()...)
	h.now = lost.Add(time.Minute)
	cached := h.r.Client
	listFails := errors.New("the cache's Node list failed")
	h.r.Client = interceptor.NewClient(h.c.(client.WithWatch), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*corev1.NodeList); ok {
				return listFails
			}
			return cached.List(ctx, list, opts...)
		},
		Get: func(ctx context.Context, _ client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			return cached.Get(ctx, key, obj, opts...)
		},
	})
	_, err := h.r.Reconcile(h.ctx, ctrl.Request{NamespacedName: h.p})
	if !errors.Is(err, listFails) {
		t.Errorf("Reconcile = %v, want the Node list's error", err)
	}
	if msg := h.placeholder().Status.Message; strings.Contains(msg, "zone") {
		t.Errorf("the placeholder tells of a zone that was never read: %q", msg)
	}
	if d := h.driver(); d == nil || d.DeletionTimestamp != nil {
		t.Error("the driver pod was deleted on a zone that was never read")
	}

	// The list works again, and the whole zone is down (node-b lost too): the disruption the
	// zone read exists for holds the fencing past fence-after.
	h.r.Client = cached
	h.setNode("node-b", corev1.ConditionUnknown, lost, unreachableTaints()...)
	h.now = lost.Add(5 * time.Minute)
	h.reconcile()
	if got := h.forcedDeletions(); len(got) != 0 {
		t.Errorf("force-deleted %v while every node of the zone is down", got)
	}
	if msg := h.placeholder().Status.Message; !strings.Contains(msg, "2 of 2 nodes in its zone") {
		t.Errorf("placeholder message %q, want the zone-wide disruption that holds the fencing", msg)
	}
}
