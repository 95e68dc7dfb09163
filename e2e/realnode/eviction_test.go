//go:build testbed

package realnode

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/driverset/driverset/contract"
)

// confSpill makes the simulated driver write that many MiB to its container's disk at start.
const confSpill = "spark.driverset.sim.spillMiB"

// TestDriverOverItsStorageLimitIsAFailureNotANodeLoss: the kubelet's eviction manager evicts a
// driver that writes more than its pod's ephemeral-storage limit (phase Failed, reason Evicted,
// and no DisruptionTarget condition, which it sets for node pressure only). That is the driver's
// own failure, like an OOM kill: an eviction is counted as a restart, and once max-restarts is
// spent spark-submit ends Failed. Taken for a node-pressure eviction (not counted), the same
// driver would be made again and evicted forever, and spark-submit would never end.
//
// The StatefulSet controller deletes a Failed pod at once; driverset's finalizer
// (contract.FinalizerOutcome) holds it until the exit is counted, so exactly max-restarts+1
// incarnations are evicted.
func TestDriverOverItsStorageLimitIsAFailureNotANodeLoss(t *testing.T) {
	ns := namespace(t, nil)
	podHistory(t, ns)
	a := simApp(ns, "spill", 0)
	a.Conf[confSpill] = "48"
	s := submit(t, a, func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[contract.AnnotationMaxRestarts] = "1"
		c := &p.Spec.Containers[0]
		if c.Resources.Limits == nil {
			c.Resources.Limits = corev1.ResourceList{}
		}
		c.Resources.Limits[corev1.ResourceEphemeralStorage] = resource.MustParse("16Mi")
	})

	first := runningDriver(t, s, "", 3*time.Minute)
	if !bed.cluster.IsRealNode(first.Spec.NodeName) {
		t.Fatalf("S-0 runs on %s, not a real node", first.Spec.NodeName)
	}
	waitLog(t, ns, first.Name, "simspark: spilled 48 MiB", 1, time.Minute)

	// spark-submit ends (its own exit code is 0 for a failed driver, as Spark 3.5's is), with the
	// placeholder Failed and the driver's exit code.
	res := s.Wait(t, 5*time.Minute)
	if res.FinalPhase != corev1.PodFailed {
		t.Fatalf("spark-submit saw %s (phases %v); want Failed once the restart is spent", res.FinalPhase, res.Phases)
	}
	p, err := kube().CoreV1().Pods(ns).Get(context.Background(), s.plan.DriverPodName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Annotations[contract.AnnotationRestarts]; got != "1" {
		t.Errorf("restarts recorded on the placeholder = %q, want 1", got)
	}
	if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode == 0 {
		t.Errorf("placeholder container status %+v, want terminated with the evicted driver's non-zero exit", cs)
	}
	// The kubelet really evicted S-0, once per incarnation.
	evs, err := kube().CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.name": s.names.DriverPodName(), "reason": "Evicted"}.String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	evicted := map[string]string{}
	for _, e := range evs.Items {
		evicted[string(e.InvolvedObject.UID)] = e.Message
	}
	if len(evicted) != 2 {
		t.Errorf("the kubelet evicted %d incarnations (%v), want 2: one per restart allowed, plus the first", len(evicted), evicted)
	}
	for uid, msg := range evicted {
		t.Logf("incarnation %s evicted: %s", uid, msg)
	}
}
