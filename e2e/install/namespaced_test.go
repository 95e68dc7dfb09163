//go:build testbed

package install

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/harness"
	"github.com/driverset/driverset/e2e/sparksim"
	"github.com/driverset/driverset/e2e/testbed"
	"github.com/driverset/driverset/seal"
)

// namespacedOverlay is the namespaced install (issue 11): driverset caches, is called for and
// may act in the namespaces its overlay lists, and nowhere else.
const namespacedOverlay = "overlays/namespaced"

// The namespaced install on the test bed, with driverset running as its own ServiceAccount under
// the overlay's RBAC alone: an opted-in app in a watched namespace is converted, sealed and runs;
// one in an unwatched namespace is left a plain pod; driverset's ServiceAccount cannot create a
// StatefulSet outside the watched namespaces, and the guard rails still refuse it one that no
// placeholder owns inside them.
func TestNamespacedInstall(t *testing.T) {
	objs := render(t, namespacedOverlay)
	watchedNS := watchFlag(t, find(t, objs, "Deployment", "driverset"))
	if len(watchedNS) < 2 {
		t.Fatalf("the overlay watches %v; the test needs two namespaces", watchedNS)
	}
	const unwatched = "spark-unwatched"
	c := testbed.StartT(t, testbed.Options{Nodes: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, ns := range append([]string{unwatched}, watchedNS...) {
		makeNamespace(ctx, t, c.Client, ns)
	}

	// Everything but what runs driverset as pods: here it is a local process, as in e2e.
	var access, hooks []*unstructured.Unstructured
	for _, u := range objs {
		switch u.GetKind() {
		case "Deployment", "PodDisruptionBudget", "Service":
		case "MutatingWebhookConfiguration":
			hooks = append(hooks, u)
		default:
			access = append(access, u)
		}
	}
	if err := harness.Apply(ctx, c.Config, access); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin, err := harness.Build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := harness.Start(ctx, harness.Options{Binary: bin, Kubeconfig: c.KubeconfigPath, Dir: dir,
		ServiceAccount: systemNamespace + "/driverset", Args: []string{"--watch-namespaces=" + strings.Join(watchedNS, ",")},
		Alive: c.CheckAlive})
	if err != nil {
		logTail(t, dir)
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ds.Stop() })
	for _, u := range hooks {
		pointAtLocal(t, u, ds.Port, ds.CA.CertPEM)
	}
	if err := harness.Apply(ctx, c.Config, hooks); err != nil {
		t.Fatal(err)
	}
	waitConverted(ctx, t, c.Client, watchedNS[0])

	t.Run("an opted-in app in a watched namespace is converted and runs", func(t *testing.T) {
		for _, ns := range watchedNS {
			plan := submitApp(ctx, t, c.Client, ns, "watched")
			ph, err := c.Client.CoreV1().Pods(ns).Get(ctx, plan.DriverPodName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if ph.Labels[contract.LabelPlaceholder] != "true" || ph.Annotations[seal.Annotation] == "" {
				t.Fatalf("%s/%s: labels %v, annotations %v: not a sealed placeholder", ns, ph.Name, ph.Labels, ph.Annotations)
			}
			s0 := contract.NamesFor(plan.DriverPodName).StatefulSet + "-0"
			poll(ctx, t, time.Minute, fmt.Sprintf("%s/%s running on a node", ns, s0), func(ctx context.Context) (bool, error) {
				p, err := c.Client.CoreV1().Pods(ns).Get(ctx, s0, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return false, nil
				}
				return err == nil && p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "", err
			})
		}
	})

	t.Run("an opted-in app in an unwatched namespace is left plain", func(t *testing.T) {
		plan := submitApp(ctx, t, c.Client, unwatched, "unwatched")
		poll(ctx, t, time.Minute, "the plain driver running", func(ctx context.Context) (bool, error) {
			p, err := c.Client.CoreV1().Pods(unwatched).Get(ctx, plan.DriverPodName, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if _, ok := p.Labels[contract.LabelPlaceholder]; ok || len(p.Spec.SchedulingGates) > 0 {
				return false, fmt.Errorf("converted: labels %v, gates %v", p.Labels, p.Spec.SchedulingGates)
			}
			return p.Status.Phase == corev1.PodRunning, nil
		})
		sts, err := c.Client.AppsV1().StatefulSets(unwatched).List(ctx, metav1.ListOptions{})
		if err != nil || len(sts.Items) != 0 {
			t.Errorf("StatefulSets in %s: %d (%v), want none", unwatched, len(sts.Items), err)
		}
	})

	t.Run("driverset's ServiceAccount as the apiserver sees it", func(t *testing.T) {
		for _, tc := range []struct {
			verb, group, resource, namespace string
			allowed                          bool
		}{
			{"create", "apps", "statefulsets", watchedNS[0], true},
			{"create", "apps", "statefulsets", watchedNS[1], true},
			{"create", "apps", "statefulsets", unwatched, false},
			{"create", "apps", "statefulsets", "", false},
			{"delete", "", "pods", watchedNS[0], true},
			{"delete", "", "pods", unwatched, false},
			{"list", "", "pods", "", false},
			{"patch", "", "pods", "kube-system", false},
			{"create", "", "services", unwatched, false},
			{"get", "", "pods", systemNamespace, true}, // its own pod, to learn its image
			{"watch", "", "nodes", "", true},
			{"patch", "", "nodes", "", false},
		} {
			t.Run(fmt.Sprintf("%s %s %s", tc.verb, tc.resource, tc.namespace), func(t *testing.T) {
				review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
					User:   "system:serviceaccount:" + systemNamespace + ":driverset",
					Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + systemNamespace, "system:authenticated"},
					ResourceAttributes: &authorizationv1.ResourceAttributes{
						Verb: tc.verb, Group: tc.group, Resource: tc.resource, Namespace: tc.namespace,
					},
				}}
				got, err := c.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if got.Status.Allowed != tc.allowed {
					t.Errorf("allowed = %v, want %v (%s)", got.Status.Allowed, tc.allowed, got.Status.Reason)
				}
			})
		}
	})

	t.Run("a StatefulSet create as driverset", func(t *testing.T) {
		as := clientFor(t, ds.Kubeconfig)
		bare := bareStatefulSet()
		// Outside the watched namespaces: RBAC refuses it.
		_, err := as.AppsV1().StatefulSets(unwatched).Create(ctx, bare, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "cannot create resource") {
			t.Errorf("in %s: %v, want RBAC's Forbidden", unwatched, err)
		}
		// Inside, RBAC allows it and the guard rail refuses one that no placeholder controls.
		_, err = as.AppsV1().StatefulSets(watchedNS[0]).Create(ctx, bare, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil || !strings.Contains(err.Error(), "driverset-guard-creates") {
			t.Errorf("in %s: %v, want the guard rail driverset-guard-creates to refuse it", watchedNS[0], err)
		}
	})
}

// watchFlag is the namespaces of the Deployment's --watch-namespaces.
func watchFlag(t *testing.T, deploy *unstructured.Unstructured) []string {
	t.Helper()
	for _, a := range containerArgs(t, podSpec(t, deploy)) {
		if v, ok := strings.CutPrefix(a, "--watch-namespaces="); ok {
			return strings.Split(v, ",")
		}
	}
	t.Fatalf("the Deployment has no --watch-namespaces: %v", containerArgs(t, podSpec(t, deploy)))
	return nil
}

func makeNamespace(ctx context.Context, t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, 30*time.Second, name+"'s default ServiceAccount", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// pointAtLocal has the webhook configuration call the local driverset on port, trusting ca.
func pointAtLocal(t *testing.T, u *unstructured.Unstructured, port int, ca []byte) {
	t.Helper()
	hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
	for i := range hooks {
		h := hooks[i].(map[string]any)
		svc, _, _ := unstructured.NestedMap(h, "clientConfig", "service")
		h["clientConfig"] = map[string]any{
			"url":      "https://127.0.0.1:" + strconv.Itoa(port) + fmt.Sprint(svc["path"]),
			"caBundle": base64.StdEncoding.EncodeToString(ca),
		}
	}
	if err := unstructured.SetNestedSlice(u.Object, hooks, "webhooks"); err != nil {
		t.Fatal(err)
	}
}

// waitConverted waits until the apiserver calls driverset for an opted-in driver in ns (dry run).
func waitConverted(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	plan, err := sparksim.App{Version: sparksim.Spark35, Name: "probe", Namespace: ns,
		DriverLabels: map[string]string{contract.LabelResilient: "true"}}.Plan()
	if err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, 30*time.Second, "the webhook active in "+ns, func(ctx context.Context) (bool, error) {
		got, err := cs.CoreV1().Pods(ns).Create(ctx, plan.DriverPod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && got.Labels[contract.LabelPlaceholder] == "true", nil
	})
}

// submitApp runs spark-submit (not waiting for the app) for an opted-in Spark 3.5 app in ns.
func submitApp(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string) *sparksim.Plan {
	t.Helper()
	plan, err := sparksim.App{Version: sparksim.Spark35, Name: name, Namespace: ns,
		DriverLabels: map[string]string{contract.LabelResilient: "true"}}.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if res, err := sparksim.SubmitPlan(ctx, cs, plan, sparksim.SubmitOptions{}); err != nil || res.ExitCode != 0 {
		t.Fatalf("spark-submit in %s: exit %d, %v", ns, res.ExitCode, err)
	}
	return plan
}

func bareStatefulSet() *appsv1.StatefulSet {
	labels := map[string]string{"app": "bare"}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "bare"},
		Spec: appsv1.StatefulSetSpec{
			ServiceName: "bare", Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}},
			},
		},
	}
}

func clientFor(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func poll(ctx context.Context, t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	start := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, cond); err != nil {
		t.Fatalf("waiting %s for %s: %v", timeout, what, err)
	}
	t.Logf("%s after %s", what, time.Since(start).Round(time.Millisecond))
}

// logTail prints the end of driverset's logs in dir, for a start that failed.
func logTail(t *testing.T, dir string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			b, _ := os.ReadFile(dir + "/" + e.Name())
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("%s:\n%s", e.Name(), b)
		}
	}
}
