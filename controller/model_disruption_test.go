package controller

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The kubelet's own disruptions in the model (model_kubelet_test.go), after k8s v1.37
// pkg/kubelet: graceful node shutdown (nodeshutdown/nodeshutdown_manager_linux.go,
// processShutdownEvent) and node-pressure eviction (eviction/eviction_manager.go, evictPod) both
// call killPodFunc with a status function that sets phase Failed, the reason (Terminated,
// Evicted) and a DisruptionTarget=True condition, reason TerminationByKubelet. The pod worker
// then runs SyncTerminatingPod (kubelet.go): it stops every container (SIGTERM: a running driver
// is recorded 143, an idling wrap exits 0 and writes its record again, an ended container stays
// as it was) and starts none again. The status manager (status/status_manager.go,
// mergePodStatus) holds the terminal phase, the reason and the DisruptionTarget condition back
// while the pod could still have running containers; statuses sent meanwhile carry the stopped
// containers under the old phase. Once the worker has finished terminating, it sends phase
// Failed with the condition, whose lastTransitionTime it stamps then: after the kill.
//
// The model makes those two steps two events: the kill (after which the kubelet reports the
// stopped containers, phase unchanged), and the terminal report. Between them anything may come
// (a partition, driverset's passes, time), as a status sync that fails between them allows.

// The kubelet's disruptions: its reason for the pod (the last one's is Evicted too), and the
// event's words.
const (
	disruptShutdown = reasonNodeShutdown // graceful node shutdown
	disruptEviction = reasonEvicted      // node-pressure eviction
	// disruptOwnStorage: the eviction manager's eviction of a pod over its own ephemeral-storage
	// limit (eviction_manager.go localStorageEviction, podEphemeralStorageLimitEviction): the same
	// kill, and phase Failed with reason Evicted, but no DisruptionTarget condition (it is the
	// pod's own doing). driverset counts it as the driver's failure, not a node loss, so the model
	// takes the kill's 143 for the driver's own exit.
	disruptOwnStorage = "EvictedForItsOwnStorage"
)

var disruptionWords = map[string]string{
	disruptShutdown:   "shuts its node down (graceful node shutdown)",
	disruptEviction:   "evicts it for node pressure",
	disruptOwnStorage: "evicts it for its own ephemeral-storage use",
}

// disruptionEvents are the kubelet's own stops of inc (its number n), reachable and its pod in
// the apiserver: the kill, and later the terminal report with its mark.
func (w *mworld) disruptionEvents(i int, n string, inc *minc, pod *corev1.Pod, now time.Time) []mevent {
	var out []mevent
	if inc.Disrupted == "" && !inc.Stopped && pod.DeletionTimestamp == nil {
		for _, kind := range []string{disruptShutdown, disruptEviction, disruptOwnStorage} {
			out = append(out, mevent{name: "kubelet on " + inc.Node + " " + disruptionWords[kind] + ": kills " + n + "'s containers", kind: kindKubelet, apply: func(w *mworld) {
				inc := w.m.Incs[i]
				running := inc.Ctr == ctrDriver
				inc.kubeletKill(kind, now)
				if kind == disruptOwnStorage && running {
					// The app's own failure: its 143 must be counted.
					code := 143
					inc.OwnExit, inc.OwnExitBeforeDelete = &code, true
				}
			}})
		}
	}
	if inc.Ctr == ctrTerminated && inc.Term.Kind == termExit && !inc.BackingOff && !inc.Stopped && pod.DeletionTimestamp == nil {
		// With the kubelet's stops only: the back-off decides whether the exit is still in
		// state.terminated when the kubelet stops the pod.
		out = append(out, mevent{name: "kubelet on " + inc.Node + " backs off " + n + "'s restart: CrashLoopBackOff, the exit in lastState", kind: kindKubelet, apply: func(w *mworld) {
			w.m.Incs[i].BackingOff = true
		}})
	}
	if inc.Disrupted != "" && inc.MarkedAt.IsZero() {
		mark := "Failed (" + inc.Disrupted + "), DisruptionTarget TerminationByKubelet"
		if inc.Disrupted == disruptOwnStorage {
			mark = "Failed (Evicted), no DisruptionTarget"
		}
		out = append(out, mevent{name: "kubelet on " + inc.Node + " reports " + n + " " + mark, kind: kindKubelet, apply: func(w *mworld) {
			inc := w.m.Incs[i]
			inc.MarkedAt, inc.Phase = now, corev1.PodFailed
		}})
		if inc.Disrupted == disruptOwnStorage && inc.Ctr == ctrTerminated && (inc.Term.Kind == termStopped || inc.Term.Kind == termIdleStopped) {
			// The eviction removes an evicted pod's containers at once: a kubelet that lost the
			// container before it sent its status reports ContainerStatusUnknown over wrap's
			// record (status_manager TerminatePod). The eviction still says the driver failed;
			// taken for no exit, it was a pod-deleted loss, never counted (the real-node
			// TestDriverOverItsStorageLimitIsAFailureNotANodeLoss, 1 run in 2 of the clean-clone
			// CI). Only for a container the kill stopped (the kubelet loses only one it had
			// started), and only here: after its other stops nothing is counted either way.
			out = append(out, mevent{name: "kubelet on " + inc.Node + " reports " + n + " " + mark + ", its container lost: ContainerStatusUnknown", kind: kindKubelet, apply: func(w *mworld) {
				inc := w.m.Incs[i]
				inc.MarkedAt, inc.Phase = now, corev1.PodFailed
				inc.Ctr, inc.Term = ctrTerminated, &mterm{Kind: termUnknown}
			}})
		}
	}
	return out
}

// kubeletKill is the kubelet stopping inc's containers for its own reason (kind): as for a
// deletion (stop), but the phase it reports stays as it was until the terminal report.
func (inc *minc) kubeletKill(kind string, now time.Time) {
	// The pod is not deleted: a container in back-off stays Waiting, its exit in lastState.
	phase, backingOff := inc.Phase, inc.BackingOff
	inc.stop(now)
	inc.Phase, inc.Disrupted, inc.BackingOff = phase, kind, backingOff
}

// markOf is the status the kubelet reports for inc once it has sent its own disruption's end:
// the reason, the message and the DisruptionTarget condition, stamped when sent.
func (inc *minc) markOf(st *corev1.PodStatus) {
	if inc.MarkedAt.IsZero() {
		return
	}
	st.Reason, st.Message = inc.Disrupted, "the kubelet stopped the pod: "+disruptionWords[inc.Disrupted]
	if inc.Disrupted == disruptOwnStorage {
		st.Reason = reasonEvicted
		return
	}
	st.Conditions = append(st.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: corev1.PodReasonTerminationByKubelet, Message: st.Message, LastTransitionTime: metaTime(inc.MarkedAt)})
}
