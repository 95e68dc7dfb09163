//go:build testbed

package realrelease

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/harness"
	"github.com/driverset/driverset/e2e/images"
	"github.com/driverset/driverset/e2e/testbed"
	"github.com/driverset/driverset/webhook"
)

// leftAfterUninstall is what driverset makes at run time in its namespace and `helm uninstall`
// therefore leaves, as docs/install.md's Uninstall says (and tells the admin to delete).
var leftAfterUninstall = []string{"Lease/driverset.driverset.dev", "Secret/driverset-ca", "Secret/driverset-seal"}

// Issue 35: `helm uninstall` lets go what driverset's finalizer holds. On a real node (KWOK runs
// no container, so no hook Job can run there), the chart is installed from charts/driverset with
// the helm CLI, a driver is converted and runs, driverset goes down (its Deployment scaled to 0)
// and the driver's pod S-0 is deleted: it stays Terminating on driverset.dev/outcome. Then
// `helm uninstall`: its hook Job runs `driverset uninstall-cleanup` from driverset's image, the
// stranded S-0 goes, the StatefulSet's template and the placeholder lose the finalizer, the next
// S-0 is made without it, and nothing of the release is left but what driverset made at run time.
// With uninstallCleanup.enabled=false the old S-0 stays Terminating (the commit says when that was
// shown).
func TestHelmUninstallLetsGoAStrandedDriver(t *testing.T) {
	rest.SetDefaultWarningHandler(rest.NoWarnings{})
	ctrllog.SetLogger(logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	started := time.Now()
	root, err := harness.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	helm, err := harness.HelmBinary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	archives := imageArchives(ctx, t, dir)

	cluster := startBed(ctx, t, archives)
	c := cluster.Client
	run := func(name string, args ...string) string {
		t.Helper()
		return runIn(ctx, t, cluster, name, args...)
	}

	const ns = "driverset-system"
	repo, tag, _ := strings.Cut(images.DriversetName, ":")
	// With the chart's webhook.clientCA: the bed's apiserver presents a client certificate of its
	// own CA to webhooks, so driverset serves it alone.
	run(helm, "install", "driverset", filepath.Join(root, "charts", "driverset"), "-n", ns, "--create-namespace",
		"--set", "image.repository="+repo, "--set", "image.tag="+tag,
		"--set-file", "webhook.clientCA="+cluster.WebhookClientCAFile(), "--set", "webhook.clientNames={"+testbed.WebhookClientName+"}",
		"--wait", "--timeout", "3m")
	if err := testbed.WaitConverts(ctx, c, images.PauseName, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	// The apiserver's calls are answered (WaitConverts); anyone else's, before its body is read, not.
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=driverset"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("driverset's pods: %v %v", pods, err)
	}
	for _, p := range pods.Items {
		if p.Status.PodIP == "" {
			t.Fatalf("%s has no IP after helm install --wait", p.Name)
		}
		code, err := callWithoutCertificate(ctx, p.Status.PodIP, 9443)
		if err != nil {
			t.Fatalf("calling %s's webhook at %s without a client certificate: %v", p.Name, p.Status.PodIP, err)
		}
		if code != http.StatusForbidden {
			t.Errorf("%s answered a caller without the apiserver's certificate %d, want 403", p.Name, code)
		} else {
			t.Logf("%s (%s) answered a caller without the apiserver's certificate 403", p.Name, p.Status.PodIP)
		}
	}

	// A driver: the opt-in label, Spark's driver args, a container that runs until it is stopped
	// (pause ignores the args).
	const app = "helm-driver"
	names := contract.NamesFor(app)
	s0Name := names.StatefulSet + "-0"
	driver := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: "default",
			Labels: map[string]string{contract.LabelSparkRole: contract.RoleDriver, contract.LabelResilient: "true"}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: contract.DriverContainerName, Image: images.PauseName, Command: []string{"/pause"},
			Args: []string{"driver", "--class", "Pause", "pause.jar"}, ImagePullPolicy: corev1.PullNever,
		}}},
	}
	if _, err := c.CoreV1().Pods("default").Create(ctx, driver, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var s0 *corev1.Pod
	poll(ctx, t, 2*time.Minute, s0Name+" running", func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods("default").Get(ctx, s0Name, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not made yet
		}
		s0 = p
		return p.Status.Phase == corev1.PodRunning, nil
	}, func() string { return testbed.PodsReport(ctx, c, "default") })
	if !slices.Contains(s0.Finalizers, contract.FinalizerOutcome) {
		t.Fatalf("%s has finalizers %v, want %s", s0Name, s0.Finalizers, contract.FinalizerOutcome)
	}

	// driverset down, then S-0 deleted: its containers stop, the finalizer holds it.
	run(filepath.Join(cluster.BinDir, "kubectl"), "-n", ns, "scale", "deployment/driverset", "--replicas=0")
	poll(ctx, t, 2*time.Minute, "driverset's pods gone", func(ctx context.Context) (bool, error) {
		l, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=driverset"})
		return err == nil && len(l.Items) == 0, err
	}, nil)
	if err := c.CoreV1().Pods("default").Delete(ctx, s0Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, time.Minute, s0Name+"'s containers stopped, the pod kept", func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods("default").Get(ctx, s0Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return p.UID == s0.UID && p.DeletionTimestamp != nil && stopped(p), nil
	}, nil)
	time.Sleep(5 * time.Second)
	if p, err := c.CoreV1().Pods("default").Get(ctx, s0Name, metav1.GetOptions{}); err != nil || p.UID != s0.UID || !slices.Contains(p.Finalizers, contract.FinalizerOutcome) {
		t.Fatalf("%s is not stranded on %s: %v %v", s0Name, contract.FinalizerOutcome, p, err)
	}
	t.Logf("%s stranded Terminating on %s, driverset down", s0Name, contract.FinalizerOutcome)

	run(helm, "uninstall", "driverset", "-n", ns, "--wait", "--timeout", "3m")

	// The hook ran twice, before and after the deletes: the Job controller recorded each run of its
	// Job (deleted once it succeeded, so a run is told by its Job's UID).
	hookRuns := map[string]bool{}
	ev, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Job,involvedObject.name=driverset-uninstall-cleanup"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ev.Items {
		t.Logf("event: Job %s (%s): %s %s", e.InvolvedObject.Name, e.InvolvedObject.UID, e.Reason, e.Message)
		if e.Reason == "Completed" {
			hookRuns[string(e.InvolvedObject.UID)] = true
		}
	}
	if len(hookRuns) != 2 {
		t.Errorf("%d runs of the uninstall hook's Job completed, want 2 (pre-delete and post-delete)", len(hookRuns))
	}

	poll(ctx, t, time.Minute, "the stranded "+s0Name+" let go", func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods("default").Get(ctx, s0Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && p.UID != s0.UID, err
	}, func() string { return testbed.PodsReport(ctx, c, "default") })
	sts, err := c.AppsV1().StatefulSets("default").Get(ctx, names.StatefulSet, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(sts.Spec.Template.Finalizers, contract.FinalizerOutcome) {
		t.Errorf("StatefulSet %s's template keeps %v", sts.Name, sts.Spec.Template.Finalizers)
	}
	// The next S-0, made once the webhook configuration was gone, has no finalizer; nor has the
	// placeholder.
	poll(ctx, t, time.Minute, "the next "+s0Name, func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods("default").Get(ctx, s0Name, metav1.GetOptions{})
		return err == nil && p.UID != s0.UID, nil
	}, func() string { return testbed.PodsReport(ctx, c, "default") })
	for _, name := range []string{s0Name, app} {
		p, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(p.Finalizers, contract.FinalizerOutcome) {
			t.Errorf("pod %s keeps %v", name, p.Finalizers)
		}
	}

	// Nothing of the release left: no release, none of its objects; in its namespace only what
	// driverset made at run time.
	if out := run(helm, "list", "-A", "-q"); strings.TrimSpace(out) != "" {
		t.Errorf("helm list -A: %q", out)
	}
	if left := driversetObjects(ctx, t, c); len(left) > 0 {
		t.Errorf("left after helm uninstall: %v", left)
	}
	var left []string
	poll(ctx, t, time.Minute, "only run-time objects left in "+ns, func(ctx context.Context) (bool, error) {
		left = namespaceObjects(ctx, t, c, ns)
		return slices.Equal(left, leftAfterUninstall), nil
	}, func() string { return strings.Join(left, " ") })
	t.Logf("left in %s, as docs/install.md says: %v; the test took %s", ns, left, time.Since(started).Round(time.Second))
}

