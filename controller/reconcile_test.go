package controller

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// checkStatus checks the placeholder's phase, its driver container's state ("running", "waiting",
// "terminated"), readiness, and that its message contains each of msg.
func checkStatus(t *testing.T, p *corev1.Pod, phase corev1.PodPhase, state string, ready bool, msg ...string) {
	t.Helper()
	if p.Status.Phase != phase {
		t.Errorf("placeholder phase = %s, want %s (message %q)", p.Status.Phase, phase, p.Status.Message)
	}
	cs := containerStatus(p.Status, contract.DriverContainerName)
	if cs == nil {
		t.Fatalf("placeholder has no status for container %s", contract.DriverContainerName)
	}
	if s := stateName(cs.State); s != state {
		t.Errorf("placeholder container state = %s (%+v), want %s", s, cs.State, state)
	}
	if c := findCondition(p.Status, corev1.PodReady); cs.Ready != ready || c == nil || c.Status != boolCondition(ready) {
		t.Errorf("placeholder ready = %v (condition %+v), want %v", cs.Ready, c, ready)
	}
	checkNeverScheduled(t, p.Status)
	for _, m := range msg {
		if !strings.Contains(p.Status.Message, m) {
			t.Errorf("placeholder message %q does not contain %q", p.Status.Message, m)
		}
	}
}

func ownedByPlaceholder(t *testing.T, what string, refs []metav1.OwnerReference, p *corev1.Pod) {
	t.Helper()
	if len(refs) != 1 || refs[0].Kind != "Pod" || refs[0].APIVersion != "v1" || refs[0].Name != p.Name ||
		refs[0].UID != p.UID || refs[0].Controller == nil || !*refs[0].Controller {
		t.Errorf("%s ownerReferences = %+v, want one controller reference to pod %s (%s)", what, refs, p.Name, p.UID)
	}
}

// runningCluster is a cluster whose driver runs in S-0 on the Ready node-a since t0+30s, every event so
// far checked.
func runningCluster(t *testing.T, annotations map[string]string, metrics *Metrics) *cluster {
	t.Helper()
	h := newCluster(t, annotations, metrics)
	h.reconcile()
	h.setNode("node-a", corev1.ConditionTrue, t0)
	h.startIncarnation("node-a")
	h.setDriverStatus(runningStatus(t0.Add(30 * time.Second)))
	h.now = t0.Add(time.Minute)
	h.reconcile()
	h.expectEvents([]string{"Normal Converted", "Normal DriverRunning"}, nil)
	checkStatus(t, h.placeholder(), corev1.PodRunning, "running", true)
	return h
}

func TestReconcileConvertsThePlaceholder(t *testing.T) {
	h := newCluster(t, nil, nil)
	res := h.reconcile()
	p := h.placeholder()

	var svc corev1.Service
	if err := h.c.Get(h.ctx, types.NamespacedName{Namespace: p.Namespace, Name: h.names.Service}, &svc); err != nil {
		t.Fatalf("headless Service: %v", err)
	}
	ownedByPlaceholder(t, "Service", svc.OwnerReferences, p)
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("Service clusterIP = %q, want None", svc.Spec.ClusterIP)
	}
	s := h.statefulSet()
	ownedByPlaceholder(t, "StatefulSet", s.OwnerReferences, p)
	if s.Spec.Replicas == nil || *s.Spec.Replicas != 1 {
		t.Errorf("StatefulSet replicas = %v, want 1", s.Spec.Replicas)
	}
	if s.Spec.ServiceName != h.names.Service {
		t.Errorf("StatefulSet serviceName = %q, want %q", s.Spec.ServiceName, h.names.Service)
	}
	h.expectEvents([]string{"Normal Converted"}, map[string][]string{"Converted": {h.names.StatefulSet, h.names.Service, h.names.DriverPodName()}})
	checkStatus(t, p, corev1.PodPending, "waiting", false, "waiting for the StatefulSet to create the driver pod")
	if res.RequeueAfter != missingDriverGrace {
		// Nothing is watched that says why S-0 does not come (the StatefulSet's Events): look again.
		t.Errorf("RequeueAfter = %s while the driver pod is missing, want %s", res.RequeueAfter, missingDriverGrace)
	}
	if len(p.Spec.SchedulingGates) != 1 || p.Spec.SchedulingGates[0].Name != contract.GatePlaceholder {
		t.Errorf("placeholder gates = %+v, want only %s", p.Spec.SchedulingGates, contract.GatePlaceholder)
	}

	// Again: create-or-get finds everything, nothing is written or announced twice.
	h.reconcile()
	h.expectEvents(nil, nil)
	if again := h.statefulSet(); again.ResourceVersion != s.ResourceVersion || again.UID != s.UID {
		t.Errorf("StatefulSet rewritten by an idempotent reconcile")
	}
	if again := h.placeholder(); again.ResourceVersion != p.ResourceVersion {
		t.Errorf("placeholder rewritten by an idempotent reconcile: %q", again.Status.Message)
	}
}

func TestReconcileWaitsWhileTheNameIsTaken(t *testing.T) {
	h := newCluster(t, nil, nil)
	// An S of the same name owned by an earlier P of the same name, which the garbage collector has
	// not removed yet.
	stale, err := convert.StatefulSet(h.placeholder(), h.r.Convert)
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	earlier := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: h.p.Name, UID: "earlier-placeholder-uid", Controller: &yes}
	stale.OwnerReferences = []metav1.OwnerReference{earlier}
	if err := h.c.Create(h.ctx, stale); err != nil {
		t.Fatal(err)
	}
	res := h.reconcile()
	h.expectEvents([]string{"Warning NameTaken"}, map[string][]string{"NameTaken": {h.names.StatefulSet}})
	if res.RequeueAfter <= 0 {
		t.Error("no requeue while the StatefulSet's name is taken")
	}
	if got := h.statefulSet(); len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != earlier.UID {
		t.Errorf("the earlier owner's StatefulSet was changed: %+v", got.OwnerReferences)
	}
	if p := h.placeholder(); p.Status.Phase != corev1.PodPending {
		t.Errorf("placeholder phase = %s while it waits for the name", p.Status.Phase)
	}
}

// A Service of H's name that someone else made is never used: the driver's stable name would
// point wherever that Service says. P waits, and no StatefulSet is made.
func TestReconcileWaitsWhileTheServiceNameIsTaken(t *testing.T) {
	h := newCluster(t, nil, nil)
	other := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: h.p.Namespace, Name: h.names.Service}}
	if err := h.c.Create(h.ctx, other); err != nil {
		t.Fatal(err)
	}
	res := h.reconcile()
	h.expectEvents([]string{"Warning NameTaken"}, map[string][]string{"NameTaken": {h.names.Service}})
	if res.RequeueAfter <= 0 {
		t.Error("no requeue while the Service's name is taken")
	}
	var s appsv1.StatefulSet
	if err := h.c.Get(h.ctx, types.NamespacedName{Namespace: h.p.Namespace, Name: h.names.StatefulSet}, &s); !apierrors.IsNotFound(err) {
		t.Errorf("a StatefulSet was made behind someone else's Service (get: %v)", err)
	}
}

