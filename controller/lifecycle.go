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
	Exited bool
	Code   int
	// StartedAt is when the driver of this incarnation started (the terminated container's
	// startedAt: wrap runs the driver once per container start); zero when not known.
	StartedAt  time.Time
	FinishedAt time.Time
	// PodUID is the incarnation the outcome belongs to.
	PodUID types.UID
	// SelfFenced: wrap stopped the driver because its heartbeat could not be renewed (not the
	// driver's failure).
	SelfFenced bool
	// Stopped: wrap recorded that a stop from outside (the kubelet's SIGTERM) came before the
	// driver ended; ByItself: that none did. Neither when the record does not say (a wrap before
	// the stop line, wrap.StopOf).
	Stopped, ByItself bool
}

// outcomeOf reads the recorded exit of container in pod (S-0). wrap runs the driver once per pod,
// exits with its code and is then restarted by the kubelet to idle, so the record is in
// state.terminated right after the exit and in lastState.terminated once the idle run started.
// A driver stopped from outside (stoppedFromOutside: the pod is being deleted, or the kubelet
// terminated it for a node shutdown or an eviction) has no outcome: the 143 that wrap recorded is
// the kill, not the application's failure, and the driver is recovered like after a node loss.
// A recorded 0 stays a success: a kill never exits 0 (the JVM exits 143 on SIGTERM), so it is an
// exit the driver made before the stop, and running a completed app again would be wrong.
// A pod its own kubelet stopped keeps an exit that the kubelet started the container again after
// (exitedBeforeARestart: a kubelet stopping a pod starts nothing in it); that mark is looked at first, because such a pod is deleted
// after its exit (the StatefulSet controller deletes it once Failed), and that exit is the kill.
// Any other pod being deleted, marked or not, keeps an exit the driver made before the deletion
// was asked for (exitedBeforeDeletion): PodGC, the taint manager, the scheduler and the eviction
// API stop a driver only through the deletion.
func outcomeOf(pod *corev1.Pod, container string) Outcome {
	if pod == nil {
		return Outcome{}
	}
	o := recordedExit(pod, container)
	if !o.Exited && evictedForItsOwnUse(pod) && endLost(pod, container) {
		return ownEvictionLost(pod)
	}
	if o.Exited && o.Code != 0 && !o.SelfFenced {
		switch {
		case o.ByItself:
			return o
		case o.Stopped && stopNotReportedYet(pod, container):
			return Outcome{}
		case o.Stopped && pod.DeletionTimestamp != nil && !evictedForItsOwnUse(pod) && !exitedBeforeARestart(pod, container):
			// A stop came first, and the pod is being deleted: the end is a stop from outside, the
			// deletion's or the kubelet's, whatever the times say. They cannot tell: the kubelet's
			// final delete (grace 0) moves deletionTimestamp to its own moment, after the kill, and
			// the kill was counted when driverset saw the pod only then
			// (TestFinalDeleteMovesTheRequest). The eviction for the pod's own storage use and a
			// kill the kubelet restarted the container after (a failed liveness probe) are the
			// driver's failures: the rules below count them.
			return Outcome{}
		}
	}
	if _, _, disrupted := disruptedBy(pod); disrupted && byItsKubelet(pod) {
		// The kubelet's mark carries no time to compare with: it sends the DisruptionTarget
		// condition only once every container has stopped, and stamps it then (k8s v1.37
		// pkg/kubelet/status mergePodStatus), so it always follows the kill; the real-node
		// shutdown test saw a kill's 143 counted when the mark's time was taken for the stop's.
		// What does tell is a start after the exit: a kubelet that is stopping a pod starts none
		// of its containers again, so an exit the kubelet started wrap again after (to idle) came
		// before the stop, and is the driver's own.
		if o.Exited && (o.Code == 0 || exitedBeforeARestart(pod, container)) {
			return o
		}
		return Outcome{}
	}
	// Every other disruption (PodGC, the taint manager, the scheduler's preemption, the eviction
	// API) stops the driver only by deleting its pod: the deletion decides, below. PodGC marks a
	// pod whose node is already gone, so the exit the pod records is the driver's own: taking the
	// mark for the stop lost it (TestPodGCHidesTheExit).
	if pod.DeletionTimestamp != nil && !exitedBeforeDeletion(pod, o) && !evictedForItsOwnUse(pod) && (!o.Exited || o.Code != 0) {
		return Outcome{}
	}
	return o
}

// codeLost is the exit code the kubelet gives a container whose end it lost
// (reasonStatusUnknown): a kill.
const codeLost = 137

// endLost reports whether the end of pod's driver container that the kubelet reports is its
// ContainerStatusUnknown (in state or lastState): it lost a container it had started.
func endLost(pod *corev1.Pod, container string) bool {
	cs := containerStatus(pod.Status, container)
	if cs == nil {
		return false
	}
	for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
		if t != nil && t.Reason == reasonStatusUnknown {
			return true
		}
	}
	return false
}

