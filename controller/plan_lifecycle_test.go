package controller

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/driverset/driverset/contract"
)

// planPlaceholder is a placeholder P for the plan's tables, with the given annotations.
func planPlaceholder(annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "jobs", UID: "p-uid", Annotations: annotations},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: contract.DriverContainerName}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// planDriver is S-0, incarnation uid, on node-a with status st.
func planDriver(uid types.UID, st corev1.PodStatus) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pi-driver-0", Namespace: "jobs", UID: uid, CreationTimestamp: metav1.NewTime(t0)},
		Spec:       corev1.PodSpec{NodeName: "node-a"},
		Status:     st,
	}
}

// counted is P's annotations after restarts used restarts, the last of incarnation uid.
func counted(used, total int, uid types.UID) map[string]string {
	return map[string]string{
		contract.AnnotationRestarts:             strconv.Itoa(used),
		contract.AnnotationRestartsTotal:        strconv.Itoa(total),
		contract.AnnotationRestartedIncarnation: string(uid),
	}
}

// TestPlanLifecycle: what the driver's outcome means, with the restarts P counted and its
// settings. The table reads as the lifecycle's spec (docs/design.md#lifecycle-decisions).
func TestPlanLifecycle(t *testing.T) {
	exited := t0.Add(-time.Minute)
	settings := Effective{MaxRestarts: 2, RestartWindow: time.Hour}
	base := Budget{Backoff: 10 * time.Second, MaxBackoff: 5 * time.Minute}
	// The deletion came before the exit: outcomeOf does not take such an exit as the driver's own.
	deletedFirst := planDriver("inc-1", exitedStatus(1, t0.Add(time.Second)))
	deletedFirst.DeletionTimestamp = &metav1.Time{Time: t0}
	healthy := exitedStatus(1, exited)
	healthy.ContainerStatuses[0].LastTerminationState.Terminated.StartedAt = metav1.NewTime(exited.Add(-2 * time.Hour))

	cases := []struct {
		name      string
		p         *corev1.Pod
		driver    *corev1.Pod
		now       time.Time
		action    Action
		after     time.Duration
		used      int
		forgotten int
	}{
		{name: "no driver pod yet: observe", p: planPlaceholder(nil), driver: nil, now: t0, action: Observe},
		{name: "the driver runs: observe", p: planPlaceholder(nil), driver: planDriver("inc-1", runningStatus(t0)), now: t0, action: Observe},
		{name: "exit 0: succeed", p: planPlaceholder(nil), driver: planDriver("inc-1", exitedStatus(0, exited)), now: t0, action: Succeed},
		{name: "a failure within its backoff: wait for the rest of it", p: planPlaceholder(nil),
			driver: planDriver("inc-1", exitedStatus(1, t0.Add(-4*time.Second))), now: t0, action: Wait, after: 6 * time.Second},
		{name: "a failure past its backoff: restart", p: planPlaceholder(nil),
			driver: planDriver("inc-1", exitedStatus(1, exited)), now: t0, action: Restart},
		{name: "a failure with every restart used: fail", p: planPlaceholder(counted(2, 2, "inc-0")),
			driver: planDriver("inc-1", exitedStatus(1, exited)), now: t0, action: Fail, used: 2},
		{name: "a failure after a run longer than the window: the restarts before are forgotten", p: planPlaceholder(counted(2, 2, "inc-0")),
			driver: planDriver("inc-1", healthy), now: t0, action: Restart, used: 0, forgotten: 2},
		{name: "the incarnation counted already: its restart is under way, though its deletion came before its exit",
			p: planPlaceholder(counted(1, 1, "inc-1")), driver: deletedFirst, now: t0.Add(time.Minute), action: Restart, used: 1},
		{name: "another incarnation deleted before its exit: no outcome of its own, observe", p: planPlaceholder(counted(1, 1, "inc-0")),
			driver: deletedFirst, now: t0.Add(time.Minute), action: Observe, used: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := planLifecycle(c.p, c.driver, contract.DriverContainerName, settings, base, c.now)
			if l.Decision.Action != c.action || l.Decision.After != c.after {
				t.Errorf("decision %+v, want action %d after %s", l.Decision, c.action, c.after)
			}
			if l.Budget.Used != c.used || l.Forgotten != c.forgotten {
				t.Errorf("used %d, forgotten %d; want %d, %d", l.Budget.Used, l.Forgotten, c.used, c.forgotten)
			}
			if l.Budget.Max != settings.MaxRestarts || l.Budget.Window != settings.RestartWindow || l.Budget.Backoff != base.Backoff {
				t.Errorf("budget %+v does not take max and window from the settings, backoff from the base", l.Budget)
			}
		})
	}
}

