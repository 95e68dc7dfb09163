package controller

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/wrap"
)

// The kubelet's model, after k8s v1.37 pkg/kubelet (kubelet_pods.go's getPhase and
// convertToAPIContainerStatuses, status/status_manager.go's TerminatePod and canBeDeleted) and
// wrap's run-once contract (docs/design.md):
//
//   - S-0's pods run with restartPolicy Always: an ended container is started again, after a
//     back-off, while the pod is not being deleted. The pod is Pending until its first start,
//     then Running; it becomes Failed or Succeeded only when its kubelet terminates it (a
//     deletion, or a container it lost: ContainerStatusUnknown).
//   - wrap starts the driver at most once per pod. A start may fail before the driver runs (wrap's
//     125 "not starting the driver", the runtime's StartError 128): nothing is recorded, and the
//     next start may run it. Once the driver exited, wrap's record is the termination message,
//     and every later start idles, with the record in lastState.
//   - A Terminating pod's containers are stopped (SIGTERM: a running driver is recorded as 143,
//     an idling wrap exits 0 and writes its record again); the pod's phase becomes terminal and
//     only then does the kubelet remove it (a delete with grace 0 and the pod's UID).
//   - The kubelet reports to the apiserver only while its machine reaches it; a pod removed from
//     the apiserver has its containers killed once its kubelet learns of it (not while cut off).
//   - The driver process runs from its start until it exits, its container is stopped or lost,
//     or its machine dies. It may exit on its own while its node is cut off.
//   - The kubelet stops pods for its own reasons too (graceful node shutdown, node-pressure
//     eviction): the kill, then phase Failed with its DisruptionTarget mark, stamped after the
//     kill; and it backs off a restart with the exit in lastState (model_disruption_test.go).

// Driver process states.
const (
	procNone    = iota // the driver never started in this pod
	procRunning        // the driver runs
	procEnded          // it exited, was stopped or killed
)

// Container states, as the kubelet on the incarnation's node knows them.
const (
	ctrWaiting    = iota // not started yet (or backing off before the next start)
	ctrDriver            // wrap runs the driver
	ctrIdle              // wrap idles with its record
	ctrTerminated        // the last start ended: Term
	ctrGone              // lost with its machine, or killed once its pod was removed
)

var ctrNames = []string{"waiting", "running the driver", "idling", "terminated", "gone"}

// mterm is one termination of the driver container.
type mterm struct {
	Kind              string // termNotStarted, termStartError, termExit, termStopped, termIdleStopped, termUnknown
	Code              int    // the driver's code, with termExit and termIdleStopped
	Started, Finished time.Time
}

const (
	termNotStarted  = "wrap 125: not starting the driver"
	termStartError  = "StartError 128"
	termExit        = "exit"
	termStopped     = "stopped by SIGTERM: 143"
	termIdleStopped = "idling wrap stopped: 0, record again"
	termUnknown     = "ContainerStatusUnknown 137"
)

// minc is one incarnation (one S-0 pod) as its node knows it.
type minc struct {
	UID      types.UID
	Node     string
	Proc     int
	Ctr      int
	Term     *mterm // state.terminated
	Last     *mterm // lastState.terminated
	Restarts int32
	Phase    corev1.PodPhase
	Stopped  bool // the kubelet stopped the pod for its deletion
	PodGC    bool // PodGC marked the pod Failed (DisruptionTarget) and force-deleted it
	// ForcedByUser: a user force-deleted it.
	ForcedByUser bool
	Started      time.Time
	// OwnExit is the code the driver exited with on its own (not stopped or killed): the outcome
	// the app must be judged by. OwnExitSeen: the kubelet reported it to the apiserver.
	// OwnExitBeforeDelete: the pod was not being deleted when the driver exited.
	OwnExit             *int
	OwnExitSeen         bool
	OwnExitBeforeDelete bool
	// Disrupted is the kubelet's own stop of the pod (model_disruption_test.go: disruptShutdown,
	// disruptEviction), "" when none; MarkedAt is when it reported the pod Failed with its
	// DisruptionTarget condition, zero until then.
	Disrupted string
	MarkedAt  time.Time
	// BackingOff: the kubelet tried to start the container again after the driver's exit and
	// backs off (CrashLoopBackOff): it reports the container waiting, the exit in lastState.
	BackingOff bool
}

