package controller

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
)

// placeholderIn is a placeholder whose driver container shows state, in phase, with the loss
// record rec (nil: none).
func placeholderIn(phase corev1.PodPhase, state corev1.ContainerState, rec *lostRecord) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app-driver", Namespace: "ns",
			Labels: map[string]string{contract.LabelPlaceholder: "true"}, Annotations: map[string]string{}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: contract.DriverContainerName}}},
		Status: corev1.PodStatus{Phase: phase,
			ContainerStatuses: []corev1.ContainerStatus{{Name: contract.DriverContainerName, State: state}}},
	}
	if rec != nil {
		b, _ := json.Marshal(rec)
		p.Annotations[contract.AnnotationDriverLost] = string(b)
	}
	return p
}

func waiting(reason string) corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}
}

var runningState = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}

// TestStateOf is the gauge's spec: what each placeholder counts as.
func TestStateOf(t *testing.T) {
	lostAt := t0.Add(-7 * time.Minute)
	for _, tc := range []struct {
		name      string
		p         corev1.Pod
		want      DriverState
		wantSince time.Time
	}{
		{"admitted, no driver pod yet", placeholderIn(corev1.PodPending, waiting("DriverPending"), nil), StatePending, time.Time{}},
		{"driver pod scheduled, not started", placeholderIn(corev1.PodPending, waiting("DriverPending"), nil), StatePending, time.Time{}},
		{"driver runs", placeholderIn(corev1.PodRunning, runningState, nil), StateRunning, time.Time{}},
		{"process failed, in backoff", placeholderIn(corev1.PodRunning, waiting(ReasonRestarting), nil), StateRestarting, time.Time{}},
		{"in backoff, whatever the phase: the container's reason says it", placeholderIn(corev1.PodPending, waiting(ReasonRestarting), nil), StateRestarting, time.Time{}},
		{"no container status yet", func() corev1.Pod {
			p := placeholderIn(corev1.PodPending, corev1.ContainerState{}, nil)
			p.Status.ContainerStatuses = nil
			return p
		}(), StatePending, time.Time{}},
		{"new incarnation after a failure, not running yet", placeholderIn(corev1.PodRunning, waiting("DriverPending"), nil), StateRestarting, time.Time{}},
		{"driver pod create refused (quota)", placeholderIn(corev1.PodPending, waiting(ReasonFailedCreate), nil), StateBlocked, time.Time{}},
		{"node lost, no fencing: waits for an admin",
			placeholderIn(corev1.PodRunning, runningState, &lostRecord{Pod: "u1", Since: lostAt, Cause: CauseNodeLost}), StateLostNode, lostAt},
		{"node lost, fence-after armed",
			placeholderIn(corev1.PodRunning, runningState, &lostRecord{Pod: "u1", Since: lostAt, Cause: CauseNodeLost, Fencing: true}), StateFencing, time.Time{}},
		{"fenced, new incarnation on its way",
			placeholderIn(corev1.PodRunning, waiting("DriverPending"), &lostRecord{Pod: "u1", Since: lostAt, Cause: CauseFenced}), StateRecovering, time.Time{}},
		{"node taken out of service",
			placeholderIn(corev1.PodRunning, runningState, &lostRecord{Pod: "u1", Since: lostAt, Cause: CauseOutOfService}), StateRecovering, time.Time{}},
		{"pod evicted from a healthy node",
			placeholderIn(corev1.PodRunning, runningState, &lostRecord{Pod: "u1", Since: lostAt, Cause: CausePodDeleted}), StateRecovering, time.Time{}},
		{"completed", placeholderIn(corev1.PodSucceeded, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}, nil), StateSucceeded, time.Time{}},
		{"failed for good", placeholderIn(corev1.PodFailed, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}, nil), StateFailed, time.Time{}},
		{"ended while lost: the end wins",
			placeholderIn(corev1.PodFailed, corev1.ContainerState{}, &lostRecord{Pod: "u1", Since: lostAt, Cause: CauseNodeLost}), StateFailed, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, since := stateOf(&tc.p)
			if got != tc.want || !since.Equal(tc.wantSince) {
				t.Errorf("stateOf = %s since %v, want %s since %v", got, since, tc.want, tc.wantSince)
			}
		})
	}
}

func TestTallyOldestWaitForAdmin(t *testing.T) {
	now := t0
	pods := []corev1.Pod{
		placeholderIn(corev1.PodRunning, runningState, nil),
		placeholderIn(corev1.PodRunning, runningState, &lostRecord{Since: now.Add(-3 * time.Minute), Cause: CauseNodeLost}),
		placeholderIn(corev1.PodRunning, runningState, &lostRecord{Since: now.Add(-9 * time.Minute), Cause: CauseNodeLost}),
		// Waiting longer, but for fencing, which ends on its own: not an admin's wait.
		placeholderIn(corev1.PodRunning, runningState, &lostRecord{Since: now.Add(-time.Hour), Cause: CauseNodeLost, Fencing: true}),
	}
	counts, oldest := tally(pods, now)
	if counts[StateRunning] != 1 || counts[StateLostNode] != 2 || counts[StateFencing] != 1 {
		t.Errorf("counts = %v, want 1 running, 2 waiting for an admin, 1 fencing", counts)
	}
	if oldest != 9*time.Minute {
		t.Errorf("oldest wait = %v, want 9m", oldest)
	}
	if _, oldest := tally(pods[:1], now); oldest != 0 {
		t.Errorf("oldest wait with none waiting = %v, want 0", oldest)
	}
}

// TestReconcileRecordsWhoEndsTheWait: the reconciler's loss record says whether fencing is armed,
// which is what tells "waiting for an admin" from "fencing" in the gauge.
func TestReconcileRecordsWhoEndsTheWait(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        DriverState
	}{
		{"no fence-after: an admin must act", nil, StateLostNode},
		{"fence-after 10m: driverset will fence", map[string]string{contract.AnnotationFenceAfter: "10m"}, StateFencing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := runningCluster(t, tc.annotations, nil)
			// A healthy node beside it: with every node of the zone lost, fencing is held.
			h.setNode("node-b", corev1.ConditionTrue, t0)
			lost := t0.Add(2 * time.Minute)
			h.setNode("node-a", corev1.ConditionUnknown, lost, unreachableTaints()...)
			h.now = lost.Add(time.Minute)
			h.reconcile()
			if got, _ := stateOf(h.placeholder()); got != tc.want {
				t.Errorf("state = %s, want %s (loss record %+v)", got, tc.want, lostOf(h.placeholder()))
			}
		})
	}
}
