package controller

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// DriverState is what a managed driver is doing, as the driverset_drivers gauge counts it.
type DriverState string

// The states, in the order the gauge lists them (docs/observability.md).
const (
	// StatePending: the driver has not run yet (its pod is being made, scheduled or started).
	StatePending DriverState = "pending"
	// StateRunning: the driver container runs.
	StateRunning DriverState = "running"
	// StateRestarting: the driver process failed; a new incarnation is on its way (after backoff).
	StateRestarting DriverState = "restarting"
	// StateBlocked: the driver pod cannot be made: its create is refused (quota, admission policy).
	StateBlocked DriverState = "blocked"
	// StateLostNode: the driver's node is lost and nothing but an admin ends the wait (delete the
	// Node or taint it out-of-service); the pod is kept so that two drivers never run at once.
	StateLostNode DriverState = "waiting-for-admin"
	// StateFencing: the driver's node is lost and driverset will force-delete its pod on its own
	// (fence-after or self-fence armed).
	StateFencing DriverState = "fencing"
	// StateRecovering: the driver was lost (fenced, node proven down, pod stopped from outside)
	// and its new incarnation does not run yet.
	StateRecovering DriverState = "recovering"
	// StateSucceeded and StateFailed: the app has ended.
	StateSucceeded DriverState = "succeeded"
	StateFailed    DriverState = "failed"
)

// allDriverStates lists every state, so the gauge shows a 0 rather than no series.
func allDriverStates() []DriverState {
	return []DriverState{StatePending, StateRunning, StateRestarting, StateBlocked,
		StateLostNode, StateFencing, StateRecovering, StateSucceeded, StateFailed}
}

// stateOf is the state of the driver of placeholder p, read from p alone: its phase, the driver
// container's state that the controller mirrors onto it, and its loss record. since is when the
// driver was lost, for StateLostNode (zero otherwise). Reading only the placeholder keeps the
// gauge's cost at one cache list per scrape, and agrees with what `kubectl get pod` shows.
func stateOf(p *corev1.Pod) (state DriverState, since time.Time) {
	switch p.Status.Phase {
	case corev1.PodSucceeded:
		return StateSucceeded, time.Time{}
	case corev1.PodFailed:
		return StateFailed, time.Time{}
	}
	if rec := lostOf(p); rec != nil {
		switch {
		case rec.Cause != CauseNodeLost:
			return StateRecovering, time.Time{}
		case rec.Fencing:
			return StateFencing, time.Time{}
		}
		return StateLostNode, rec.Since
	}
	cs := containerStatus(p.Status, driverContainer(p))
	switch {
	case cs != nil && cs.State.Running != nil:
		return StateRunning, time.Time{}
	case cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason == ReasonFailedCreate:
		return StateBlocked, time.Time{}
	case cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason == ReasonRestarting:
		return StateRestarting, time.Time{}
	case p.Status.Phase == corev1.PodRunning:
		// It ran, is not lost, and does not run: the new incarnation after a process failure.
		return StateRestarting, time.Time{}
	}
	return StatePending, time.Time{}
}

// tally counts placeholders by state, and how long the driver longest waiting for an admin on a
// lost node has waited (0: none waits).
func tally(placeholders []corev1.Pod, now time.Time) (map[DriverState]int, time.Duration) {
	counts := map[DriverState]int{}
	var oldest time.Duration
	for i := range placeholders {
		state, since := stateOf(&placeholders[i])
		counts[state]++
		if state == StateLostNode && !since.IsZero() {
			oldest = max(oldest, now.Sub(since))
		}
	}
	return counts, oldest
}
