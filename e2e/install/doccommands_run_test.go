//go:build testbed

package install

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/harness"
	"github.com/driverset/driverset/e2e/sparksim"
	"github.com/driverset/driverset/e2e/testbed"
)

// docBed is the test bed the docs' commands run against, and what they left behind.
type docBed struct {
	c    *testbed.Cluster
	root string // the repository
	dir  string // the commands' working folder: dist/install.yaml, my-install.yaml
	bin  string // kubectl, kubectl-driverset and driverset, first on PATH
	env  []string
	// ds is driverset, running beside the test bed in place of the Deployment's pods.
	ds *harness.Driverset
	// poweredOff is the node N the quick start powers off.
	poweredOff string
	// uids are the driver pods (<sts>-0) each status saw, by placeholder.
	uids map[string][]string
	// image is the Deployment's image before a helm upgrade.
	image string
	// runs are the run-once pods of driverset's image the stand-in ran (standInForRunOncePods).
	runs *podRuns
}

// The commands of the quick start, docs/install.md and docs/usage.md, run in bash as written
// (placeholders substituted from docPlaceholders) against the test bed, one after another, in the
// order of each of documentedPaths (install.yaml, Helm), each path on a bed of its own: what each
// prints is checked where the docs say what it prints. What the test bed cannot be, it stands in
// for, each time said where: KWOK runs no container, so driverset runs beside the test bed as its
// ServiceAccount, and a MutatingAdmissionPolicy of the test points the apiserver at it where the
// webhook Service would route to its pods; the run-once pods of driverset's image (helm test's,
// the uninstall hook Job's) have their command run beside the bed as their ServiceAccount, its
// exit made theirs.
func TestDocumentedCommandsRun(t *testing.T) {
	for _, p := range documentedPaths() {
		t.Run(p.Name, func(t *testing.T) { runDocumented(t, documentedCommands(t, p.Sections)) })
	}
}

func runDocumented(t *testing.T, cmds []docCommand) {
	b := startDocBed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, c := range cmds {
		r, ok := ruleFor(c)
		if !ok {
			t.Errorf("%s: neither run nor listed (TestEveryDocumentedCommandIsRunOrListed)", c)
			continue
		}
		if r.skip != "" {
			t.Logf("not run: %s: %s", c, r.skip)
			continue
		}
		if !t.Run(fmt.Sprintf("%s:%d", c.File, c.Line), func(t *testing.T) {
			if r.before != nil {
				r.before(ctx, t, b, c)
			}
			if r.run != nil {
				t.Logf("%s: instead, %s", c, r.why)
				r.run(ctx, t, b, c)
				return
			}
			out := b.sh(ctx, t, c)
			if r.check != nil {
				r.check(ctx, t, b, c, out)
			}
		}) {
			// Each command builds on the ones before: the first failure is the one to read.
			t.Fatalf("stopped at %s", c)
		}
	}
}