func TestReconcileMirrorsTheRunningDriver(t *testing.T) {
	h := newCluster(t, nil, nil)
	h.reconcile()
	h.expectEvents([]string{"Normal Converted"}, nil)
	h.setNode("node-a", corev1.ConditionTrue, t0)

	h.startIncarnation("node-a")
	h.setDriverStatus(pendingStatus())
	h.reconcile()
	h.expectEvents(nil, nil)
	checkStatus(t, h.placeholder(), corev1.PodPending, "waiting", false, h.p.Namespace+"/"+h.names.DriverPodName(), "node-a")

	h.setDriverStatus(runningStatus(t0.Add(30 * time.Second)))
	h.reconcile()
	h.expectEvents([]string{"Normal DriverRunning"}, map[string][]string{"DriverRunning": {h.names.DriverPodName(), "node-a"}})
	p := h.placeholder()
	checkStatus(t, p, corev1.PodRunning, "running", true, "the driver runs in pod "+h.p.Namespace+"/"+h.names.DriverPodName()+" on node node-a")
	if p.Status.StartTime == nil {
		t.Error("a Running placeholder has no startTime")
	}

	// Nothing changed: no write, no event.
	h.reconcile()
	h.expectEvents(nil, nil)
	if again := h.placeholder(); again.ResourceVersion != p.ResourceVersion {
		t.Errorf("placeholder rewritten although nothing changed")
	}
}

func TestReconcileWaitsForTheBackoff(t *testing.T) {
	h := runningCluster(t, nil, nil)
	first := h.driver()
	h.now = t0.Add(10 * time.Minute)
	h.setDriverStatus(exitedStatus(1, h.now.Add(-4*time.Second)))

	res := h.reconcile()
	if res.RequeueAfter != 6*time.Second {
		t.Errorf("RequeueAfter = %s, want the 6s left of the 10s backoff", res.RequeueAfter)
	}
	if d := h.driver(); d == nil || d.UID != first.UID || d.DeletionTimestamp != nil {
		t.Error("the driver pod was deleted before its backoff elapsed")
	}
	p := h.placeholder()
	if _, counted := p.Annotations[contract.AnnotationRestarts]; counted {
		t.Errorf("restart counted before it was made: %v", p.Annotations)
	}
	checkStatus(t, p, corev1.PodRunning, "waiting", false, "exited with code 1", "restarting (restart 1)")
	if last := containerStatus(p.Status, contract.DriverContainerName).LastTerminationState.Terminated; last == nil || last.ExitCode != 1 {
		t.Errorf("placeholder lastState.terminated = %+v, want exit code 1", last)
	}
	// The driver stopped running: no event says it runs (the Restarting event comes with the restart).
	h.expectEvents(nil, nil)
}

// TestReconcileRestartsThenFails: max-restarts 1. The first failure makes a new incarnation, the
// second is final.
func TestReconcileRestartsThenFails(t *testing.T) {
	reg, m := newMetrics(t)
	h := runningCluster(t, map[string]string{contract.AnnotationMaxRestarts: "1"}, m)
	first := h.driver()
	h.now = t0.Add(10 * time.Minute)
	h.setDriverStatus(exitedStatus(1, h.now.Add(-time.Minute)))

	h.reconcile()
	p := h.placeholder()
	if p.Annotations[contract.AnnotationRestarts] != "1" || p.Annotations[contract.AnnotationRestartedIncarnation] != string(first.UID) {
		t.Errorf("placeholder annotations = %v, want restarts 1 and restarted-incarnation %s", p.Annotations, first.UID)
	}
	if d := h.driver(); d == nil || d.DeletionTimestamp == nil {
		t.Fatal("the failed incarnation was not deleted")
	}
	if len(h.deletes) != 1 || h.deletes[0].uid != first.UID || h.deletes[0].force {
		t.Errorf("deletions = %+v, want one graceful deletion of %s", h.deletes, first.UID)
	}
	h.expectEvents([]string{"Warning Restarting"}, map[string][]string{"Restarting": {"exit", "code 1", "1 of 1"}})
	checkStatus(t, p, corev1.PodRunning, "waiting", false, "exited with code 1", "restarting (restart 1)")
	if cs := containerStatus(p.Status, contract.DriverContainerName); cs.RestartCount != 1 {
		t.Errorf("placeholder restartCount = %d during the first restart, want 1", cs.RestartCount)
	}
	if got := counterValue(t, reg, "driverset_driver_restarts_total"); got != 1 {
		t.Errorf("driverset_driver_restarts_total = %v, want 1", got)
	}

	// The kubelet stops the old pod; the StatefulSet makes the next incarnation on node-b.
	h.stopped(h.names.DriverPodName())
	h.setNode("node-b", corev1.ConditionTrue, t0)
	h.startIncarnation("node-b")
	h.setDriverStatus(runningStatus(h.now.Add(20 * time.Second)))
	h.now = h.now.Add(30 * time.Second)
	h.reconcile()
	h.expectEvents([]string{"Normal DriverRunning"}, map[string][]string{"DriverRunning": {"node-b"}})
	p = h.placeholder()
	checkStatus(t, p, corev1.PodRunning, "running", true, "node-b")
	if cs := containerStatus(p.Status, contract.DriverContainerName); cs.RestartCount != 1 {
		t.Errorf("placeholder restartCount = %d, want 1", cs.RestartCount)
	}

	// The second incarnation fails too: no restart left.
	h.now = h.now.Add(10 * time.Minute)
	h.setDriverStatus(exitedStatus(1, h.now.Add(-time.Minute)))
	deletes := len(h.deletes)
	h.reconcile()
	p = h.placeholder()
	checkStatus(t, p, corev1.PodFailed, "terminated", false, "exited with code 1")
	if term := containerStatus(p.Status, contract.DriverContainerName).State.Terminated; term.ExitCode != 1 || term.Reason != "Error" {
		t.Errorf("placeholder terminated = %+v, want exit code 1, reason Error", term)
	}
	if s := h.statefulSet(); *s.Spec.Replicas != 0 {
		t.Errorf("StatefulSet replicas = %d after the final failure, want 0", *s.Spec.Replicas)
	}
	if len(h.deletes) != deletes {
		t.Errorf("the final incarnation was deleted by driverset (%+v); scaling to 0 is the StatefulSet's job", h.deletes[deletes:])
	}
	if p.Annotations[contract.AnnotationRestarts] != "1" {
		t.Errorf("restarts = %q after a failure with none left, want 1", p.Annotations[contract.AnnotationRestarts])
	}
	h.expectEvents([]string{"Warning Failed"}, map[string][]string{"Failed": {"exit code 1", "1 restart(s)"}})
	if got := counterValue(t, reg, "driverset_driver_restarts_total"); got != 1 {
		t.Errorf("driverset_driver_restarts_total = %v, want 1", got)
	}

	// Terminal: nothing more happens.
	h.reconcile()
	h.expectEvents(nil, nil)
	if again := h.placeholder(); again.ResourceVersion != p.ResourceVersion {
		t.Error("a Failed placeholder was written again")
	}
}

// failAndRestart plays one failure of the running driver: it started at started, ran for ran and
// exited 1; a minute later (every backoff elapsed) the controller decides. When it restarts, the
// old pod goes and the next incarnation runs on node-a; it returns whether the app is still
// Running.
func (h *cluster) failAndRestart(started time.Time, ran time.Duration) bool {
	h.t.Helper()
	finished := started.Add(ran)
	st := exitedStatus(1, finished)
	st.ContainerStatuses[0].LastTerminationState.Terminated.StartedAt = metav1.NewTime(started)
	h.setDriverStatus(st)
	h.now = finished.Add(time.Minute)
	h.reconcile()
	if p := h.placeholder(); p.Status.Phase == corev1.PodFailed {
		return false
	}
	h.stopped(h.names.DriverPodName())
	h.startIncarnation("node-a")
	h.setDriverStatus(runningStatus(h.now.Add(10 * time.Second)))
	h.now = h.now.Add(20 * time.Second)
	h.reconcile()
	checkStatus(h.t, h.placeholder(), corev1.PodRunning, "running", true)
	return true
}