// ownEvictionLost is the outcome of pod, which its kubelet evicted for its own ephemeral-storage
// use (evictedForItsOwnUse), when the driver container's end that it reports is no record of
// wrap's but its ContainerStatusUnknown (137, no finishedAt; endLost), the kubelet having lost
// the container before it sent its status. The eviction itself says the driver failed: it is
// counted like the 143 wrap would have recorded, with the kubelet's 137, ended when the pod
// stopped being ready. Not so a pod evicted before its container ever started (no end at all):
// no driver ran, and make model's "the kubelet's own stops" counted that one when every
// own-storage eviction with no record was taken for a failure. Taken for no exit, the pod's deletion by the StatefulSet
// controller made it a pod-deleted loss, never counted, and a driver that always fills its disk
// would be made again forever (TestOwnStorageEvictionWithItsContainerLost; the real-node
// TestDriverOverItsStorageLimitIsAFailureNotANodeLoss saw one incarnation too many, 1 run in 2).
func ownEvictionLost(pod *corev1.Pod) Outcome {
	o := Outcome{Exited: true, Code: codeLost, PodUID: pod.UID, Stopped: true}
	if pod.Status.StartTime != nil {
		// wrap runs the driver once per pod: the pod's start is the driver's, to the seconds
		// that forget needs.
		o.StartedAt = pod.Status.StartTime.Time
	}
	for _, c := range pod.Status.Conditions {
		if (c.Type == corev1.ContainersReady || c.Type == corev1.PodReady) && c.Status == corev1.ConditionFalse && c.LastTransitionTime.After(o.FinishedAt) {
			o.FinishedAt = c.LastTransitionTime.Time
		}
	}
	return o
}

// stopNotReportedYet reports whether pod, whose driver wrap recorded ending after a stop from
// outside (wrap.StopOf), shows nothing yet of what stopped it: not terminal, no DisruptionTarget
// mark, and the kubelet has not started the container again after the end
// (exitedBeforeARestart: no kubelet restarts a container of a pod it is stopping, so such an end
// was a liveness probe's kill, the driver's failure). The kubelet reports the killed containers
// before it marks the pod and makes it terminal (k8s v1.37 SyncTerminatingPod, mergePodStatus),
// and that 143 was taken for the driver's exit (TestKubeletKillBeforeItsMark): nothing is decided
// until the pod shows more, and then the rules below decide as for any end (an eviction for the
// pod's own storage use, Failed with reason Evicted and no mark, is the driver's failure).
// A deletion does not end the wait: when the stop came before it (the kubelet's kill for a node
// shutdown, then a taint eviction or kubectl delete once the node is gone), the exit was made
// before the deletion, and the deletion's rule took that 143 for the driver's own exit
// (TestKubeletKillThenDeleted). A pod whose kubelet is alive is still made terminal, with its
// reason; one on a node that is gone is never, and its driver is recovered as a loss.
//
// The record also says when the driver ended by itself, which the pod cannot: such an end is the
// driver's exit whatever stops or marks the pod after it (outcomeOf). An exit 1 the kubelet had
// not yet restarted wrap after when it then shut the node down was taken for the kill
// (TestKubeletStopHidesAnExitNotRestarted).
func stopNotReportedYet(pod *corev1.Pod, container string) bool {
	return !isTerminal(pod.Status.Phase) && disruptionOf(pod) == nil && !exitedBeforeARestart(pod, container)
}

// recordedExit is the exit wrap recorded in pod, whether or not the pod is being deleted: the
// newer of the driver container's last two terminations that ended the driver. wrap runs the
// driver once per pod, so any such end is the incarnation's outcome, wherever the kubelet keeps it.
// A termination that is no end of the driver (notAnEnd) is passed over: the driver that the next
// start of the container runs, or already runs, has not exited.
func recordedExit(pod *corev1.Pod, container string) Outcome {
	o, _ := recordedEnd(pod, container)
	return o
}

// exitedBeforeARestart reports whether the exit recordedExit finds in pod is one the kubelet
// started the container again after: it is in lastState.terminated, which the kubelet fills only
// once it has made a newer instance of the container (wrap, idling after the exit).
func exitedBeforeARestart(pod *corev1.Pod, container string) bool {
	o, inLastState := recordedEnd(pod, container)
	return o.Exited && inLastState
}

// recordedEnd is recordedExit, and whether the end was found in lastState.terminated.
func recordedEnd(pod *corev1.Pod, container string) (Outcome, bool) {
	cs := containerStatus(pod.Status, container)
	if cs == nil {
		return Outcome{}, false
	}
	terms := []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated}
	skip := 0
	if restates(terms[0], terms[1]) {
		// The idling wrap's stop (the deletion's, or the kubelet's) is no new end: it writes the
		// record again (wrap/run.go) with the stop's finishedAt. The exit is the earlier one, and
		// its time is what tells an exit before a deletion from the deletion's stop
		// (TestIdleStopRestatesTheExit).
		skip = 1
	}
	for i, t := range terms[skip:] {
		if t == nil || notAnEnd(t) {
			continue
		}
		code := int(t.ExitCode)
		// wrap's own record wins: the container's exit code can also come from wrap itself.
		if recorded, ok := wrap.ParseTerminationMessage(t.Message); ok {
			code = recorded
		}
		stopped, known := wrap.StopOf(t.Message)
		return Outcome{Exited: true, Code: code, StartedAt: t.StartedAt.Time, FinishedAt: t.FinishedAt.Time, PodUID: pod.UID,
			SelfFenced: wrap.IsSelfFenced(t.Message), Stopped: stopped, ByItself: known && !stopped}, skip+i == 1
	}
	return Outcome{}, false
}

