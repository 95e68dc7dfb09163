package controller

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
)

// forceDeletable is what deletes.driverset.dev admits of a driver pod removed without its
// kubelet: the proof the controller fences on, and nothing less. (That each force-delete the
// controller makes passes it is checked by the harness: cluster.delete asks ForceDeletion.)
func TestForceDeletable(t *testing.T) {
	lostAt := t0.Add(-10 * time.Minute)
	running := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pi-ds-0", Namespace: "team-a"},
		Spec:       corev1.PodSpec{NodeName: "node-a"},
		Status:     runningStatus(t0.Add(-time.Hour)),
	}
	exited := running.DeepCopy()
	exited.Status = exitedStatus(1, lostAt.Add(-time.Minute))
	exitedDeleted := exited.DeepCopy()
	exitedDeleted.DeletionTimestamp = &metav1.Time{Time: lostAt}
	runningDeleted := running.DeepCopy()
	runningDeleted.DeletionTimestamp = &metav1.Time{Time: lostAt}
	unbound := running.DeepCopy()
	unbound.Spec.NodeName = ""
	ended := running.DeepCopy()
	ended.Status.Phase = corev1.PodSucceeded
	outOfService := corev1.Taint{Key: TaintOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}
	ready := nodeWith(corev1.ConditionTrue, t0.Add(-time.Hour))
	cutOff := nodeWith(corev1.ConditionUnknown, lostAt, unreachableTaints()...)
	cutOffUntainted := nodeWith(corev1.ConditionUnknown, lostAt)

	for _, tc := range []struct {
		name       string
		pod        *corev1.Pod
		node       *corev1.Node
		fenceAfter time.Duration
		zone       Zone
		hb         Heartbeat
		want       bool
		why        string // the answer names it
	}{
		{name: "never bound", pod: unbound, want: true, why: "never bound"},
		{name: "ended, as its kubelet reported", pod: ended, node: ready, want: true, why: "Succeeded"},
		{name: "running on a Ready node", pod: running, node: ready, fenceAfter: time.Minute, why: "node-a is Ready"},
		{name: "its Node deleted", pod: running, node: nil, want: true, why: CauseNodeDeleted},
		{name: "its node out of service", pod: running, node: nodeWith(corev1.ConditionUnknown, lostAt, outOfService), want: true, why: CauseOutOfService},
		{name: "cut off, no fence-after", pod: running, node: cutOff, why: "not been Ready"},
		{name: "cut off, fence-after not over", pod: running, node: cutOff, fenceAfter: time.Hour, why: "will force-delete"},
		{name: "cut off, fence-after over", pod: running, node: cutOff, fenceAfter: 5 * time.Minute, want: true, why: CauseFenced},
		{name: "cut off, fence-after over, but its zone disrupted", pod: running, node: cutOff, fenceAfter: 5 * time.Minute,
			zone: Zone{Total: 3, NotReady: 3}, why: "partition"},
		{name: "cut off, not tainted yet", pod: running, node: cutOffUntainted, fenceAfter: 5 * time.Minute, why: "tainted"},
		{name: "self-fencing, heartbeat silent for T and its margin", pod: running, node: cutOff,
			hb: Heartbeat{T: time.Minute, Silent: 2 * time.Minute}, want: true, why: CauseSelfFenced},
		{name: "self-fencing, heartbeat renewed lately", pod: running, node: cutOff,
			hb: Heartbeat{T: time.Minute, Silent: 30 * time.Second}, why: "stops itself"},
		{name: "deleted, its exit recorded, node down and avoided", pod: exitedDeleted, node: cutOff, want: true, why: "exit is recorded"},
		{name: "deleted, its exit recorded, node Ready", pod: exitedDeleted, node: ready, why: "node-a is Ready"},
		{name: "deleted, its exit recorded, node down, not tainted yet", pod: exitedDeleted, node: cutOffUntainted, why: "not been Ready"},
		{name: "deleted while running, node down, no fence", pod: runningDeleted, node: cutOff, why: "not been Ready"},
		{name: "exited, not deleted, node down", pod: exited, node: cutOff, why: "not been Ready"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := forceDeletable(tc.pod, tc.node, tc.zone, tc.fenceAfter, tc.hb, contract.DriverContainerName, t0)
			if got != tc.want {
				t.Errorf("forceDeletable = %v (%s), want %v", got, why, tc.want)
			}
			if !strings.Contains(why, tc.why) {
				t.Errorf("why = %q, does not name %q", why, tc.why)
			}
		})
	}
}
