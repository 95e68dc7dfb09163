//go:build testbed

package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/driverset/driverset/contract"
)

// Issue 10, "A failed driver on a node that dies hangs": the driver fails and its node dies before
// its pod is gone. driverset deletes the pod to restart it, no kubelet confirms the deletion, and
// the recorded exit proves the process gone: driverset force-deletes that incarnation and the
// restart goes on elsewhere.
func TestFailedDriverOnADyingNodeIsRestarted(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	a := app(ns, "fail-then-die")
	s := submit(t, a)
	names := contract.NamesFor(s.plan.DriverPodName)
	d0 := runningDriver(t, ns, names, "")

	replaceNode(t, d0.Spec.NodeName)
	if err := bed.cluster.KillNode(ctx, d0.Spec.NodeName); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bed.cluster.ReviveNode(context.Background(), d0.Spec.NodeName) })
	exitDriver(t, d0, 1) // the kubelet's last report, just before it went

	d1 := runningDriverWithin(t, 2*time.Minute, ns, names, string(d0.UID))
	if d1.Spec.NodeName == d0.Spec.NodeName {
		t.Errorf("the new incarnation runs on the dead node %s", d1.Spec.NodeName)
	}
	if p := getPod(t, ns, s.plan.DriverPodName); p.Annotations[contract.AnnotationRestarts] != "1" {
		t.Errorf("restart count %q, want 1", p.Annotations[contract.AnnotationRestarts])
	}
	exitDriver(t, d1, 0)
	if res := s.wait(t, 60*time.Second); res.FinalPhase != corev1.PodSucceeded {
		t.Errorf("spark-submit's final phase %s, want Succeeded", res.FinalPhase)
	}
}
