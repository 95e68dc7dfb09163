package controller

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReasonPlaceholder replaces the apiserver's PodScheduled=False/SchedulingGated condition on the
// placeholder: kubectl shows "SchedulingGated" for any pod with that condition, whatever its phase,
// and the placeholder must read Running / Completed / Error like a normal driver pod.
const ReasonPlaceholder = "DriversetPlaceholder"

// ReasonRestarting is the driver container's waiting reason on the placeholder while a failed
// driver is restarted.
const ReasonRestarting = "DriverRestarting"

// View is what the controller knows about the driver when it writes the placeholder's status.
type View struct {
	// Driver is the StatefulSet's pod (S-0), nil while it does not exist.
	Driver *corev1.Pod
	// Container is the name of the driver container (the same in P and S-0).
	Container string
	// Decision about Driver's outcome, and the outcome itself.
	Decision Decision
	Outcome  Outcome
	// Restarts made so far in the current run of failures (process failures only; a failure after
	// a healthy run begins a new run, see forget).
	Restarts int
	// TotalRestarts made over the app's life: the placeholder's restartCount, which never goes down.
	TotalRestarts int
	// Note, when set, is appended to the message (e.g. why a lost node's pod is waited for).
	Note string
	// Invalid, when set, names the driver's annotations that are invalid and ignored.
	Invalid string
	// Blocked, when set, is why the driver pod cannot be made (a refused create), shown while
	// there is no driver pod.
	Blocked string
	// Recovered: this pass told Driver's recovery from a node loss already (the Recovered Event
	// names its pod and node), so that no DriverRunning Event repeats it.
	Recovered bool
}

// placeholderStatus is the status the placeholder must show for v, given its current status.
// It never moves a container from terminated back to running: the placeholder keeps Spark's
// restartPolicy Never, for which the apiserver forbids that transition, so an exit that will be
// retried is shown as waiting with the exit in lastState, and terminated only once it is final.
func placeholderStatus(cur corev1.PodStatus, v View) corev1.PodStatus {
	st := corev1.PodStatus{
		Phase:     corev1.PodPending,
		StartTime: cur.StartTime,
		QOSClass:  cur.QOSClass,
	}
	cs := corev1.ContainerStatus{Name: v.Container, RestartCount: int32(max(v.Restarts, v.TotalRestarts))}
	var driverCS *corev1.ContainerStatus
	if v.Driver != nil {
		for i := range v.Driver.Status.ContainerStatuses {
			if v.Driver.Status.ContainerStatuses[i].Name == v.Container {
				driverCS = &v.Driver.Status.ContainerStatuses[i]
			}
		}
		if driverCS != nil {
			cs.Image, cs.ImageID, cs.ContainerID = driverCS.Image, driverCS.ImageID, driverCS.ContainerID
		}
	}
	ready := false
	switch v.Decision.Action {
	case Succeed, Fail:
		st.Phase = corev1.PodSucceeded
		reason := "Completed"
		if v.Decision.Action == Fail {
			st.Phase, reason = corev1.PodFailed, "Error"
		}
		cs.State.Terminated = &corev1.ContainerStateTerminated{
			ExitCode:   int32(v.Outcome.Code),
			Reason:     reason,
			FinishedAt: metav1.NewTime(v.Outcome.FinishedAt),
			Message:    fmt.Sprintf("driver exited with code %d in pod %s", v.Outcome.Code, podRef(v.Driver)),
		}
		st.Message = fmt.Sprintf("driverset: the driver exited with code %d in pod %s; %d restart(s)", v.Outcome.Code, podRef(v.Driver), v.Restarts)
	case Wait, Restart:
		st.Phase = corev1.PodRunning
		cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{
			ExitCode:   int32(v.Outcome.Code),
			Reason:     "Error",
			FinishedAt: metav1.NewTime(v.Outcome.FinishedAt),
		}
		cs.State.Waiting = &corev1.ContainerStateWaiting{
			Reason:  ReasonRestarting,
			Message: fmt.Sprintf("the driver exited with code %d; starting a new incarnation", v.Outcome.Code),
		}
		n := v.Restarts // with Restart, the restart under way is counted already
		if v.Decision.Action == Wait {
			n++
		}
		st.Message = fmt.Sprintf("driverset: the driver exited with code %d in pod %s; restarting (restart %d)", v.Outcome.Code, podRef(v.Driver), n)
	default:
		switch {
		case v.Driver == nil:
			// Once the driver has run, the app stays Running while a new incarnation is made.
			if cur.Phase == corev1.PodRunning {
				st.Phase = corev1.PodRunning
			}
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "DriverPending", Message: "waiting for the StatefulSet to create the driver pod"}
			st.Message = "driverset: waiting for the StatefulSet to create the driver pod"
			if v.Blocked != "" {
				// spark-submit prints the waiting reason and message; kubectl shows the reason.
				cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: ReasonFailedCreate, Message: v.Blocked}
				st.Message = "driverset: " + v.Blocked
			}
		case driverCS != nil && driverCS.State.Running != nil:
			st.Phase = corev1.PodRunning
			cs.State.Running = driverCS.State.Running.DeepCopy()
			cs.Started = driverCS.Started
			ready = driverCS.Ready && podReady(v.Driver)
			cs.Ready = ready
			st.Message = runningMessage(v.Driver)
		default:
			// Scheduled or not, the driver has not started yet (or its node was lost before it did).
			if cur.Phase == corev1.PodRunning {
				st.Phase = corev1.PodRunning
			}
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "DriverPending", Message: fmt.Sprintf("driver pod %s is %s", podRef(v.Driver), v.Driver.Status.Phase)}
			st.Message = fmt.Sprintf("driverset: the driver pod %s is %s", podRef(v.Driver), v.Driver.Status.Phase)
			if v.Driver.Spec.NodeName != "" {
				st.Message += " on node " + v.Driver.Spec.NodeName
			}
			if why := failedStart(v.Driver, v.Container); why != "" {
				st.Message += "; the driver did not start, the kubelet tries again: " + why
			}
		}
		if driverCS != nil && driverCS.LastTerminationState.Terminated != nil && v.Restarts > 0 {
			cs.LastTerminationState = *driverCS.LastTerminationState.DeepCopy()
		}
	}
	if v.Note != "" {
		st.Message += "; " + v.Note
	}
	if v.Invalid != "" {
		st.Message += "; " + v.Invalid
	}
	// A container that already shows a final state keeps it (see above).
	if old := containerStatus(cur, v.Container); old != nil && old.State.Terminated != nil && cs.State.Terminated == nil {
		cs = *old
		st.Phase = cur.Phase
	}
	st.ContainerStatuses = []corev1.ContainerStatus{cs}
	st.Conditions = []corev1.PodCondition{
		condition(cur, corev1.PodScheduled, corev1.ConditionFalse, ReasonPlaceholder,
			"driverset runs this driver in a StatefulSet; this placeholder is never scheduled"),
		condition(cur, corev1.PodReady, boolCondition(ready), "", ""),
		condition(cur, corev1.ContainersReady, boolCondition(ready), "", ""),
	}
	if st.StartTime == nil && st.Phase != corev1.PodPending {
		now := metav1.Now()
		st.StartTime = &now
	}
	return st
}