func startDocBed(t *testing.T) *docBed {
	t.Helper()
	c := testbed.StartT(t, testbed.Options{Nodes: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b := &docBed{c: c, root: moduleRoot(t), dir: t.TempDir(), bin: t.TempDir(), uids: map[string][]string{}, runs: &podRuns{}}
	for _, build := range []struct{ out, pkg string }{{"driverset", "./cmd/driverset"}, {"kubectl-driverset", "./cmd/kubectl-driverset"}} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(b.bin, build.out), build.pkg)
		cmd.Dir = b.root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", build.pkg, err, out)
		}
	}
	helm, err := harness.HelmBinary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"kubectl": kubectl(t), "helm": helm} {
		if err := os.Symlink(target, filepath.Join(b.bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	b.env = append(os.Environ(), "PATH="+b.bin+":"+os.Getenv("PATH"), "KUBECONFIG="+c.KubeconfigPath, "KUBECTL="+kubectl(t))

	// dist/install.yaml as `make release` renders it: the image pinned to a digest.
	if err := os.Mkdir(filepath.Join(b.dir, "dist"), 0o755); err != nil {
		t.Fatal(err)
	}
	render := exec.CommandContext(ctx, filepath.Join(b.root, "hack", "render-install.sh"), filepath.Join(b.dir, "dist", "install.yaml"))
	render.Env = append(slices.Clone(b.env), "DRIVERSET_IMAGE=registry.example.com/driverset:v0.1.0@sha256:"+strings.Repeat("0", 64))
	if out, err := render.CombinedOutput(); err != nil {
		t.Fatalf("hack/render-install.sh: %v\n%s", err, out)
	}
	// The namespace the docs' commands name, which an admin has.
	makeNamespace(ctx, t, c.Client, usageNamespace)
	routeWebhooksToLocal(ctx, t, b)
	standInForRunOncePods(t, b)
	t.Cleanup(func() {
		if b.ds.LogPath != "" {
			_ = b.ds.Stop()
		}
	})
	return b
}

// sh runs c in bash, its placeholders substituted, in the working folder; it fails the test
// unless the command exits 0, and returns what it printed on stdout (stderr is logged).
func (b *docBed) sh(ctx context.Context, t *testing.T, c docCommand) string {
	t.Helper()
	text := c.Text
	for _, p := range docPlaceholders(b) {
		text = p.doc.ReplaceAllString(text, p.test)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", text)
	cmd.Dir, cmd.Env = b.dir, b.env
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	start := time.Now()
	err := cmd.Run()
	t.Logf("$ %s   (%s)\n%s%s", text, time.Since(start).Round(time.Millisecond), out.String(), errs.String())
	if err != nil {
		t.Fatalf("%s: %v", c, err)
	}
	return out.String()
}

// routeWebhooksToLocal has the apiserver rewrite driverset's webhook configuration, on every
// create and update, to call https://127.0.0.1:<port><path> where it says Service
// driverset-webhook: the port driverset runs on beside the test bed. The configuration as applied
// is otherwise untouched (the caBundle is driverset's own, self-managed TLS), so the docs'
// kubectl apply, delete and driverset's caBundle writes act on it as in a cluster.
func routeWebhooksToLocal(ctx context.Context, t *testing.T, b *docBed) {
	t.Helper()
	port, err := freeLocalPort()
	if err != nil {
		t.Fatal(err)
	}
	hooks := webhooks(t, decodeFile(t, filepath.Join(b.dir, "dist", "install.yaml")))
	var patches []string
	for i := range hooks {
		w := fmt.Sprintf("object.webhooks[%d]", i)
		p := fmt.Sprintf("/webhooks/%d/clientConfig", i)
		patches = append(patches, fmt.Sprintf(`(size(object.webhooks) > %d && has(%s.clientConfig.service) ? [
  JSONPatch{op: "remove", path: "%s/service"},
  JSONPatch{op: "add", path: "%s/url", value: "https://127.0.0.1:%d" + %s.clientConfig.service.?path.orValue("")}] : [])`,
			i, w, p, p, port, w))
	}
	policy := fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: testbed-driverset-webhook-route
spec:
  matchConstraints:
    resourceRules:
      - apiGroups: [admissionregistration.k8s.io]
        apiVersions: [v1]
        operations: [CREATE, UPDATE]
        resources: [mutatingwebhookconfigurations]
  matchConditions:
    - name: driverset
      expression: object.metadata.name == 'driverset'
  failurePolicy: Fail
  reinvocationPolicy: Never
  mutations:
    - patchType: JSONPatch
      jsonPatch:
        expression: |
          %s
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: testbed-driverset-webhook-route
spec:
  policyName: testbed-driverset-webhook-route
`, strings.ReplaceAll(strings.Join(patches, " +\n"), "\n", "\n          "))
	objs, err := harness.Decode(strings.NewReader(policy))
	if err != nil {
		t.Fatal(err)
	}
	if err := harness.Apply(ctx, b.c.Config, objs); err != nil {
		t.Fatalf("the webhook route: %v\n%s", err, policy)
	}
	b.ds = &harness.Driverset{Port: port} // started once driverset's RBAC is installed

	// The apiserver loads policies asynchronously: wait until it rewrites a (dry-run) create.
	probe := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "driverset"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "probe.driverset.dev", AdmissionReviewVersions: []string{"v1"}, SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone),
			ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
				Namespace: systemNamespace, Name: "driverset-webhook", Path: ptr.To("/probe")}},
		}},
	}
	poll(ctx, t, time.Minute, "the webhook route in effect", func(ctx context.Context) (bool, error) {
		got, err := b.c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && got.Webhooks[0].ClientConfig.URL != nil, err
	})
}

// startLocalDriverset runs driverset as the installed Deployment would, as its ServiceAccount,
// with self-managed TLS, on the port the webhook route names; its certificate also names
// 127.0.0.1, which the apiserver calls.
func startLocalDriverset(ctx context.Context, t *testing.T, b *docBed) {
	t.Helper()
	// Beside the commands' folder, not the subtest's: driverset outlives the command that started it.
	dir, err := os.MkdirTemp(b.dir, "driverset-")
	if err != nil {
		t.Fatal(err)
	}
	ds, err := harness.Start(ctx, harness.Options{
		Binary: filepath.Join(b.bin, "driverset"), Kubeconfig: b.c.KubeconfigPath, Dir: dir, Port: b.ds.Port,
		ServiceAccount: systemNamespace + "/driverset", SelfManagedTLS: true, Restart: true, Alive: b.c.CheckAlive,
		Args: []string{"--webhook-cert-extra-hosts=127.0.0.1"},
	})
	if err != nil {
		logTail(t, dir)
		t.Fatal(err)
	}
	b.ds = ds
	if err := harness.WaitWebhookActive(ctx, b.c.Config, b.c.CheckAlive); err != nil {
		logTail(t, dir)
		t.Fatal(err)
	}
}

// checkInstalled starts driverset beside the test bed once an install was applied: the
// Deployment's pods, which KWOK runs without a container.
func checkInstalled(ctx context.Context, t *testing.T, b *docBed, _ docCommand, _ string) {
	if b.ds.LogPath == "" {
		startLocalDriverset(ctx, t, b)
	}
}

// deleteKeyMakerJob deletes the install's Job driverset-make-seal-key, as its TTL does a minute
// after it ends on real nodes: its template is immutable, so a new release's apply needs it gone.
func deleteKeyMakerJob(ctx context.Context, t *testing.T, b *docBed, _ docCommand) {
	bg := metav1.DeletePropagationBackground
	err := b.c.Client.BatchV1().Jobs(systemNamespace).Delete(ctx, "driverset-make-seal-key", metav1.DeleteOptions{PropagationPolicy: &bg})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// stopLocalDriverset stops driverset with its Deployment: the install is deleted.
func stopLocalDriverset(_ context.Context, t *testing.T, b *docBed, _ docCommand, _ string) {
	if b.ds.LogPath != "" {
		if err := b.ds.Stop(); err != nil {
			t.Error(err)
		}
		b.ds = &harness.Driverset{Port: b.ds.Port}
	}
}

// checkGated: the install check prints driverset's gate, and the comment after it, when there
// is one, is what it prints.
func checkGated(_ context.Context, t *testing.T, _ *docBed, c docCommand, out string) {
	want := `[{"name":"` + contract.GatePlaceholder + `"}]`
	if got := strings.TrimSpace(out); got != want {
		t.Errorf("printed %q, want %q", got, want)
	}
	if c.Comment != "" && c.Comment != want {
		t.Errorf("the docs say it prints %q; it prints %q", c.Comment, want)
	}
}

// checkCheck: the plugin's install check says it converted a driver pod in the namespace.
func checkCheck(_ context.Context, t *testing.T, _ *docBed, _ docCommand, out string) {
	if want := "driverset converted the opted-in driver pod " + usageNamespace + "/"; !strings.Contains(out, want) {
		t.Errorf("printed %q, want %q…", out, want)
	}
}

// checkHeartbeatRole: the binding names the ClusterRole the install ships.
func checkHeartbeatRole(ctx context.Context, t *testing.T, b *docBed, _ docCommand, _ string) {
	if _, err := b.c.Client.RbacV1().ClusterRoles().Get(ctx, "driverset-heartbeat", metav1.GetOptions{}); err != nil {
		t.Errorf("the role bound: %v", err)
	}
}

// checkEnforced: in a namespace labelled enforce, a Spark driver without the opt-in label is
// converted (a dry run).
func checkEnforced(ctx context.Context, t *testing.T, b *docBed, _ docCommand, _ string) {
	plan, err := sparksim.App{Version: sparksim.Spark35, Name: "enforced", Namespace: usageNamespace}.Plan()
	if err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, 30*time.Second, "an unlabelled driver converted in "+usageNamespace, func(ctx context.Context) (bool, error) {
		got, err := b.c.Client.CoreV1().Pods(usageNamespace).Create(ctx, plan.DriverPod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && got.Labels[contract.LabelPlaceholder] == "true", nil
	})
}

// submitDocApp is spark-submit with the docs' label, of the app the commands after it name.
func submitDocApp(ctx context.Context, t *testing.T, b *docBed, c docCommand) {
	if !strings.Contains(c.Text, "--conf spark.kubernetes.driver.label."+contract.LabelResilient+"=true") {
		t.Fatalf("%s: no opt-in label", c)
	}
	ns, name := "default", quickstartDriver
	if c.File == "docs/usage.md" {
		ns, name = usageNamespace, usageDriver
	}
	plan, err := sparksim.App{Version: sparksim.Spark35, Name: "docs", Namespace: ns, DriverPodName: name,
		DriverLabels: map[string]string{contract.LabelResilient: "true"}}.Plan()
	if err != nil {
		t.Fatal(err)
	}
	// spark-submit's client, which prints the apiserver's warnings.
	cfg := rest.CopyConfig(b.c.Config)
	warnings := &warningRecorder{}
	cfg.WarningHandler = warnings
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := sparksim.SubmitPlan(ctx, cs, plan, sparksim.SubmitOptions{}); err != nil || res.ExitCode != 0 {
		t.Fatalf("spark-submit: exit %v, %v", res, err)
	}
	// What the README and usage.md say spark-submit is warned.
	want := "driverset: pod " + name + " is a placeholder; the driver runs in pod " + contract.NamesFor(name).StatefulSet + "-0"
	if !slices.Contains(warnings.texts(), want) {
		t.Errorf("spark-submit was warned %q, want %q", warnings.texts(), want)
	}
}

// warningRecorder keeps the apiserver's warnings to a client.
type warningRecorder struct {
	mu  sync.Mutex
	got []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, text)
}

func (w *warningRecorder) texts() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.got)
}

// checkRendered: the rendered install names the image the command gave.
func checkRendered(_ context.Context, t *testing.T, b *docBed, c docCommand, _ string) {
	image := strings.TrimPrefix(strings.Fields(c.Text)[0], "DRIVERSET_IMAGE=")
	out := filepath.Join(b.dir, strings.Fields(c.Text)[2])
	deploy := find(t, decodeFile(t, out), "Deployment", "driverset")
	if got := container(t, podSpec(t, deploy))["image"]; got != image {
		t.Errorf("%s runs %v, want %s", out, got, image)
	}
}

// docApp is the namespace and placeholder a plugin command names.
func docApp(c docCommand) (ns, name string) {
	if strings.Contains(c.Text, usageDriver) {
		return usageNamespace, usageDriver
	}
	return "default", quickstartDriver
}

// waitDriverRunning waits for the app's driver pod to run on a node that was not powered off.
func waitDriverRunning(ctx context.Context, t *testing.T, b *docBed, c docCommand) {
	ns, name := docApp(c)
	s0 := contract.NamesFor(name).StatefulSet + "-0"
	poll(ctx, t, 2*time.Minute, ns+"/"+s0+" running", func(ctx context.Context) (bool, error) {
		p, err := b.c.Client.CoreV1().Pods(ns).Get(ctx, s0, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning &&
			p.Spec.NodeName != "" && p.Spec.NodeName != b.poweredOff, err
	})
}

// checkStatus: status names the driver pod <sts>-0, its UID and its node; after the node loss, a
// new one (another UID).
func checkStatus(ctx context.Context, t *testing.T, b *docBed, c docCommand, out string) {
	ns, name := docApp(c)
	s0, err := b.c.Client.CoreV1().Pods(ns).Get(ctx, contract.NamesFor(name).StatefulSet+"-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(c.Text, "-o json") {
		if got := strings.TrimSpace(out); !strings.HasPrefix(got, s0.Spec.NodeName+":") {
			t.Errorf("printed %q, want the node %q", got, s0.Spec.NodeName)
		}
		return
	}
	for _, want := range []string{s0.Name, string(s0.UID), s0.Spec.NodeName} {
		if !strings.Contains(out, want) {
			t.Errorf("status does not name %q", want)
		}
	}
	seen := b.uids[name]
	if strings.Contains(c.Comment, "another UID") && (len(seen) == 0 || seen[len(seen)-1] == string(s0.UID)) {
		t.Errorf("the docs say a new %s (another UID); status saw %v, now %s", s0.Name, seen, s0.UID)
	}
	b.uids[name] = append(seen, string(s0.UID))
}

// powerOffDriverNode is the quick start's "power off the node N that runs <sts>-0": its kubelet
// stops, N turns not Ready, and the placeholder says what the docs quote.
func powerOffDriverNode(ctx context.Context, t *testing.T, b *docBed, _ docCommand) {
	s0, err := b.c.Client.CoreV1().Pods("default").Get(ctx, contract.NamesFor(quickstartDriver).StatefulSet+"-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.poweredOff = s0.Spec.NodeName
	if err := b.c.KillNode(ctx, b.poweredOff); err != nil {
		t.Fatal(err)
	}
	quote := "node " + b.poweredOff + " has not been Ready since "
	last := ""
	defer func() { t.Logf("the placeholder says: %s", last) }()
	poll(ctx, t, 2*time.Minute, "the placeholder saying "+quote+"…", func(ctx context.Context) (bool, error) {
		p, err := b.c.Client.CoreV1().Pods("default").Get(ctx, quickstartDriver, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = p.Status.Message
		return strings.Contains(last, quote) && strings.Contains(last, "; the driver pod is kept until the node is confirmed down"), nil
	})
}

// checkWhy: why lists the decisions its comment names, in that order.
func checkWhy(_ context.Context, t *testing.T, _ *docBed, c docCommand, out string) {
	named, _, ok := strings.Cut(c.Comment, ":")
	if !ok {
		return
	}
	at := 0
	for _, reason := range strings.Split(named, ",") {
		reason = strings.TrimSpace(reason)
		i := strings.Index(out[at:], reason)
		if i < 0 {
			t.Errorf("why does not list %s after position %d", reason, at)
			continue
		}
		at += i + len(reason)
	}
}

// checkList: a list names the drivers of its namespaces.
func checkList(_ context.Context, t *testing.T, _ *docBed, c docCommand, out string) {
	want := []string{usageDriver}
	if strings.Contains(c.Text, " -A") {
		want = append(want, quickstartDriver)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("does not list %s", w)
		}
	}
	if strings.Contains(c.Text, "-o yaml") && !strings.Contains(out, "kind: DriverList") {
		t.Error("-o yaml printed no DriverList")
	}
}

// runCleanupAsItsServiceAccount: the pod was admitted as written; KWOK runs no container, so its
// command, `driverset uninstall-cleanup`, runs here as the pod's ServiceAccount, with the RBAC
// the docs made, and must leave no driverset finalizer on any pod or StatefulSet template.
func runCleanupAsItsServiceAccount(ctx context.Context, t *testing.T, b *docBed, _ docCommand, _ string) {
	pod, err := b.c.Client.CoreV1().Pods("driverset-cleanup").Get(ctx, "cleanup", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.ServiceAccountName != "cleanup" || len(pod.Spec.Containers) != 1 ||
		strings.Join(pod.Spec.Containers[0].Args, " ") != "uninstall-cleanup" {
		t.Fatalf("the pod runs %v as %q", pod.Spec.Containers, pod.Spec.ServiceAccountName)
	}
	kc, err := b.kubeconfigAs("driverset-cleanup", "cleanup")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(b.bin, "driverset"), append(pod.Spec.Containers[0].Args, "--kubeconfig="+kc)...)
	out, err := cmd.CombinedOutput()
	t.Logf("driverset uninstall-cleanup as driverset-cleanup/cleanup:\n%s", out)
	if err != nil {
		t.Fatal(err)
	}
	// What the docs say its log shows: one line per object, then the count.
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if !regexp.MustCompile(`^[0-9]+ object\(s\)`).MatchString(lines[len(lines)-1]) {
		t.Errorf("its last line is %q, not the count of objects", lines[len(lines)-1])
	}
	checkNoFinalizers(ctx, t, b)
}

// checkNoFinalizers: no pod and no StatefulSet template of the cluster keeps driverset's finalizer.
func checkNoFinalizers(ctx context.Context, t *testing.T, b *docBed) {
	t.Helper()
	pods, err := b.c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, f := range p.Finalizers {
			if f == contract.FinalizerOutcome {
				t.Errorf("pod %s/%s keeps %s", p.Namespace, p.Name, f)
			}
		}
	}
	sts, err := b.c.Client.AppsV1().StatefulSets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sts.Items {
		raw, _ := json.Marshal(s.Spec.Template.Finalizers)
		if strings.Contains(string(raw), contract.FinalizerOutcome) {
			t.Errorf("StatefulSet %s/%s's template keeps %s", s.Namespace, s.Name, raw)
		}
	}
}

// kubeconfigAs is a kubeconfig file (in the commands' folder) of the test bed's admin
// impersonating ServiceAccount ns/name, with the groups a token of it has.
func (b *docBed) kubeconfigAs(ns, name string) (string, error) {
	cfg, err := clientcmd.LoadFromFile(b.c.KubeconfigPath)
	if err != nil {
		return "", err
	}
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate = "system:serviceaccount:" + ns + ":" + name
		auth.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	}
	kc := filepath.Join(b.dir, ns+"."+name+".kubeconfig")
	return kc, clientcmd.WriteToFile(*cfg, kc)
}

// freeLocalPort is a port of 127.0.0.1 free now.
func freeLocalPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// decodeFile decodes the objects of a YAML file.
func decodeFile(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return decodeBytes(t, data)
}
