//go:build testbed

package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
	"github.com/driverset/driverset/e2e/sparksim"
	"github.com/driverset/driverset/wrap"
)

// exitDriver plays the driver container of pod ending with code, as `driverset wrap` records it
// (the termination message) and the kubelet restarts it (restartPolicy Always).
func exitDriver(t *testing.T, pod *corev1.Pod, code int32) {
	t.Helper()
	err := bed.cluster.TerminateContainer(context.Background(), pod.Namespace, pod.Name, contract.DriverContainerName, code, wrap.TerminationMessage(int(code), ""))
	if err != nil {
		t.Fatalf("terminate the driver container of %s: %v", pod.Name, err)
	}
}

// Flow steps 1, 2 and 4, and exit 0: the placeholder is gated and never scheduled, the driver
// runs as S-0 behind H, finds its own pod, makes executors, and spark-submit sees it complete.
func TestOptedInDriverRunsAsStatefulSetAndCompletes(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	s := submit(t, app(ns, "spark-pi"))
	p := getPod(t, ns, s.plan.DriverPodName)
	if p.Labels[contract.LabelPlaceholder] != "true" || !convert.HasGate(&p.Spec, contract.GatePlaceholder) {
		t.Fatalf("driver pod was not admitted as a gated placeholder: labels %v, gates %v", p.Labels, p.Spec.SchedulingGates)
	}
	names := contract.NamesFor(p.Name)

	var sts *appsv1.StatefulSet
	waitFor(t, 30*time.Second, "StatefulSet and headless Service owned by the placeholder", func(ctx context.Context) (bool, error) {
		var err error
		if sts, err = kube().AppsV1().StatefulSets(ns).Get(ctx, names.StatefulSet, metav1.GetOptions{}); err != nil {
			return false, nil
		}
		svc, err := kube().CoreV1().Services(ns).Get(ctx, names.Service, metav1.GetOptions{})
		return err == nil && ownedBy(sts, p) && ownedBy(svc, p) && svc.Spec.ClusterIP == corev1.ClusterIPNone, nil
	})
	if *sts.Spec.Replicas != 1 || sts.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType || sts.Spec.ServiceName != names.Service {
		t.Errorf("StatefulSet spec: replicas %d, update strategy %s, serviceName %s", *sts.Spec.Replicas, sts.Spec.UpdateStrategy.Type, sts.Spec.ServiceName)
	}

	d0 := runningDriver(t, ns, names, "")
	drv, err := sparksim.StartDriver(ctx, kube(), ns, d0.Name)
	if err != nil {
		t.Fatalf("the driver did not start in %s: %v", d0.Name, err)
	}
	if drv.OwnPod().UID != d0.UID {
		t.Errorf("the driver found pod %s (%s), want its own pod %s", drv.OwnPod().Name, drv.OwnPod().UID, d0.Name)
	}
	if got, want := drv.Conf()["spark.driver.host"], names.DriverHost(ns); got != want {
		t.Errorf("spark.driver.host = %q, want the stable name %q", got, want)
	}
	execs, err := drv.RequestExecutors(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range execs {
		if !ownedBy(e, d0) {
			t.Errorf("executor %s is not owned by the driver pod %s: %v", e.Name, d0.Name, e.OwnerReferences)
		}
	}
	waitFor(t, 30*time.Second, "placeholder Running", func(ctx context.Context) (bool, error) {
		p, err := kube().CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	})

	exitDriver(t, d0, 0)
	res := s.Wait(t, 60*time.Second)
	if res.FinalPhase != corev1.PodSucceeded || res.ExitCode != 0 || !slices.Contains(res.Phases, corev1.PodRunning) {
		t.Errorf("spark-submit saw phases %v, final %s, exit code %d; want Running then Succeeded, 0", res.Phases, res.FinalPhase, res.ExitCode)
	}
	waitFor(t, 30*time.Second, "StatefulSet at 0 replicas and its pod gone", func(ctx context.Context) (bool, error) {
		sts := getStatefulSet(t, ns, names.StatefulSet)
		_, err := kube().CoreV1().Pods(ns).Get(ctx, names.DriverPodName(), metav1.GetOptions{})
		return *sts.Spec.Replicas == 0 && err != nil, nil
	})
	// The driver is not run again: no pod appears in the next seconds.
	time.Sleep(3 * time.Second)
	if _, err := kube().CoreV1().Pods(ns).Get(ctx, names.DriverPodName(), metav1.GetOptions{}); err == nil {
		t.Error("a finished driver was started again")
	}
	p = getPod(t, ns, p.Name)
	if p.Spec.NodeName != "" || !convert.HasGate(&p.Spec, contract.GatePlaceholder) {
		t.Errorf("the placeholder was scheduled (node %q, gates %v)", p.Spec.NodeName, p.Spec.SchedulingGates)
	}
	if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 0 {
		t.Errorf("placeholder container status %+v, want terminated with exit code 0", cs)
	}
	expectEvents(t, p, "Converted", "DriverRunning", "Completed")
}

// Lifecycle: a failing driver gets exactly max-restarts new incarnations, then fails.
func TestFailingDriverIsRestartedThenFails(t *testing.T) {
	ns := namespace(t, nil)
	a := app(ns, "flaky")
	a.DriverAnnotations = map[string]string{contract.AnnotationMaxRestarts: "1"}
	s := submit(t, a)
	names := contract.NamesFor(s.plan.DriverPodName)

	d0 := runningDriver(t, ns, names, "")
	exitDriver(t, d0, 1)
	d1 := runningDriver(t, ns, names, string(d0.UID))
	if p := getPod(t, ns, s.plan.DriverPodName); p.Annotations[contract.AnnotationRestarts] != "1" {
		t.Errorf("restart count on the placeholder = %q, want 1", p.Annotations[contract.AnnotationRestarts])
	}
	exitDriver(t, d1, 1)

	res := s.Wait(t, 60*time.Second)
	if res.FinalPhase != corev1.PodFailed {
		t.Fatalf("spark-submit's final phase %s, want Failed", res.FinalPhase)
	}
	p := getPod(t, ns, s.plan.DriverPodName)
	if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 1 {
		t.Errorf("placeholder container status %+v, want terminated with exit code 1", cs)
	}
	waitFor(t, 30*time.Second, "StatefulSet at 0 replicas", func(ctx context.Context) (bool, error) {
		return *getStatefulSet(t, ns, names.StatefulSet).Spec.Replicas == 0, nil
	})
	// A third incarnation would be a new pod object named S-0, however briefly it lived (a
	// scale to 0 deletes it, Terminating or not): the monitor has seen every one.
	time.Sleep(3 * time.Second)
	if err := bed.monitor.Check(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	if got, want := bed.monitor.Incarnations(ns, names.DriverPodName()), []types.UID{d0.UID, d1.UID}; !slices.Equal(got, want) {
		t.Errorf("incarnations of %s = %v, want exactly %v: max-restarts 1 allows one restart", names.DriverPodName(), got, want)
	}
	expectEvents(t, p, "Restarting", "Failed")
}

// expectEvents checks that the placeholder has Events with each of the reasons.
func expectEvents(t *testing.T, p *corev1.Pod, reasons ...string) {
	t.Helper()
	waitFor(t, 15*time.Second, "Events "+strings.Join(reasons, ", ")+" on the placeholder", func(ctx context.Context) (bool, error) {
		evs, err := kube().EventsV1().Events(p.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=" + p.Name})
		if err != nil {
			return false, err
		}
		seen := map[string]bool{}
		for _, e := range evs.Items {
			if e.Regarding.UID == p.UID {
				seen[e.Reason] = true
			}
		}
		for _, r := range reasons {
			if !seen[r] {
				return false, nil
			}
		}
		return true, nil
	})
}

// A new incarnation is held by a scheduling gate while an executor of an earlier one exists (a
// finalizer keeps one here), and starts as soon as it is gone.
func TestNewIncarnationWaitsForStaleExecutors(t *testing.T) {
	ns := namespace(t, nil)
	a := app(ns, "stale")
	a.DriverAnnotations = map[string]string{contract.AnnotationMaxRestarts: "1"}
	r := startApp(t, a, 1)
	s, names, d0, execs := r.sub, r.names, r.pod, r.executors
	release := holdPod(t, ns, execs[0].Name)

	exitDriver(t, d0, 1)
	var d1 *corev1.Pod
	waitFor(t, 30*time.Second, "a new incarnation held by the stale-executor gate", func(ctx context.Context) (bool, error) {
		p, err := kube().CoreV1().Pods(ns).Get(ctx, names.DriverPodName(), metav1.GetOptions{})
		if err != nil || p.UID == d0.UID {
			return false, nil
		}
		d1 = p
		return convert.HasGate(&p.Spec, contract.GateStaleExecutors), nil
	})
	time.Sleep(3 * time.Second)
	if p := getPod(t, ns, names.DriverPodName()); p.UID != d1.UID || p.Spec.NodeName != "" {
		t.Fatalf("the new incarnation was scheduled (node %q) while an old executor exists", p.Spec.NodeName)
	}
	if msg := getPod(t, ns, s.plan.DriverPodName).Status.Message; !strings.Contains(msg, "executor(s) of the previous driver") {
		t.Errorf("placeholder message %q does not say what the driver waits for", msg)
	}

	release()
	d2 := runningDriver(t, ns, names, string(d0.UID))
	if d2.UID != d1.UID {
		t.Errorf("the held incarnation %s was replaced by %s instead of released", d1.UID, d2.UID)
	}
	expectEvents(t, getPod(t, ns, s.plan.DriverPodName), "Restarting", "ExecutorsCleared")
}

// Each Spark version's driver pod is taken over and runs to completion; after a process-failure
// restart the new driver makes its executors again — on 2.4, whose executor names are fixed by
// spark-submit, under the very same names, which only works because no executor of the earlier
// incarnation is left.
func TestEverySparkVersionRestartsAndCompletes(t *testing.T) {
	for _, v := range []sparksim.Version{sparksim.Spark24, sparksim.Spark35, sparksim.Spark41} {
		t.Run(string(v), func(t *testing.T) {
			ctx := context.Background()
			ns := namespace(t, nil)
			a := app(ns, "v"+strings.ReplaceAll(string(v), ".", ""))
			a.Version = v
			r := startApp(t, a, 2)
			exitDriver(t, r.pod, 1)
			d1 := runningDriver(t, ns, r.names, string(r.pod.UID))
			drv, err := sparksim.StartDriver(ctx, kube(), ns, d1.Name)
			if err != nil {
				t.Fatal(err)
			}
			execs, err := drv.RequestExecutors(ctx, 2)
			if err != nil {
				t.Fatalf("the restarted driver could not make its executors: %v", err)
			}
			for i, e := range execs {
				if v == sparksim.Spark24 && e.Name != r.executors[i].Name {
					t.Errorf("Spark 2.4 executor %d is named %s, want the fixed name %s again", i, e.Name, r.executors[i].Name)
				}
				if !ownedBy(e, d1) {
					t.Errorf("executor %s is not owned by the new incarnation", e.Name)
				}
			}
			exitDriver(t, d1, 0)
			if res := r.sub.Wait(t, time.Minute); res.FinalPhase != corev1.PodSucceeded {
				t.Errorf("spark-submit's final phase %s, want Succeeded", res.FinalPhase)
			}
		})
	}
}

// TestRestartWindowForgetsFailuresFarApart: max-restarts is the budget of one run of failures. With
// max-restarts 1 and a restart window of 1m, a driver that fails at once uses the budget; the next
// one runs for more than the window, so its failure starts a new run of failures: restarted, not
// Failed (as it would be with no window, TestFailingDriverIsRestartedThenFails). Failures close
// together still end the app: a second app with the same settings fails twice at once and is Failed.
func TestRestartWindowForgetsFailuresFarApart(t *testing.T) {
	ns := namespace(t, nil)
	budget := map[string]string{contract.AnnotationMaxRestarts: "1", contract.AnnotationRestartWindow: "1m"}
	far, near := app(ns, "far"), app(ns, "near")
	far.DriverAnnotations, near.DriverAnnotations = budget, budget
	sf, sc := submit(t, far), submit(t, near)
	fn, cn := contract.NamesFor(sf.plan.DriverPodName), contract.NamesFor(sc.plan.DriverPodName)

	f0 := runningDriver(t, ns, fn, "")
	exitDriver(t, f0, 1)
	f1 := runningDriver(t, ns, fn, string(f0.UID))

	c0 := runningDriver(t, ns, cn, "")
	exitDriver(t, c0, 1)
	c1 := runningDriver(t, ns, cn, string(c0.UID))
	exitDriver(t, c1, 1)
	if res := sc.Wait(t, 60*time.Second); res.FinalPhase != corev1.PodFailed {
		t.Errorf("failures close together: spark-submit's final phase %s, want Failed", res.FinalPhase)
	}

	// f1 runs for longer than the window, then fails.
	var started time.Time
	for _, cs := range f1.Status.ContainerStatuses {
		if cs.Name == contract.DriverContainerName && cs.State.Running != nil {
			started = cs.State.Running.StartedAt.Time
		}
	}
	if started.IsZero() {
		t.Fatalf("%s's driver container is not running: %+v", f1.Name, f1.Status.ContainerStatuses)
	}
	time.Sleep(time.Until(started.Add(time.Minute + 2*time.Second)))
	exitDriver(t, f1, 1)
	f2 := runningDriver(t, ns, fn, string(f1.UID))
	p := getPod(t, ns, sf.plan.DriverPodName)
	if p.Status.Phase == corev1.PodFailed || p.Annotations[contract.AnnotationRestarts] != "1" || p.Annotations[contract.AnnotationRestartsTotal] != "2" {
		t.Errorf("after a failure far from the last: phase %s, restarts %q (want 1: the run of failures begins again), in all %q (want 2)",
			p.Status.Phase, p.Annotations[contract.AnnotationRestarts], p.Annotations[contract.AnnotationRestartsTotal])
	}
	exitDriver(t, f2, 0)
	if res := sf.Wait(t, 60*time.Second); res.FinalPhase != corev1.PodSucceeded {
		t.Errorf("failures far apart: spark-submit's final phase %s, want Succeeded", res.FinalPhase)
	}
}
