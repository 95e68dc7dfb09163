package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/driverset/driverset/seal"
)

// TestReconcileLeavesAnEndedUnsealedPodAlone: a pod driverset did not seal that has ended (a
// lookalike that ran to its end somewhere, or a leftover) gets no status written: its final
// status is its own.
func TestReconcileLeavesAnEndedUnsealedPodAlone(t *testing.T) {
	for _, phase := range []corev1.PodPhase{corev1.PodSucceeded, corev1.PodFailed} {
		t.Run(string(phase), func(t *testing.T) {
			h := newCluster(t, nil, nil)
			p := h.placeholder()
			delete(p.Annotations, seal.Annotation)
			if err := h.c.Update(h.ctx, p); err != nil {
				t.Fatal(err)
			}
			p.Status.Phase = phase
			if err := h.c.Status().Update(h.ctx, p); err != nil {
				t.Fatal(err)
			}
			before := h.placeholder()
			h.reconcile()
			if after := h.placeholder(); after.ResourceVersion != before.ResourceVersion {
				t.Errorf("an ended pod driverset did not seal was written: %s %q", after.Status.Phase, after.Status.Message)
			}
			if len(h.creates) != 0 {
				t.Errorf("created %v", h.creates)
			}
		})
	}
}
