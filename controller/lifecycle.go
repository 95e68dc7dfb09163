package controller

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/driverset/driverset/wrap"
)

// Outcome is what the driver recorded in one incarnation of the StatefulSet's pod.
type Outcome struct {
	// Exited is true once `driverset wrap` has recorded the driver's exit in this pod.
	Exited     bool
	Code       int
	FinishedAt time.Time
	// PodUID is the incarnation the outcome belongs to.
	PodUID types.UID
}

// outcomeOf reads the recorded exit of container in pod (S-0). wrap runs the driver once per pod,
// exits with its code and is then restarted by the kubelet to idle, so the record is in
// state.terminated right after the exit and in lastState.terminated once the idle run started.
// A pod that is being deleted has no outcome: its driver was stopped from outside (eviction, node
// drain, scale-down), which is not the application's failure — unless it had exited before the
// deletion was asked for (see exitedBeforeDeletion).
func outcomeOf(pod *corev1.Pod, container string) Outcome {
	if pod == nil {
		return Outcome{}
	}
	if o := recordedExit(pod, container); pod.DeletionTimestamp == nil || exitedBeforeDeletion(pod, o) {
		return o
	}
	return Outcome{}
}

// recordedExit is the exit wrap recorded in pod, whether or not the pod is being deleted.
func recordedExit(pod *corev1.Pod, container string) Outcome {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != container {
			continue
		}
		t := cs.State.Terminated
		if t == nil {
			t = cs.LastTerminationState.Terminated
		}
		if t == nil {
			return Outcome{}
		}
		code := int(t.ExitCode)
		// wrap's own record wins: the container's exit code can also come from wrap itself.
		if recorded, ok := wrap.ParseTerminationMessage(t.Message); ok {
			code = recorded
		}
		return Outcome{Exited: true, Code: code, FinishedAt: t.FinishedAt.Time, PodUID: pod.UID}
	}
	return Outcome{}
}

// Action is what the controller does about an incarnation's outcome.
type Action int

const (
	// Observe: the driver has not exited; mirror its state.
	Observe Action = iota
	// Succeed: exit 0; the placeholder becomes Succeeded and the StatefulSet is scaled to 0.
	Succeed
	// Wait: a non-zero exit with restarts left, but its backoff has not elapsed yet.
	Wait
	// Restart: delete the pod so that the StatefulSet makes a new incarnation.
	Restart
	// Fail: a non-zero exit with no restarts left; the placeholder becomes Failed.
	Fail
)

// Decision is the lifecycle decision for one outcome.
type Decision struct {
	Action Action
	// After is how long to wait, with Wait.
	After time.Duration
}

// Budget is how many process-failure restarts a driver has and has used.
type Budget struct {
	Max, Used int
	// Restarted is the incarnation already counted as a restart (so one exit is counted once).
	Restarted types.UID
	// Backoff is the delay before the first restart; it doubles with each restart, up to MaxBackoff.
	Backoff, MaxBackoff time.Duration
}

// decide is the driver lifecycle of DESIGN.md as a pure function.
func decide(o Outcome, b Budget, now time.Time) Decision {
	switch {
	case !o.Exited:
		return Decision{Action: Observe}
	case o.Code == 0:
		return Decision{Action: Succeed}
	case o.PodUID == b.Restarted:
		// Counted already; the restart is under way (the pod's deletion may not be seen yet).
		return Decision{Action: Restart}
	case b.Used >= b.Max:
		return Decision{Action: Fail}
	}
	if wait := o.FinishedAt.Add(backoff(b)).Sub(now); wait > 0 {
		return Decision{Action: Wait, After: wait}
	}
	return Decision{Action: Restart}
}

// backoff is Backoff·2^Used, capped at MaxBackoff.
func backoff(b Budget) time.Duration {
	d := b.Backoff
	for i := 0; i < b.Used && d < b.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, b.MaxBackoff)
}
