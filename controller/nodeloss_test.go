package controller

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodeWith is node-a with its Ready condition status since the given time, and the given taints.
func nodeWith(ready corev1.ConditionStatus, since time.Time, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a"},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
			{Type: corev1.NodeReady, Status: ready, LastTransitionTime: metav1.NewTime(since)},
		}},
	}
}

func TestAssessNode(t *testing.T) {
	lostAt := t0.Add(-90 * time.Second)
	onNode := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pi-driver-0"}, Spec: corev1.PodSpec{NodeName: "node-a"}}
	unscheduled := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pi-driver-0"}}
	outOfService := corev1.Taint{Key: TaintOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}
	unreachable := corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}

	cases := []struct {
		name       string
		driver     *corev1.Pod
		node       *corev1.Node
		fenceAfter time.Duration
		want       NodeLoss
		note       []string // the note must name these
	}{
		{name: "no driver pod", driver: nil, want: NodeLoss{}},
		{name: "driver not scheduled yet", driver: unscheduled, want: NodeLoss{}},
		{name: "node Ready", driver: onNode, node: nodeWith(corev1.ConditionTrue, t0.Add(-time.Hour)), fenceAfter: time.Minute, want: NodeLoss{}},
		{
			name: "node object deleted", driver: onNode, node: nil,
			want: NodeLoss{Lost: true, Since: t0, Cause: CauseNodeDeleted},
			note: []string{"node-a", "deleted"},
		},
		{
			name: "NotReady, no fencing: kept, and the note says what an admin can do", driver: onNode,
			node: nodeWith(corev1.ConditionFalse, lostAt, unreachable),
			want: NodeLoss{Lost: true, Since: lostAt, Cause: CauseNodeLost},
			note: []string{"node-a", "kubectl delete node node-a", TaintOutOfService, "fence-after"},
		},
		{
			name: "Unknown (kubelet stopped posting), no fencing", driver: onNode,
			node: nodeWith(corev1.ConditionUnknown, lostAt, unreachable),
			want: NodeLoss{Lost: true, Since: lostAt, Cause: CauseNodeLost},
			note: []string{"node-a", "kubectl delete node node-a", TaintOutOfService},
		},
		{
			name: "node without a Ready condition: lost since now", driver: onNode,
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}},
			want: NodeLoss{Lost: true, Since: t0, Cause: CauseNodeLost},
			note: []string{"node-a"},
		},
		{
			name: "out-of-service taint: the controller-manager moves the pod", driver: onNode,
			node: nodeWith(corev1.ConditionFalse, lostAt, unreachable, outOfService), fenceAfter: time.Minute,
			want: NodeLoss{Lost: true, Since: lostAt, Cause: CauseOutOfService},
			note: []string{"node-a", "out of service"},
		},
		{
			name: "fence-after not reached: FenceIn is the time left", driver: onNode,
			node: nodeWith(corev1.ConditionUnknown, lostAt), fenceAfter: 2 * time.Minute,
			want: NodeLoss{Lost: true, Since: lostAt, Cause: CauseNodeLost, FenceIn: 30 * time.Second},
			note: []string{"node-a", "force-delete"},
		},
		{
			name: "fence-after reached exactly: fence now", driver: onNode,
			node: nodeWith(corev1.ConditionFalse, lostAt), fenceAfter: 90 * time.Second,
			want: NodeLoss{Lost: true, Since: lostAt, Cause: CauseFenced, Fence: true},
			note: []string{"node-a"},
		},
		{
			name: "fence-after long past: fence now", driver: onNode,
			node: nodeWith(corev1.ConditionFalse, t0.Add(-time.Hour)), fenceAfter: time.Minute,
			want: NodeLoss{Lost: true, Since: t0.Add(-time.Hour), Cause: CauseFenced, Fence: true},
			note: []string{"node-a"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := assessNode(tc.driver, tc.node, tc.fenceAfter, t0)
			note := got.Note
			got.Note = ""
			if !got.Since.Equal(tc.want.Since) {
				t.Errorf("Since = %v, want %v", got.Since, tc.want.Since)
			}
			got.Since, tc.want.Since = time.Time{}, time.Time{}
			if got != tc.want {
				t.Errorf("assessNode = %+v, want %+v", got, tc.want)
			}
			if !tc.want.Lost && note != "" {
				t.Errorf("note %q for a driver that is not lost", note)
			}
			for _, s := range tc.note {
				if !strings.Contains(note, s) {
					t.Errorf("note %q does not name %q", note, s)
				}
			}
		})
	}
}