// TestReconcileRestartWindowForgets: max-restarts 3 and the default restart window (1h). Five
// failures, each after a run of a day, are each restarted as restart 1 with the first backoff: the
// app keeps running.
func TestReconcileRestartWindowForgets(t *testing.T) {
	h := runningCluster(t, map[string]string{contract.AnnotationMaxRestarts: "3"}, nil)
	for i := range 5 {
		if !h.failAndRestart(h.now, 24*time.Hour) {
			t.Fatalf("failure %d after a day's run ended the app: %q", i+1, h.placeholder().Status.Message)
		}
		notes := []string{"restart 1 of 3"}
		if i > 0 {
			notes = append(notes, "after a run of 24h0m0s", "1 restart(s) before forgotten", "restart-window 1h")
		}
		h.expectEvents([]string{"Warning Restarting", "Normal DriverRunning"}, map[string][]string{"Restarting": notes})
		p := h.placeholder()
		if got := p.Annotations[contract.AnnotationRestarts]; got != "1" {
			t.Errorf("after failure %d: restarts = %q, want 1 (the run of failures begun by it)", i+1, got)
		}
		// What never goes down: the total, and the placeholder's restartCount, as a kubelet's.
		if got, want := p.Annotations[contract.AnnotationRestartsTotal], strconv.Itoa(i+1); got != want {
			t.Errorf("after failure %d: restarts-total = %q, want %s", i+1, got, want)
		}
		if cs := containerStatus(p.Status, contract.DriverContainerName); cs.RestartCount != int32(i+1) {
			t.Errorf("after failure %d: placeholder restartCount = %d, want %d", i+1, cs.RestartCount, i+1)
		}
	}
}

// TestReconcileRestartsTotalFromBefore: an app restarted by a driverset without restarts-total
// has its lifetime count in restarts; the total goes on from there.
func TestReconcileRestartsTotalFromBefore(t *testing.T) {
	h := runningCluster(t, map[string]string{contract.AnnotationMaxRestarts: "3"}, nil)
	p := h.placeholder()
	p.Annotations[contract.AnnotationRestarts] = "2"
	p.Annotations[contract.AnnotationRestartedIncarnation] = "an-earlier-incarnation"
	if err := h.c.Update(h.ctx, p); err != nil {
		t.Fatal(err)
	}
	if !h.failAndRestart(h.now, 24*time.Hour) {
		t.Fatal("a failure after a day's run ended the app")
	}
	p = h.placeholder()
	if got := p.Annotations[contract.AnnotationRestarts]; got != "1" {
		t.Errorf("restarts = %q, want 1", got)
	}
	if got := p.Annotations[contract.AnnotationRestartsTotal]; got != "3" {
		t.Errorf("restarts-total = %q, want 3 (the 2 of before and this one)", got)
	}
}

// TestReconcileRestartWindowStillCounts: max-restarts 3, the default window; four failures, each
// 5 minutes after its start, end the app Failed after 3 restarts.
func TestReconcileRestartWindowStillCounts(t *testing.T) {
	h := runningCluster(t, map[string]string{contract.AnnotationMaxRestarts: "3"}, nil)
	for i := range 3 {
		if !h.failAndRestart(h.now, 5*time.Minute) {
			t.Fatalf("quick failure %d ended the app", i+1)
		}
	}
	if h.failAndRestart(h.now, 5*time.Minute) {
		t.Fatalf("the 4th quick failure was restarted: %q", h.placeholder().Status.Message)
	}
	if got := h.placeholder().Annotations[contract.AnnotationRestarts]; got != "3" {
		t.Errorf("restarts = %q after the final failure, want 3", got)
	}
}

// TestReconcileRestartWindowZeroNeverForgets: restart-window 0 is the lifetime budget of before:
// the 4th failure ends the app, however long each run was.
func TestReconcileRestartWindowZeroNeverForgets(t *testing.T) {
	h := runningCluster(t, map[string]string{contract.AnnotationMaxRestarts: "3", contract.AnnotationRestartWindow: "0"}, nil)
	for i := range 3 {
		if !h.failAndRestart(h.now, 24*time.Hour) {
			t.Fatalf("failure %d ended the app", i+1)
		}
	}
	if h.failAndRestart(h.now, 24*time.Hour) {
		t.Fatalf("the 4th failure was restarted with restart-window 0: %q", h.placeholder().Status.Message)
	}
}

// TestReconcileRestartedDriverWhileTerminating: between driverset's deletion of a failed incarnation
// and its kubelet confirming the stop, the old pod still exists (Terminating) with its idle wrap
// "running". The placeholder must keep saying the driver is restarting, not that it runs.
func TestReconcileRestartedDriverWhileTerminating(t *testing.T) {
	h := runningCluster(t, nil, nil)
	h.now = t0.Add(10 * time.Minute)
	h.setDriverStatus(exitedStatus(3, h.now.Add(-time.Minute)))
	h.reconcile()
	h.expectEvents([]string{"Warning Restarting"}, nil)
	before := h.placeholder()

	// The kubelet has not stopped the old pod yet.
	if d := h.driver(); d == nil || d.DeletionTimestamp == nil {
		t.Fatal("the old incarnation should be Terminating")
	}
	h.now = h.now.Add(5 * time.Second)
	h.reconcile()
	h.expectEvents(nil, nil)
	p := h.placeholder()
	checkStatus(t, p, corev1.PodRunning, "waiting", false, "exited with code 3")
	if p.Annotations[contract.AnnotationRestarts] != before.Annotations[contract.AnnotationRestarts] {
		t.Errorf("restarts = %q, want it unchanged at %q", p.Annotations[contract.AnnotationRestarts], before.Annotations[contract.AnnotationRestarts])
	}
	if _, lost := p.Annotations[contract.AnnotationDriverLost]; lost {
		t.Errorf("a restart by driverset recorded as a lost driver: %s", p.Annotations[contract.AnnotationDriverLost])
	}
}

func TestReconcileSucceeds(t *testing.T) {
	h := runningCluster(t, nil, nil)
	h.now = t0.Add(time.Hour)
	h.setDriverStatus(exitedStatus(0, h.now.Add(-time.Second)))
	h.reconcile()
	p := h.placeholder()
	checkStatus(t, p, corev1.PodSucceeded, "terminated", false, "exited with code 0")
	if term := containerStatus(p.Status, contract.DriverContainerName).State.Terminated; term.ExitCode != 0 || term.Reason != "Completed" {
		t.Errorf("placeholder terminated = %+v, want exit code 0, reason Completed", term)
	}
	if s := h.statefulSet(); *s.Spec.Replicas != 0 {
		t.Errorf("StatefulSet replicas = %d after success, want 0", *s.Spec.Replicas)
	}
	if len(h.deletes) != 0 {
		t.Errorf("deletions %+v after a success", h.deletes)
	}
	h.expectEvents([]string{"Normal Completed"}, map[string][]string{"Completed": {h.names.DriverPodName()}})

	// A terminal placeholder only keeps S at 0: someone scales it up and a driver pod runs again.
	s := h.statefulSet()
	one := int32(1)
	s.Spec.Replicas = &one
	if err := h.c.Update(h.ctx, s); err != nil {
		t.Fatal(err)
	}
	h.setDriverStatus(exitedStatus(5, h.now))
	h.reconcile()
	if s := h.statefulSet(); *s.Spec.Replicas != 0 {
		t.Errorf("StatefulSet replicas = %d for a terminal placeholder, want 0", *s.Spec.Replicas)
	}
	if again := h.placeholder(); again.ResourceVersion != p.ResourceVersion {
		t.Errorf("a Succeeded placeholder was written again: %s %q", again.Status.Phase, again.Status.Message)
	}
	h.expectEvents(nil, nil)
	if len(h.deletes) != 0 {
		t.Errorf("deletions %+v for a terminal placeholder", h.deletes)
	}
}

