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
	unreachableNoSchedule := corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule}
	tolerating := onNode.DeepCopy()
	tolerating.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists,
		Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(300))}}

	cases := []struct {
		name       string
		driver     *corev1.Pod
		node       *corev1.Node
		fenceAfter time.Duration
		zone       Zone      // the driver's node's zone; zero: healthy
		hb         Heartbeat // a self-fencing driver's heartbeat; zero: none
		want       NodeLoss
		note       []string // the note must name these
	}{
		{name: "no driver pod", driver: nil, want: NodeLoss{}},
		{name: "driver not scheduled yet", driver: unscheduled, want: NodeLoss{}},
		{name: "node Ready", driver: onNode, node: nodeWith(corev1.ConditionTrue, t0.Add(-time.Hour)), fenceAfter: time.Minute, want: NodeLoss{}},
		{
			// Proof for PodGC too (after its quarantine and a live GET, which planLoss asks for
			// before it acts): no kubelet is left to run the driver or to confirm its end.
			name: "node object deleted: force-delete now, fence-after or not", driver: onNode, node: nil,
			want: NodeLoss{Lost: true, Since: t0, Cause: CauseNodeDeleted, Fence: true},
			note: []string{"node-a", "deleted", "force-delete"},
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
			// PodGC's condition: the taint and the node not Ready. An admin's statement that the
			// node is down; needs no fence-after and ignores the zone.
			name: "out-of-service taint, NotReady: force-delete now", driver: onNode,
			node: nodeWith(corev1.ConditionFalse, lostAt, unreachable, outOfService),
			want: NodeLoss{Lost: true, Since: lostAt, Cause: CauseOutOfService, Fence: true},
			note: []string{"node-a", "out of service", "force-delete"},
		},
		{
			name: "out-of-service taint, Unknown, zone disrupted: force-delete now", driver: onNode,
			node: nodeWith(corev1.ConditionUnknown, lostAt, unreachable, outOfService), fenceAfter: time.Minute,
			zone: Zone{NotReady: 3, Total: 3},
			want: NodeLoss{Lost: true, Since: lostAt, Cause: CauseOutOfService, Fence: true},
		},
		{
			name: "out-of-service taint, no Ready condition: force-delete now", driver: onNode,
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{outOfService}}},
			want: NodeLoss{Lost: true, Since: t0, Cause: CauseOutOfService, Fence: true},
		},
		{
			// PodGC too requires the node not Ready: the taint on a node that still runs pods
			// (put on too early, or left after a repair) proves nothing.
			name: "out-of-service taint on a Ready node: nothing lost", driver: onNode,
			node: nodeWith(corev1.ConditionTrue, lostAt, outOfService), want: NodeLoss{},
		},
		{
			// Kubernetes evicts only for NoExecute (PodGC removes only pods already terminating):
			// with NoSchedule the pod stays, and so does the driver's.
			name: "out-of-service NoSchedule, NotReady: a lost node like any other", driver: onNode,
			node: nodeWith(corev1.ConditionFalse, lostAt, corev1.Taint{Key: TaintOutOfService, Effect: corev1.TaintEffectNoSchedule}),
			want: NodeLoss{Lost: true, Since: lostAt, Cause: CauseNodeLost},
		},
		{
			// A pod that tolerates the taint is not evicted, so Kubernetes never removes it.
			name: "out-of-service taint the driver tolerates: a lost node like any other",
			driver: &corev1.Pod{ObjectMeta: onNode.ObjectMeta, Spec: corev1.PodSpec{NodeName: "node-a",
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}},
			node: nodeWith(corev1.ConditionFalse, lostAt, outOfService),
			want: NodeLoss{Lost: true, Since: lostAt, Cause: CauseNodeLost},
		},
		{
			name: "fence-after not reached: FenceIn is the time left", driver: onNode,
			node: nodeWith(corev1.ConditionUnknown, lostAt, unreachable), fenceAfter: 2 * time.Minute,
			want: NodeLoss{Lost: true, Since: lostAt, Cause: CauseNodeLost, FenceIn: 30 * time.Second},
			note: []string{"node-a", "force-delete"},
		},
		{
			name: "fence-after reached exactly: fence now", driver: onNode,
			node: nodeWith(corev1.ConditionUnknown, lostAt, unreachable), fenceAfter: 90 * time.Second,
			want: NodeLoss{Lost: true, Since: lostAt, Cause: CauseFenced, Fence: true},
			note: []string{"node-a"},
		},
		{
			name: "fence-after long past: fence now", driver: onNode,
			node: nodeWith(corev1.ConditionUnknown, t0.Add(-time.Hour), unreachable), fenceAfter: time.Minute,
			want: NodeLoss{Lost: true, Since: t0.Add(-time.Hour), Cause: CauseFenced, Fence: true},
			note: []string{"node-a"},
		},
		{
			// Ready=False: the kubelet is up and reporting (PLEG unhealthy, a hung runtime); the
			// driver usually still runs, and force-deleting its pod would start a second one.
			name: "NotReady but reporting, fence-after long past: never fenced", driver: onNode,
			node: nodeWith(corev1.ConditionFalse, t0.Add(-time.Hour), unreachable), fenceAfter: time.Minute,
			want: NodeLoss{Lost: true, Since: t0.Add(-time.Hour), Cause: CauseNodeLost},
			note: []string{"node-a", "still reports", "not force-deleted"},
		},
		{
			// Unknown but not (yet, or no longer) tainted unreachable by the node lifecycle
			// controller, which removes the taint itself when it judges the whole zone disrupted.
			name: "Unknown without the unreachable taint: not fenced", driver: onNode,
			node: nodeWith(corev1.ConditionUnknown, t0.Add(-time.Hour)), fenceAfter: time.Minute,
			want: NodeLoss{Lost: true, Since: t0.Add(-time.Hour), Cause: CauseNodeLost},
			note: []string{"node-a", corev1.TaintNodeUnreachable},
		},
		{
			// A real pod tolerates unreachable:NoExecute for 300 s (DefaultTolerationSeconds), so
			// with only that taint on the node the scheduler would bind the next S-0 right back to
			// it. Fencing waits for the NoSchedule taint, which keeps the next one off the node.
			name: "Unknown, tainted only NoExecute, which the driver tolerates: not fenced yet", driver: tolerating,
			node: nodeWith(corev1.ConditionUnknown, t0.Add(-time.Hour), unreachable), fenceAfter: time.Minute,
			want: NodeLoss{Lost: true, Since: t0.Add(-time.Hour), Cause: CauseNodeLost},
			note: []string{"node-a", corev1.TaintNodeUnreachable + ":NoSchedule"},
		},
		{
			name: "Unknown, tainted NoSchedule too: fenced", driver: tolerating,
			node: nodeWith(corev1.ConditionUnknown, t0.Add(-time.Hour), unreachable, unreachableNoSchedule), fenceAfter: time.Minute,
			want: NodeLoss{Lost: true, Since: t0.Add(-time.Hour), Cause: CauseFenced, Fence: true},
			note: []string{"node-a", "force-delete"},
		},
		{
			// As the node lifecycle controller stops evicting: every node of the zone is not
			// Ready (full disruption) — more likely the network to the control plane than them all.
			name: "zone fully disrupted: fencing held", driver: onNode,
			node: nodeWith(corev1.ConditionUnknown, t0.Add(-time.Hour), unreachable), fenceAfter: time.Minute,
			zone: Zone{NotReady: 3, Total: 3},
			want: NodeLoss{Lost: true, Since: t0.Add(-time.Hour), Cause: CauseNodeLost},
			note: []string{"node-a", "3 of 3 nodes", "not force-deleted"},
		},
		{
			name: "zone partially disrupted (more than 2, at least 55%): fencing held", driver: onNode,
			node: nodeWith(corev1.ConditionUnknown, t0.Add(-time.Hour), unreachable), fenceAfter: time.Minute,
			zone: Zone{NotReady: 11, Total: 20},
			want: NodeLoss{Lost: true, Since: t0.Add(-time.Hour), Cause: CauseNodeLost},
			note: []string{"11 of 20 nodes"},
		},
		{
			name: "two of three nodes lost is no disruption: fenced", driver: onNode,
			node: nodeWith(corev1.ConditionUnknown, t0.Add(-time.Hour), unreachable), fenceAfter: time.Minute,
			zone: Zone{NotReady: 2, Total: 3},
			want: NodeLoss{Lost: true, Since: t0.Add(-time.Hour), Cause: CauseFenced, Fence: true},
		},
		{
			name: "10 of 20 is below the threshold: fenced", driver: onNode,
			node: nodeWith(corev1.ConditionUnknown, t0.Add(-time.Hour), unreachable), fenceAfter: time.Minute,
			zone: Zone{NotReady: 10, Total: 20},
			want: NodeLoss{Lost: true, Since: t0.Add(-time.Hour), Cause: CauseFenced, Fence: true},
		},
		// Self-fencing (issue 12): the node unreachable AND no renewal seen for T plus the margin.
		{
			name: "self-fence, unreachable, heartbeat silent T+margin: fenced", driver: onNode,
			node: nodeWith(corev1.ConditionUnknown, lostAt, unreachable), hb: Heartbeat{T: time.Minute, Silent: time.Minute + 11*time.Second},
			want: NodeLoss{Lost: true, Since: lostAt, Cause: CauseSelfFenced, Fence: true},
			note: []string{"node-a", "heartbeat", "1m11s"},
		},
		{
			name: "self-fence, unreachable, heartbeat silent only T: not yet (the margin)", driver: onNode,
			node: nodeWith(corev1.ConditionUnknown, lostAt, unreachable), hb: Heartbeat{T: time.Minute, Silent: time.Minute},
			want: NodeLoss{Lost: true, Since: lostAt, Cause: CauseNodeLost, FenceIn: 11 * time.Second},
		},
		{
			// The kubelet is dead but the network works: the driver still renews, and runs.
			name: "self-fence, unreachable for an hour, heartbeat renewed just now: kept", driver: onNode,
			node: nodeWith(corev1.ConditionUnknown, t0.Add(-time.Hour), unreachable), hb: Heartbeat{T: time.Minute, Silent: 0},
			want: NodeLoss{Lost: true, Since: t0.Add(-time.Hour), Cause: CauseNodeLost, FenceIn: time.Minute + 11*time.Second},
		},
		{
			name: "self-fence, heartbeat silent but node only Ready=False (kubelet reports): kept", driver: onNode,
			node: nodeWith(corev1.ConditionFalse, lostAt, unreachable), hb: Heartbeat{T: time.Minute, Silent: time.Hour},
			want: NodeLoss{Lost: true, Since: lostAt, Cause: CauseNodeLost},
		},
		{
			name: "self-fence, heartbeat silent, node Unknown but not tainted unreachable yet: kept", driver: onNode,
			node: nodeWith(corev1.ConditionUnknown, lostAt), hb: Heartbeat{T: time.Minute, Silent: time.Hour},
			want: NodeLoss{Lost: true, Since: lostAt, Cause: CauseNodeLost},
		},
		{
			name: "self-fence, heartbeat silent, node Ready: nothing", driver: onNode,
			node: nodeWith(corev1.ConditionTrue, lostAt), hb: Heartbeat{T: time.Minute, Silent: time.Hour},
			want: NodeLoss{},
		},
		{
			// The heartbeat proves the driver stopped, partition or not.
			name: "self-fence holds in a disrupted zone: fenced", driver: onNode,
			node: nodeWith(corev1.ConditionUnknown, lostAt, unreachable), zone: Zone{NotReady: 20, Total: 20},
			hb:   Heartbeat{T: time.Minute, Silent: time.Hour},
			want: NodeLoss{Lost: true, Since: lostAt, Cause: CauseSelfFenced, Fence: true},
		},
		{
			// fence-after's clock (the node's condition) does not apply to a self-fencing driver.
			name: "self-fence wins over an elapsed fence-after while it renews", driver: onNode,
			node: nodeWith(corev1.ConditionUnknown, t0.Add(-time.Hour), unreachable), fenceAfter: time.Second,
			hb:   Heartbeat{T: time.Minute, Silent: 30 * time.Second},
			want: NodeLoss{Lost: true, Since: t0.Add(-time.Hour), Cause: CauseNodeLost, FenceIn: 41 * time.Second},
		},
		{
			name: "node deleted: force-deleted at once, self-fencing or not", driver: onNode, node: nil,
			hb:   Heartbeat{T: time.Minute},
			want: NodeLoss{Lost: true, Since: t0, Cause: CauseNodeDeleted, Fence: true},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := assessNode(tc.driver, tc.node, tc.zone, tc.fenceAfter, tc.hb, t0)
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

// provenDown is also what clears the stale executors on the node at once.
func TestProvenDown(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "node-a"}}
	tolerant := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "node-a", Tolerations: []corev1.Toleration{{Key: TaintOutOfService, Operator: corev1.TolerationOpExists}}}}
	oos := corev1.Taint{Key: TaintOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}
	cases := []struct {
		name  string
		pod   *corev1.Pod
		node  *corev1.Node
		cause string
	}{
		{"node deleted", pod, nil, CauseNodeDeleted},
		{"tainted, Ready False", pod, nodeWith(corev1.ConditionFalse, t0, oos), CauseOutOfService},
		{"tainted, Ready Unknown", pod, nodeWith(corev1.ConditionUnknown, t0, oos), CauseOutOfService},
		{"tainted, Ready", pod, nodeWith(corev1.ConditionTrue, t0, oos), ""},
		{"tainted, tolerated", tolerant, nodeWith(corev1.ConditionUnknown, t0, oos), ""},
		{"not Ready, untainted", pod, nodeWith(corev1.ConditionUnknown, t0, corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}), ""},
	}
	for _, tc := range cases {
		if got := provenDown(tc.pod, tc.node); got != tc.cause {
			t.Errorf("%s: provenDown = %q, want %q", tc.name, got, tc.cause)
		}
	}
}

