package controller

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/wrap"
)

// shutdownStatus: the kubelet stopped the driver for its node's graceful shutdown at `at`. wrap
// forwarded the SIGTERM and recorded the JVM's 143; the pod is Failed with the kubelet's reason
// and DisruptionTarget condition, and not deleted (k8s v1.37 pkg/kubelet/nodeshutdown).
func shutdownStatus(started, at time.Time) corev1.PodStatus {
	st := runningStatus(started)
	st.Phase, st.Reason, st.Message = corev1.PodFailed, "Terminated", "Pod was terminated in response to imminent node shutdown."
	for i := range st.Conditions {
		if st.Conditions[i].Type != corev1.PodScheduled {
			st.Conditions[i].Status, st.Conditions[i].LastTransitionTime = corev1.ConditionFalse, metav1.NewTime(at)
		}
	}
	st.Conditions = append(st.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: corev1.PodReasonTerminationByKubelet, LastTransitionTime: metav1.NewTime(at)})
	cs := &st.ContainerStatuses[0]
	cs.Ready = false
	cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 143, Reason: "Error", Message: wrap.TerminationMessage(143, "killed by signal 15"),
		StartedAt: metav1.NewTime(started), FinishedAt: metav1.NewTime(at.Add(2 * time.Second)),
	}}
	return st
}

// TestReconcileKubeletTerminationIsARecovery: a driver that the kubelet stopped for its node's
// shutdown is not a process failure. With max-restarts 0 the app goes on: nothing is counted,
// driverset leaves the Failed pod to the StatefulSet controller (which replaces a terminal pod
// itself), records the loss as a node shutdown and measures the recovery when the new incarnation
// runs.
func TestReconcileKubeletTerminationIsARecovery(t *testing.T) {
	reg, m := newMetrics(t)
	h := runningCluster(t, map[string]string{contract.AnnotationMaxRestarts: "0"}, m)
	first := h.driver()
	shutdownAt := t0.Add(10 * time.Minute)
	// The kubelet reports a terminal phase only once no container can run: first the driver is
	// stopped while the pod still says Running, then the pod is Failed. Reconciled in between,
	// twice, a loss must stay a loss (a pod that "still runs" would clear it).
	terminating := shutdownStatus(t0.Add(30*time.Second), shutdownAt)
	terminating.Phase, terminating.Reason, terminating.Message = corev1.PodRunning, "", ""
	h.setDriverStatus(terminating)
	h.now = shutdownAt.Add(3 * time.Second)
	h.reconcile()
	h.reconcile()
	if rec := lostOf(h.placeholder()); rec == nil || rec.Cause != CauseNodeShutdown {
		t.Errorf("loss record %+v while the kubelet stops the driver, want cause %s", rec, CauseNodeShutdown)
	}
	h.setDriverStatus(shutdownStatus(t0.Add(30*time.Second), shutdownAt))
	h.reconcile()

	p := h.placeholder()
	if n := p.Annotations[contract.AnnotationRestarts]; n != "" {
		t.Errorf("restarts = %q after a node shutdown, want none counted", n)
	}
	if rec := lostOf(p); rec == nil || rec.Cause != CauseNodeShutdown || rec.Pod != first.UID || !rec.Since.Equal(shutdownAt) {
		t.Errorf("loss record %+v, want cause %s for pod %s since %v", rec, CauseNodeShutdown, first.UID, shutdownAt)
	}
	if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		t.Errorf("placeholder is %s after a node shutdown: %s", p.Status.Phase, p.Status.Message)
	}
	if s := h.statefulSet(); *s.Spec.Replicas != 1 {
		t.Errorf("StatefulSet replicas = %d, want 1", *s.Spec.Replicas)
	}
	if len(h.deletes) != 0 {
		t.Errorf("driverset deleted %+v; a terminal pod is the StatefulSet controller's to replace", h.deletes)
	}
	h.expectEvents(nil, nil)

	// The StatefulSet controller deletes the Failed pod (at once: it is terminal) and makes the
	// next incarnation, which runs on node-b.
	if err := h.c.Delete(h.ctx, h.driver(), client.Preconditions{UID: &first.UID}); err != nil {
		t.Fatal(err)
	}
	// driverset's finalizer holds it until driverset has looked: a stop from outside leaves no
	// exit of the driver's own to read, so it lets go at once.
	if d := h.driver(); d == nil || d.DeletionTimestamp == nil {
		t.Fatalf("the deleted terminal pod is not held for driverset: %+v", d)
	}
	h.reconcile()
	if h.driver() != nil {
		t.Fatal("the terminal pod was not let go")
	}
	h.setNode("node-b", corev1.ConditionTrue, t0)
	h.startIncarnation("node-b")
	h.setDriverStatus(runningStatus(shutdownAt.Add(20 * time.Second)))
	h.now = shutdownAt.Add(25 * time.Second)
	h.reconcile()
	h.expectEvents([]string{"Normal Recovered"}, map[string][]string{"Recovered": {"node-b", "20.0s", CauseNodeShutdown}})
	p = h.placeholder()
	checkStatus(t, p, corev1.PodRunning, "running", true, "node-b")
	if rec := lostOf(p); rec != nil {
		t.Errorf("loss record %+v kept after the recovery", rec)
	}
	if count, _ := histogram(t, reg, "driverset_driver_recovery_seconds", CauseNodeShutdown); count != 1 {
		t.Errorf("recoveries measured for %s = %d, want 1", CauseNodeShutdown, count)
	}
	if got := counterValue(t, reg, "driverset_driver_restarts_total"); got != 0 {
		t.Errorf("driverset_driver_restarts_total = %v, want 0", got)
	}
}

