package controller

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/wrap"
)

// runningDriver is S-0 running on node-a with its driver container running, Ready or not (the
// container and the pod's condition alike, as the kubelet reports them).
func runningDriver(ready bool) *corev1.Pod {
	p := withDriverStatus("incarnation-1", corev1.ContainerStatus{
		Image: "apache/spark:3.5.3", ImageID: "docker.io/apache/spark@sha256:0123", ContainerID: "containerd://abc",
		State:   corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t0.Add(-time.Hour))}},
		Ready:   ready,
		Started: &ready,
	})
	p.Status.ContainerStatuses = p.Status.ContainerStatuses[1:]
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodReady, Status: boolCondition(ready)},
		{Type: corev1.ContainersReady, Status: boolCondition(ready)},
	}
	return p
}

// unreachableDriver is a running, Ready driver whose node was lost: the node lifecycle controller
// set its PodReady condition False and left the container statuses as the kubelet last reported.
func unreachableDriver() *corev1.Pod {
	p := runningDriver(true)
	p.Status.Conditions[0].Status = corev1.ConditionFalse
	return p
}

// exitedDriver is S-0 whose wrap recorded code and now idles.
func exitedDriver(code int) *corev1.Pod {
	p := withDriverStatus("incarnation-1", corev1.ContainerStatus{
		State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		LastTerminationState: corev1.ContainerState{Terminated: terminated(int32(code), wrap.TerminationMessage(code, ""), t0.Add(-time.Minute))},
	})
	p.Status.ContainerStatuses = p.Status.ContainerStatuses[1:]
	return p
}

func exitView(action Action, code, restarts int) View {
	d := exitedDriver(code)
	return View{
		Driver: d, Container: contract.DriverContainerName,
		Decision: Decision{Action: action},
		Outcome:  outcomeOf(d, contract.DriverContainerName),
		Restarts: restarts,
	}
}

// pendingPlaceholder is the status the apiserver gives a new gated pod.
func pendingPlaceholder() corev1.PodStatus {
	return corev1.PodStatus{
		Phase:    corev1.PodPending,
		QOSClass: corev1.PodQOSBurstable,
		Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "SchedulingGated",
			Message: "Scheduling is blocked due to non-empty scheduling gates", LastTransitionTime: metav1.NewTime(t0.Add(-2 * time.Hour)),
		}},
	}
}

