//go:build testbed

package realnode

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/driverset/driverset/contract"
)

// TestExitThenEvictedIsCounted (issue 34, no exit lost): the driver exits 1 while driverset is
// down (an upgrade, both replicas rescheduled); wrap records the exit, the kubelet starts wrap
// again, and wrap idles. Then the node runs short of memory and its kubelet evicts S-0: Failed,
// reason Evicted, a DisruptionTarget by the kubelet, and the exit 1 in the container's lastState.
// When driverset is back, the kubelet's mark must not hide the driver's own exit: it is counted,
// and the app, allowed no restart, ends Failed with no second driver. Read as a node loss (what
// the mark alone says), the app would run again after it had failed.
func TestExitThenEvictedIsCounted(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	s := submit(t, simApp(ns, "exitevicted", 0), func(p *corev1.Pod) {
		noRestarts(p)
		// Under memory pressure the kubelet evicts first the pods using more than they request:
		// an idling wrap uses a few MiB, so the driver pod must request less than that.
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("1Mi")
	})
	first := runningDriver(t, s, "", 3*time.Minute)
	node := first.Spec.NodeName
	waitLog(t, ns, first.Name, "simspark: driver started", 1, time.Minute)
	seen := watchIncarnation(t, first)
	incarnations := watchIncarnations(t, ns, first)

	resume := pauseDriverset(t)
	s.end(t, "1")
	// wrap records the 1 and exits with it; the kubelet starts it again (after its back-off) and it
	// idles: the exit is now in lastState, under a running container.
	waitFor(t, 2*time.Minute, "wrap idling in "+first.Name+" after the driver's exit 1", func(ctx context.Context) (bool, error) {
		p, err := kube().CoreV1().Pods(ns).Get(ctx, first.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == contract.DriverContainerName {
				last := cs.LastTerminationState.Terminated
				return cs.State.Running != nil && last != nil && last.ExitCode == 1, nil
			}
		}
		return false, nil
	})
	// A driver started again from here on would run on (its control no longer says to exit): an
	// app run again after its exit is then seen, not hidden behind a second exit 1.
	s.end(t, "")

	restore := underMemoryPressure(t, node)
	pressured := time.Now()
	stopped := seen.terminal(t, 3*time.Minute)
	t.Logf("S-0 %s %s after the threshold: %s", first.UID, time.Since(pressured).Round(time.Millisecond), describeStop(stopped))
	// The idling wrap exits 0 on the kubelet's SIGTERM, restating the record: every container
	// ended 0, so the kubelet reports the evicted pod Succeeded (Kubernetes v1.37), not Failed
	// with reason Evicted as it does a pod whose driver it killed. Its mark is the same.
	if d := disruptionTarget(stopped); d == nil || d.Reason != corev1.PodReasonTerminationByKubelet || !strings.Contains(d.Message, "memory") {
		t.Fatalf("S-0 ended %s with DisruptionTarget %+v; want one by its kubelet, for memory", stopped.Status.Phase, d)
	}
	restore()

	resume()
	res := s.Wait(t, 3*time.Minute)
	t.Logf("spark-submit: %s, exit code %d, phases %v", res.FinalPhase, res.ExitCode, res.Phases)
	if res.FinalPhase != corev1.PodFailed {
		t.Errorf("spark-submit saw %s (phases %v), want Failed: the driver exited 1 and no restart is allowed", res.FinalPhase, res.Phases)
	}
	p, err := kube().CoreV1().Pods(ns).Get(ctx, s.plan.DriverPodName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("placeholder: phase %s, %q; restarts %q", p.Status.Phase, p.Status.Message, p.Annotations[contract.AnnotationRestarts])
	// Nothing may run the app again: give driverset a few passes, then no other S-0 may ever have
	// existed.
	time.Sleep(10 * time.Second)
	if uids := incarnations(); len(uids) != 1 {
		t.Errorf("incarnations of S-0: %v, want only the first: the eviction hid the driver's exit 1, and the app ran again", uids)
	}
}

// watchIncarnations records the UID of every pod of first's name in ns from first's version on,
// and returns the function that lists them in the order seen.
func watchIncarnations(t *testing.T, ns string, first *corev1.Pod) func() []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := kube().CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", first.Name).String(), ResourceVersion: first.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	uids := []string{string(first.UID)}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && !slices.Contains(uids, string(p.UID)) {
				mu.Lock()
				uids = append(uids, string(p.UID))
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(uids)
	}
}

// pauseDriverset stops every replica of driverset (its Deployment scaled to 0, as during an
// upgrade that reschedules both) and returns the function that brings them back and waits until
// they are Ready. The test's cleanup brings them back too, if the test ended before.
func pauseDriverset(t *testing.T) (resume func()) {
	t.Helper()
	ctx := context.Background()
	deployments := kube().AppsV1().Deployments(driversetNamespace)
	d, err := deployments.Get(ctx, "driverset", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	replicas := *d.Spec.Replicas
	scale := func(n int32) error {
		sc, err := deployments.GetScale(ctx, "driverset", metav1.GetOptions{})
		if err != nil {
			return err
		}
		sc.Spec.Replicas = n
		_, err = deployments.UpdateScale(ctx, "driverset", sc, metav1.UpdateOptions{})
		return err
	}
	if err := scale(0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "no replica of driverset left", func(ctx context.Context) (bool, error) {
		pods, err := kube().CoreV1().Pods(driversetNamespace).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(d.Spec.Selector)})
		if err != nil {
			return false, err
		}
		return len(pods.Items) == 0, nil
	})
	resumed := false
	resume = func() {
		if resumed {
			return
		}
		resumed = true
		if err := scale(replicas); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 3*time.Minute, "driverset's replicas Ready again", func(ctx context.Context) (bool, error) {
			d, err := deployments.Get(ctx, "driverset", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return deploymentReady(d, replicas), nil
		})
	}
	t.Cleanup(resume)
	return resume
}

func deploymentReady(d *appsv1.Deployment, replicas int32) bool {
	return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == replicas &&
		d.Status.ReadyReplicas == replicas && d.Status.Replicas == replicas
}

// disruptionTarget is p's DisruptionTarget=True condition, nil when it has none.
func disruptionTarget(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if c := &p.Status.Conditions[i]; c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}