func metaTime(t time.Time) metav1.Time { return metav1.NewTime(t) }

// terminated is t as the kubelet writes it in a container status.
func (t *mterm) terminated() *corev1.ContainerStateTerminated {
	if t == nil {
		return nil
	}
	var out corev1.ContainerStateTerminated
	switch t.Kind {
	case termNotStarted:
		out = failedStarts[0].term
	case termStartError:
		out = failedStarts[2].term
	case termExit:
		// wrap's record of an end by itself (wrap.Record): no stop from outside came before it.
		out = corev1.ContainerStateTerminated{ExitCode: int32(t.Code), Reason: "Error", Message: wrap.Record(t.Code, "", false)}
		if t.Code == 0 {
			out.Reason = "Completed"
		}
	case termStopped:
		// The kubelet's SIGTERM, forwarded: wrap records the stop that came before the end.
		out = corev1.ContainerStateTerminated{ExitCode: 143, Reason: "Error", Message: wrap.Record(143, "", true)}
	case termIdleStopped:
		// The idling wrap writes its record again: that of the driver's own exit.
		out = corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", Message: wrap.Record(t.Code, "", false)}
	case termUnknown:
		// No times: the kubelet writes them only for a container it saw end.
		return &corev1.ContainerStateTerminated{ExitCode: 137, Reason: reasonStatusUnknown,
			Message: "The container could not be located when the pod was terminated"}
	}
	out.StartedAt, out.FinishedAt = metaTime(t.Started), metaTime(t.Finished)
	return &out
}

// status is the pod status the kubelet reports for inc.
func (inc *minc) status() corev1.PodStatus {
	st := corev1.PodStatus{Phase: inc.Phase}
	if inc.Phase == "" {
		st.Phase = corev1.PodPending
	}
	cs := corev1.ContainerStatus{Name: contract.DriverContainerName, Image: "apache/spark:3.5.3", RestartCount: inc.Restarts}
	cs.LastTerminationState.Terminated = inc.Last.terminated()
	ready := corev1.ConditionFalse
	switch inc.Ctr {
	case ctrWaiting:
		reason := "ContainerCreating"
		if inc.Last != nil {
			reason = "CrashLoopBackOff"
		}
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason}
	case ctrDriver, ctrIdle:
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metaTime(inc.Started)}
		cs.Ready, ready = true, corev1.ConditionTrue
		yes := true
		cs.Started = &yes
	default:
		cs.State.Terminated = inc.Term.terminated()
		if inc.BackingOff {
			// kubelet_pods.go convertToAPIContainerStatuses: a container the kubelet will start
			// again, with a start failure in its reasonCache, is Waiting, its last end in lastState.
			cs.LastTerminationState.Terminated, cs.State.Terminated = cs.State.Terminated, nil
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
		}
	}
	st.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		{Type: corev1.PodReady, Status: ready, LastTransitionTime: metaTime(inc.Started)},
		{Type: corev1.ContainersReady, Status: ready, LastTransitionTime: metaTime(inc.Started)},
	}
	st.ContainerStatuses = []corev1.ContainerStatus{cs}
	inc.markOf(&st)
	return st
}

// podOf is inc's pod in the apiserver, nil when it is gone (or S-0 is another incarnation).
func (w *mworld) podOf(inc *minc) *corev1.Pod {
	d := w.h.driver()
	if d == nil || d.UID != inc.UID {
		return nil
	}
	return d
}