func TestPlaceholderStatus(t *testing.T) {
	pendingOnNode := withDriverStatus("incarnation-1", corev1.ContainerStatus{
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}},
	})
	pendingOnNode.Status.Phase = corev1.PodPending
	runningPlaceholder := placeholderStatus(pendingPlaceholder(), View{Driver: runningDriver(true), Container: contract.DriverContainerName})

	cases := []struct {
		name string
		cur  corev1.PodStatus
		view View
		// what the result must show
		phase    corev1.PodPhase
		state    string // running, waiting or terminated
		ready    bool
		exitCode int32  // of state.terminated, or of lastState.terminated with waiting
		reason   string // of the container state
		message  []string
		restarts int32
	}{
		{
			name: "no driver pod yet: Pending, saying so",
			cur:  pendingPlaceholder(), view: View{Container: contract.DriverContainerName},
			phase: corev1.PodPending, state: "waiting", reason: "DriverPending",
			message: []string{"waiting for the StatefulSet to create the driver pod"},
		},
		{
			name: "a placeholder that ran stays Running while S-0 is made again",
			cur:  runningPlaceholder, view: View{Container: contract.DriverContainerName, Restarts: 1},
			phase: corev1.PodRunning, state: "waiting", reason: "DriverPending", restarts: 1,
			message: []string{"waiting for the StatefulSet to create the driver pod"},
		},
		{
			name: "driver scheduled, not started: Pending, naming pod and node",
			cur:  pendingPlaceholder(), view: View{Driver: pendingOnNode, Container: contract.DriverContainerName},
			phase: corev1.PodPending, state: "waiting", reason: "DriverPending",
			message: []string{"jobs/pi-driver-0", "Pending", "node-a"},
		},
		{
			name: "a placeholder that ran stays Running while the next driver pod starts",
			cur:  runningPlaceholder, view: View{Driver: pendingOnNode, Container: contract.DriverContainerName, Restarts: 1},
			phase: corev1.PodRunning, state: "waiting", reason: "DriverPending", restarts: 1,
			message: []string{"jobs/pi-driver-0"},
		},
		{
			name: "driver running and Ready on node-a: Running and Ready, naming pod and node",
			cur:  pendingPlaceholder(), view: View{Driver: runningDriver(true), Container: contract.DriverContainerName},
			phase: corev1.PodRunning, state: "running", ready: true,
			message: []string{"runs in pod jobs/pi-driver-0 on node node-a"},
		},
		{
			name: "driver running, not Ready: Running, not Ready",
			cur:  pendingPlaceholder(), view: View{Driver: runningDriver(false), Container: contract.DriverContainerName},
			phase: corev1.PodRunning, state: "running", ready: false,
			message: []string{"jobs/pi-driver-0", "node-a"},
		},
		{
			name: "driver on a lost node (pod not Ready, container last seen Ready): Running, not Ready",
			cur:  runningPlaceholder, view: View{Driver: unreachableDriver(), Container: contract.DriverContainerName},
			phase: corev1.PodRunning, state: "running", ready: false,
			message: []string{"jobs/pi-driver-0", "node-a"},
		},
		{
			name: "Succeed: Succeeded, terminated with 0, Completed",
			cur:  runningPlaceholder, view: exitView(Succeed, 0, 0),
			phase: corev1.PodSucceeded, state: "terminated", exitCode: 0, reason: "Completed",
			message: []string{"exited with code 0", "jobs/pi-driver-0"},
		},
		{
			name: "Fail: Failed, terminated with the code, Error, the restarts counted",
			cur:  runningPlaceholder, view: exitView(Fail, 3, 2),
			phase: corev1.PodFailed, state: "terminated", exitCode: 3, reason: "Error", restarts: 2,
			message: []string{"exited with code 3", "jobs/pi-driver-0", "2 restart(s)"},
		},
		{
			name: "Fail from Pending (the driver never seen running)",
			cur:  pendingPlaceholder(), view: exitView(Fail, 1, 0),
			phase: corev1.PodFailed, state: "terminated", exitCode: 1, reason: "Error",
			message: []string{"exited with code 1"},
		},
		{
			name: "Wait: Running, waiting, the exit in lastState (never state.terminated)",
			cur:  runningPlaceholder, view: exitView(Wait, 1, 0),
			phase: corev1.PodRunning, state: "waiting", exitCode: 1, reason: "DriverRestarting",
			message: []string{"exited with code 1", "restarting (restart 1)"},
		},
		{
			// With Restart the reconciler has counted the restart under way: Restarts 1 is restart 1.
			name: "Restart: Running, waiting, the exit in lastState",
			cur:  runningPlaceholder, view: exitView(Restart, 137, 1),
			phase: corev1.PodRunning, state: "waiting", exitCode: 137, reason: "DriverRestarting", restarts: 1,
			message: []string{"exited with code 137", "restarting (restart 1)"},
		},
		{
			name: "Note is appended",
			cur:  pendingPlaceholder(), view: View{Driver: runningDriver(true), Container: contract.DriverContainerName, Note: "node node-a has not been Ready"},
			phase: corev1.PodRunning, state: "running", ready: true,
			message: []string{"on node node-a; node node-a has not been Ready"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := placeholderStatus(tc.cur, tc.view)
			if got.Phase != tc.phase {
				t.Errorf("phase = %s, want %s", got.Phase, tc.phase)
			}
			if len(got.ContainerStatuses) != 1 || got.ContainerStatuses[0].Name != contract.DriverContainerName {
				t.Fatalf("containerStatuses = %+v, want one for %s", got.ContainerStatuses, contract.DriverContainerName)
			}
			cs := got.ContainerStatuses[0]
			if s := stateName(cs.State); s != tc.state {
				t.Errorf("container state = %s (%+v), want %s", s, cs.State, tc.state)
			}
			switch tc.state {
			case "terminated":
				if cs.State.Terminated.ExitCode != tc.exitCode || cs.State.Terminated.Reason != tc.reason {
					t.Errorf("terminated = %+v, want exit code %d reason %s", cs.State.Terminated, tc.exitCode, tc.reason)
				}
				if !cs.State.Terminated.FinishedAt.Time.Equal(tc.view.Outcome.FinishedAt) {
					t.Errorf("finishedAt = %v, want the driver's %v", cs.State.Terminated.FinishedAt, tc.view.Outcome.FinishedAt)
				}
			case "waiting":
				if cs.State.Waiting.Reason != tc.reason {
					t.Errorf("waiting reason = %q, want %q", cs.State.Waiting.Reason, tc.reason)
				}
				if tc.reason == "DriverRestarting" {
					last := cs.LastTerminationState.Terminated
					if last == nil || last.ExitCode != tc.exitCode {
						t.Errorf("lastState.terminated = %+v, want exit code %d", last, tc.exitCode)
					}
				}
			case "running":
				if cs.Image != "apache/spark:3.5.3" || cs.ContainerID != "containerd://abc" {
					t.Errorf("image/containerID = %q/%q, want the driver's", cs.Image, cs.ContainerID)
				}
			}
			if cs.Ready != tc.ready {
				t.Errorf("container ready = %v, want %v", cs.Ready, tc.ready)
			}
			if cs.RestartCount != tc.restarts {
				t.Errorf("restartCount = %d, want %d", cs.RestartCount, tc.restarts)
			}
			for _, typ := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady} {
				if c := findCondition(got, typ); c == nil || c.Status != boolCondition(tc.ready) {
					t.Errorf("condition %s = %+v, want %v", typ, c, boolCondition(tc.ready))
				}
			}
			checkNeverScheduled(t, got)
			for _, m := range tc.message {
				if !strings.Contains(got.Message, m) {
					t.Errorf("message %q does not contain %q", got.Message, m)
				}
			}
			if got.QOSClass != tc.cur.QOSClass {
				t.Errorf("qosClass = %q, want the current %q", got.QOSClass, tc.cur.QOSClass)
			}
			if got.Phase != corev1.PodPending && got.StartTime == nil {
				t.Error("startTime not set once the placeholder left Pending")
			}
		})
	}
}

