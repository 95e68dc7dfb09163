//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/sparksim"
)

// Flow step 3: executors find the driver at its stable name and die with its incarnation;
// another app's executors are left as Spark made them.
func TestExecutorsFollowTheStableName(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	r := startApp(t, app(ns, "stable"), 2)
	names, d0, execs := r.names, r.pod, r.executors
	want := fmt.Sprintf("spark://CoarseGrainedScheduler@%s:7078", names.DriverHost(ns))
	for _, e := range execs {
		if got := envOf(e, contract.EnvDriverURL); got != want {
			t.Errorf("executor %s: %s=%q, want %q", e.Name, contract.EnvDriverURL, got, want)
		}
		if !ownedBy(e, d0) || e.Labels[contract.LabelDriver] != names.StatefulSet {
			t.Errorf("executor %s: owners %v, labels %v; want owned by %s and labelled", e.Name, e.OwnerReferences, e.Labels, d0.Name)
		}
	}

	other := app(ns, "bare")
	other.DriverLabels = nil
	s2 := submit(t, other)
	bare := waitPodRunning(t, ns, s2.plan.DriverPodName)
	drv2, err := sparksim.StartDriver(ctx, kube(), ns, bare.Name)
	if err != nil {
		t.Fatal(err)
	}
	execs2, err := drv2.RequestExecutors(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	wantBare := fmt.Sprintf("spark://CoarseGrainedScheduler@%s:7078", drv2.Conf()["spark.driver.host"])
	if e := execs2[0]; envOf(e, contract.EnvDriverURL) != wantBare || e.Labels[contract.LabelDriver] != "" || !ownedBy(e, bare) {
		t.Errorf("another app's executor was changed: url %q, labels %v, owners %v", envOf(e, contract.EnvDriverURL), e.Labels, e.OwnerReferences)
	}
}

// Node object deleted under a running driver (autoscaler, node repair). A deleted Node is proof
// enough for Kubernetes' PodGC, which acts on it only after its 40 s quarantine and 20 s tick;
// driverset acts on the same proof at once, so the bound fails without it.
func TestDriverRecoversWhenItsNodeIsDeleted(t *testing.T) {
	recoverFromNodeLoss(t, "node-deleted", 5*time.Second, func(ctx context.Context, node string) (time.Time, error) {
		at := time.Now()
		return at, bed.cluster.DeleteNode(ctx, node)
	})
}

// A dead node confirmed by an admin with the out-of-service taint: driverset acts on the taint at
// once rather than on PodGC's next tick (up to 20 s), so the bound fails without it.
func TestDriverRecoversAfterOutOfServiceTaint(t *testing.T) {
	recoverFromNodeLoss(t, "out-of-service", 3*time.Second, func(ctx context.Context, node string) (time.Time, error) {
		if err := bed.cluster.KillNode(ctx, node); err != nil {
			return time.Time{}, err
		}
		if err := waitNodeCondition(ctx, node, corev1.ConditionTrue, false); err != nil {
			return time.Time{}, err
		}
		at := time.Now()
		return at, bed.cluster.TaintOutOfService(ctx, node)
	})
}

// recoverFromNodeLoss runs an app, loses its driver's node with lose, and checks the recovery:
// a new incarnation runs on another node within bound of the moment lose proved the node down
// (the time it returns), the driver starts again there with an app id of its own, and no executor of
// the old incarnation exists when the new one makes its own.
func recoverFromNodeLoss(t *testing.T, cause string, bound time.Duration, lose func(ctx context.Context, node string) (time.Time, error)) {
	ctx := context.Background()
	ns := namespace(t, nil)
	r := startApp(t, app(ns, "recover"), 2)
	s, names, d0, drv := r.sub, r.names, r.pod, r.driver
	node := d0.Spec.NodeName
	replaceNode(t, node)
	// driverset's own force-delete is judged by deletes.driverset.dev like a stolen token's
	// (TestStolenTokenForceDeletesNoDriverThatMayStillRun): it must be admitted, on the proof.
	const admittedDeletes = `driverset_admission_decisions_total{outcome="skipped",reason="",webhook="deletes"}`
	admittedBefore := metric(t, admittedDeletes)
	// And so is its release of the pod's finalizer by releases.driverset.dev
	// (TestStolenTokenReleasesNoDriverThatMayStillRun).
	const admittedReleases = `driverset_admission_decisions_total{outcome="skipped",reason="",webhook="releases"}`
	releasesBefore := metric(t, admittedReleases)

	start, err := lose(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	// Wait well past the bound, so that a slow recovery is measured and reported, not cut off.
	d1 := runningDriverWithin(t, 3*time.Minute, ns, names, string(d0.UID))
	took := time.Since(start)
	t.Logf("recovered (%s): new driver pod %s on %s, %.1fs after the node was proven down", cause, short(d1.UID), d1.Spec.NodeName, took.Seconds())
	if took > bound {
		t.Errorf("the new driver pod ran %.1fs after the node was proven down (%s), want at most %s", took.Seconds(), cause, bound)
	}
	if d1.Spec.NodeName == node {
		t.Errorf("the new driver runs on the lost node %s", node)
	}
	for _, e := range executorsOf(t, ns, drv.AppID()) {
		if ref := metav1.GetControllerOf(&e); ref == nil || ref.UID != d1.UID {
			t.Errorf("executor %s of an earlier incarnation still exists when the new driver starts", e.Name)
		}
	}
	drv1, err := sparksim.StartDriver(ctx, kube(), ns, d1.Name)
	if err != nil {
		t.Fatalf("the driver did not start again in %s: %v", d1.Name, err)
	}
	expectIncarnationAppIDs(t, s.plan.AppID, []*corev1.Pod{d0, d1}, []string{drv.AppID(), drv1.AppID()})
	execs, err := drv1.RequestExecutors(ctx, 2)
	if err != nil {
		t.Fatalf("the recovered driver could not make executors: %v", err)
	}
	for _, e := range execs {
		if !ownedBy(e, d1) {
			t.Errorf("new executor %s not owned by the new incarnation", e.Name)
		}
	}
	expectEvents(t, getPod(t, ns, s.plan.DriverPodName), "NodeLost", "Recovered")
	if n := metric(t, admittedDeletes); n <= admittedBefore {
		t.Errorf("%s = %v, as before the loss: driverset's force-delete did not go through deletes.driverset.dev", admittedDeletes, n)
	}
	if n := metric(t, admittedReleases); n <= releasesBefore {
		t.Errorf("%s = %v, as before the loss: driverset's release of the lost pod did not go through releases.driverset.dev", admittedReleases, n)
	}
	if n := metric(t, `driverset_driver_recovery_seconds_count{cause="`+cause+`"}`); n < 1 {
		t.Errorf("recovery-time histogram has %v observations for cause %s, want at least 1", n, cause)
	}
}

// metric reads one sample from driverset's /metrics (0 when absent).
func metric(t *testing.T, series string) float64 {
	t.Helper()
	body, err := metricsOf(bed.driverset)
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("metric %s: %v", series, err)
			}
			return f
		}
	}
	return 0
}