// TestReconcileFencesAfterTheNodeIsLost: fence-after 2m on the driver; its node stops being Ready.
func TestReconcileFencesAfterTheNodeIsLost(t *testing.T) {
	reg, m := newMetrics(t)
	h := runningCluster(t, map[string]string{contract.AnnotationFenceAfter: "2m"}, m)
	lost := t0.Add(10 * time.Minute)
	first := h.driver()
	h.setNode("node-b", corev1.ConditionTrue, t0) // one lost node of two is no zone-wide disruption
	h.setNode("node-a", corev1.ConditionUnknown, lost, unreachableTaints()...)

	h.now = lost.Add(time.Minute)
	res := h.reconcile()
	if res.RequeueAfter != time.Minute {
		t.Errorf("RequeueAfter = %s, want the 1m left before fencing", res.RequeueAfter)
	}
	if d := h.driver(); d == nil || d.DeletionTimestamp != nil || len(h.deletes) != 0 {
		t.Fatalf("the driver pod was deleted before fence-after: %+v", h.deletes)
	}
	p := h.placeholder()
	rec := lostOf(p)
	if rec == nil || rec.Pod != first.UID || !rec.Since.Equal(lost) || rec.Cause != CauseNodeLost {
		t.Errorf("loss record = %+v, want pod %s since %v cause %s", rec, first.UID, lost, CauseNodeLost)
	}
	if !strings.Contains(p.Status.Message, "node-a") || !strings.Contains(p.Status.Message, "force-delete") {
		t.Errorf("placeholder message %q does not tell about the fencing to come", p.Status.Message)
	}
	h.expectEvents([]string{"Warning NodeLost"}, map[string][]string{"NodeLost": {"node-a"}})

	// Still before the time: nothing new.
	h.now = lost.Add(90 * time.Second)
	if res := h.reconcile(); res.RequeueAfter != 30*time.Second {
		t.Errorf("RequeueAfter = %s, want 30s", res.RequeueAfter)
	}
	h.expectEvents(nil, nil)

	// fence-after elapsed: force-deleted, so the StatefulSet can make the driver elsewhere.
	h.now = lost.Add(2 * time.Minute)
	h.reconcile()
	if d := h.driver(); d != nil {
		t.Fatalf("driver pod still exists (Terminating: %v) after fencing", d.DeletionTimestamp != nil)
	}
	if got := h.forcedDeletions(); strings.Join(got, ",") != "Pod/"+h.names.DriverPodName() {
		t.Errorf("force-deletions = %v, want only the driver pod", got)
	}
	if rec := lostOf(h.placeholder()); rec == nil || rec.Cause != CauseFenced || !rec.Since.Equal(lost) {
		t.Errorf("loss record = %+v, want cause %s since %v", rec, CauseFenced, lost)
	}
	h.expectEvents([]string{"Warning Fenced"}, map[string][]string{"Fenced": {h.names.DriverPodName(), "node-a", "2m0s"}})
	if got := counterValue(t, reg, "driverset_drivers_fenced_total"); got != 1 {
		t.Errorf("driverset_drivers_fenced_total = %v, want 1", got)
	}

	// The next incarnation runs on node-b 150s after the loss: a recovery, measured.
	h.setNode("node-b", corev1.ConditionTrue, t0)
	h.startIncarnation("node-b")
	h.setDriverStatus(runningStatus(lost.Add(150 * time.Second)))
	h.now = lost.Add(160 * time.Second)
	h.reconcile()
	h.expectEvents([]string{"Normal Recovered"},
		map[string][]string{"Recovered": {"node-b", "150.0s", CauseFenced}})
	p = h.placeholder()
	if _, still := p.Annotations[contract.AnnotationDriverLost]; still {
		t.Errorf("loss record kept after the recovery: %s", p.Annotations[contract.AnnotationDriverLost])
	}
	checkStatus(t, p, corev1.PodRunning, "running", true, "node-b")
	if count, sum := histogram(t, reg, "driverset_driver_recovery_seconds", CauseFenced); count != 1 || sum != 150 {
		t.Errorf("recovery histogram {cause=%s}: count %d sum %v, want 1 observation of 150s", CauseFenced, count, sum)
	}
	if p.Annotations[contract.AnnotationRestarts] != "" {
		t.Errorf("a node-loss recovery was counted as a restart: %v", p.Annotations)
	}
}

// TestReconcileWaitsForTheAdmin: without fence-after the driver on a lost node is kept until the
// node is confirmed down; then driverset force-deletes it at once, rather than wait for the
// controller-manager's PodGC; each confirmation path is a recovery with its own cause.
func TestReconcileWaitsForTheAdmin(t *testing.T) {
	cases := []struct {
		name    string
		confirm func(h *cluster) // what the admin does
		cause   string
		event   string // the Event that says what proved the node down
	}{
		{
			name: "out-of-service taint",
			confirm: func(h *cluster) {
				h.setNode("node-a", corev1.ConditionUnknown, t0.Add(10*time.Minute),
					corev1.Taint{Key: TaintOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})
			},
			cause: CauseOutOfService,
			event: "OutOfService",
		},
		{
			name: "node deleted",
			confirm: func(h *cluster) {
				if err := h.c.Delete(h.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}); err != nil {
					h.t.Fatal(err)
				}
			},
			cause: CauseNodeDeleted,
			event: "NodeGone",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg, m := newMetrics(t)
			h := runningCluster(t, nil, m)
			lost := t0.Add(10 * time.Minute)
			h.setNode("node-a", corev1.ConditionUnknown, lost)
			for _, after := range []time.Duration{time.Minute, time.Hour, 10 * time.Hour} {
				h.now = lost.Add(after)
				if res := h.reconcile(); res.RequeueAfter != 0 {
					t.Errorf("RequeueAfter = %s without fencing; the Node watch brings the next change", res.RequeueAfter)
				}
			}
			if len(h.deletes) != 0 || h.driver() == nil {
				t.Fatalf("driverset deleted a driver on a lost node without fence-after: %+v", h.deletes)
			}
			h.expectEvents([]string{"Warning NodeLost"},
				map[string][]string{"NodeLost": {"kubectl delete node node-a", TaintOutOfService}})
			checkStatus(t, h.placeholder(), corev1.PodRunning, "running", true, "kubectl delete node node-a")

			tc.confirm(h)
			h.deletes = nil
			before := h.placeholder().Status
			h.reconcile()
			// The force-delete pass writes no status: the pod's deletion brings the next pass at
			// once, which says what follows (the new incarnation); under a mass loss that write is
			// one request per driver on the critical path.
			if after := h.placeholder().Status; !equality.Semantic.DeepEqual(before, after) {
				t.Errorf("the force-delete pass wrote the status: %q, was %q", after.Message, before.Message)
			}
			if rec := lostOf(h.placeholder()); rec == nil || rec.Cause != tc.cause || !rec.Since.Equal(lost) {
				t.Errorf("loss record = %+v, want cause %s since %v", rec, tc.cause, lost)
			}
			old := h.driver()
			if got := h.forcedDeletions(); len(got) != 1 || h.deletes[0].uid == "" {
				t.Fatalf("force-deletions %v, want the driver pod at once", h.deletes)
			}
			if old != nil {
				t.Fatalf("driver pod %s still exists after a force-delete", old.Name)
			}
			h.expectEvents([]string{"Warning " + tc.event}, map[string][]string{tc.event: {"node-a"}})
			if n := counterValue(t, reg, "driverset_drivers_fenced_total"); n != 0 {
				t.Errorf("fenced drivers = %v; a node proven down is no fence", n)
			}
			// The StatefulSet makes S-0 again.
			h.setNode("node-b", corev1.ConditionTrue, t0)
			h.startIncarnation("node-b")
			h.setDriverStatus(runningStatus(lost.Add(11 * time.Hour)))
			h.now = lost.Add(11 * time.Hour)
			h.reconcile()
			// Recovered names the new pod and its node: no DriverRunning besides it.
			h.expectEvents([]string{"Normal Recovered"}, map[string][]string{"Recovered": {tc.cause, h.names.DriverPodName(), "node-b"}})
			if count, sum := histogram(t, reg, "driverset_driver_recovery_seconds", tc.cause); count != 1 || sum != 11*3600 {
				t.Errorf("recovery histogram {cause=%s}: count %d sum %v, want one of 39600s", tc.cause, count, sum)
			}
		})
	}
}