// checkNeverScheduled: PodScheduled is False with driverset's reason, never SchedulingGated (kubectl
// shows SchedulingGated for any pod with that reason, whatever its phase).
func checkNeverScheduled(t *testing.T, st corev1.PodStatus) {
	t.Helper()
	c := findCondition(st, corev1.PodScheduled)
	if c == nil || c.Status != corev1.ConditionFalse || c.Reason != ReasonPlaceholder {
		t.Errorf("PodScheduled = %+v, want False with reason %s", c, ReasonPlaceholder)
	}
	for _, c := range st.Conditions {
		if c.Reason == "SchedulingGated" {
			t.Errorf("condition %s still has reason SchedulingGated", c.Type)
		}
	}
}

func TestPlaceholderStatusNeverLeavesTerminated(t *testing.T) {
	failed := placeholderStatus(pendingPlaceholder(), exitView(Fail, 3, 1))
	succeeded := placeholderStatus(pendingPlaceholder(), exitView(Succeed, 0, 0))
	for _, cur := range []corev1.PodStatus{failed, succeeded} {
		for _, v := range []View{
			{Container: contract.DriverContainerName},
			{Driver: runningDriver(true), Container: contract.DriverContainerName},
			exitView(Wait, 1, 1),
			exitView(Restart, 1, 1),
		} {
			got := placeholderStatus(cur, v)
			if got.Phase != cur.Phase {
				t.Errorf("%s placeholder, view %v: phase became %s", cur.Phase, v.Decision.Action, got.Phase)
			}
			if cs := got.ContainerStatuses[0]; cs.State.Terminated == nil || cs.State.Terminated.ExitCode != cur.ContainerStatuses[0].State.Terminated.ExitCode {
				t.Errorf("%s placeholder, view %v: container state became %+v", cur.Phase, v.Decision.Action, cs.State)
			}
		}
	}
}

func TestPlaceholderStatusStartTime(t *testing.T) {
	cur := pendingPlaceholder()
	if got := placeholderStatus(cur, View{Container: contract.DriverContainerName}); got.StartTime != nil {
		t.Errorf("a Pending placeholder got startTime %v", got.StartTime)
	}
	started := metav1.NewTime(t0.Add(-time.Hour))
	cur.StartTime = &started
	if got := placeholderStatus(cur, View{Driver: runningDriver(true), Container: contract.DriverContainerName}); !got.StartTime.Equal(&started) {
		t.Errorf("startTime = %v, want the current %v", got.StartTime, started)
	}
}

func TestPlaceholderStatusTransitionTimes(t *testing.T) {
	before := metav1.NewTime(t0.Add(-time.Hour))
	cur := corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: ReasonPlaceholder, LastTransitionTime: before},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: before},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: before},
		},
	}
	// Still ready: every condition keeps its time.
	got := placeholderStatus(cur, View{Driver: runningDriver(true), Container: contract.DriverContainerName})
	for _, typ := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodReady, corev1.ContainersReady} {
		if c := findCondition(got, typ); !c.LastTransitionTime.Equal(&before) {
			t.Errorf("%s: lastTransitionTime = %v, want the unchanged %v", typ, c.LastTransitionTime, before)
		}
	}
	// No longer ready: Ready and ContainersReady move, PodScheduled keeps its time.
	got = placeholderStatus(cur, View{Driver: runningDriver(false), Container: contract.DriverContainerName})
	if c := findCondition(got, corev1.PodScheduled); !c.LastTransitionTime.Equal(&before) {
		t.Errorf("PodScheduled: lastTransitionTime = %v, want the unchanged %v", c.LastTransitionTime, before)
	}
	for _, typ := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady} {
		if c := findCondition(got, typ); c.Status != corev1.ConditionFalse || !c.LastTransitionTime.After(before.Time) {
			t.Errorf("%s = %+v, want False with a new lastTransitionTime", typ, c)
		}
	}
	// The apiserver's SchedulingGated condition is replaced, and its time with it (the reason changed
	// but not the status: the time is kept, which is what kubectl and the apiserver expect).
	got = placeholderStatus(pendingPlaceholder(), View{Container: contract.DriverContainerName})
	if c := findCondition(got, corev1.PodScheduled); c.Reason != ReasonPlaceholder || !c.LastTransitionTime.Equal(&pendingPlaceholder().Conditions[0].LastTransitionTime) {
		t.Errorf("PodScheduled = %+v, want reason %s and the apiserver's transition time", c, ReasonPlaceholder)
	}
}

func stateName(s corev1.ContainerState) string {
	switch {
	case s.Terminated != nil && s.Running == nil && s.Waiting == nil:
		return "terminated"
	case s.Running != nil && s.Waiting == nil && s.Terminated == nil:
		return "running"
	case s.Waiting != nil && s.Running == nil && s.Terminated == nil:
		return "waiting"
	}
	return "invalid"
}

func findCondition(st corev1.PodStatus, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}