// runIn runs name with args against cluster (its KUBECONFIG), logs what it printed and how long it
// took, fails the test unless it exited 0, and returns its output.
func runIn(ctx context.Context, t *testing.T, cluster *testbed.Cluster, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.KubeconfigPath)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("$ %s %s   (%s)\n%s", filepath.Base(name), strings.Join(args, " "), time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(name), err)
	}
	return string(out)
}

// imageArchives writes the pause image and driverset's (built from this repository) into dir.
func imageArchives(ctx context.Context, t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, img := range []struct {
		pkg, file string
		make      func([]byte) images.Image
	}{{"./e2e/images/pause", "pause.tar", images.Pause}, {"./cmd/driverset", "driverset.tar", images.Driverset}} {
		bin, err := images.GoBinary(ctx, img.pkg)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, img.file)
		if _, err := images.WriteOCIArchiveFile(path, img.make(bin)); err != nil {
			t.Fatal(err)
		}
		out = append(out, path)
	}
	return out
}

// stopped: every container of p has terminated.
func stopped(p *corev1.Pod) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Terminated == nil {
			return false
		}
	}
	return len(p.Status.ContainerStatuses) > 0
}

// driversetObjects are the cluster-scoped objects named for driverset, and the workloads and
// RBAC of its namespace: what the chart makes, none of which may outlive the uninstall.
func driversetObjects(ctx context.Context, t *testing.T, c kubernetes.Interface) []string {
	t.Helper()
	adm, rbac := c.AdmissionregistrationV1(), c.RbacV1()
	var out []string
	for _, l := range []struct {
		kind string
		list func() ([]string, error)
	}{
		{"MutatingWebhookConfiguration", func() ([]string, error) {
			return namesOf(adm.MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{}))
		}},
		{"ValidatingAdmissionPolicy", func() ([]string, error) {
			return namesOf(adm.ValidatingAdmissionPolicies().List(ctx, metav1.ListOptions{}))
		}},
		{"ValidatingAdmissionPolicyBinding", func() ([]string, error) {
			return namesOf(adm.ValidatingAdmissionPolicyBindings().List(ctx, metav1.ListOptions{}))
		}},
		{"ClusterRole", func() ([]string, error) { return namesOf(rbac.ClusterRoles().List(ctx, metav1.ListOptions{})) }},
		{"ClusterRoleBinding", func() ([]string, error) { return namesOf(rbac.ClusterRoleBindings().List(ctx, metav1.ListOptions{})) }},
		{"PriorityClass", func() ([]string, error) {
			return namesOf(c.SchedulingV1().PriorityClasses().List(ctx, metav1.ListOptions{}))
		}},
	} {
		names, err := l.list()
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if strings.Contains(n, "driverset") {
				out = append(out, l.kind+"/"+n)
			}
		}
	}
	return out
}