// TestReconcileLostNodeDriverIsNotReady: the node lifecycle controller marks the pods of a lost node
// not Ready (the PodReady condition; the container statuses keep the kubelet's last report). The
// placeholder must not read 1/1 Ready for a driver nobody can reach.
func TestReconcileLostNodeDriverIsNotReady(t *testing.T) {
	h := runningCluster(t, nil, nil)
	lost := t0.Add(10 * time.Minute)
	h.setNode("node-a", corev1.ConditionUnknown, lost)
	st := runningStatus(t0.Add(30 * time.Second))
	for i := range st.Conditions {
		if st.Conditions[i].Type == corev1.PodReady {
			st.Conditions[i].Status = corev1.ConditionFalse
			st.Conditions[i].Reason = "NodeNotReady"
			st.Conditions[i].LastTransitionTime = metav1.NewTime(lost.Add(40 * time.Second))
		}
	}
	h.setDriverStatus(st)
	h.now = lost.Add(time.Minute)
	h.reconcile()
	checkStatus(t, h.placeholder(), corev1.PodRunning, "running", false, "node-a")
}

// TestReconcileNodeBackClearsTheLoss: a node that comes back Ready with the driver still running
// in the same pod ends the loss. A later process-failure restart is not a node-loss recovery.
func TestReconcileNodeBackClearsTheLoss(t *testing.T) {
	reg, m := newMetrics(t)
	h := runningCluster(t, nil, m)
	h.setNode("node-a", corev1.ConditionUnknown, t0.Add(10*time.Minute))
	h.now = t0.Add(11 * time.Minute)
	h.reconcile()
	h.expectEvents([]string{"Warning NodeLost"}, nil)

	h.setNode("node-a", corev1.ConditionTrue, t0.Add(12*time.Minute))
	h.now = t0.Add(12 * time.Minute)
	h.reconcile()
	if rec := lostOf(h.placeholder()); rec != nil {
		t.Errorf("loss record %+v kept after the node came back with the driver still running", rec)
	}
	checkStatus(t, h.placeholder(), corev1.PodRunning, "running", true, "node-a")
	h.expectEvents(nil, nil)

	// A day later the driver fails and is restarted.
	h.now = t0.Add(24 * time.Hour)
	h.setDriverStatus(exitedStatus(1, h.now.Add(-time.Minute)))
	h.reconcile()
	h.stopped(h.names.DriverPodName())
	h.startIncarnation("node-a")
	h.setDriverStatus(runningStatus(h.now.Add(10 * time.Second)))
	h.now = h.now.Add(20 * time.Second)
	h.reconcile()
	h.expectEvents([]string{"Warning Restarting", "Normal DriverRunning"}, nil)
	for _, cause := range []string{CauseNodeLost, CauseFenced, CauseOutOfService, CauseNodeDeleted, CausePodDeleted} {
		if count, _ := histogram(t, reg, "driverset_driver_recovery_seconds", cause); count != 0 {
			t.Errorf("a process-failure restart was measured as a recovery from %s", cause)
		}
	}
}

// TestReconcileClearsStaleExecutors: a new incarnation, gated while executors of an earlier one
// exist; driverset deletes them (force-deleting those stuck on a lost node) and then lifts the gate.
func TestReconcileClearsStaleExecutors(t *testing.T) {
	h := newCluster(t, nil, nil)
	h.reconcile()
	h.expectEvents([]string{"Normal Converted"}, nil)
	h.setNode("node-a", corev1.ConditionTrue, t0)
	h.setNode("node-dead", corev1.ConditionUnknown, t0)
	app := h.placeholder().Labels[contract.LabelSparkAppSelector]
	const oldDriver = types.UID("5d1f0c8e-old-incarnation")

	executor := func(name, appID string, owner types.UID, node string, terminating bool) {
		t.Helper()
		h.makeExecutor(name, node, appID, h.names.DriverPodName(), owner)
		if terminating {
			e := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.p.Namespace}}
			if err := h.c.Delete(h.ctx, e); err != nil { // graceful: stays Terminating on its node
				t.Fatal(err)
			}
		}
	}
	executor("pi-exec-1", app, oldDriver, "node-a", false)
	executor("pi-exec-2", app, oldDriver, "node-dead", true) // no kubelet will confirm its end
	executor("pi-exec-3", app, oldDriver, "node-a", true)    // its kubelet is stopping it
	// An earlier incarnation ran with an app id of its own (wrap.IncarnationAppID).
	executor("pi-exec-4", app+"-5d1f0c8e", oldDriver, "node-a", false)
	h.makeExecutorOf("other-driver", "other-exec-1", "node-a", "spark-0000000000000000000000000000other", "other-driver-0", "other-driver-uid")
	h.deletes = nil

	d := h.startIncarnation("", contract.GateStaleExecutors)
	executor("pi-exec-9", app, d.UID, "node-a", false) // (cannot exist while gated, but is never stale)
	h.setDriverStatus(pendingStatus())

	res := h.reconcile()
	if res.RequeueAfter <= 0 {
		t.Error("no requeue while stale executors remain")
	}
	if !convert.HasGate(&h.driver().Spec, contract.GateStaleExecutors) {
		t.Fatal("gate lifted while stale executors remain")
	}
	deleted := map[string]deletion{}
	for _, del := range h.deletes {
		deleted[del.name] = del
	}
	for _, name := range []string{"pi-exec-1", "pi-exec-4"} {
		if del, ok := deleted[name]; !ok || del.force {
			t.Errorf("%s: deletion %+v, want a graceful one", name, del)
		}
	}
	if del, ok := deleted["pi-exec-2"]; !ok || !del.force {
		t.Errorf("pi-exec-2 (Terminating on a lost node): deletion %+v, want a force-deletion", del)
	}
	for _, name := range []string{"pi-exec-3", "other-exec-1", "pi-exec-9"} {
		if del, ok := deleted[name]; ok {
			t.Errorf("%s deleted (%+v)", name, del)
		}
	}
	checkStatus(t, h.placeholder(), corev1.PodPending, "waiting", false, "4 executor(s)")
	h.expectEvents(nil, nil)

	// The kubelet of node-a finishes; none of the earlier executors remain.
	h.stopped("pi-exec-1")
	h.stopped("pi-exec-4")
	h.stopped("pi-exec-3")
	h.reconcile()
	if d := h.driver(); convert.HasGate(&d.Spec, contract.GateStaleExecutors) || len(d.Spec.SchedulingGates) != 0 {
		t.Errorf("driver pod gates = %+v, want none", d.Spec.SchedulingGates)
	}
	h.expectEvents([]string{"Normal ExecutorsCleared"}, map[string][]string{"ExecutorsCleared": {h.names.DriverPodName()}})
	var other corev1.Pod
	if err := h.c.Get(h.ctx, types.NamespacedName{Namespace: h.p.Namespace, Name: "other-exec-1"}, &other); err != nil {
		t.Errorf("another app's executor: %v", err)
	}
}