// kubeletSync is every reachable kubelet reporting what it knows: the status of its pods, and
// the end of the containers of pods removed from the apiserver.
func (w *mworld) kubeletSync() {
	for _, inc := range w.m.Incs {
		if inc.Node == "" || w.m.Machines[inc.Node] != machineUp || inc.Ctr == ctrGone {
			continue
		}
		pod := w.podOf(inc)
		if pod == nil {
			// HandlePodRemoves: the kubelet kills what is left of a pod the apiserver no longer has.
			if inc.Proc == procRunning {
				inc.Proc = procEnded
			}
			inc.Ctr = ctrGone
			continue
		}
		st := inc.status()
		if !equality.Semantic.DeepEqual(pod.Status.ContainerStatuses, st.ContainerStatuses) || pod.Status.Phase != st.Phase {
			if disruptionOf(&corev1.Pod{Status: st}) == nil {
				st.Conditions = append(st.Conditions, disruptionsOf(pod)...)
			}
			pod.Status = st
			if err := w.h.c.Status().Update(w.ctx, pod); err != nil {
				w.t.Fatalf("kubelet status: %v", err)
			}
		}
		if inc.OwnExit != nil {
			inc.OwnExitSeen = true
		}
	}
}

// disruptionsOf keeps the DisruptionTarget condition others (PodGC) wrote on pod.
func disruptionsOf(pod *corev1.Pod) []corev1.PodCondition {
	if c := disruptionOf(pod); c != nil {
		return []corev1.PodCondition{*c}
	}
	return nil
}

// kubeletEvents are the events of S-0's kubelet, on a reachable machine, and of the driver
// processes anywhere.
func (w *mworld) kubeletEvents() []mevent {
	var out []mevent
	now := w.m.now()
	for i, inc := range w.m.Incs {
		n := fmt.Sprintf("#%d", i+1)
		if inc.Proc == procRunning && w.m.Machines[inc.Node] != machineDead {
			for _, code := range []int{0, 1} {
				out = append(out, mevent{name: fmt.Sprintf("the driver of %s on %s exits %d", n, inc.Node, code), kind: kindExit, process: true, apply: func(w *mworld) {
					inc := w.m.Incs[i]
					inc.Proc, inc.Ctr = procEnded, ctrTerminated
					inc.Term = &mterm{Kind: termExit, Code: code, Started: inc.Started, Finished: now}
					inc.OwnExit = &code
					pod := w.podOf(inc)
					inc.OwnExitBeforeDelete = pod != nil && pod.DeletionTimestamp == nil
				}})
			}
		}
		if inc.Node == "" || w.m.Machines[inc.Node] != machineUp {
			continue
		}
		pod := w.podOf(inc)
		if pod == nil {
			continue
		}
		terminating := pod.DeletionTimestamp != nil
		out = append(out, w.disruptionEvents(i, n, inc, pod, now)...)
		startable := inc.Proc == procNone && !inc.Stopped && !terminating &&
			(inc.Ctr == ctrWaiting || inc.Ctr == ctrTerminated && (inc.Term.Kind == termNotStarted || inc.Term.Kind == termStartError))
		if startable {
			out = append(out,
				mevent{name: "kubelet on " + inc.Node + " starts " + n + ": wrap runs the driver", kind: kindContainer, process: true, apply: func(w *mworld) {
					inc := w.m.Incs[i]
					if w.m.Ended {
						w.m.Broken = promiseNoRerun + ": a driver started after the app's end was recorded"
					}
					if met := w.metClaims(i); met != "" {
						w.m.Broken = met
					}
					inc.restart(now)
					inc.Ctr, inc.Proc = ctrDriver, procRunning
				}},
				mevent{name: "kubelet on " + inc.Node + " starts " + n + ": wrap does not start the driver (125)", kind: kindFailedStart, process: true, apply: func(w *mworld) {
					w.m.Incs[i].failStart(termNotStarted, now)
				}},
				mevent{name: "kubelet on " + inc.Node + " starts " + n + ": the runtime fails (StartError 128)", kind: kindStartError, process: true, apply: func(w *mworld) {
					w.m.Incs[i].failStart(termStartError, now)
				}})
		}
		if inc.Ctr == ctrTerminated && inc.Term.Kind == termExit && !inc.Stopped && !terminating {
			out = append(out, mevent{name: "kubelet on " + inc.Node + " restarts " + n + "'s container: wrap idles", kind: kindContainer, apply: func(w *mworld) {
				inc := w.m.Incs[i]
				inc.restart(now)
				inc.Ctr = ctrIdle
			}})
		}
		if (inc.Ctr == ctrDriver || inc.Ctr == ctrIdle) && !inc.Stopped {
			out = append(out, mevent{name: "kubelet on " + inc.Node + " loses " + n + "'s container: ContainerStatusUnknown", kind: kindUnknown, process: true, apply: func(w *mworld) {
				inc := w.m.Incs[i]
				if inc.Proc == procRunning {
					inc.Proc = procEnded
				}
				inc.Ctr, inc.Term, inc.Phase, inc.Stopped = ctrTerminated, &mterm{Kind: termUnknown}, corev1.PodFailed, true
			}})
		}
		if terminating && !inc.Stopped {
			out = append(out, mevent{name: "kubelet on " + inc.Node + " stops Terminating " + n, kind: kindContainer, apply: func(w *mworld) {
				w.m.Incs[i].stop(now)
			}})
		}
		if terminating && inc.Stopped && isTerminal(pod.Status.Phase) && slices.Contains(pod.Finalizers, kubeletFinalizer) {
			out = append(out, mevent{name: "kubelet on " + inc.Node + " removes " + n + " (delete, grace 0)", kind: kindContainer, apply: func(w *mworld) {
				w.deletePod(w.podOf(w.m.Incs[i]), true)
			}})
		}
	}
	return out
}

