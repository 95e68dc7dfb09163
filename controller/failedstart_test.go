package controller

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/wrap"
)

// failedStarts are the ends of a container start in which the driver never ran, as the kubelet
// reports them: wrap's own 125 (it could not hold its heartbeat Lease, or use its state
// directory; it records nothing, so the kubelet's next start tries again) and a runtime that
// could not start the container at all (StartError, exit 128: wrap never ran). The messages are
// the ones wrap and containerd write.
var failedStarts = []struct {
	name string
	term corev1.ContainerStateTerminated
}{
	{"wrap could not hold its heartbeat", corev1.ContainerStateTerminated{
		ExitCode: wrap.ExitWrapFailed, Reason: "Error",
		Message: wrap.TerminationMessage(wrap.ExitWrapFailed, "not starting the driver: self-fencing is on and its heartbeat Lease pi-driver-heartbeat could not be held: held by pi-driver-0/6c4bd1e6 until 18:40:05"),
	}},
	{"wrap could not use its state directory", corev1.ContainerStateTerminated{
		ExitCode: wrap.ExitWrapFailed, Reason: "Error",
		Message: wrap.TerminationMessage(wrap.ExitWrapFailed, "not starting the driver: state directory /opt/driverset/state: mkdir: read-only file system"),
	}},
	{"the runtime could not start the container", corev1.ContainerStateTerminated{
		ExitCode: 128, Reason: "StartError",
		Message: `failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: exec: "/opt/driverset/bin/driverset": permission denied`,
	}},
}

// startedAfterAFailedStart is S-0 as its kubelet reports it once a start failed and the next
// one, a backoff later, started the driver: running, with the failed start in lastState.
func startedAfterAFailedStart(failed corev1.ContainerStateTerminated, at time.Time) corev1.PodStatus {
	st := runningStatus(at.Add(10 * time.Second))
	cs := &st.ContainerStatuses[0]
	cs.RestartCount = 1
	failed.StartedAt, failed.FinishedAt = metav1.NewTime(at), metav1.NewTime(at)
	cs.LastTerminationState = corev1.ContainerState{Terminated: &failed}
	return st
}

// TestFailedStartIsNotTheDriversExit: a container start in which the driver never ran is not the
// driver's exit. The driver that the kubelet's next start runs is a running driver: driverset
// neither counts a restart nor deletes it, nor, with no restarts left, ends the app Failed. And
// when its node is then cut off and the pod evicted, nothing "recorded" proves the driver ended:
// the pod is not force-deleted, so no second S-0 starts while the first may still run.
func TestFailedStartIsNotTheDriversExit(t *testing.T) {
	for _, fs := range failedStarts {
		for _, maxRestarts := range []string{"3", "0"} {
			t.Run(fs.name+", max-restarts "+maxRestarts, func(t *testing.T) {
				h := runningCluster(t, map[string]string{contract.AnnotationMaxRestarts: maxRestarts}, nil)
				first := h.driver()
				h.setNode("node-b", corev1.ConditionTrue, t0)
				h.now = t0.Add(10 * time.Minute)
				h.setDriverStatus(startedAfterAFailedStart(fs.term, h.now.Add(-time.Minute)))
				h.reconcile()
				h.expectEvents(nil, nil)
				if len(h.deletes) != 0 {
					t.Fatalf("the running driver was deleted after a failed start: %+v", h.deletes)
				}
				p := h.placeholder()
				checkStatus(t, p, corev1.PodRunning, "running", true)
				if n := p.Annotations[contract.AnnotationRestarts]; n != "" {
					t.Errorf("restarts = %q after a failed start, want none counted", n)
				}

				// Its node is cut off; the taint manager evicts S-0, which stays Terminating.
				h.setNode("node-a", corev1.ConditionUnknown, h.now, unreachableTaints()...)
				if err := h.c.Delete(h.ctx, h.driver()); err != nil {
					t.Fatal(err)
				}
				for _, after := range []time.Duration{time.Minute, time.Hour} {
					h.now = h.now.Add(after)
					h.reconcile()
					if got := h.forcedDeletions(); len(got) != 0 {
						t.Fatalf("force-deleted %v: the driver may still run on the cut-off node", got)
					}
				}
				if d := h.driver(); d == nil || d.UID != first.UID {
					t.Errorf("S-0 = %v, want the first incarnation kept until the node is proven down", d)
				}
				if p := h.placeholder(); p.Status.Phase != corev1.PodRunning || !strings.Contains(p.Status.Message, "node-a") {
					t.Errorf("placeholder %s %q, want Running, waiting for proof about node-a", p.Status.Phase, p.Status.Message)
				}
			})
		}
	}
}

