//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/wrap"
)

// The kubelet stops a driver itself for its node's graceful shutdown (spot and preemptible VMs,
// upgrades): wrap forwards the SIGTERM and records the JVM's 143, the kubelet marks the pod
// Failed with a DisruptionTarget condition and does not delete it. That is no failure of the
// application: with max-restarts 0 the app is not failed, the StatefulSet controller makes a new
// incarnation, the restart count stays 0, the loss is recorded as a node shutdown, and the app
// can then complete.
func TestDriverTerminatedForNodeShutdownIsRecoveredNotCounted(t *testing.T) {
	ns := namespace(t, nil)
	a := app(ns, "spot")
	a.DriverAnnotations = map[string]string{contract.AnnotationMaxRestarts: "0"}
	s := submit(t, a)
	names := contract.NamesFor(s.plan.DriverPodName)
	d0 := runningDriver(t, ns, names, "")

	// The kubelet's own order (its status manager never reports a terminal phase while a
	// container may still run): the condition first, then the killed container, then Failed.
	kubeletShutsDown(t, d0, disruptionCondition)
	kubeletShutsDown(t, d0, driverKilled)
	// The window the bug lived in: the driver's 143 is recorded, the pod is not terminal yet and
	// the StatefulSet controller leaves it alone. driverset must see a loss here, not a failure.
	waitFor(t, 30*time.Second, "the loss recorded on the placeholder as a node shutdown", func(ctx context.Context) (bool, error) {
		p, err := kube().CoreV1().Pods(ns).Get(ctx, s.plan.DriverPodName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Status.Phase == corev1.PodFailed {
			return false, fmt.Errorf("the app was failed by the kubelet's termination: %s", p.Status.Message)
		}
		return strings.Contains(p.Annotations[contract.AnnotationDriverLost], `"cause":"node-shutdown"`), nil
	})
	kubeletShutsDown(t, d0, podFailed)

	d1 := runningDriver(t, ns, names, string(d0.UID))
	p := getPod(t, ns, s.plan.DriverPodName)
	if n := p.Annotations[contract.AnnotationRestarts]; n != "" && n != "0" {
		t.Errorf("restart count %s after a node shutdown, want 0 (node-loss recoveries are not counted)", n)
	}
	expectEvents(t, p, "Recovered")
	if n := metric(t, `driverset_driver_recovery_seconds_count{cause="node-shutdown"}`); n < 1 {
		t.Errorf("recovery-time histogram has %v observations for cause node-shutdown, want at least 1", n)
	}

	exitDriver(t, d1, 0)
	res := s.Wait(t, 60*time.Second)
	if res.FinalPhase != corev1.PodSucceeded || res.ExitCode != 0 {
		t.Errorf("spark-submit saw phases %v, final %s, exit code %d; want Succeeded, 0", res.Phases, res.FinalPhase, res.ExitCode)
	}
	for _, ph := range res.Phases[:max(len(res.Phases)-1, 0)] {
		if ph == corev1.PodFailed {
			t.Errorf("spark-submit saw the app Failed on its way: phases %v", res.Phases)
		}
	}
}

// The steps of the kubelet's graceful node shutdown, as its status reaches the apiserver
// (k8s v1.37 pkg/kubelet/nodeshutdown: reason Terminated, condition TerminationByKubelet).
const shutdownMessage = "Pod was terminated in response to imminent node shutdown."

func disruptionCondition(st *corev1.PodStatus, now metav1.Time) {
	st.Conditions = append(st.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: corev1.PodReasonTerminationByKubelet, Message: shutdownMessage, LastTransitionTime: now})
}

// driverKilled: the driver container was stopped by SIGTERM; wrap recorded 143 and exited with it.
// The pod is terminating, so the kubelet does not start the container again.
func driverKilled(st *corev1.PodStatus, now metav1.Time) {
	for i := range st.ContainerStatuses {
		cs := &st.ContainerStatuses[i]
		if cs.Name != contract.DriverContainerName || cs.State.Running == nil {
			continue
		}
		cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 143, Reason: "Error", StartedAt: cs.State.Running.StartedAt, FinishedAt: now, ContainerID: cs.ContainerID,
			Message: wrap.TerminationMessage(143, "the driver command /opt/entrypoint.sh was killed by signal 15 (terminated); recorded as exit code 143"),
		}}
		cs.Ready, cs.Started = false, new(false)
	}
	for i := range st.Conditions {
		if c := &st.Conditions[i]; c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
			c.Status, c.Reason, c.LastTransitionTime = corev1.ConditionFalse, "ContainersNotReady", now
		}
	}
}

func podFailed(st *corev1.PodStatus, _ metav1.Time) {
	st.Phase, st.Reason, st.Message = corev1.PodFailed, "Terminated", shutdownMessage
}

// kubeletShutsDown writes one step of the kubelet's termination into pod's status.
func kubeletShutsDown(t *testing.T, pod *corev1.Pod, step func(*corev1.PodStatus, metav1.Time)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := kube().CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.UID != pod.UID {
			t.Fatalf("pod %s was replaced before the kubelet finished stopping it", pod.Name)
		}
		step(&p.Status, metav1.Now())
		_, err = kube().CoreV1().Pods(pod.Namespace).UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("kubelet status of %s: %v", pod.Name, err)
	}
}

// A drain evicts driverset's leader together with the driver (same node): S-0 is deleted while
// no driverset runs, and the kubelet's SIGTERM is recorded. When driverset is back, its Outcomes
// reconciler and its placeholder pass both look at the held S-0; the next incarnation must be
// told as a recovery (Recovered, measured as pod-deleted), whichever looks first. Before, the
// Outcomes reconciler let the pod go at once, and when it came first the loss was never recorded
// (controller's TestRecoveryToldWhenOutcomesGoesFirst shows that order).
func TestDriverEvictedWithDriversetIsRecovered(t *testing.T) {
	ns := namespace(t, nil)
	dumpOnFailure(t, ns)
	s := submit(t, app(ns, "drained"))
	names := contract.NamesFor(s.plan.DriverPodName)
	d0 := runningDriver(t, ns, names, "")

	restart := stopSharedDriverset(t)
	if err := kube().CoreV1().Pods(ns).Delete(context.Background(), d0.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &d0.UID}}); err != nil {
		t.Fatal(err)
	}
	kubeletShutsDown(t, d0, driverKilled)
	if p := getPod(t, ns, d0.Name); p.UID != d0.UID || p.DeletionTimestamp == nil {
		t.Fatalf("S-0 %s is not held Terminating while driverset is down", d0.Name)
	}
	restart()

	runningDriver(t, ns, names, string(d0.UID))
	p := getPod(t, ns, s.plan.DriverPodName)
	expectEvents(t, p, "Recovered")
	if n := p.Annotations[contract.AnnotationRestarts]; n != "" && n != "0" {
		t.Errorf("restart count %s after an eviction, want 0", n)
	}
	// The restarted process counts from 0: this recovery is the one it measured.
	if n := metric(t, `driverset_driver_recovery_seconds_count{cause="pod-deleted"}`); n < 1 {
		t.Errorf("recoveries measured for cause pod-deleted since driverset started again: %v, want at least 1", n)
	}
}