func TestZoneOf(t *testing.T) {
	in := func(name, region, zone string, ready corev1.ConditionStatus) corev1.Node {
		n := nodeWith(ready, t0)
		n.Name = name
		n.Labels = map[string]string{}
		if region != "" {
			n.Labels[corev1.LabelTopologyRegion] = region
		}
		if zone != "" {
			n.Labels[corev1.LabelTopologyZone] = zone
		}
		return *n
	}
	nodes := []corev1.Node{
		in("a1", "r", "a", corev1.ConditionUnknown),
		in("a2", "r", "a", corev1.ConditionFalse),
		in("a3", "r", "a", corev1.ConditionTrue),
		in("b1", "r", "b", corev1.ConditionUnknown),
		in("x1", "other", "a", corev1.ConditionUnknown), // zone "a" of another region
		in("n1", "", "", corev1.ConditionTrue),
		{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}, // no Ready condition yet: not Ready
	}
	cases := []struct {
		node string
		want Zone
	}{
		{"a1", Zone{NotReady: 2, Total: 3}},
		{"b1", Zone{NotReady: 1, Total: 1}},
		{"x1", Zone{NotReady: 1, Total: 1}},
		{"n1", Zone{NotReady: 1, Total: 2}},
	}
	for _, tc := range cases {
		var node *corev1.Node
		for i := range nodes {
			if nodes[i].Name == tc.node {
				node = &nodes[i]
			}
		}
		if got := zoneOf(node, nodes); got != tc.want {
			t.Errorf("zoneOf(%s) = %+v, want %+v", tc.node, got, tc.want)
		}
	}
}