// A node that dies silently: by default the old driver pod is kept (Terminating) and no second
// driver starts, and the placeholder says why and what an admin can do. With fence-after, the
// driver is force-deleted once its node has been lost that long, and recovers elsewhere.
func TestDriverOnADeadNodeIsKeptUnlessFenced(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)

	kept := submit(t, app(ns, "kept"))
	fenced := app(ns, "fenced")
	fenced.DriverAnnotations = map[string]string{contract.AnnotationFenceAfter: "30s"}
	f := submit(t, fenced)
	keptNames, fencedNames := contract.NamesFor(kept.plan.DriverPodName), contract.NamesFor(f.plan.DriverPodName)
	k0 := runningDriver(t, ns, keptNames, "")
	f0 := runningDriver(t, ns, fencedNames, "")

	start := time.Now()
	for _, node := range unique(k0.Spec.NodeName, f0.Spec.NodeName) {
		replaceNode(t, node)
		if err := bed.cluster.KillNode(ctx, node); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = bed.cluster.ReviveNode(context.Background(), node) })
	}

	f1 := runningDriverWithin(t, 2*time.Minute, ns, fencedNames, string(f0.UID))
	took := time.Since(start)
	t.Logf("fenced driver recovered on %s %.1fs after its node died (fence-after 30s)", f1.Spec.NodeName, took.Seconds())
	if took < 30*time.Second {
		t.Errorf("the driver was fenced after %s, before fence-after 30s", took)
	}
	expectEvents(t, getPod(t, ns, f.plan.DriverPodName), "NodeLost", "Fenced", "Recovered")

	// By now the kept driver's node has been dead as long; its pod must still be the only one.
	waitFor(t, time.Minute, "the kept driver pod evicted and Terminating", func(ctx context.Context) (bool, error) {
		p, err := kube().CoreV1().Pods(ns).Get(ctx, keptNames.DriverPodName(), metav1.GetOptions{})
		return err == nil && p.UID == k0.UID && p.DeletionTimestamp != nil, nil
	})
	time.Sleep(10 * time.Second)
	if p := getPod(t, ns, keptNames.DriverPodName()); p.UID != k0.UID {
		t.Fatalf("a second driver %s was started while the first one's node was only unreachable", p.UID)
	}
	p := getPod(t, ns, kept.plan.DriverPodName)
	for _, want := range []string{k0.Spec.NodeName, "kubectl delete node", contract.AnnotationFenceAfter, "out-of-service"} {
		if !strings.Contains(p.Status.Message, want) {
			t.Errorf("placeholder status message %q does not mention %q", p.Status.Message, want)
		}
	}
	expectEvents(t, p, "NodeLost")
}