// namespaceObjects are the objects of ns but those Kubernetes makes in every namespace, sorted.
func namespaceObjects(ctx context.Context, t *testing.T, c kubernetes.Interface, ns string) []string {
	t.Helper()
	var out []string
	for _, l := range []struct {
		kind string
		list func() ([]string, error)
	}{
		{"Deployment", func() ([]string, error) { return namesOf(c.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})) }},
		{"Job", func() ([]string, error) { return namesOf(c.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})) }},
		{"Pod", func() ([]string, error) { return namesOf(c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})) }},
		{"Service", func() ([]string, error) { return namesOf(c.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})) }},
		{"ServiceAccount", func() ([]string, error) {
			return namesOf(c.CoreV1().ServiceAccounts(ns).List(ctx, metav1.ListOptions{}))
		}},
		{"ConfigMap", func() ([]string, error) { return namesOf(c.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})) }},
		{"Secret", func() ([]string, error) { return namesOf(c.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})) }},
		{"Role", func() ([]string, error) { return namesOf(c.RbacV1().Roles(ns).List(ctx, metav1.ListOptions{})) }},
		{"RoleBinding", func() ([]string, error) { return namesOf(c.RbacV1().RoleBindings(ns).List(ctx, metav1.ListOptions{})) }},
		{"Lease", func() ([]string, error) {
			return namesOf(c.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{}))
		}},
		{"PodDisruptionBudget", func() ([]string, error) {
			return namesOf(c.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{}))
		}},
	} {
		names, err := l.list()
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if n != "default" && n != "kube-root-ca.crt" {
				out = append(out, l.kind+"/"+n)
			}
		}
	}
	sort.Strings(out)
	return out
}

// namesOf is the names of a list's items.
func namesOf[L runtime.Object](l L, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(l)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, o := range items {
		m, err := meta.Accessor(o)
		if err != nil {
			return nil, err
		}
		out = append(out, m.GetName())
	}
	return out, nil
}

// poll waits for cond, failing the test with report() (when given) if it does not hold in time.
func poll(ctx context.Context, t *testing.T, timeout time.Duration, what string, cond func(context.Context) (bool, error), report func() string) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, cond); err != nil {
		msg := ""
		if report != nil {
			msg = "\n" + report()
		}
		t.Fatalf("%s: %v%s", what, err, msg)
	}
}

// callWithoutCertificate posts an AdmissionReview to the webhook server at ip:port as any pod could:
// TLS, no client certificate; it returns the HTTP status.
func callWithoutCertificate(ctx context.Context, ip string, port int) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	review := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","kind":{"version":"v1","kind":"Pod"},` +
		`"resource":{"version":"v1","resource":"pods"},"namespace":"default","operation":"CREATE","userInfo":{"username":"someone"},"object":{}}}`
	url := "https://" + net.JoinHostPort(ip, strconv.Itoa(port)) + webhook.DriverPath
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(review))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	// The serving certificate is not what is checked here: the caller's is.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // see above
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}
