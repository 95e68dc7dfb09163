package controller

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/wrap"
)

// t0 is the fixed "now" of the pure-function tests.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// withDriverStatus is a pod (S-0) with uid whose driver container has status cs (its name is set here).
func withDriverStatus(uid types.UID, cs corev1.ContainerStatus) *corev1.Pod {
	cs.Name = contract.DriverContainerName
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pi-driver-0", Namespace: "jobs", UID: uid},
		Spec:       corev1.PodSpec{NodeName: "node-a"},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "sidecar", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 9}}},
				cs,
			},
		},
	}
}

func terminated(code int32, msg string, at time.Time) *corev1.ContainerStateTerminated {
	return &corev1.ContainerStateTerminated{ExitCode: code, Message: msg, FinishedAt: metav1.NewTime(at)}
}

func TestOutcomeOf(t *testing.T) {
	const uid = types.UID("incarnation-1")
	finished := t0.Add(-time.Minute)
	deleting := withDriverStatus(uid, corev1.ContainerStatus{
		State: corev1.ContainerState{Terminated: terminated(3, wrap.TerminationMessage(3, ""), finished)},
	})
	// Deleted (a drain, 30s grace) 10s before the driver exited: the exit is the drain's SIGTERM.
	deleting.DeletionTimestamp, deleting.DeletionGracePeriodSeconds = &metav1.Time{Time: finished.Add(20 * time.Second)}, new(int64(30))
	// Deleted a second after the driver had exited (a drain right after success): the exit stands.
	finishedThenDeleted := withDriverStatus(uid, corev1.ContainerStatus{
		State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		LastTerminationState: corev1.ContainerState{Terminated: terminated(0, wrap.TerminationMessage(0, ""), finished)},
	})
	finishedThenDeleted.DeletionTimestamp, finishedThenDeleted.DeletionGracePeriodSeconds = &metav1.Time{Time: finished.Add(31 * time.Second)}, new(int64(30))
	// The kubelet stops the driver (graceful node shutdown, node-pressure eviction): wrap forwards
	// the SIGTERM and records the JVM's 143; the kubelet marks the pod Failed and DisruptionTarget.
	// The kubelet stamps its DisruptionTarget (t0, see disrupted) when it sends it, once every
	// container has stopped: after the kill (seen on real nodes, shutdown_test.go).
	killedAt := finished
	killed := corev1.ContainerStatus{State: corev1.ContainerState{Terminated: terminated(143, wrap.TerminationMessage(143, ""), killedAt)}}
	// The driver exited 1 on its own; wrap idled in the restart backoff until the kubelet stopped
	// it, and restated the record (wrap/run.go).
	exitedThenKilled := corev1.ContainerStatus{
		State:                corev1.ContainerState{Terminated: terminated(0, wrap.TerminationMessage(1, ""), killedAt)},
		LastTerminationState: corev1.ContainerState{Terminated: terminated(1, wrap.TerminationMessage(1, ""), finished)},
	}
	shutDown := disrupted(withDriverStatus(uid, killed), "Terminated", corev1.PodReasonTerminationByKubelet)
	completedThenShutDown := disrupted(withDriverStatus(uid, corev1.ContainerStatus{
		State:                corev1.ContainerState{Terminated: terminated(0, wrap.TerminationMessage(0, ""), finished)},
		LastTerminationState: corev1.ContainerState{Terminated: terminated(0, wrap.TerminationMessage(0, ""), finished.Add(-time.Second))},
	}), "Terminated", corev1.PodReasonTerminationByKubelet)

	cases := []struct {
		name string
		pod  *corev1.Pod
		want Outcome
	}{
		{name: "no pod", pod: nil, want: Outcome{}},
		{
			name: "driver running: no outcome",
			pod: withDriverStatus(uid, corev1.ContainerStatus{
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(finished)}},
			}),
			want: Outcome{},
		},
		{
			name: "driver waiting to start: no outcome",
			pod: withDriverStatus(uid, corev1.ContainerStatus{
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}},
			}),
			want: Outcome{},
		},
		{
			name: "just exited: state.terminated with wrap's message",
			pod: withDriverStatus(uid, corev1.ContainerStatus{
				State: corev1.ContainerState{Terminated: terminated(42, wrap.TerminationMessage(42, "java.lang.OutOfMemoryError"), finished)},
			}),
			want: Outcome{Exited: true, Code: 42, FinishedAt: finished, PodUID: uid},
		},
		{
			name: "wrap idles after the exit: the record is in lastState",
			pod: withDriverStatus(uid, corev1.ContainerStatus{
				State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
				LastTerminationState: corev1.ContainerState{Terminated: terminated(1, wrap.TerminationMessage(1, ""), finished)},
			}),
			want: Outcome{Exited: true, Code: 1, FinishedAt: finished, PodUID: uid},
		},
		{
			// The idling wrap's stop restates the record with the stop's time: the exit is the
			// first one, at its own time (TestIdleStopRestatesTheExit).
			name: "an idle wrap that was stopped restates the record: the first exit, at its own time",
			pod: withDriverStatus(uid, corev1.ContainerStatus{
				State:                corev1.ContainerState{Terminated: terminated(0, wrap.TerminationMessage(1, ""), finished)},
				LastTerminationState: corev1.ContainerState{Terminated: terminated(1, wrap.TerminationMessage(1, ""), finished.Add(-time.Second))},
			}),
			want: Outcome{Exited: true, Code: 1, FinishedAt: finished.Add(-time.Second), PodUID: uid},
		},
		{
			// Two different records cannot both be wrap's exit (it runs the driver once per pod):
			// the newer is taken, as before.
			name: "two different records: the newer",
			pod: withDriverStatus(uid, corev1.ContainerStatus{
				State:                corev1.ContainerState{Terminated: terminated(2, wrap.TerminationMessage(2, ""), finished)},
				LastTerminationState: corev1.ContainerState{Terminated: terminated(1, wrap.TerminationMessage(1, ""), finished.Add(-time.Second))},
			}),
			want: Outcome{Exited: true, Code: 2, FinishedAt: finished, PodUID: uid},
		},
		{
			name: "lastState's message wins over its exit code",
			pod: withDriverStatus(uid, corev1.ContainerStatus{
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: terminated(0, wrap.TerminationMessage(2, ""), finished)},
			}),
			want: Outcome{Exited: true, Code: 2, FinishedAt: finished, PodUID: uid},
		},
		{
			name: "a message that is not wrap's: the container's exit code",
			pod: withDriverStatus(uid, corev1.ContainerStatus{
				State: corev1.ContainerState{Terminated: terminated(137, "OOMKilled", finished)},
			}),
			want: Outcome{Exited: true, Code: 137, FinishedAt: finished, PodUID: uid},
		},
		{
			name: "no message at all: the container's exit code",
			pod: withDriverStatus(uid, corev1.ContainerStatus{
				State: corev1.ContainerState{Terminated: terminated(0, "", finished)},
			}),
			want: Outcome{Exited: true, Code: 0, FinishedAt: finished, PodUID: uid},
		},
		{name: "pod being deleted: stopped from outside, no outcome", pod: deleting, want: Outcome{}},
		{name: "terminated by the kubelet (node shutdown): no outcome", pod: shutDown, want: Outcome{}},
		{name: "evicted for node pressure: no outcome", pod: disrupted(withDriverStatus(uid, killed), "Evicted", corev1.PodReasonTerminationByKubelet), want: Outcome{}},
		{
			name: "evicted for its own storage limit (no condition): the driver's failure",
			pod:  disrupted(withDriverStatus(uid, killed), "Evicted", ""),
			want: Outcome{Exited: true, Code: 143, FinishedAt: killedAt, PodUID: uid},
		},
		{
			// The StatefulSet controller deletes the Failed pod in the second the kubelet finished
			// it: the eviction came first, so the exit is still the driver's.
			name: "evicted for its own storage limit, then deleted at once: still the driver's failure",
			pod: func() *corev1.Pod {
				p := disrupted(withDriverStatus(uid, killed), "Evicted", "")
				p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &metav1.Time{Time: killedAt}, new(int64(0))
				return p
			}(),
			want: Outcome{Exited: true, Code: 143, FinishedAt: killedAt, PodUID: uid},
		},
		{name: "the kubelet's DisruptionTarget alone, the pod still terminating: no outcome", pod: disrupted(withDriverStatus(uid, killed), "", corev1.PodReasonTerminationByKubelet), want: Outcome{}},
		{
			name: "exited 1, then the kubelet stopped the idling wrap: the driver's own exit",
			pod:  disrupted(withDriverStatus(uid, exitedThenKilled), "Evicted", corev1.PodReasonTerminationByKubelet),
			want: Outcome{Exited: true, Code: 1, FinishedAt: finished, PodUID: uid},
		},
		{
			// The kubelet stamps its mark when it sends it, after the kill: an exit not followed
			// by a restart cannot be told from the kill, whatever the times say.
			name: "exited 1 well before the kubelet's mark, but not started again: taken for the kill",
			pod: disrupted(withDriverStatus(uid, corev1.ContainerStatus{
				State: corev1.ContainerState{Terminated: terminated(1, wrap.TerminationMessage(1, ""), finished)},
			}), "Terminated", corev1.PodReasonTerminationByKubelet),
			want: Outcome{},
		},
		{
			name: "exited 1, wrap idling, then the kubelet's mark while it still stops the pod: the driver's own exit",
			pod: disrupted(withDriverStatus(uid, corev1.ContainerStatus{
				State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
				LastTerminationState: corev1.ContainerState{Terminated: terminated(1, wrap.TerminationMessage(1, ""), finished)},
			}), "", corev1.PodReasonTerminationByKubelet),
			want: Outcome{Exited: true, Code: 1, FinishedAt: finished, PodUID: uid},
		},
		{
			// The scheduler, the taint manager and the eviction API mark the pod, then delete it:
			// the stop is the deletion's. Before the deletion, the exit the pod shows is its own.
			name: "the scheduler's mark before its deletion: the exit is the driver's own",
			pod:  disrupted(withDriverStatus(uid, killed), "", corev1.PodReasonPreemptionByScheduler),
			want: Outcome{Exited: true, Code: 143, FinishedAt: killedAt, PodUID: uid},
		},
		{
			name: "the scheduler's mark, then its deletion before the exit: the deletion's stop",
			pod: func() *corev1.Pod {
				p := disrupted(withDriverStatus(uid, killed), "", corev1.PodReasonPreemptionByScheduler)
				// Asked for 10 s before the kill.
				p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &metav1.Time{Time: killedAt.Add(20 * time.Second)}, new(int64(30))
				return p
			}(),
			want: Outcome{},
		},
		{
			// PodGC marks and force-deletes a pod whose node is gone: nothing stopped the driver,
			// so the exit it recorded is its own (TestPodGCHidesTheExit).
			name: "PodGC's mark and deletion after the driver exited 1: the driver's own exit",
			pod: func() *corev1.Pod {
				p := disrupted(withDriverStatus(uid, corev1.ContainerStatus{
					State: corev1.ContainerState{Terminated: terminated(1, wrap.TerminationMessage(1, ""), finished)},
				}), "", "DeletionByPodGC")
				p.Status.Phase = corev1.PodFailed
				p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &metav1.Time{Time: t0}, new(int64(0))
				return p
			}(),
			want: Outcome{Exited: true, Code: 1, FinishedAt: finished, PodUID: uid},
		},
		{name: "Failed with the kubelet's reason but no condition (older kubelet): no outcome", pod: disrupted(withDriverStatus(uid, killed), "Shutdown", ""), want: Outcome{}},
		{
			name: "a success recorded before the shutdown stays a success: a kill never exits 0",
			pod:  completedThenShutDown,
			want: Outcome{Exited: true, Code: 0, FinishedAt: finished.Add(-time.Second), PodUID: uid},
		},
		{
			name: "a Failed pod without the kubelet's reason or condition: the driver's own failure",
			pod: func() *corev1.Pod {
				p := withDriverStatus(uid, killed)
				p.Status.Phase = corev1.PodFailed
				p.Status.Reason = "DeadlineExceeded"
				return p
			}(),
			want: Outcome{Exited: true, Code: 143, FinishedAt: killedAt, PodUID: uid},
		},
		{
			name: "DisruptionTarget False: no disruption",
			pod: func() *corev1.Pod {
				p := disrupted(withDriverStatus(uid, killed), "", corev1.PodReasonTerminationByKubelet)
				p.Status.Conditions[0].Status = corev1.ConditionFalse
				return p
			}(),
			want: Outcome{Exited: true, Code: 143, FinishedAt: killedAt, PodUID: uid},
		},
		{name: "exited before its pod was deleted: the outcome stands", pod: finishedThenDeleted,
			want: Outcome{Exited: true, Code: 0, FinishedAt: finished, PodUID: uid}},
		{
			// No time to compare with the deletion's: it may be the deletion's SIGTERM.
			name: "a failure of unknown time on a pod being deleted: no outcome",
			pod: func() *corev1.Pod {
				p := withDriverStatus(uid, corev1.ContainerStatus{
					State: corev1.ContainerState{Terminated: terminated(3, wrap.TerminationMessage(3, ""), time.Time{})},
				})
				p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &metav1.Time{Time: finished}, new(int64(30))
				return p
			}(),
			want: Outcome{},
		},
		{
			name: "no status for the driver container yet",
			pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
				{Name: "sidecar", State: corev1.ContainerState{Terminated: terminated(1, wrap.TerminationMessage(1, ""), finished)}},
			}}},
			want: Outcome{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := outcomeOf(tc.pod, contract.DriverContainerName)
			if !got.FinishedAt.Equal(tc.want.FinishedAt) {
				t.Errorf("FinishedAt = %v, want %v", got.FinishedAt, tc.want.FinishedAt)
			}
			got.FinishedAt, tc.want.FinishedAt = time.Time{}, time.Time{}
			if got != tc.want {
				t.Errorf("outcomeOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// disrupted is pod as the kubelet leaves it when it stops it: phase Failed with reason (when not
// ""), and a DisruptionTarget condition with condReason (when not "").
func disrupted(pod *corev1.Pod, reason, condReason string) *corev1.Pod {
	if reason != "" {
		pod.Status.Phase, pod.Status.Reason = corev1.PodFailed, reason
	}
	if condReason != "" {
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{
			Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: condReason, LastTransitionTime: metav1.NewTime(t0),
		})
	}
	return pod
}

// TestStoppedFromOutside: which stops are not the application's, the recovery cause recorded for
// each, and when the stop began (what the recovery time is measured from).
func TestStoppedFromOutside(t *testing.T) {
	running := func() *corev1.Pod {
		return withDriverStatus("u", corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})
	}
	deleting := running()
	deleting.DeletionTimestamp = &metav1.Time{Time: t0.Add(time.Second)}
	disruptedAndDeleting := disrupted(running(), "", "EvictionByEvictionAPI")
	disruptedAndDeleting.DeletionTimestamp = &metav1.Time{Time: t0.Add(time.Second)}

	cases := []struct {
		name  string
		pod   *corev1.Pod
		cause string
		since time.Time
	}{
		{name: "no pod", pod: nil},
		{name: "a running driver", pod: running()},
		{name: "a pod being deleted", pod: deleting, cause: CausePodDeleted, since: t0.Add(time.Second)},
		{name: "graceful node shutdown", pod: disrupted(running(), "Terminated", corev1.PodReasonTerminationByKubelet), cause: CauseNodeShutdown, since: t0},
		{name: "node-pressure eviction", pod: disrupted(running(), "Evicted", corev1.PodReasonTerminationByKubelet), cause: CauseEvicted, since: t0},
		{name: "the kubelet's condition while the pod still terminates: shutdown", pod: disrupted(running(), "", corev1.PodReasonTerminationByKubelet), cause: CauseNodeShutdown, since: t0},
		{name: "preempted by the scheduler", pod: disrupted(running(), "", corev1.PodReasonPreemptionByScheduler), cause: CauseEvicted, since: t0},
		// Without the condition the stop has no time: the caller dates it (zero since).
		{name: "Failed, reason Shutdown, no condition", pod: disrupted(running(), "Shutdown", ""), cause: CauseNodeShutdown},
		// A kubelet restarted while its node shuts down admits its pods again and rejects them
		// (pkg/kubelet/nodeshutdown's admit handler), with no condition: a stop for the node.
		{name: "Failed, reason NodeShutdown (rejected on a node shutting down), no condition", pod: disrupted(running(), "NodeShutdown", ""), cause: CauseNodeShutdown},
		// The eviction manager marks node-pressure evictions with the condition (above). Without
		// it, the kubelet evicted the pod for its own ephemeral-storage limit or an emptyDir's
		// sizeLimit: the driver's own failure, like an OOM kill, or it would be evicted forever.
		{name: "Failed, reason Evicted, no condition: over its own storage limit", pod: disrupted(running(), "Evicted", "")},
		{name: "a disrupted pod that is also being deleted: the deletion", pod: disruptedAndDeleting, cause: CausePodDeleted, since: t0.Add(time.Second)},
		{name: "Failed for another reason: the driver's own", pod: disrupted(running(), "DeadlineExceeded", "")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cause, since, ok := stoppedFromOutside(tc.pod)
			if ok != (tc.cause != "") || cause != tc.cause || !since.Equal(tc.since) {
				t.Errorf("stoppedFromOutside = %q, %v, %v; want %q, %v", cause, since, ok, tc.cause, tc.since)
			}
		})
	}
}