// replaceNode adds a fresh node, so that losing node leaves the test bed its capacity.
func replaceNode(t *testing.T, node string) {
	t.Helper()
	name := fmt.Sprintf("kwok-spare-%d", time.Now().UnixNano()%1_000_000)
	if err := bed.cluster.AddNode(context.Background(), name); err != nil {
		t.Fatalf("add a node to replace %s: %v", node, err)
	}
}

// cutOff cuts node off from the control plane for the rest of the test (its kubelet silent, its
// pods running on as far as anyone can tell), a fresh node taking its place.
func cutOff(t *testing.T, node string) {
	t.Helper()
	replaceNode(t, node)
	if err := bed.cluster.KillNode(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bed.cluster.ReviveNode(context.Background(), node) })
}

// waitEvicted waits for pod, on a node cut off, to be evicted: the same pod, Terminating.
func waitEvicted(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	waitFor(t, 2*time.Minute, "the driver pod evicted from its cut-off node", func(ctx context.Context) (bool, error) {
		p, err := kube().CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && p.UID == pod.UID && p.DeletionTimestamp != nil, nil
	})
}

func waitPodRunning(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	waitFor(t, time.Minute, "pod "+name+" Running", func(ctx context.Context) (bool, error) {
		p, err := kube().CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		pod = p
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	})
	return pod
}

func executorsOf(t *testing.T, ns, appID string) []corev1.Pod {
	t.Helper()
	list, err := kube().CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{
		LabelSelector: contract.LabelSparkAppSelector + "=" + appID + "," + contract.LabelSparkRole + "=" + contract.RoleExecutor,
	})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func envOf(p *corev1.Pod, name string) string {
	for _, c := range p.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == name {
				return e.Value
			}
		}
	}
	return ""
}

func unique(a, b string) []string {
	if a == b {
		return []string{a}
	}
	return []string{a, b}
}

func short[T ~string](uid T) string { return string(uid)[:8] }

// TestDeletedAppWaitsForItsDriverOnALostNode: `kubectl delete pod <driver>` while the driver's node
// is cut off. The old driver may still run there, so the placeholder stays Terminating (driverset's
// finalizer) until the node is proven down: a user who deletes an app and submits it again (a
// stream's code upgrade, onto the same checkpoint) sees the delete end only once the old driver
// cannot run. Without the finalizer the placeholder, a pod that never ran, was removed at once.
func TestDeletedAppWaitsForItsDriverOnALostNode(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	r := startApp(t, app(ns, "upgrade"), 1)
	node := r.pod.Spec.NodeName
	replaceNode(t, node)
	if err := bed.cluster.KillNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	if err := waitNodeCondition(ctx, node, corev1.ConditionTrue, false); err != nil {
		t.Fatal(err)
	}
	if err := kube().CoreV1().Pods(ns).Delete(ctx, r.sub.plan.DriverPodName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the StatefulSet at 0 replicas", func(ctx context.Context) (bool, error) {
		return *getStatefulSet(t, ns, r.names.StatefulSet).Spec.Replicas == 0, nil
	})
	time.Sleep(10 * time.Second)
	p, err := kube().CoreV1().Pods(ns).Get(ctx, r.sub.plan.DriverPodName, metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp == nil {
		t.Fatalf("the deleted app's placeholder: %v (Terminating %v); want it kept while its driver may still run on %s", err, p != nil && p.DeletionTimestamp != nil, node)
	}
	if d, err := kube().CoreV1().Pods(ns).Get(ctx, r.names.DriverPodName(), metav1.GetOptions{}); err != nil || d.UID != r.pod.UID {
		t.Fatalf("the old driver pod on %s: %v; want it kept, Terminating", node, err)
	}

	tainted := time.Now()
	if err := bed.cluster.TaintOutOfService(ctx, node); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the placeholder and the old driver pod gone", func(ctx context.Context) (bool, error) {
		_, errP := kube().CoreV1().Pods(ns).Get(ctx, r.sub.plan.DriverPodName, metav1.GetOptions{})
		_, errD := kube().CoreV1().Pods(ns).Get(ctx, r.names.DriverPodName(), metav1.GetOptions{})
		return apierrors.IsNotFound(errP) && apierrors.IsNotFound(errD), nil
	})
	t.Logf("the deleted app went %s after the taint", time.Since(tainted).Round(100*time.Millisecond))
}
