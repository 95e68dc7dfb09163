package controller

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Why a driver pod stopped, when something other than its application stopped it: decided here
// once, by stopOf, for the placeholder's pass (planLoss) and for the Outcomes reconciler, which
// records the loss itself when it lets a pod go first (lossAtRelease) and waits for the kubelet's
// cause to be recorded (releasable). The two once had a copy each of this decision.

// stop is why a driver pod was stopped from outside, as the pod tells it.
type stop struct {
	// Cause is the recovery cause recorded on the placeholder and in metrics.
	Cause string
	// Since is when the stop began, zero when the pod does not say (record dates it).
	Since time.Time
	// ByKubelet: its own kubelet stopped it and reported the end (endedByItsKubelet). Nothing of
	// it runs whatever its node's state, and this cause is the loss's even where the node was
	// seen lost first.
	ByKubelet bool
}

// stopOf is why pod's driver was stopped from outside, and false when it was not (or not yet as
// far as the pod tells). The kubelet's own word comes first: a pod it stopped for its node's
// shutdown or for node pressure, and reported Failed, keeps that cause when the StatefulSet
// controller (or anyone) deletes it afterwards. Otherwise the deletion is the cause, and without
// one the mark of a stop still under way (stoppedFromOutside).
func stopOf(pod *corev1.Pod) (stop, bool) {
	if cause, since, ok := endedByItsKubelet(pod); ok {
		return stop{Cause: cause, Since: since, ByKubelet: true}, true
	}
	cause, since, ok := stoppedFromOutside(pod)
	return stop{Cause: cause, Since: since}, ok
}

// firstLoss is the loss record of incarnation pod when none is recorded yet, as both places that
// record one decide it (planLoss, lossAtRelease): its kubelet's word first, for nothing of it runs
// whatever its node's state; else its node's loss (loss, as assessNode has it; zero while the node
// is Ready), which a deletion on a lost node does not undo; else the stop from outside. nil when
// none of them. lossAtRelease once recorded a pod deleted on a lost node as pod-deleted, dated at
// the deletion, where planLoss had the node's cause and when it was lost (TestFirstLossAgrees).
func firstLoss(pod *corev1.Pod, loss NodeLoss, now time.Time) *lostRecord {
	stopped, ok := stopOf(pod)
	switch {
	case stopped.ByKubelet:
		return stopped.record(pod.UID, now)
	case loss.Lost:
		return &lostRecord{Pod: pod.UID, Since: loss.Since, Cause: loss.Cause, Fencing: loss.fencing()}
	case ok:
		return stopped.record(pod.UID, now)
	}
	return nil
}

// record is the loss record of s for incarnation pod, dated now when the pod did not say when the
// stop began.
func (s stop) record(pod types.UID, now time.Time) *lostRecord {
	since := s.Since
	if since.IsZero() {
		since = now
	}
	return &lostRecord{Pod: pod, Since: since, Cause: s.Cause}
}

// Reasons the kubelet gives a pod it terminated itself (pod.status.reason, with phase Failed):
// graceful node shutdown ("Terminated"; "Shutdown" in older kubelets) and node-pressure eviction.
const (
	reasonNodeShutdown       = "Terminated"
	reasonNodeShutdownBefore = "Shutdown"
	// reasonNodeShutdownRejected: a kubelet restarted while its node shuts down admits its pods
	// again and rejects them, Failed with this reason and no DisruptionTarget condition.
	reasonNodeShutdownRejected = "NodeShutdown"
	reasonEvicted              = "Evicted"
	// reasonPreempting: the kubelet's admission handler stopped the pod to make room for a
	// critical pod (pkg/kubelet/preemption, events.PreemptContainer), with the same
	// TerminationByKubelet mark as a shutdown.
	reasonPreempting = "Preempting"
)

