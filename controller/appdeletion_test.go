package controller

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driverset/driverset/contract"
)

// deleteApp is the user's `kubectl delete pod <driver>` (or spark-submit --kill): a graceful delete
// of the placeholder.
func (h *cluster) deleteApp() {
	h.t.Helper()
	if err := h.c.Delete(h.ctx, h.placeholder()); err != nil {
		h.t.Fatal(err)
	}
}

// appGone reports whether the placeholder has been removed from the apiserver.
func (h *cluster) appGone() bool {
	h.t.Helper()
	var p corev1.Pod
	err := h.c.Get(h.ctx, h.p, &p)
	if err != nil && !apierrors.IsNotFound(err) {
		h.t.Fatal(err)
	}
	return apierrors.IsNotFound(err)
}

// driverPresent reports whether a pod named S-0 exists (Terminating or not).
func (h *cluster) driverPresent() bool {
	h.t.Helper()
	var d corev1.Pod
	err := h.c.Get(h.ctx, types.NamespacedName{Namespace: h.p.Namespace, Name: h.names.DriverPodName()}, &d)
	if err != nil && !apierrors.IsNotFound(err) {
		h.t.Fatal(err)
	}
	return err == nil
}

// The placeholder is made with driverset's finalizer, so that "the driver pod is gone" still means
// "the driver stopped": deleting an app and submitting it again (a stream's code upgrade) must not
// start the new driver on the same checkpoint while the old S-0 still stops, or still runs on a
// node that is only cut off.
func TestPlaceholderIsMadeWithTheFinalizer(t *testing.T) {
	h := newCluster(t, nil, nil)
	if !slices.Contains(h.placeholder().Finalizers, contract.FinalizerOutcome) {
		t.Errorf("placeholder finalizers %v, want %s", h.placeholder().Finalizers, contract.FinalizerOutcome)
	}
}

// A deleted app stops its driver (StatefulSet scaled to 0) and its placeholder stays, Terminating,
// until S-0 is gone: on a Ready node, until its kubelet confirms the stop.
func TestDeletedAppIsHeldUntilItsDriverStopped(t *testing.T) {
	h := runningCluster(t, nil, nil)
	h.deleteApp()
	h.reconcile()
	if r := h.statefulSet().Spec.Replicas; r == nil || *r != 0 {
		t.Errorf("StatefulSet replicas %v, want 0: a deleted app's driver is stopped", r)
	}
	if h.appGone() {
		t.Fatal("the placeholder is gone while its driver still runs")
	}
	// The StatefulSet controller deletes S-0; its kubelet has not confirmed yet.
	if err := h.c.Delete(h.ctx, h.driver()); err != nil {
		t.Fatal(err)
	}
	h.now = h.now.Add(time.Minute)
	h.reconcile()
	if h.appGone() {
		t.Fatal("the placeholder is gone while S-0 still terminates")
	}
	h.stopped(h.names.DriverPodName())
	h.reconcile()
	if h.driverPresent() {
		t.Fatal("S-0 kept after its kubelet confirmed the stop of a deleted app")
	}
	h.reconcile()
	if !h.appGone() {
		t.Errorf("the placeholder is kept after S-0 is gone: finalizers %v", h.placeholder().Finalizers)
	}
}

// On a node that is cut off, S-0 may still run: the deleted app is held until the node is proven
// down, also when the user force-deletes S-0 (the finalizer keeps it, as while the app lives).
func TestDeletedAppOnACutOffNodeIsHeldUntilProof(t *testing.T) {
	h := runningCluster(t, nil, nil)
	lost := t0.Add(10 * time.Minute)
	h.setNode("node-a", corev1.ConditionUnknown, lost, unreachableTaints()...)
	h.now = lost.Add(time.Minute)
	h.deleteApp()
	h.reconcile()
	if err := h.c.Delete(h.ctx, h.driver()); err != nil { // the StatefulSet controller's
		t.Fatal(err)
	}
	force := int64(0)
	if err := h.c.Delete(h.ctx, h.driver(), &client.DeleteOptions{GracePeriodSeconds: &force}); err != nil { // the user's --force
		t.Fatal(err)
	}
	for range 3 {
		h.now = h.now.Add(time.Minute)
		h.reconcile()
	}
	if !h.driverPresent() || h.appGone() {
		t.Fatalf("on a cut-off node: S-0 present %v, placeholder gone %v; want both kept until the node is proven down", h.driverPresent(), h.appGone())
	}
	h.setNode("node-a", corev1.ConditionUnknown, lost, append(unreachableTaints(),
		corev1.Taint{Key: TaintOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})...)
	h.reconcile()
	h.reconcile()
	if h.driverPresent() || !h.appGone() {
		t.Errorf("node proven down: S-0 present %v, placeholder gone %v; want both gone", h.driverPresent(), h.appGone())
	}
}

// A deleted app whose driver opted into fencing is fenced on a lost node as while it lived: the
// fence is the proof that nothing of it runs, so the app goes without an admin (real nodes:
// TestStreamDeletedAndResubmittedWhileItsNodeIsCutOff waited three minutes for its self-fencing
// stream, whose deleted placeholder nothing would ever let go).
func TestDeletedAppIsFencedAsWhileItLived(t *testing.T) {
	h := runningCluster(t, map[string]string{contract.AnnotationFenceAfter: "2m"}, nil)
	lost := t0.Add(10 * time.Minute)
	h.setNode("node-b", corev1.ConditionTrue, t0)
	h.setNode("node-a", corev1.ConditionUnknown, lost, unreachableTaints()...)
	h.now = lost.Add(time.Minute)
	h.deleteApp()
	h.reconcile()
	if err := h.c.Delete(h.ctx, h.driver()); err != nil { // the StatefulSet controller's
		t.Fatal(err)
	}
	h.reconcile()
	if !h.driverPresent() || h.appGone() {
		t.Fatalf("1 min into the loss (fence-after 2m): S-0 present %v, placeholder gone %v; want both kept", h.driverPresent(), h.appGone())
	}
	h.now = lost.Add(2*time.Minute + time.Second)
	h.reconcile()
	h.reconcile()
	if h.driverPresent() || !h.appGone() {
		t.Errorf("past fence-after: S-0 present %v, placeholder gone %v; want S-0 fenced and the app gone", h.driverPresent(), h.appGone())
	}
	if got := h.forcedDeletions(); len(got) != 1 {
		t.Errorf("forced deletions %v, want the one fence of S-0", got)
	}
}

// An app that has ended, or never got a driver pod, goes at once.
func TestDeletedAppWithoutADriverGoesAtOnce(t *testing.T) {
	h := newCluster(t, nil, nil)
	h.deleteApp()
	h.reconcile()
	if !h.appGone() {
		t.Errorf("a deleted app with no driver pod is kept: finalizers %v", h.placeholder().Finalizers)
	}
}

// The Outcomes reconciler watches every deleted pod that carries the finalizer: a deleted
// placeholder is not its to let go (it has no StatefulSet to follow back), but stopDeletedApp's.
func TestOutcomesLeavesADeletedPlaceholderAlone(t *testing.T) {
	h := runningCluster(t, nil, nil)
	h.deleteApp()
	o := &Outcomes{Client: cacheView{h.c}}
	if _, err := o.Reconcile(h.ctx, ctrl.Request{NamespacedName: h.p}); err != nil {
		t.Fatal(err)
	}
	if h.appGone() {
		t.Error("the Outcomes reconciler let a deleted placeholder go while its driver runs")
	}
}
