//go:build testbed

package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
	"github.com/driverset/driverset/e2e/sparksim"
)

// Flow step 5: `kubectl delete pod <driver>` takes everything of the app with it.
func TestDeletingThePlaceholderCollectsEverything(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	r := startApp(t, app(ns, "to-delete"), 2)
	s, names, execs := r.sub, r.names, r.executors
	if err := kube().CoreV1().Pods(ns).Delete(ctx, s.plan.DriverPodName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if res := s.Wait(t, 30*time.Second); !res.Deleted && !failedByPodGC(res.Last) {
		t.Errorf("spark-submit's watch did not end on DELETED: %+v", res)
	}
	gone := apierrors.IsNotFound
	waitFor(t, 90*time.Second, "StatefulSet, headless Service, Spark's ConfigMap and Service, driver pod and executors garbage-collected",
		func(ctx context.Context) (bool, error) {
			_, e1 := kube().AppsV1().StatefulSets(ns).Get(ctx, names.StatefulSet, metav1.GetOptions{})
			_, e2 := kube().CoreV1().Services(ns).Get(ctx, names.Service, metav1.GetOptions{})
			_, e3 := kube().CoreV1().ConfigMaps(ns).Get(ctx, s.plan.ConfigMapName, metav1.GetOptions{})
			_, e4 := kube().CoreV1().Services(ns).Get(ctx, s.plan.ServiceName, metav1.GetOptions{})
			_, e5 := kube().CoreV1().Pods(ns).Get(ctx, names.DriverPodName(), metav1.GetOptions{})
			all := gone(e1) && gone(e2) && gone(e3) && gone(e4) && gone(e5)
			for _, e := range execs {
				_, err := kube().CoreV1().Pods(ns).Get(ctx, e.Name, metav1.GetOptions{})
				all = all && gone(err)
			}
			return all, nil
		})
}

// Namespace policy: every Spark driver in an enforce namespace is converted without the label;
// other namespaces and non-Spark pods are untouched.
func TestNamespacePolicyEnforce(t *testing.T) {
	ctx := context.Background()
	enforced := namespace(t, map[string]string{contract.LabelPolicy: contract.PolicyEnforce})
	plain := namespace(t, nil)

	a := app(enforced, "no-label")
	a.DriverLabels = nil
	s := submit(t, a)
	p := getPod(t, enforced, s.plan.DriverPodName)
	if !convert.HasGate(&p.Spec, contract.GatePlaceholder) {
		t.Errorf("driver in an enforce namespace was not converted: gates %v", p.Spec.SchedulingGates)
	}
	runningDriver(t, enforced, contract.NamesFor(p.Name), "")

	b := app(plain, "not-opted-in")
	b.DriverLabels = nil
	s2 := submit(t, b)
	p2 := getPod(t, plain, s2.plan.DriverPodName)
	if len(p2.Spec.SchedulingGates) != 0 || p2.Labels[contract.LabelPlaceholder] != "" {
		t.Errorf("driver that did not opt in was changed: gates %v labels %v", p2.Spec.SchedulingGates, p2.Labels)
	}

	other := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "not-spark", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
	}
	got, err := kube().CoreV1().Pods(enforced).Create(ctx, other, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a non-Spark pod in an enforce namespace was refused: %v", err)
	}
	if len(got.Spec.SchedulingGates) != 0 || len(got.Labels) != 1 {
		t.Errorf("a non-Spark pod was changed: gates %v labels %v", got.Spec.SchedulingGates, got.Labels)
	}
	waitFor(t, 30*time.Second, "the non-Spark pod scheduled", func(ctx context.Context) (bool, error) {
		p, err := kube().CoreV1().Pods(enforced).Get(ctx, "not-spark", metav1.GetOptions{})
		return err == nil && p.Spec.NodeName != "", nil
	})
}