// TestDeadAndAvoided: a restarted driver's pod, Terminating on its node, is force-deleted only
// when no kubelet will confirm its end and the scheduler keeps the StatefulSet's next pod off
// that node.
func TestDeadAndAvoided(t *testing.T) {
	taint := func(key string, effect corev1.TaintEffect) corev1.Taint {
		return corev1.Taint{Key: key, Effect: effect}
	}
	// What the DefaultTolerationSeconds admission plugin gives every pod.
	defaults := []corev1.Toleration{
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(300))},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(300))},
	}
	everything := []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	cases := []struct {
		name        string
		node        *corev1.Node
		tolerations []corev1.Toleration
		want        bool
	}{
		{"Ready: its kubelet will confirm the deletion", nodeWith(corev1.ConditionTrue, t0), defaults, false},
		{"Ready and cordoned: still its kubelet's", nodeWith(corev1.ConditionTrue, t0, taint(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule)), defaults, false},
		{"unreachable, not tainted yet: the next pod could land there", nodeWith(corev1.ConditionUnknown, t0), defaults, false},
		{"unreachable, only the NoExecute taint, which the pod tolerates", nodeWith(corev1.ConditionUnknown, t0, taint(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute)), defaults, false},
		{"unreachable and tainted NoSchedule", nodeWith(corev1.ConditionUnknown, t0, taint(corev1.TaintNodeUnreachable, corev1.TaintEffectNoSchedule)), defaults, true},
		{"not Ready and tainted NoSchedule", nodeWith(corev1.ConditionFalse, t0, taint(corev1.TaintNodeNotReady, corev1.TaintEffectNoSchedule)), defaults, true},
		{"out of service", nodeWith(corev1.ConditionUnknown, t0, taint(TaintOutOfService, corev1.TaintEffectNoExecute)), defaults, true},
		{"a PreferNoSchedule taint keeps no pod off", nodeWith(corev1.ConditionUnknown, t0, taint("example.com/slow", corev1.TaintEffectPreferNoSchedule)), defaults, false},
		{"no Ready condition at all, tainted NoSchedule", &corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{taint(corev1.TaintNodeUnreachable, corev1.TaintEffectNoSchedule)}}}, defaults, true},
		{"a pod that tolerates everything gains nothing by waiting", nodeWith(corev1.ConditionUnknown, t0), everything, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := deadAndAvoided(c.node, c.tolerations); got != c.want {
				t.Errorf("deadAndAvoided = %v, want %v", got, c.want)
			}
		})
	}
}
