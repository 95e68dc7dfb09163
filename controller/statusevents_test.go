package controller

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestStatusEvents: the Events a status change tells, once each, as a user watching the
// placeholder wants them.
func TestStatusEvents(t *testing.T) {
	driver := planDriver("inc-1", runningStatus(t0))
	running := corev1.PodStatus{Phase: corev1.PodRunning, Message: runningMessage(driver)}
	runningNoted := corev1.PodStatus{Phase: corev1.PodRunning, Message: runningMessage(driver) + "; a note"}
	pending := corev1.PodStatus{Phase: corev1.PodPending, Message: "driverset: waiting for the StatefulSet to create the driver pod"}
	blocked := corev1.PodStatus{Phase: corev1.PodPending, Message: "driverset: quota exceeded"}
	failed := corev1.PodStatus{Phase: corev1.PodFailed}
	succeeded := corev1.PodStatus{Phase: corev1.PodSucceeded}
	invalid := `invalid annotation driverset.dev/max-restarts="x" ignored`

	cases := []struct {
		name      string
		old, want corev1.PodStatus
		v         View
		events    []string // "Type Reason: a part of the note"
	}{
		{name: "the driver runs, first seen: DriverRunning names pod and node", old: pending, want: running, v: View{Driver: driver},
			events: []string{"Normal DriverRunning: the driver runs in pod jobs/pi-driver-0 on node node-a"}},
		{name: "it runs still, a note added: nothing new", old: running, want: runningNoted, v: View{Driver: driver}},
		{name: "it runs again after a loss the pass told as Recovered: not told twice", old: pending, want: running, v: View{Driver: driver, Recovered: true}},
		{name: "a refused create: told", old: pending, want: blocked, v: View{Blocked: "quota exceeded"},
			events: []string{"Warning " + ReasonFailedCreate + ": quota exceeded"}},
		{name: "the same refusal again: not told again", old: blocked, want: blocked, v: View{Blocked: "quota exceeded"}},
		{name: "succeeded: Completed", old: running, want: succeeded, v: View{Driver: driver},
			events: []string{"Normal Completed: the driver completed (exit code 0) in pod jobs/pi-driver-0"}},
		{name: "succeeded already: nothing", old: succeeded, want: succeeded, v: View{Driver: driver}},
		{name: "failed: Failed with the code and the restarts", old: running, want: failed, v: View{Driver: driver, Outcome: Outcome{Code: 3}, Restarts: 2},
			events: []string{"Warning Failed: the driver failed with exit code 3 in pod jobs/pi-driver-0 after 2 restart(s)"}},
		{name: "an invalid setting, new to the message: told, besides the transition", old: pending, want: running, v: View{Driver: driver, Invalid: invalid},
			events: []string{"Warning InvalidSetting: " + invalid, "Normal DriverRunning: the driver runs"}},
		{name: "an invalid setting the message says already: not told again", old: corev1.PodStatus{Phase: corev1.PodRunning, Message: "x; " + invalid},
			want: running, v: View{Driver: driver, Invalid: invalid, Recovered: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := statusEvents(c.old, c.want, c.v)
			if len(got) != len(c.events) {
				t.Fatalf("events %+v, want %q", got, c.events)
			}
			for i, st := range got {
				e := st.(eventStep)
				head, note, _ := strings.Cut(c.events[i], ": ")
				if e.Type+" "+e.Reason != head || !strings.Contains(e.Note, note) {
					t.Errorf("event %d: %s %s %q, want %q", i, e.Type, e.Reason, e.Note, c.events[i])
				}
				if related := e.Related != nil && !isNilPod(e.Related); related != (c.v.Driver != nil && e.Reason != "InvalidSetting" && e.Reason != ReasonFailedCreate) {
					t.Errorf("event %s related to %v", e.Reason, e.Related)
				}
			}
		})
	}
}

func isNilPod(o any) bool { p, ok := o.(*corev1.Pod); return ok && p == nil }