// TestReconcileNodeShutdownSeenNotReadyFirst: on a graceful shutdown the kubelet marks its node
// not Ready as the shutdown begins, often before it reports why it stopped the driver. The loss
// first looks like a node lost; once the kubelet reports the pod Failed for the shutdown, its word
// wins: the loss is a node shutdown (nothing runs there, nothing to fence or wait out), and the
// recovery is measured as one.
func TestReconcileNodeShutdownSeenNotReadyFirst(t *testing.T) {
	reg, m := newMetrics(t)
	h := runningCluster(t, nil, m)
	first := h.driver()
	shutdownAt := t0.Add(10 * time.Minute)
	h.setNode("node-a", corev1.ConditionFalse, shutdownAt)
	h.now = shutdownAt.Add(time.Second)
	h.reconcile()
	if rec := lostOf(h.placeholder()); rec == nil || rec.Cause != CauseNodeLost {
		t.Fatalf("loss record %+v on a node not Ready, want cause %s", rec, CauseNodeLost)
	}
	h.setDriverStatus(shutdownStatus(t0.Add(30*time.Second), shutdownAt))
	h.expectEvents([]string{"Warning NodeLost"}, nil)
	h.now = shutdownAt.Add(3 * time.Second)
	h.reconcile()
	if rec := lostOf(h.placeholder()); rec == nil || rec.Cause != CauseNodeShutdown || rec.Pod != first.UID || !rec.Since.Equal(shutdownAt) {
		t.Errorf("loss record %+v once the kubelet reported the shutdown, want cause %s for pod %s since %v", rec, CauseNodeShutdown, first.UID, shutdownAt)
	}
	if len(h.deletes) != 0 {
		t.Errorf("driverset deleted %+v; a terminal pod is the StatefulSet controller's to replace", h.deletes)
	}
	if msg := h.placeholder().Status.Message; strings.Contains(msg, "confirmed down") {
		t.Errorf("placeholder says %q of a driver its kubelet stopped", msg)
	}

	h.expectEvents(nil, nil)
	if err := h.c.Delete(h.ctx, h.driver(), client.Preconditions{UID: &first.UID}); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	h.expectEvents(nil, nil)
	h.setNode("node-b", corev1.ConditionTrue, t0)
	h.startIncarnation("node-b")
	h.setDriverStatus(runningStatus(shutdownAt.Add(20 * time.Second)))
	h.now = shutdownAt.Add(25 * time.Second)
	h.reconcile()
	h.expectEvents([]string{"Normal Recovered"}, map[string][]string{"Recovered": {"node-b", CauseNodeShutdown}})
	for cause, want := range map[string]uint64{CauseNodeShutdown: 1, CauseNodeLost: 0} {
		if count, _ := histogram(t, reg, "driverset_driver_recovery_seconds", cause); count != want {
			t.Errorf("recoveries measured for %s = %d, want %d", cause, count, want)
		}
	}
}

// TestReconcileLossRecordedDriverGone: a loss is recorded and the driver pod is gone (force-deleted,
// the next one not made yet). The pass keeps the record for the recovery to come.
func TestReconcileLossRecordedDriverGone(t *testing.T) {
	h := runningCluster(t, nil, nil)
	first := h.driver()
	lostAt := t0.Add(10 * time.Minute)
	h.setNode("node-a", corev1.ConditionUnknown, lostAt)
	h.now = lostAt.Add(time.Second)
	h.reconcile()
	if rec := lostOf(h.placeholder()); rec == nil || rec.Pod != first.UID {
		t.Fatalf("loss record %+v, want one for %s", rec, first.UID)
	}
	// An admin force-deletes it and removes driverset's finalizer by hand (driverset alone holds a
	// forced delete on a node that is only unreachable: TestForcedDeleteOfACutOffDriverIsHeld).
	if err := h.c.Delete(h.ctx, h.driver(), client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	h.releaseOutcome()
	if d := h.driver(); d != nil {
		controllerutil.RemoveFinalizer(d, contract.FinalizerOutcome)
		if err := h.c.Update(h.ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if h.driver() != nil {
		t.Fatal("the force-deleted pod is still there")
	}
	h.reconcile()
	if rec := lostOf(h.placeholder()); rec == nil || rec.Pod != first.UID || rec.Cause != CauseNodeLost {
		t.Errorf("loss record %+v once the pod is gone, want the one for %s kept", rec, first.UID)
	}
}
