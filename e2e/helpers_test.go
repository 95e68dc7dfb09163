//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/harness"
	"github.com/driverset/driverset/e2e/sparksim"
	"github.com/driverset/driverset/wrap"
)

func kube() kubernetes.Interface { return bed.cluster.Client }

// serverMinor is the test bed's Kubernetes minor version, for the few scenarios of APIs that older
// versions lack (make compat runs every scenario it lists on the oldest version the chart claims).
func serverMinor(t *testing.T) int {
	t.Helper()
	v, err := kube().Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	minor, err := strconv.Atoi(strings.TrimRight(v.Minor, "+"))
	if err != nil || v.Major != "1" {
		t.Fatalf("the apiserver's version %s.%s is not 1.N", v.Major, v.Minor)
	}
	return minor
}

// namespace makes a fresh namespace for one scenario, deleted when it ends.
func namespace(t *testing.T, labels map[string]string) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-", ".", "").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.TrimRight(name, "-") + fmt.Sprintf("-%d", time.Now().UnixNano()%100000)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if _, err := kube().CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the namespace's default ServiceAccount", func(ctx context.Context) (bool, error) {
		_, err := kube().CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	t.Cleanup(func() {
		for _, v := range bed.monitor.Violations(name) {
			t.Errorf("at-most-one driver violated: %s", v)
		}
		if err := bed.monitor.Check(context.Background(), name); err != nil {
			t.Error(err)
		}
		_ = kube().CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// waitFor polls cond every 200 ms until it holds, failing the test after timeout, or at once
// when a test-bed component is down for good (testbed's CheckAlive).
func waitFor(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	start := time.Now()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, bed.cluster.Alive(cond))
	if err != nil {
		t.Fatalf("waiting %s for %s: %v", timeout, what, err)
	}
	t.Logf("%s after %s", what, time.Since(start).Round(time.Millisecond))
}

// app is an opted-in Spark 3.5 app in ns, unless the scenario changes it.
func app(ns, name string) sparksim.App {
	return sparksim.App{
		Version:      sparksim.Spark35,
		Name:         name,
		Namespace:    ns,
		DriverLabels: map[string]string{contract.LabelResilient: "true"},
	}
}

// submission is a simulated spark-submit running in the background (harness.Submission); plan is
// what it sends.
type submission struct {
	*harness.Submission
	plan *sparksim.Plan
}

// submit runs spark-submit for a in the background and waits until its driver pod exists.
func submit(t *testing.T, a sparksim.App) *submission {
	t.Helper()
	return submitEdited(t, a, nil)
}

// submitEdited is submit with the driver pod changed by edit before it is sent, as a pod template
// (spark.kubernetes.driver.podTemplateFile) would change it.
func submitEdited(t *testing.T, a sparksim.App, edit func(*corev1.Pod)) *submission {
	t.Helper()
	plan, err := a.Plan()
	if err != nil {
		t.Fatal(err)
	}
	return &submission{Submission: harness.Submit(t, kube(), bed.cluster.CheckAlive, plan, edit), plan: plan}
}

func getPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	p, err := kube().CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("pod %s/%s: %v", ns, name, err)
	}
	return p
}

// runningDriver waits until the StatefulSet's pod runs on a node and returns it.
func runningDriver(t *testing.T, ns string, names contract.Names, notUID string) *corev1.Pod {
	t.Helper()
	return runningDriverWithin(t, 60*time.Second, ns, names, notUID)
}

func runningDriverWithin(t *testing.T, timeout time.Duration, ns string, names contract.Names, notUID string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	waitFor(t, timeout, "driver pod "+names.DriverPodName()+" Running", func(ctx context.Context) (bool, error) {
		p, err := kube().CoreV1().Pods(ns).Get(ctx, names.DriverPodName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		pod = p
		return string(p.UID) != notUID && p.DeletionTimestamp == nil && p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning, nil
	})
	return pod
}

func getStatefulSet(t *testing.T, ns, name string) *appsv1.StatefulSet {
	t.Helper()
	s, err := kube().AppsV1().StatefulSets(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("StatefulSet %s/%s: %v", ns, name, err)
	}
	return s
}

// ownedBy reports whether o has exactly one controller reference, to owner.
func ownedBy(o metav1.Object, owner metav1.Object) bool {
	ref := metav1.GetControllerOf(o)
	return ref != nil && ref.UID == owner.GetUID() && len(o.GetOwnerReferences()) == 1
}

// runningApp is an opted-in app whose driver runs in its StatefulSet's pod and has made executors.
type runningApp struct {
	sub       *submission
	names     contract.Names
	pod       *corev1.Pod // S-0
	driver    *sparksim.Driver
	executors []*corev1.Pod
}

// startApp submits a, waits for its driver pod to run, starts the driver there and has it make
// n executors.
func startApp(t *testing.T, a sparksim.App, n int) runningApp {
	t.Helper()
	s := submit(t, a)
	names := contract.NamesFor(s.plan.DriverPodName)
	pod := runningDriver(t, a.Namespace, names, "")
	drv, err := sparksim.StartDriver(context.Background(), kube(), a.Namespace, pod.Name)
	if err != nil {
		t.Fatalf("the driver did not start in %s: %v", pod.Name, err)
	}
	execs, err := drv.RequestExecutors(context.Background(), n)
	if err != nil {
		t.Fatal(err)
	}
	return runningApp{sub: s, names: names, pod: pod, driver: drv, executors: execs}
}

// holdPod keeps pod ns/name from being removed by a finalizer of the test's own, as a slow kubelet
// would, until the returned release is called; release runs again at cleanup, so a failed test
// never leaves the pod (and its namespace) stuck.
func holdPod(t *testing.T, ns, name string) (release func()) {
	t.Helper()
	hold := []byte(`{"metadata":{"finalizers":["e2e.driverset.dev/hold"]}}`)
	if _, err := kube().CoreV1().Pods(ns).Patch(context.Background(), name, types.MergePatchType, hold, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	release = func() {
		t.Helper()
		drop := []byte(`{"metadata":{"finalizers":null}}`)
		_, err := kube().CoreV1().Pods(ns).Patch(context.Background(), name, types.MergePatchType, drop, metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("release pod %s: %v", name, err)
		}
	}
	t.Cleanup(release)
	return release
}

// expectIncarnationAppIDs checks that the driver in each of pods (incarnations of one app, in
// order) ran with the app id ids[i], its own: the submitted id and its pod's UID, as wrap gives it
// (wrap.IncarnationAppID).
func expectIncarnationAppIDs(t *testing.T, submitted string, pods []*corev1.Pod, ids []string) {
	t.Helper()
	for i, p := range pods {
		want, err := wrap.IncarnationAppID(submitted, string(p.UID))
		if err != nil {
			t.Fatal(err)
		}
		if ids[i] != want {
			t.Errorf("the driver in %s (incarnation %d) ran as app %s, want %s", p.Name, i+1, ids[i], want)
		}
	}
}