// TestContainerStatusUnknownHidesNoRecordedExit: the driver exited 0 and wrap idles; then its
// kubelet loses the container (the pod deleted, a node reboot) and writes ContainerStatusUnknown
// (137, no finishedAt) over the running idle state. That is no exit of the driver: wrap's record
// of 0 in lastState is the app's outcome, and a finished app is not run again.
func TestContainerStatusUnknownHidesNoRecordedExit(t *testing.T) {
	unknown := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 137, Reason: "ContainerStatusUnknown", Message: "The container could not be located when the pod was terminated",
	}}
	for _, deleted := range []bool{false, true} {
		name := "pod kept"
		if deleted {
			name = "pod being deleted"
		}
		t.Run(name, func(t *testing.T) {
			h := runningCluster(t, nil, nil)
			h.now = t0.Add(time.Hour)
			st := exitedStatus(0, h.now.Add(-time.Minute))
			st.ContainerStatuses[0].State = unknown
			st.Phase = corev1.PodFailed
			h.setDriverStatus(st)
			if deleted {
				if err := h.c.Delete(h.ctx, h.driver()); err != nil {
					t.Fatal(err)
				}
			}
			h.reconcile()
			checkStatus(t, h.placeholder(), corev1.PodSucceeded, "terminated", false, "exited with code 0")
			h.expectEvents([]string{"Normal Completed"}, nil)
		})
	}
}

// TestFailedStartIsTold: while the kubelet backs off before its next start, the placeholder says
// why the driver did not start (what a user would otherwise find only in S-0's status).
func TestFailedStartIsTold(t *testing.T) {
	for _, fs := range failedStarts {
		t.Run(fs.name, func(t *testing.T) {
			h := runningCluster(t, nil, nil)
			h.now = t0.Add(10 * time.Minute)
			st := startedAfterAFailedStart(fs.term, h.now.Add(-time.Minute))
			st.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
			st.ContainerStatuses[0].Ready = false
			h.setDriverStatus(st)
			h.reconcile()
			why := fs.term.Message
			if _, detail, ok := strings.Cut(why, "\n"); ok {
				why = detail
			}
			checkStatus(t, h.placeholder(), corev1.PodRunning, "waiting", false, "the driver did not start, the kubelet tries again: "+why)
			if len(h.deletes) != 0 {
				t.Errorf("deleted %+v while the kubelet retries a failed start", h.deletes)
			}
		})
	}
}

// TestForcedDeleteOfACutOffDriverIsHeld: a user runs `kubectl delete pod <S-0> --force` while the
// driver's node is cut off. The apiserver would remove the pod as soon as driverset's finalizer
// is gone, and the StatefulSet would start a second driver beside the one that may still run
// there: driverset holds the pod until the node is proven down (here, an admin's out-of-service
// taint), then lets it go, and the next incarnation runs elsewhere.
func TestForcedDeleteOfACutOffDriverIsHeld(t *testing.T) {
	h := runningCluster(t, nil, nil)
	first := h.driver()
	h.setNode("node-b", corev1.ConditionTrue, t0)
	h.now = t0.Add(10 * time.Minute)
	h.setNode("node-a", corev1.ConditionUnknown, h.now, unreachableTaints()...)
	if err := h.c.Delete(h.ctx, first, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	for _, after := range []time.Duration{time.Second, time.Hour} {
		h.now = h.now.Add(after)
		h.reconcile()
		if d := h.driver(); d == nil || d.UID != first.UID {
			t.Fatalf("the force-deleted S-0 was let go %s later while its node is only cut off", after)
		}
	}
	h.setNode("node-a", corev1.ConditionUnknown, h.now, append(unreachableTaints(),
		corev1.Taint{Key: TaintOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})...)
	h.reconcile()
	if d := h.driver(); d != nil {
		t.Fatalf("S-0 still held after the out-of-service taint (Terminating: %v)", d.DeletionTimestamp != nil)
	}
	h.startIncarnation("node-b")
	h.setDriverStatus(runningStatus(h.now))
	h.reconcile()
	checkStatus(t, h.placeholder(), corev1.PodRunning, "running", true, "node-b")
}