// restart is the kubelet starting inc's container again: the last termination moves to lastState.
func (inc *minc) restart(now time.Time) {
	inc.BackingOff = false
	if inc.Ctr == ctrTerminated {
		inc.Last, inc.Term = inc.Term, nil
		inc.Restarts++
	}
	inc.Phase, inc.Started = corev1.PodRunning, now
}

// failStart is a start of inc's container in which the driver did not run.
func (inc *minc) failStart(kind string, now time.Time) {
	inc.restart(now)
	inc.Ctr, inc.Term = ctrTerminated, &mterm{Kind: kind, Started: now, Finished: now}
}

// stop is the kubelet stopping a Terminating pod: SIGTERM to wrap, which records a running
// driver's 143, or, idling, exits 0 writing its record again; the pod's phase then becomes
// terminal (Succeeded when every container exited 0).
func (inc *minc) stop(now time.Time) {
	inc.BackingOff = false // a pod being deleted is started no more (ShouldContainerBeRestarted)
	switch inc.Ctr {
	case ctrDriver:
		inc.Proc, inc.Term = procEnded, &mterm{Kind: termStopped, Started: inc.Started, Finished: now}
	case ctrIdle:
		inc.Term = &mterm{Kind: termIdleStopped, Code: *inc.Last.code(), Started: inc.Started, Finished: now}
	}
	inc.Stopped, inc.Phase = true, corev1.PodFailed
	if inc.Ctr == ctrIdle || inc.Ctr == ctrTerminated && inc.Term.Kind == termExit && inc.Term.Code == 0 {
		inc.Phase = corev1.PodSucceeded // every container exited 0
	}
	if inc.Ctr != ctrWaiting || inc.Term != nil {
		inc.Ctr = ctrTerminated
	}
}

// code is the driver's code a termination records, nil for one that is no exit.
func (t *mterm) code() *int {
	if t == nil || t.Kind != termExit && t.Kind != termIdleStopped {
		return nil
	}
	return &t.Code
}
