package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driverset/driverset/contract"
)

// TestOwnStorageEvictionWithItsContainerLost: the kubelet evicts S-0 for its own
// ephemeral-storage use and reports it Failed, reason Evicted, with no DisruptionTarget; but the
// driver container's end it reports is its ContainerStatusUnknown (137, no finishedAt), which
// hides wrap's record: it lost the container before it sent its status (the eviction removes an
// evicted pod's containers at once). The StatefulSet controller deletes the Failed pod. The
// eviction itself says the driver failed, record or not: it is counted, not taken for a
// pod-deleted loss (which made the real-node TestDriverOverItsStorageLimitIsAFailureNotANodeLoss
// see one incarnation more than max-restarts allows, 1 run in 2 of the clean-clone CI).
func TestOwnStorageEvictionWithItsContainerLost(t *testing.T) {
	unknown := &corev1.ContainerStateTerminated{ExitCode: 137, Reason: reasonStatusUnknown,
		Message: "The container could not be located when the pod was terminated"}
	for _, tc := range []struct {
		name  string
		state func(cs *corev1.ContainerStatus)
		// outcomesFirst: the Outcomes reconciler looks at the deleted pod before the placeholder's
		// pass does (the pass is busy, or its cache is behind).
		outcomesFirst bool
	}{
		{"lost in state.terminated (TerminatePod)", func(cs *corev1.ContainerStatus) {
			cs.State = corev1.ContainerState{Terminated: unknown}
		}, false},
		{"lost in state.terminated, Outcomes first", func(cs *corev1.ContainerStatus) {
			cs.State = corev1.ContainerState{Terminated: unknown}
		}, true},
		{"lost in lastState, waiting (a container gone from the runtime)", func(cs *corev1.ContainerStatus) {
			cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
			cs.LastTerminationState = corev1.ContainerState{Terminated: unknown}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := runningCluster(t, map[string]string{contract.AnnotationMaxRestarts: "1"}, nil)
			first := h.driver()
			killedAt := h.now.Add(10 * time.Second)
			st := runningStatus(h.now.Add(-time.Minute))
			cs := &st.ContainerStatuses[0]
			cs.Ready = false
			tc.state(cs)
			for i := range st.Conditions {
				if c := &st.Conditions[i]; c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
					c.Status, c.LastTransitionTime = corev1.ConditionFalse, metav1.NewTime(killedAt)
				}
			}
			st.Phase, st.Reason, st.Message = corev1.PodFailed, reasonEvicted, "Pod ephemeral local storage usage exceeds the total limit of containers 16Mi."
			h.setDriverStatus(st)
			h.now = killedAt.Add(time.Second)
			if !tc.outcomesFirst {
				h.reconcile()
			}
			// The StatefulSet controller deletes the Failed pod; the finalizer holds it.
			if err := h.c.Delete(h.ctx, h.driver(), client.Preconditions{UID: &first.UID}); err != nil {
				t.Fatal(err)
			}
			h.releaseOutcome()
			if d := h.driver(); d == nil || d.UID != first.UID {
				t.Fatal("the evicted pod was let go before its failure was counted")
			}
			h.now = h.now.Add(time.Hour) // past the backoff
			h.reconcile()
			p := h.placeholder()
			if n, uid := restartsOf(p); n != 1 || uid != first.UID {
				t.Errorf("restarts %d for %q, want 1 for the evicted %s", n, uid, first.UID)
			}
			if rec := lostOf(p); rec != nil {
				t.Errorf("recorded as a loss (%+v): an eviction for the pod's own storage use is its failure", rec)
			}
		})
	}
}

// TestOwnEvictionOutcome: what outcomeOf reads from a pod its kubelet evicted for its own storage
// use. A lost container end is the driver's failure, 137, ended when the pod stopped being ready;
// a container that never started has no end (make model counted one when every own-storage
// eviction with no record was taken for a failure).
func TestOwnEvictionOutcome(t *testing.T) {
	started, killed := t0, t0.Add(time.Minute)
	unknown := &corev1.ContainerStateTerminated{ExitCode: 137, Reason: reasonStatusUnknown}
	for _, tc := range []struct {
		name   string
		state  corev1.ContainerState
		last   corev1.ContainerState
		exited bool
	}{
		{"its end lost in state", corev1.ContainerState{Terminated: unknown}, corev1.ContainerState{}, true},
		{"its end lost in lastState", corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}},
			corev1.ContainerState{Terminated: unknown}, true},
		{"evicted before its container started", corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}},
			corev1.ContainerState{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "uid-s0"}, Status: corev1.PodStatus{
				Phase: corev1.PodFailed, Reason: reasonEvicted, StartTime: &metav1.Time{Time: started},
				Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(killed)}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: contract.DriverContainerName, State: tc.state, LastTerminationState: tc.last}},
			}}
			o := outcomeOf(pod, contract.DriverContainerName)
			if o.Exited != tc.exited {
				t.Fatalf("outcome %+v, exited want %v", o, tc.exited)
			}
			if tc.exited && (o.Code != codeLost || !o.FinishedAt.Equal(killed) || !o.StartedAt.Equal(started) || o.PodUID != "uid-s0") {
				t.Errorf("outcome %+v, want %d from %v to %v", o, codeLost, started, killed)
			}
		})
	}
}
