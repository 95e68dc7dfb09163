package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/seal"
)

// testSeal is the webhook's sealer in the controller's tests: the placeholders of newCluster are
// sealed with it at t0, their creation.
func testSeal() seal.Sealer {
	return seal.Sealer{Key: []byte(strings.Repeat("k", seal.MinKeyLen)), Now: func() time.Time { return t0 }}
}

// TestReconcileBuildsOnlyFromSealedPlaceholders: the controller makes the driver's Service and
// StatefulSet only from a placeholder that driverset's webhook sealed at its creation, unchanged
// since; anything else gets nothing built, and says why on the pod and in an Event.
func TestReconcileBuildsOnlyFromSealedPlaceholders(t *testing.T) {
	gpu := `{"spark-kubernetes-driver":{"limits":{"nvidia.com/gpu":"8"},"requests":{"nvidia.com/gpu":"8"}}}`
	tests := []struct {
		name   string
		edit   func(p *corev1.Pod)
		reason string // "" means built
	}{
		{name: "sealed by the webhook at its creation"},
		{name: "shaped by hand: no seal", edit: func(p *corev1.Pod) { delete(p.Annotations, seal.Annotation) },
			reason: "has no seal"},
		{name: "a GPU added to the recorded resources", edit: func(p *corev1.Pod) { p.Annotations[contract.AnnotationResources] = gpu },
			reason: "does not match"},
		{name: "sealed with another key", edit: func(p *corev1.Pod) {
			other := seal.Sealer{Key: []byte(strings.Repeat("o", seal.MinKeyLen)), Now: func() time.Time { return t0 }}
			if err := other.Sign(p, "alice"); err != nil {
				panic(err)
			}
		}, reason: "does not match"},
		{name: "a seal replayed onto a later pod of the same name", edit: func(p *corev1.Pod) {
			p.CreationTimestamp = metav1.NewTime(t0.Add(time.Hour))
		}, reason: "belongs to another pod"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newCluster(t, nil, nil)
			if tc.edit != nil {
				p := h.placeholder()
				tc.edit(p)
				if err := h.c.Update(h.ctx, p); err != nil {
					t.Fatal(err)
				}
			}
			h.reconcile()
			p := h.placeholder()
			if tc.reason == "" {
				if len(h.creates) != 2 {
					t.Fatalf("created %v, want the Service and the StatefulSet", h.creates)
				}
				return
			}
			if len(h.creates) != 0 {
				t.Errorf("created %v from a placeholder driverset did not make", h.creates)
			}
			if !strings.Contains(p.Status.Message, tc.reason) {
				t.Errorf("status message %q, want one saying %q", p.Status.Message, tc.reason)
			}
			h.expectEvents([]string{"Warning " + ReasonFailedCreate}, map[string][]string{ReasonFailedCreate: {tc.reason}})
		})
	}
}

// A placeholder's annotation edited after its StatefulSet was built changes nothing that runs; if
// the tenant then deletes the StatefulSet, hoping for one built from the edit, none is built.
func TestEditedAfterBuildNeverRebuilds(t *testing.T) {
	h := newCluster(t, nil, nil)
	h.reconcile()
	sts := h.statefulSet()
	p := h.placeholder()
	p.Annotations[contract.AnnotationResources] = `{"spark-kubernetes-driver":{"limits":{"nvidia.com/gpu":"8"}}}`
	if err := h.c.Update(h.ctx, p); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	if got := h.statefulSet(); got.UID != sts.UID {
		t.Fatalf("the StatefulSet was replaced")
	}
	if err := h.c.Delete(h.ctx, sts); err != nil {
		t.Fatal(err)
	}
	h.creates = nil
	h.reconcile()
	if len(h.creates) != 0 {
		t.Fatalf("created %v from an edited placeholder", h.creates)
	}
	if msg := h.placeholder().Status.Message; !strings.Contains(msg, "does not match") {
		t.Fatalf("status message %q, want the reason", msg)
	}
}

// TestSealIsVerifiedOnWhatIsBuilt (issue 35): the seal is checked on the placeholder from the
// cache, and the StatefulSet built from the placeholder read live after it. A tenant's edit of the
// recorded resources between the two reads (a GPU) must not be built: the seal is verified again
// on the object the StatefulSet is built from.
func TestSealIsVerifiedOnWhatIsBuilt(t *testing.T) {
	h := newCluster(t, nil, nil)
	live := h.r.APIReader
	h.r.APIReader = interceptor.NewClient(h.c.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := live.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			if p, ok := obj.(*corev1.Pod); ok && key == h.p {
				p.Annotations[contract.AnnotationResources] = `{"spark-kubernetes-driver":{"limits":{"nvidia.com/gpu":"8"},"requests":{"nvidia.com/gpu":"8"}}}`
			}
			return nil
		},
	})
	h.reconcile()
	for _, c := range h.created {
		if sts, ok := c.(*appsv1.StatefulSet); ok {
			t.Fatalf("built StatefulSet %s from a placeholder edited after its seal was checked: resources %v",
				sts.Name, sts.Spec.Template.Spec.Containers[0].Resources)
		}
	}
	if msg := h.placeholder().Status.Message; !strings.Contains(msg, "does not match") {
		t.Errorf("status message %q, want the seal's reason", msg)
	}
}