// TestEndedByItsKubelet: which stops the kubelet both made and reported finished, so that the
// node's state no longer matters to the driver's recovery.
func TestEndedByItsKubelet(t *testing.T) {
	running := func() *corev1.Pod {
		return withDriverStatus("u", corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})
	}
	// PodGC marks a pod Failed, with its own condition reason, on a node that is gone or out of
	// service: that is a node loss, not the kubelet's word.
	byPodGC := disrupted(running(), "", "DeletionByPodGC")
	byPodGC.Status.Phase = corev1.PodFailed
	cases := []struct {
		name  string
		pod   *corev1.Pod
		cause string
	}{
		{name: "no pod", pod: nil},
		{name: "a running driver", pod: running()},
		{name: "graceful node shutdown, reported Failed", pod: disrupted(running(), "Terminated", corev1.PodReasonTerminationByKubelet), cause: CauseNodeShutdown},
		{name: "node-pressure eviction, reported Failed", pod: disrupted(running(), "Evicted", corev1.PodReasonTerminationByKubelet), cause: CauseEvicted},
		{name: "rejected on a node shutting down, no condition", pod: disrupted(running(), "NodeShutdown", ""), cause: CauseNodeShutdown},
		// Still Running: the kubelet is stopping it, and its node may die before it has.
		{name: "the kubelet's condition while the pod still terminates", pod: disrupted(running(), "", corev1.PodReasonTerminationByKubelet)},
		{name: "marked Failed by PodGC", pod: byPodGC},
		{name: "Failed, reason Evicted, no condition: its own storage limit", pod: disrupted(running(), "Evicted", "")},
		{name: "Failed for another reason", pod: disrupted(running(), "DeadlineExceeded", "")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cause, _, ok := endedByItsKubelet(tc.pod)
			if ok != (tc.cause != "") || cause != tc.cause {
				t.Errorf("endedByItsKubelet = %q, %v; want %q", cause, ok, tc.cause)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	const uid = types.UID("incarnation-2")
	exit := func(code int, ago time.Duration) Outcome {
		return Outcome{Exited: true, Code: code, FinishedAt: t0.Add(-ago), PodUID: uid}
	}
	budget := func(max, used int) Budget {
		return Budget{Max: max, Used: used, Backoff: 10 * time.Second, MaxBackoff: 5 * time.Minute}
	}
	cases := []struct {
		name    string
		outcome Outcome
		budget  Budget
		want    Decision
	}{
		{name: "not exited: observe", outcome: Outcome{}, budget: budget(3, 0), want: Decision{Action: Observe}},
		{name: "exit 0: succeed", outcome: exit(0, 0), budget: budget(3, 0), want: Decision{Action: Succeed}},
		{name: "exit 0 with no restarts left: still succeed", outcome: exit(0, 0), budget: budget(1, 1), want: Decision{Action: Succeed}},
		{name: "exit 1 just now, restarts left: wait the first backoff", outcome: exit(1, 0), budget: budget(3, 0), want: Decision{Action: Wait, After: 10 * time.Second}},
		{name: "exit 1, part of the backoff elapsed: wait the rest", outcome: exit(1, 4*time.Second), budget: budget(3, 0), want: Decision{Action: Wait, After: 6 * time.Second}},
		{name: "exit 1, backoff elapsed exactly: restart", outcome: exit(1, 10*time.Second), budget: budget(3, 0), want: Decision{Action: Restart}},
		{name: "second restart waits twice as long", outcome: exit(1, 15*time.Second), budget: budget(3, 1), want: Decision{Action: Wait, After: 5 * time.Second}},
		{name: "second restart after 20s: restart", outcome: exit(1, 20*time.Second), budget: budget(3, 1), want: Decision{Action: Restart}},
		{name: "no restarts left: fail", outcome: exit(1, time.Hour), budget: budget(3, 3), want: Decision{Action: Fail}},
		{name: "no restarts left, just exited: fail at once, no backoff", outcome: exit(7, 0), budget: budget(1, 1), want: Decision{Action: Fail}},
		{name: "max-restarts 0: the first failure is final", outcome: exit(1, time.Hour), budget: budget(0, 0), want: Decision{Action: Fail}},
		// wrap stopped the driver for want of a heartbeat: a node-loss recovery, at once, not a failure.
		{name: "self-fenced, no restarts left, just now: restart at once", outcome: Outcome{Exited: true, Code: 137, FinishedAt: t0, PodUID: uid, SelfFenced: true},
			budget: budget(1, 1), want: Decision{Action: Restart}},
		{
			name:    "incarnation already counted: restart even with the budget exhausted",
			outcome: exit(1, 0),
			budget:  Budget{Max: 1, Used: 1, Restarted: uid, Backoff: 10 * time.Second, MaxBackoff: time.Minute},
			want:    Decision{Action: Restart},
		},
		{
			name:    "another incarnation was counted: this one is judged on its own",
			outcome: exit(1, time.Hour),
			budget:  Budget{Max: 1, Used: 1, Restarted: "incarnation-1", Backoff: 10 * time.Second, MaxBackoff: time.Minute},
			want:    Decision{Action: Fail},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := decide(tc.outcome, tc.budget, t0); got != tc.want {
				t.Errorf("decide = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestDecideRestartWindow: a failure after a run of at least the restart window (a healthy run)
// starts a new run of failures: the restarts counted before are forgotten and the backoff is the
// first one again. Failures close together are still counted to max-restarts.
func TestDecideRestartWindow(t *testing.T) {
	const uid = types.UID("incarnation-2")
	// exit: code 1, ago before t0, after the incarnation ran for ran.
	exit := func(ago, ran time.Duration) Outcome {
		finished := t0.Add(-ago)
		return Outcome{Exited: true, Code: 1, StartedAt: finished.Add(-ran), FinishedAt: finished, PodUID: uid}
	}
	budget := func(max, used int, window time.Duration) Budget {
		return Budget{Max: max, Used: used, Window: window, Backoff: 10 * time.Second, MaxBackoff: 5 * time.Minute}
	}
	cases := []struct {
		name    string
		outcome Outcome
		budget  Budget
		want    Decision
	}{
		{name: "budget used up, the failed run was longer than the window: restart, count forgotten",
			outcome: exit(time.Minute, 2*time.Hour), budget: budget(3, 3, time.Hour), want: Decision{Action: Restart}},
		{name: "a run of exactly the window is healthy",
			outcome: exit(time.Minute, time.Hour), budget: budget(3, 3, time.Hour), want: Decision{Action: Restart}},
		{name: "budget used up, a short run: fail as before",
			outcome: exit(time.Minute, 59*time.Minute), budget: budget(3, 3, time.Hour), want: Decision{Action: Fail}},
		{name: "window 0 never forgets, however long the run",
			outcome: exit(time.Minute, 1000*time.Hour), budget: budget(3, 3, 0), want: Decision{Action: Fail}},
		{name: "no start time known: counted",
			outcome: Outcome{Exited: true, Code: 1, FinishedAt: t0.Add(-time.Minute), PodUID: uid}, budget: budget(3, 3, time.Hour), want: Decision{Action: Fail}},
		{name: "backoff resets after a healthy run: the first 10s, not 80s",
			outcome: exit(4*time.Second, 2*time.Hour), budget: budget(5, 3, time.Hour), want: Decision{Action: Wait, After: 6 * time.Second}},
		{name: "a short run keeps the doubled backoff",
			outcome: exit(4*time.Second, time.Minute), budget: budget(5, 3, time.Hour), want: Decision{Action: Wait, After: 76 * time.Second}},
		{name: "max-restarts 0: the first failure is final even after a healthy run",
			outcome: exit(time.Minute, 2*time.Hour), budget: budget(0, 0, time.Hour), want: Decision{Action: Fail}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := decide(tc.outcome, tc.budget, t0); got != tc.want {
				t.Errorf("decide = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestForgetOnlyAnUncountedFailure: the incarnation already counted keeps the count it was
// counted with (a reconcile after the restart was recorded must not reset it again), and a
// self-fenced stop, not counted, forgets nothing.
func TestForgetOnlyAnUncountedFailure(t *testing.T) {
	const uid = types.UID("incarnation-2")
	long := Outcome{Exited: true, Code: 1, StartedAt: t0.Add(-3 * time.Hour), FinishedAt: t0.Add(-time.Hour), PodUID: uid}
	b := Budget{Max: 3, Used: 2, Window: time.Hour, Restarted: "incarnation-1"}
	if got := forget(long, b); got.Used != 0 {
		t.Errorf("forget(healthy run) Used = %d, want 0", got.Used)
	}
	counted := b
	counted.Restarted = uid
	if got := forget(long, counted); got.Used != 2 {
		t.Errorf("forget(counted incarnation) Used = %d, want 2 (unchanged)", got.Used)
	}
	fenced := long
	fenced.SelfFenced = true
	if got := forget(fenced, b); got.Used != 2 {
		t.Errorf("forget(self-fenced) Used = %d, want 2 (unchanged)", got.Used)
	}
	success := long
	success.Code = 0
	if got := forget(success, b); got.Used != 2 {
		t.Errorf("forget(exit 0) Used = %d, want 2 (unchanged)", got.Used)
	}
}

// TestRestartWindowSequence plays five failures, each after a healthy run, with max-restarts 3:
// every one is restarted; four quick failures end the app.
func TestRestartWindowSequence(t *testing.T) {
	play := func(ran time.Duration, failures int) (restarts int, failed bool) {
		b := Budget{Max: 3, Window: time.Hour, Backoff: 10 * time.Second, MaxBackoff: 5 * time.Minute}
		start := t0
		for i := range failures {
			uid := types.UID(fmt.Sprintf("incarnation-%d", i))
			o := Outcome{Exited: true, Code: 1, StartedAt: start, FinishedAt: start.Add(ran), PodUID: uid}
			now := o.FinishedAt.Add(10 * time.Minute) // every backoff elapsed
			switch d := decide(o, b, now); d.Action {
			case Restart:
				b = forget(o, b)
				b.Used++
				b.Restarted = uid
				restarts++
			case Fail:
				return restarts, true
			default:
				t.Fatalf("failure %d: decision %+v, want Restart or Fail", i+1, d)
			}
			start = now
		}
		return restarts, false
	}
	if restarts, failed := play(3*time.Hour, 5); failed || restarts != 5 {
		t.Errorf("5 failures after healthy runs: %d restarts, failed %v; want 5 restarts, not failed", restarts, failed)
	}
	if restarts, failed := play(time.Minute, 4); !failed || restarts != 3 {
		t.Errorf("4 quick failures: %d restarts, failed %v; want 3 restarts, then failed", restarts, failed)
	}
}

func TestBackoff(t *testing.T) {
	cases := []struct {
		backoff, max time.Duration
		used         int
		want         time.Duration
	}{
		{backoff: 10 * time.Second, max: time.Minute, used: 0, want: 10 * time.Second},
		{backoff: 10 * time.Second, max: time.Minute, used: 1, want: 20 * time.Second},
		{backoff: 10 * time.Second, max: time.Minute, used: 2, want: 40 * time.Second},
		{backoff: 10 * time.Second, max: time.Minute, used: 3, want: time.Minute},   // 80s capped
		{backoff: 10 * time.Second, max: time.Minute, used: 100, want: time.Minute}, // no overflow
		{backoff: 10 * time.Second, max: 25 * time.Second, used: 1, want: 20 * time.Second},
		{backoff: 10 * time.Second, max: 5 * time.Second, used: 0, want: 5 * time.Second}, // cap below the first delay
		{backoff: 0, max: time.Minute, used: 5, want: 0},
	}
	for _, tc := range cases {
		b := Budget{Used: tc.used, Backoff: tc.backoff, MaxBackoff: tc.max}
		if got := backoff(b); got != tc.want {
			t.Errorf("backoff(%s·2^%d, cap %s) = %s, want %s", tc.backoff, tc.used, tc.max, got, tc.want)
		}
	}
}

// TestRestartWindowProperty: for every max-restarts of 1 or more and any count so far, a failure
// after a healthy run is never final and waits at most the first backoff; with the same count, a
// failure after a short run is final exactly when the count has reached max-restarts.
func TestRestartWindowProperty(t *testing.T) {
	const uid = types.UID("incarnation-9")
	for maxR := 1; maxR <= 5; maxR++ {
		for used := 0; used <= maxR+2; used++ {
			for _, ran := range []time.Duration{0, time.Second, 59 * time.Minute, time.Hour, 30 * 24 * time.Hour} {
				b := Budget{Max: maxR, Used: used, Window: time.Hour, Restarted: "incarnation-8", Backoff: 10 * time.Second, MaxBackoff: 5 * time.Minute}
				o := Outcome{Exited: true, Code: 1, StartedAt: t0.Add(-ran), FinishedAt: t0, PodUID: uid}
				d := decide(o, b, t0)
				healthy := ran >= time.Hour
				switch {
				case healthy && (d.Action != Wait || d.After != b.Backoff):
					t.Errorf("max %d, used %d, ran %s: %+v, want a wait of the first backoff", maxR, used, ran, d)
				case !healthy && (d.Action == Fail) != (used >= maxR):
					t.Errorf("max %d, used %d, ran %s: %+v, want Fail exactly when used ≥ max", maxR, used, ran, d)
				}
			}
		}
	}
}