// TestPlanRestart: a failed incarnation is counted once (a self-fenced one is noted, not counted),
// told, and then deleted by its UID; one left Terminating is force-deleted only once its node is
// dead and avoided.
func TestPlanRestart(t *testing.T) {
	failed := Outcome{Exited: true, Code: 3, PodUID: "inc-1", StartedAt: t0.Add(-time.Hour), FinishedAt: t0}
	restart := func(o Outcome, used int, restarted types.UID) lifecycle {
		return lifecycle{Budget: Budget{Max: 5, Used: used, Restarted: restarted, Window: time.Hour}, Outcome: o, Decision: Decision{Action: Restart}}
	}
	driver := planDriver("inc-1", exitedStatus(3, t0))
	terminating := driver.DeepCopy()
	terminating.DeletionTimestamp = &metav1.Time{Time: t0}
	selfFenced := failed
	selfFenced.SelfFenced = true
	forgot := restart(failed, 0, "inc-0")
	forgot.Forgotten = 2
	lost := nodeWith(corev1.ConditionUnknown, t0, unreachableTaints()...)
	notYetTainted := nodeWith(corev1.ConditionUnknown, t0)

	cases := []struct {
		name        string
		p           *corev1.Pod
		driver      *corev1.Pod
		node        *corev1.Node
		l           lifecycle
		want        []Step
		used, total int
		note        string // the Restarting Event's note contains it
	}{
		{name: "a failure not counted yet: counted, told, then deleted", p: planPlaceholder(nil), driver: driver, node: nodeWith(corev1.ConditionTrue, t0),
			l: restart(failed, 0, ""), used: 1, total: 1, note: "Restarting: the driver exited with code 3 in pod jobs/pi-driver-0; starting a new incarnation (restart 1 of 5)",
			want: []Step{recordRestartStep{Used: 1, Total: 1, Incarnation: "inc-1"}, countRestartStep{}, eventStep{}, deleteDriverStep{UID: "inc-1"}}},
		{name: "a failure after a healthy run: the Event says what was forgotten", p: planPlaceholder(counted(2, 2, "inc-0")), driver: driver,
			l: forgot, used: 1, total: 3, note: "after a run of 1h0m0s, at least " + contract.AnnotationRestartWindow + " 1h, the 2 restart(s) before forgotten",
			want: []Step{recordRestartStep{Used: 1, Total: 3, Incarnation: "inc-1"}, countRestartStep{}, eventStep{}, deleteDriverStep{UID: "inc-1"}}},
		{name: "counted already, its deletion not seen yet: deleted again, not counted twice", p: planPlaceholder(counted(1, 1, "inc-1")), driver: driver,
			l: restart(failed, 1, "inc-1"), used: 1, total: 1,
			want: []Step{deleteDriverStep{UID: "inc-1"}}},
		{name: "self-fenced: noted, not counted, and deleted", p: planPlaceholder(counted(1, 4, "inc-0")), driver: driver,
			l: restart(selfFenced, 1, "inc-0"), used: 1, total: 4, note: "SelfFenced: the driver in pod jobs/pi-driver-0 was stopped by driverset wrap",
			want: []Step{recordRestartStep{Used: 1, Total: 4, Incarnation: "inc-1"}, eventStep{}, deleteDriverStep{UID: "inc-1"}}},
		{name: "Terminating on a Ready node: its kubelet will end it, nothing forced", p: planPlaceholder(counted(1, 1, "inc-1")), driver: terminating,
			node: nodeWith(corev1.ConditionTrue, t0), l: restart(failed, 1, "inc-1"), used: 1, total: 1},
		{name: "Terminating on a lost node not yet tainted NoSchedule: held, the next one would land there", p: planPlaceholder(counted(1, 1, "inc-1")),
			driver: terminating, node: notYetTainted, l: restart(failed, 1, "inc-1"), used: 1, total: 1},
		{name: "Terminating on a lost node the scheduler avoids: force-deleted", p: planPlaceholder(counted(1, 1, "inc-1")), driver: terminating,
			node: lost, l: restart(failed, 1, "inc-1"), used: 1, total: 1,
			want: []Step{deleteDriverStep{UID: "inc-1", Force: true}}},
		{name: "Terminating on a node that is gone: force-deleted", p: planPlaceholder(counted(1, 1, "inc-1")), driver: terminating,
			node: nil, l: restart(failed, 1, "inc-1"), used: 1, total: 1,
			want: []Step{deleteDriverStep{UID: "inc-1", Force: true}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rp := planRestart(c.p, c.driver, c.node, c.l)
			var notes []string
			got := make([]Step, len(rp.Steps))
			for i, st := range rp.Steps {
				if e, ok := st.(eventStep); ok {
					if e.Related != nil && e.Related.GetName() != c.driver.Name {
						t.Errorf("Event about %s, want the incarnation", e.Related.GetName())
					}
					notes = append(notes, e.Reason+": "+e.Note)
					st = eventStep{}
				}
				got[i] = st
			}
			if len(got) == 0 {
				got = nil
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("steps %#v\nwant %#v", got, c.want)
			}
			if rp.Used != c.used || rp.Total != c.total {
				t.Errorf("P shows %d restart(s), %d in all; want %d, %d", rp.Used, rp.Total, c.used, c.total)
			}
			if c.note != "" && (len(notes) != 1 || !strings.Contains(notes[0], c.note)) {
				t.Errorf("Events %q, want one saying %q", notes, c.note)
			}
		})
	}
}