// The placeholder is not charged the driver's resources: a quota sized for one driver and two
// executors (plus one pod object for the placeholder) admits the whole app.
func TestQuotaSizedForOneDriverAndTwoExecutors(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	a := app(ns, "in-quota")
	plan, err := a.Plan()
	if err != nil {
		t.Fatal(err)
	}
	driver := plan.DriverPod.Spec.Containers[0].Resources
	oneAppQuota(t, ns, driver.Requests.Cpu().DeepCopy(), driver.Requests.Memory().DeepCopy(), driver.Requests)
	s := submit(t, a)
	names := contract.NamesFor(s.plan.DriverPodName)
	d0 := runningDriver(t, ns, names, "")
	drv, err := sparksim.StartDriver(ctx, kube(), ns, d0.Name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := drv.RequestExecutors(ctx, 2); err != nil {
		t.Fatalf("executors refused under a quota sized for the app: %v", err)
	}
}

// Webhook down: an opted-in driver is refused with a clear message and nothing is left; other
// pods are created as usual. driverset is started again afterwards.
func TestDriversetDownRefusesOptedInDrivers(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	if err := bed.driverset.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d, err := startDriverset(context.Background(), bed.driverset)
		if err != nil {
			t.Fatalf("restart driverset: %v", err)
		}
		bed.driverset = d
	})

	a := app(ns, "while-down")
	res, err := sparksim.Submit(ctx, kube(), a, sparksim.SubmitOptions{WaitAppCompletion: true})
	if err == nil || res == nil || res.ExitCode != 1 {
		t.Fatalf("spark-submit with driverset down: result %+v, error %v; want exit code 1 and an error", res, err)
	}
	if !strings.Contains(err.Error(), "drivers.driverset.dev") {
		t.Errorf("the refusal does not name driverset's webhook: %v", err)
	}
	t.Logf("spark-submit was refused: %v", err)
	// A List that fails shows nothing left behind: each must succeed for the check to mean anything.
	cms, err := kube().CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list ConfigMaps: %v", err)
	}
	for _, cm := range cms.Items {
		if cm.Name != "kube-root-ca.crt" {
			t.Errorf("ConfigMap %s left behind", cm.Name)
		}
	}
	svcs, err := kube().CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list Services: %v", err)
	}
	pods, err := kube().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	if len(svcs.Items) != 0 || len(pods.Items) != 0 {
		t.Errorf("left behind: %d Services, %d pods", len(svcs.Items), len(pods.Items))
	}

	other := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "not-spark"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
	}
	if _, err := kube().CoreV1().Pods(ns).Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Errorf("a non-Spark pod was refused while driverset is down: %v", err)
	}
}

// driverset runs in these scenarios as its own ServiceAccount, with the manifests' RBAC: who it
// is, and that it is refused what the ClusterRole does not grant.
func TestDriversetRunsAsItsServiceAccount(t *testing.T) {
	ctx := context.Background()
	cfg, err := clientcmd.BuildConfigFromFlags("", bed.driverset.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	who, err := c.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := who.Status.UserInfo.Username, "system:serviceaccount:driverset-system:driverset"; got != want {
		t.Fatalf("driverset acts as %q, want %q", got, want)
	}
	if _, err := c.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing Secrets as driverset: %v, want Forbidden", err)
	}
	if _, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("listing Nodes as driverset (it watches them): %v", err)
	}
}

// A namespace whose LimitRange sets a min per container: the placeholder keeps that min (not 0,
// which the LimitRanger would refuse), and the app runs.
func TestLimitRangeMinIsRespected(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	lr := &corev1.LimitRange{
		ObjectMeta: metav1.ObjectMeta{Name: "floor"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type: corev1.LimitTypeContainer,
			Min:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		}}},
	}
	if _, err := kube().CoreV1().LimitRanges(ns).Create(ctx, lr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The cache must have seen it before the driver is submitted.
	time.Sleep(time.Second)
	r := startApp(t, app(ns, "limited"), 1)
	p := getPod(t, ns, r.sub.plan.DriverPodName)
	req := p.Spec.Containers[0].Resources.Requests
	if cpu := req[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("100m")) != 0 {
		t.Errorf("placeholder cpu request %s, want the LimitRange min 100m", cpu.String())
	}
}

// The README's install check, run as written against the test bed.
func TestReadmeInstallCheck(t *testing.T) {
	out, err := exec.Command(filepath.Join(bed.cluster.BinDir, "kubectl"), "--kubeconfig", bed.cluster.KubeconfigPath,
		"run", "driverset-check", "--dry-run=server", "--restart=Never", "--image=apache/spark",
		"--labels=spark-role=driver,driverset.dev/resilient=true",
		"-o", "jsonpath={.spec.schedulingGates}", "--", "driver", "--class", "Check", "check.jar").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl run: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), `"name":"`+contract.GatePlaceholder+`"`) {
		t.Errorf("the README's check printed %q, want driverset's gate", out)
	}
}

// failedByPodGC reports whether placeholder was last seen marked Failed by Kubernetes' PodGC. A
// deleted placeholder is never scheduled, and PodGC marks an unscheduled Terminating pod Failed
// (its status patched by kube-controller-manager, with no reason or condition) and force-deletes
// it when its 20 s tick falls while driverset still holds it: spark-submit's watch then ends on
// that Failed, before DELETED (a CI run, 2026-12-07, the controller-manager's log saying "Forced
// deletion of unscheduled terminating Pod"). driverset itself writes no Failed on a deleted one.
func failedByPodGC(placeholder *corev1.Pod) bool {
	if placeholder == nil || placeholder.DeletionTimestamp == nil || placeholder.Spec.NodeName != "" || placeholder.Status.Phase != corev1.PodFailed {
		return false
	}
	for _, m := range placeholder.ManagedFields {
		if m.Manager == "kube-controller-manager" && m.Subresource == "status" {
			return true
		}
	}
	return false
}