// runningMessage is the placeholder's status message while the driver runs in pod d; the Event
// that reports it is recorded when the status first says so (see runningOn).
func runningMessage(d *corev1.Pod) string {
	return fmt.Sprintf("driverset: the driver runs in pod %s on node %s", podRef(d), d.Spec.NodeName)
}

func podRef(p *corev1.Pod) string {
	if p == nil {
		return "(none)"
	}
	return p.Namespace + "/" + p.Name
}

func containerStatus(st corev1.PodStatus, name string) *corev1.ContainerStatus {
	for i := range st.ContainerStatuses {
		if st.ContainerStatuses[i].Name == name {
			return &st.ContainerStatuses[i]
		}
	}
	return nil
}

func boolCondition(b bool) corev1.ConditionStatus {
	if b {
		return corev1.ConditionTrue
	}
	return corev1.ConditionFalse
}

// condition builds a condition, keeping its lastTransitionTime when its status did not change.
func condition(cur corev1.PodStatus, t corev1.PodConditionType, s corev1.ConditionStatus, reason, msg string) corev1.PodCondition {
	c := corev1.PodCondition{Type: t, Status: s, Reason: reason, Message: msg, LastTransitionTime: metav1.Now()}
	for _, old := range cur.Conditions {
		if old.Type == t && old.Status == s {
			c.LastTransitionTime = old.LastTransitionTime
		}
	}
	return c
}

// podReady reports the pod's Ready condition: for a pod on a lost node the node lifecycle
// controller sets it False and leaves the container statuses as the kubelet last reported them.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// statusEvents are the Events of P's status going from old to want, as v explains it: each
// transition a user watching the placeholder would want to know about.
func statusEvents(old, want corev1.PodStatus, v View) []Step {
	var out []Step
	if v.Invalid != "" && !strings.Contains(old.Message, v.Invalid) {
		out = append(out, eventStep{Type: corev1.EventTypeWarning, Reason: "InvalidSetting", Note: v.Invalid})
	}
	driverEvent := func(eventType, reason, format string, args ...any) {
		out = append(out, eventStep{Related: v.Driver, Type: eventType, Reason: reason, Note: fmt.Sprintf(format, args...)})
	}
	switch {
	case v.Blocked != "" && want.Message != old.Message:
		out = append(out, eventStep{Type: corev1.EventTypeWarning, Reason: ReasonFailedCreate, Note: v.Blocked})
	case want.Phase == corev1.PodSucceeded && old.Phase != corev1.PodSucceeded:
		driverEvent(corev1.EventTypeNormal, "Completed", "the driver completed (exit code 0) in pod %s", podRef(v.Driver))
	case want.Phase == corev1.PodFailed && old.Phase != corev1.PodFailed:
		driverEvent(corev1.EventTypeWarning, "Failed", "the driver failed with exit code %d in pod %s after %d restart(s)",
			v.Outcome.Code, podRef(v.Driver), v.Restarts)
	case v.Driver != nil && v.Driver.Spec.NodeName != "" && runningOn(want, v.Driver) && !runningOn(old, v.Driver) && !v.Recovered:
		driverEvent(corev1.EventTypeNormal, "DriverRunning", "the driver runs in pod %s on node %s", podRef(v.Driver), v.Driver.Spec.NodeName)
	}
	return out
}

// runningOn reports whether st says the driver runs in pod d on its node.
func runningOn(st corev1.PodStatus, d *corev1.Pod) bool {
	m := runningMessage(d)
	return st.Phase == corev1.PodRunning && (st.Message == m || strings.HasPrefix(st.Message, m+"; "))
}