// stoppedFromOutside reports whether pod's driver was stopped by something other than the
// application, the recovery cause, and when the stop began (zero when the pod does not say).
//
//   - The pod is being deleted (eviction API, drain, scale-down, by hand): CausePodDeleted.
//   - The kubelet or the scheduler terminated it without deleting it: a DisruptionTarget=True
//     condition, or phase Failed with the kubelet's reason. Graceful node shutdown (spot and
//     preemptible VMs, upgrades) is CauseNodeShutdown; node-pressure eviction and preemption (the scheduler's, and
//     the kubelet's to admit a critical pod) are CauseEvicted. Such a pod stays, Failed, until the StatefulSet controller deletes it (a
//     terminal pod goes at once, with no grace period) and makes S-0 again.
//
// An eviction without the condition is not from outside: the eviction manager sets it for node
// pressure only, and evicts without it a pod over its own ephemeral-storage limit or an emptyDir
// over its sizeLimit (k8s v1.37 pkg/kubelet/eviction). That is the driver's failure, like an OOM
// kill: counted, or a driver that always fills its disk would be evicted and made again forever.
func stoppedFromOutside(pod *corev1.Pod) (cause string, since time.Time, ok bool) {
	if pod == nil {
		return "", time.Time{}, false
	}
	if pod.DeletionTimestamp != nil {
		return CausePodDeleted, pod.DeletionTimestamp.Time, true
	}
	return disruptedBy(pod)
}

// disruptedBy is stoppedFromOutside without the deletion: whether the kubelet, the scheduler or
// the eviction API marked pod as stopped for the node's sake, why, and since when (zero when the
// pod does not say).
func disruptedBy(pod *corev1.Pod) (cause string, since time.Time, ok bool) {
	disruption := disruptionOf(pod)
	failed := pod.Status.Phase == corev1.PodFailed
	switch {
	case evictedForItsOwnUse(pod):
		return "", time.Time{}, false
	case failed && (pod.Status.Reason == reasonEvicted || pod.Status.Reason == reasonPreempting):
		// Freed for the node's sake; was taken for a shutdown by its mark alone
		// (TestStopOf, "preempted by its kubelet to admit a critical pod").
		cause = CauseEvicted
	case failed && shutdownReason(pod):
		cause = CauseNodeShutdown
	case disruption == nil:
		return "", time.Time{}, false
	case disruption.Reason == corev1.PodReasonTerminationByKubelet:
		// The eviction manager sets the Evicted reason with the same condition (above); without
		// it, the kubelet is shutting its node down.
		cause = CauseNodeShutdown
	default:
		cause = CauseEvicted
	}
	if disruption != nil {
		since = disruption.LastTransitionTime.Time
	}
	return cause, since, true
}

// endedByItsKubelet reports whether pod's own kubelet stopped it for its node's sake and reported
// the end (phase Failed): a graceful node shutdown or a node-pressure eviction, with the cause and
// since when as disruptedBy has them. Not so a pod that PodGC marked Failed (its reason is not the
// kubelet's), nor one merely being stopped (still Running: its node may die before it ends).
func endedByItsKubelet(pod *corev1.Pod) (cause string, since time.Time, ok bool) {
	if pod == nil || pod.Status.Phase != corev1.PodFailed || !byItsKubelet(pod) {
		return "", time.Time{}, false
	}
	return disruptedBy(pod)
}

// byItsKubelet reports whether what marked pod as disrupted is its own kubelet, which stops the
// driver itself (a node shutdown, a node-pressure eviction, an admission preemption), rather than
// a controller that deletes the pod and leaves the stop to the deletion.
func byItsKubelet(pod *corev1.Pod) bool {
	if d := disruptionOf(pod); d != nil {
		return d.Reason == corev1.PodReasonTerminationByKubelet
	}
	return pod.Status.Phase == corev1.PodFailed && shutdownReason(pod)
}

// shutdownReason reports whether pod's status reason is one the kubelet gives a pod it stopped or
// rejected for its node's shutdown.
func shutdownReason(pod *corev1.Pod) bool {
	switch pod.Status.Reason {
	case reasonNodeShutdown, reasonNodeShutdownBefore, reasonNodeShutdownRejected:
		return true
	}
	return false
}

// evictedForItsOwnUse reports whether the kubelet evicted pod for its own ephemeral-storage use
// (phase Failed, reason Evicted, no DisruptionTarget condition; see stoppedFromOutside). The
// StatefulSet controller deletes such a pod as soon as it is Failed, often within the second the
// driver was stopped in, so the deletion cannot be told to have come after the exit by the times:
// the eviction itself says it did.
func evictedForItsOwnUse(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodFailed && pod.Status.Reason == reasonEvicted && disruptionOf(pod) == nil
}

// disruptionOf is pod's DisruptionTarget=True condition (the last one), nil when it has none.
func disruptionOf(pod *corev1.Pod) *corev1.PodCondition {
	var disruption *corev1.PodCondition
	for i := range pod.Status.Conditions {
		if c := &pod.Status.Conditions[i]; c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			disruption = c
		}
	}
	return disruption
}