// TestReconcileClearsExecutorsOnAProvenDownNode: the old incarnation's executors on a node that is
// deleted, or out of service, are force-deleted at once (no kubelet will ever confirm a graceful
// end), and the new incarnation's gate is lifted in the same pass, not a requeue later. One on a
// node merely not Ready is deleted gracefully first, as before.
func TestReconcileClearsExecutorsOnAProvenDownNode(t *testing.T) {
	h := newCluster(t, nil, nil)
	h.reconcile()
	h.expectEvents([]string{"Normal Converted"}, nil)
	h.setNode("node-a", corev1.ConditionTrue, t0)
	h.setNode("node-oos", corev1.ConditionUnknown, t0, corev1.Taint{Key: TaintOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})
	h.setNode("node-dead", corev1.ConditionUnknown, t0)
	app := h.placeholder().Labels[contract.LabelSparkAppSelector]
	const oldDriver = types.UID("5d1f0c8e-old-incarnation")
	executor := func(name, node string) { h.makeExecutor(name, node, app, h.names.DriverPodName(), oldDriver) }

	t.Run("node deleted or out of service: force-deleted, gate lifted at once", func(t *testing.T) {
		executor("pi-exec-1", "node-gone") // no such Node
		executor("pi-exec-2", "node-oos")
		h.deletes = nil
		h.startIncarnation("", contract.GateStaleExecutors)
		h.setDriverStatus(pendingStatus())
		h.reconcile()
		if got := h.forcedDeletions(); len(got) != 2 {
			t.Errorf("force-deletions %v, want pi-exec-1 and pi-exec-2", got)
		}
		if d := h.driver(); convert.HasGate(&d.Spec, contract.GateStaleExecutors) {
			t.Errorf("gate kept after the only stale executors were force-deleted: %+v", d.Spec.SchedulingGates)
		}
	})
	t.Run("node not Ready only: deleted gracefully, gate kept", func(t *testing.T) {
		executor("pi-exec-3", "node-dead")
		h.forceRemove(h.names.DriverPodName())
		h.deletes = nil
		h.startIncarnation("", contract.GateStaleExecutors)
		h.setDriverStatus(pendingStatus())
		h.reconcile()
		if got := h.forcedDeletions(); len(got) != 0 {
			t.Errorf("force-deletions %v of an executor on a node not proven down", got)
		}
		if d := h.driver(); !convert.HasGate(&d.Spec, contract.GateStaleExecutors) {
			t.Error("gate lifted while an executor of the previous driver is Terminating")
		}
	})
}

func TestReconcileIgnoresOtherPods(t *testing.T) {
	h := newCluster(t, nil, nil)
	// A pod that is not a placeholder (the driver pod S-0, an executor, any pod) and a pod that is
	// gone get nothing.
	plain := sparkDriverPod(t, nil)
	plain.Name, plain.UID = "plain-driver", "plain-uid"
	if err := h.c.Create(h.ctx, plain); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"plain-driver", "does-not-exist"} {
		h.p.Name = name
		h.reconcile()
	}
	h.expectEvents(nil, nil)
	var sets appsv1.StatefulSetList
	if err := h.c.List(h.ctx, &sets); err != nil || len(sets.Items) != 0 {
		t.Errorf("StatefulSets %v (%v) for pods that are not placeholders", sets.Items, err)
	}
}