// restates reports whether later, a termination of the driver container, is an idling wrap's stop
// restating the record that earlier carries: both hold the same exit record of wrap's. wrap runs
// the driver once per pod, so a record seen twice is one exit.
func restates(later, earlier *corev1.ContainerStateTerminated) bool {
	if later == nil || earlier == nil || later.Message != earlier.Message || notAnEnd(earlier) {
		return false
	}
	_, ok := wrap.ParseTerminationMessage(earlier.Message)
	return ok
}

// Reasons the kubelet gives a container termination that says nothing of the process in it.
const (
	// reasonStartError: the runtime could not start the container (containerd's CRI writes it,
	// with exit code 128, when the task cannot be created or started): wrap never ran.
	reasonStartError = "StartError"
	// reasonStatusUnknown: the kubelet lost track of a container it had seen running or waiting
	// (the pod deleted or terminated before its status was read, a runtime that forgot it) and
	// wrote 137 with no finishedAt (k8s v1.37 pkg/kubelet/status TerminatePod and
	// kubelet_pods.go convertToAPIContainerStatuses). Over an idling wrap it hides the record that
	// wrap keeps in lastState; over a running driver it proves no exit.
	reasonStatusUnknown = "ContainerStatusUnknown"
)

// notAnEnd reports whether t, one termination of the driver container, is not an end of the
// driver: a start in which the driver never ran (wrap could not start it, and recorded nothing,
// so the kubelet's next start tries again; or the runtime never started wrap), or the kubelet's
// ContainerStatusUnknown. Taking one for the driver's exit would restart a driver that runs, end
// its app Failed, and, once its node is cut off, force-delete a pod whose driver may still run.
func notAnEnd(t *corev1.ContainerStateTerminated) bool {
	return t.Reason == reasonStartError || t.Reason == reasonStatusUnknown || wrap.DriverNotStarted(t.Message)
}

// failedStart is the detail of the driver container's last termination when it was a start in
// which the driver never ran, "" otherwise: what the placeholder tells while the kubelet retries.
func failedStart(pod *corev1.Pod, container string) string {
	if pod == nil {
		return ""
	}
	cs := containerStatus(pod.Status, container)
	if cs == nil || cs.State.Running != nil {
		return ""
	}
	t := cs.State.Terminated
	if t == nil {
		t = cs.LastTerminationState.Terminated
	}
	if t == nil || t.Reason == reasonStatusUnknown || !notAnEnd(t) {
		return ""
	}
	if t.Reason == reasonStartError {
		return t.Message
	}
	why, _ := wrap.NotStarted(t.Message)
	return why
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
	// Window (contract.AnnotationRestartWindow): a failure after the driver had run at least this
	// long starts a new run of failures, so Used is forgotten and the backoff starts again; 0
	// never forgets.
	Window time.Duration
}

// decide is the driver lifecycle (docs/design.md#lifecycle-decisions) as a pure function. A
// failure after a healthy run is judged with the budget forget gives it.
func decide(o Outcome, b Budget, now time.Time) Decision {
	b = forget(o, b)
	switch {
	case !o.Exited:
		return Decision{Action: Observe}
	case o.Code == 0:
		return Decision{Action: Succeed}
	case o.PodUID == b.Restarted:
		// Counted already; the restart is under way (the pod's deletion may not be seen yet).
		return Decision{Action: Restart}
	case o.SelfFenced:
		// Stopped for want of a heartbeat: a recovery, at once and whatever the budget.
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

// forget is b as it counts o: when o is a failure not counted yet (nor a self-fencing, which is
// never counted) that ended a run of at least b.Window, the restarts counted before are forgotten
// (Used 0) and with them the doubled backoff. A run of failures is thus one in which no
// incarnation ran for the window; a stream that runs for months is restarted after every
// transient failure, while one that crashes soon after each start still uses up max-restarts.
// Everything it needs is in the failed incarnation's own record, so a controller restarted
// between the failure and the restart decides the same.
func forget(o Outcome, b Budget) Budget {
	if b.Window > 0 && o.Exited && o.Code != 0 && !o.SelfFenced && o.PodUID != b.Restarted && healthyRun(o, b.Window) {
		b.Used = 0
	}
	return b
}

// healthyRun reports whether o's incarnation ran for at least window before it exited (false when
// its start is not known).
func healthyRun(o Outcome, window time.Duration) bool {
	return !o.StartedAt.IsZero() && !o.FinishedAt.IsZero() && o.FinishedAt.Sub(o.StartedAt) >= window
}