// TestReconcileFinalStatusSurvivesAFailedWrite: the driver succeeded, but writing the placeholder's
// status fails once (a conflict). The StatefulSet controller deletes S-0 as soon as S is scaled to
// 0, and a pod being deleted has no outcome: if S was scaled before the status was written, the
// retry no longer sees the exit and spark-submit waits forever.
func TestReconcileFinalStatusSurvivesAFailedWrite(t *testing.T) {
	h := runningCluster(t, nil, nil)
	h.now = t0.Add(time.Hour)
	h.setDriverStatus(exitedStatus(0, h.now.Add(-time.Second)))
	failed := false
	h.r.Client = interceptor.NewClient(h.c.(client.WithWatch), interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if obj.GetName() == h.p.Name && !failed {
				failed = true
				return apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, obj.GetName(), errors.New("the object has been modified"))
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	if _, err := h.r.Reconcile(h.ctx, ctrl.Request{NamespacedName: h.p}); err == nil {
		t.Fatal("Reconcile hid the failed status write")
	}
	// The StatefulSet controller acts on what it sees.
	if s := h.statefulSet(); *s.Spec.Replicas == 0 {
		if err := h.c.Delete(h.ctx, h.driver()); err != nil {
			t.Fatal(err)
		}
	}
	h.reconcile()
	p := h.placeholder()
	checkStatus(t, p, corev1.PodSucceeded, "terminated", false, "exited with code 0")
	if s := h.statefulSet(); *s.Spec.Replicas != 0 {
		t.Errorf("StatefulSet replicas = %d after success, want 0", *s.Spec.Replicas)
	}
	h.expectEvents([]string{"Normal Completed"}, nil)
}

// TestReconcileReadsBeforeItCreates: ResourceQuota admission charges a Create before the apiserver
// finds the name taken, so a Create of an object that exists fails with "exceeded quota" in a
// namespace at its limit, and inflates the quota's used below it. Reconcile reads first (the
// cache, then the apiserver when the cache has not seen the object yet) and creates only what is
// missing.
func TestReconcileReadsBeforeItCreates(t *testing.T) {
	h := newCluster(t, nil, nil)
	h.reconcile()
	if want := "Service/" + h.names.Service + ",StatefulSet/" + h.names.StatefulSet; strings.Join(h.creates, ",") != want {
		t.Errorf("first reconcile created %v, want %s", h.creates, want)
	}
	h.expectEvents([]string{"Normal Converted"}, nil)

	h.creates = nil
	h.reconcile()
	if len(h.creates) != 0 {
		t.Errorf("a reconcile with everything in place called Create for %v", h.creates)
	}

	// The cache has not seen the Service and StatefulSet yet; the apiserver has them.
	h.r.Client = interceptor.NewClient(h.c.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			switch obj.(type) {
			case *corev1.Service, *appsv1.StatefulSet:
				return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	h.reconcile()
	if len(h.creates) != 0 {
		t.Errorf("a reconcile on a stale cache called Create for %v", h.creates)
	}
	h.expectEvents(nil, nil)
}

// TestReconcileFencesOnNoStaleCache: the informer cache still has the node unreachable past
// fence-after, but it has come back: the force-delete is decided on the Node read live.
func TestReconcileFencesOnNoStaleCache(t *testing.T) {
	h := runningCluster(t, map[string]string{contract.AnnotationFenceAfter: "1m"}, nil)
	lost := t0.Add(10 * time.Minute)
	h.setNode("node-b", corev1.ConditionTrue, t0)
	h.setNode("node-a", corev1.ConditionUnknown, lost, unreachableTaints()...)
	stale := &corev1.Node{}
	if err := h.c.Get(h.ctx, types.NamespacedName{Name: "node-a"}, stale); err != nil {
		t.Fatal(err)
	}
	h.setNode("node-a", corev1.ConditionTrue, lost.Add(30*time.Second)) // back, as the apiserver has it
	h.r.Client = interceptor.NewClient(h.c.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if n, ok := obj.(*corev1.Node); ok && key.Name == "node-a" {
				stale.DeepCopyInto(n)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	h.now = lost.Add(5 * time.Minute)
	h.reconcile()
	if got := h.forcedDeletions(); len(got) != 0 {
		t.Errorf("force-deleted %v on a stale cache; the node is Ready", got)
	}
	if d := h.driver(); d == nil || d.DeletionTimestamp != nil {
		t.Error("the driver pod on a Ready node was deleted")
	}
}

// TestReconcileActsOnNoStaleProof: a Node missing from the cache, or tainted out-of-service there,
// is read again from the apiserver before the driver pod is force-deleted: a Node recreated under
// the same name, or an admin's taint already lifted, proves nothing (PodGC, too, GETs a Node
// missing from its cache before it deletes its pods).
func TestReconcileActsOnNoStaleProof(t *testing.T) {
	cases := []struct {
		name  string
		cache func(h *cluster, n *corev1.Node) error // the Node as the informer cache has it
	}{
		{"deleted in the cache only", func(h *cluster, n *corev1.Node) error {
			return apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, "node-a")
		}},
		{"out-of-service in the cache only", func(h *cluster, n *corev1.Node) error {
			nodeWith(corev1.ConditionUnknown, t0, corev1.Taint{Key: TaintOutOfService, Effect: corev1.TaintEffectNoExecute}).DeepCopyInto(n)
			return nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := runningCluster(t, nil, nil)
			h.setNode("node-a", corev1.ConditionTrue, t0) // as the apiserver has it
			h.r.Client = interceptor.NewClient(h.c.(client.WithWatch), interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if n, ok := obj.(*corev1.Node); ok && key.Name == "node-a" {
						return tc.cache(h, n)
					}
					return c.Get(ctx, key, obj, opts...)
				},
			})
			h.now = t0.Add(time.Hour)
			h.reconcile()
			if got := h.forcedDeletions(); len(got) != 0 {
				t.Errorf("force-deleted %v on a stale cache; the node is Ready", got)
			}
			if d := h.driver(); d == nil || d.DeletionTimestamp != nil {
				t.Error("the driver pod on a Ready node was deleted")
			}
		})
	}
}

// TestReconcileFenceAfterZeroTurnsFencingOff: --fence-after is set cluster-wide; a driver's
// fence-after "0" turns fencing off for it, as the annotation's documentation says.
func TestReconcileFenceAfterZeroTurnsFencingOff(t *testing.T) {
	h := runningCluster(t, map[string]string{contract.AnnotationFenceAfter: "0"}, nil)
	h.r.FenceAfter = time.Minute
	lost := t0.Add(10 * time.Minute)
	h.setNode("node-b", corev1.ConditionTrue, t0)
	h.setNode("node-a", corev1.ConditionUnknown, lost, unreachableTaints()...)
	h.now = lost.Add(time.Hour)
	h.reconcile()
	if got := h.forcedDeletions(); len(got) != 0 {
		t.Errorf("force-deleted %v with fence-after 0", got)
	}
}

// TestReconcileKeepsTheLastValidSetting: max-restarts 1 was admitted; a typo edited onto the
// running app is reported (status and a Warning Event naming the key) and the admitted value
// kept: the next failure is restarted, not final.
func TestReconcileKeepsTheLastValidSetting(t *testing.T) {
	h := runningCluster(t, map[string]string{contract.AnnotationMaxRestarts: "1"}, nil)
	p := h.placeholder()
	p.Annotations[contract.AnnotationMaxRestarts] = "1O"
	if err := h.c.Update(h.ctx, p); err != nil {
		t.Fatal(err)
	}
	h.now = t0.Add(10 * time.Minute)
	h.setDriverStatus(exitedStatus(1, h.now.Add(-time.Minute)))
	h.reconcile()
	checkStatus(t, h.placeholder(), corev1.PodRunning, "waiting", false, "restarting (restart 1)", contract.AnnotationMaxRestarts+`="1O"`)
	h.expectEvents([]string{"Warning Restarting", "Warning InvalidSetting"},
		map[string][]string{"InvalidSetting": {contract.AnnotationMaxRestarts}, "Restarting": {"1 of 1"}})
	h.reconcile()
	h.expectEvents(nil, nil)
}

// TestReconcileRestartOnADeadNode: the driver failed and driverset deleted its pod to restart it;
// then its node died, so no kubelet confirms the deletion. The recorded exit proves the driver
// process is gone: driverset force-deletes the pod (that incarnation only) and the restart goes on.
func TestReconcileRestartOnADeadNode(t *testing.T) {
	h := runningCluster(t, nil, nil)
	first := h.driver()
	h.setNode("node-b", corev1.ConditionTrue, t0)
	h.now = t0.Add(10 * time.Minute)
	h.setDriverStatus(exitedStatus(1, h.now.Add(-time.Minute)))
	h.reconcile()
	if d := h.driver(); d == nil || d.DeletionTimestamp == nil || len(h.forcedDeletions()) != 0 {
		t.Fatalf("want the failed incarnation deleted gracefully, deletions %+v", h.deletes)
	}
	// Not Ready, but not yet tainted by the node lifecycle controller: the scheduler would still
	// place the next incarnation there, on a node that runs nothing. Not yet.
	h.setNode("node-a", corev1.ConditionUnknown, h.now)
	h.reconcile()
	if got := h.forcedDeletions(); len(got) != 0 {
		t.Fatalf("force-deleted %v on a node the scheduler does not avoid yet", got)
	}
	h.setNode("node-a", corev1.ConditionUnknown, h.now, corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule})
	h.now = h.now.Add(time.Minute)
	h.reconcile()
	if got := h.forcedDeletions(); strings.Join(got, ",") != "Pod/"+h.names.DriverPodName() {
		t.Fatalf("force-deletions = %v, want the failed incarnation", got)
	}
	if h.deletes[len(h.deletes)-1].uid != first.UID {
		t.Errorf("force-deleted %s, want the failed incarnation %s", h.deletes[len(h.deletes)-1].uid, first.UID)
	}
	h.startIncarnation("node-b")
	h.setDriverStatus(runningStatus(h.now))
	h.reconcile()
	checkStatus(t, h.placeholder(), corev1.PodRunning, "running", true, "node-b")
}

// TestReconcileFinishedAppIsNotRerun: the driver exits 0 and its pod is drained right after,
// before driverset saw the exit: the app Succeeded. Then someone deletes the finished app's
// StatefulSet: it is made again with 0 replicas, so the driver is not run again.
func TestReconcileFinishedAppIsNotRerun(t *testing.T) {
	h := runningCluster(t, nil, nil)
	h.now = t0.Add(time.Hour)
	h.setDriverStatus(exitedStatus(0, h.now.Add(-time.Second)))
	if err := h.c.Delete(h.ctx, h.driver()); err != nil { // the drain; the kubelet stops the idle wrap
		t.Fatal(err)
	}
	h.reconcile()
	checkStatus(t, h.placeholder(), corev1.PodSucceeded, "terminated", false, "exited with code 0")
	h.expectEvents([]string{"Normal Completed"}, nil)

	h.stopped(h.names.DriverPodName())
	if err := h.c.Delete(h.ctx, h.statefulSet()); err != nil {
		t.Fatal(err)
	}
	h.created = nil
	h.reconcile()
	// As created: the StatefulSet controller acts on it before any later scale-down.
	if len(h.created) != 1 {
		t.Fatalf("created %v, want the StatefulSet again", h.creates)
	}
	if s, ok := h.created[0].(*appsv1.StatefulSet); !ok || s.Spec.Replicas == nil || *s.Spec.Replicas != 0 {
		t.Errorf("%s of a finished app made again with replicas %v, want 0", h.creates[0], s.Spec.Replicas)
	}
}

// TestReconcileCorrectsReplicas: someone scales the StatefulSet (kubectl scale). 2 would make S-1,
// a second driver with the same app id; 0 would leave the app Running forever. driverset sets it
// back to 1 while the app runs — but never scales a finished app up on a stale cache.
func TestReconcileCorrectsReplicas(t *testing.T) {
	scale := func(h *cluster, n int32) {
		t.Helper()
		s := h.statefulSet()
		s.Spec.Replicas = &n
		if err := h.c.Update(h.ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []int32{2, 0} {
		h := runningCluster(t, nil, nil)
		scale(h, n)
		template := h.statefulSet().Spec.Template
		h.reconcile()
		if r := h.statefulSet().Spec.Replicas; *r != 1 {
			t.Errorf("replicas %d: corrected to %d, want 1", n, *r)
		}
		// The reconciler reads the StatefulSet from a cache that drops its template: the
		// correction must change replicas alone.
		if got := h.statefulSet().Spec.Template; !equality.Semantic.DeepEqual(got, template) {
			t.Errorf("replicas %d: the correction changed the pod template (%d containers, want %d)", n, len(got.Spec.Containers), len(template.Spec.Containers))
		}
		h.expectEvents([]string{"Warning ReplicasCorrected"}, map[string][]string{"ReplicasCorrected": {h.names.StatefulSet}})
	}

	// The app has just succeeded and S was scaled to 0; the cache has not seen the final status yet.
	h := runningCluster(t, nil, nil)
	stale := h.placeholder()
	h.now = t0.Add(time.Hour)
	h.setDriverStatus(exitedStatus(0, h.now.Add(-time.Second)))
	h.reconcile()
	h.expectEvents([]string{"Normal Completed"}, nil)
	h.r.Client = interceptor.NewClient(h.c.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if p, ok := obj.(*corev1.Pod); ok && key == h.p {
				stale.DeepCopyInto(p)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	_, _ = h.r.Reconcile(h.ctx, ctrl.Request{NamespacedName: h.p}) // the stale status write may conflict
	if r := h.statefulSet().Spec.Replicas; *r != 0 {
		t.Errorf("a finished app's StatefulSet scaled to %d on a stale cache", *r)
	}
}

// TestReconcileGateLiftIsForTheIncarnationDecided: the cache still shows incarnation A (gated,
// with its own executor, so none is stale for it) while the apiserver has its successor B, also
// gated while A's executor exists. The decision made for A must not lift B's gate.
func TestReconcileGateLiftIsForTheIncarnationDecided(t *testing.T) {
	h := newCluster(t, nil, nil)
	h.reconcile()
	h.expectEvents([]string{"Normal Converted"}, nil)
	a := h.startIncarnation("", contract.GateStaleExecutors)
	yes := true
	e := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "pi-exec-1", Namespace: h.p.Namespace,
			Labels: map[string]string{
				contract.LabelSparkAppSelector: h.placeholder().Labels[contract.LabelSparkAppSelector],
				contract.LabelSparkRole:        contract.RoleExecutor,
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: a.Name, UID: a.UID, Controller: &yes}},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "spark-kubernetes-executor", Image: "apache/spark:3.5.3"}}},
	}
	if err := h.c.Create(h.ctx, e); err != nil {
		t.Fatal(err)
	}
	stale := h.driver()
	h.forceRemove(h.names.DriverPodName())
	b := h.startIncarnation("", contract.GateStaleExecutors)
	// The fake numbers each object's resourceVersions from 1, so A and B could share one; on an
	// apiserver every write has its own. One status write makes them differ here too.
	h.setDriverStatus(pendingStatus())
	h.r.Client = interceptor.NewClient(h.c.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if p, ok := obj.(*corev1.Pod); ok && key.Name == h.names.DriverPodName() {
				stale.DeepCopyInto(p)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	_, _ = h.r.Reconcile(h.ctx, ctrl.Request{NamespacedName: h.p})
	if d := h.driver(); d.UID != b.UID || !convert.HasGate(&d.Spec, contract.GateStaleExecutors) {
		t.Errorf("incarnation %s gates %v: the gate was lifted by a decision made for %s", d.UID, d.Spec.SchedulingGates, a.UID)
	}
}

// TestReconcileBuildsFromTheWholePlaceholder: the cache keeps a placeholder without most of its
// spec (placeholderTransform); the StatefulSet is built from the placeholder as it is stored, so
// S-0 gets the driver's environment, volumes and recorded resources.
func TestReconcileBuildsFromTheWholePlaceholder(t *testing.T) {
	h := newCluster(t, nil, nil)
	h.reconcile()
	stored := h.placeholder()
	i, err := convert.DriverContainerIndex(stored)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := h.statefulSet().Spec.Template.Spec
	var driver *corev1.Container
	for j := range tmpl.Containers {
		if tmpl.Containers[j].Name == stored.Spec.Containers[i].Name {
			driver = &tmpl.Containers[j]
		}
	}
	if driver == nil {
		t.Fatalf("S-0's template has no container %s", stored.Spec.Containers[i].Name)
	}
	if len(stored.Spec.Containers[i].Env) == 0 || len(stored.Spec.Volumes) == 0 {
		t.Fatal("the fixture has no env or no volumes: the test proves nothing")
	}
	for _, e := range stored.Spec.Containers[i].Env {
		if !slices.ContainsFunc(driver.Env, func(got corev1.EnvVar) bool { return got.Name == e.Name }) {
			t.Errorf("S-0's driver container lacks the placeholder's env %s", e.Name)
		}
	}
	for _, v := range stored.Spec.Volumes {
		if strings.HasPrefix(v.Name, "kube-api-access-") {
			continue // the apiserver's token volume: S-0 gets its own
		}
		if !slices.ContainsFunc(tmpl.Volumes, func(got corev1.Volume) bool { return got.Name == v.Name }) {
			t.Errorf("S-0's template lacks the placeholder's volume %s", v.Name)
		}
	}
	if len(driver.Resources.Requests) == 0 {
		t.Error("S-0's driver container has no resource requests: the recorded resources were not applied")
	}
}
