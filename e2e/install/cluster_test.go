//go:build testbed

package install

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/driverset/driverset/e2e/testbed"
)

// certManagerModule is the cert-manager release whose CRDs our Issuers and Certificates are
// checked against. Its CRDs are read from the Go module download, never copied into the repository.
const certManagerModule = "github.com/cert-manager/cert-manager@v1.21.2"

// fieldManager is the server-side-apply manager of every apply here, as one admin's
// `kubectl apply --server-side` would be: switching overlays removes what the last one set.
const fieldManager = "driverset-install-e2e"

// Everything an admin installs is applied, server-side and for real, to a real apiserver: the
// base, each overlay (the cert-manager one against cert-manager's own CRDs), install.yaml, whose
// Deployment must then run under the restricted Pod Security level, and the Helm chart's renders.
func TestInstallOnTheTestBed(t *testing.T) {
	c := testbed.StartT(t, testbed.Options{Nodes: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	a := newApplier(t, c.Config)

	t.Run("cert-manager CRDs", func(t *testing.T) {
		installCertManagerCRDs(ctx, t, c.Config, a)
	})
	for _, dir := range kustomizations() {
		t.Run(dir, func(t *testing.T) {
			applyAll(ctx, t, a, render(t, dir), false)
		})
	}
	t.Run("cert-manager's CRDs check our objects", func(t *testing.T) {
		// The control: the same apply refuses what the CRDs do not allow, so the overlay's
		// acceptance above means something.
		objs := render(t, "overlays/cert-manager")
		for _, tc := range []struct {
			name   string
			mutate func(u *unstructured.Unstructured)
		}{
			{"misspelt field", func(u *unstructured.Unstructured) { u.Object["spec"].(map[string]any)["isCa"] = true }},
			{"wrong type", func(u *unstructured.Unstructured) { u.Object["spec"].(map[string]any)["isCA"] = "yes" }},
			{"missing required field", func(u *unstructured.Unstructured) { delete(u.Object["spec"].(map[string]any), "issuerRef") }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				bad := find(t, objs, "Certificate", "driverset-ca").DeepCopy()
				tc.mutate(bad)
				if _, err := a.apply(ctx, bad, true); err == nil {
					t.Fatalf("the apiserver accepted %s", toYAML(bad.Object["spec"]))
				}
			})
		}
	})
	t.Run("install.yaml", func(t *testing.T) {
		objs := readInstallYAML(t)
		applyAll(ctx, t, a, objs, false)
		checkPodSecurity(ctx, t, c, find(t, objs, "Deployment", "driverset"))
		checkPodSecurity(ctx, t, c, find(t, objs, "Job", "driverset-make-seal-key"))
		waitDeploymentAvailable(ctx, t, a, 2)
	})
	t.Run("RBAC as the apiserver sees it", func(t *testing.T) {
		checkAccess(ctx, t, c)
	})
	// install.yaml's key-maker Job is deleted a minute after it ends (ttlSecondsAfterFinished), so
	// that the next render's Job, whose template differs (a Job's is immutable), can be applied.
	// KWOK runs no container, so it never ends here: delete it, as its TTL would.
	bg := metav1.DeletePropagationBackground
	if err := c.Client.BatchV1().Jobs(systemNamespace).Delete(ctx, "driverset-make-seal-key", metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Errorf("delete the key-maker Job: %v", err)
	}
	for _, mode := range []string{"self-managed", "cert-manager"} {
		t.Run("chart "+mode, func(t *testing.T) {
			// Dry run: the objects have install.yaml's names, which stay installed.
			objs := mustRenderChart(t, systemNamespace, map[string]any{"tls": map[string]any{"mode": mode}})
			applyAll(ctx, t, a, objs, true)
		})
	}
	t.Run("chart with every optional value, and its helm test hooks", func(t *testing.T) {
		// Strict: each value renders fields the apiserver knows, and the test pod meets the
		// restricted Pod Security level that driverset's namespace enforces.
		values := map[string]any{
			"image":              map[string]any{"digest": "sha256:" + strings.Repeat("0", 64)},
			"podSecurityContext": map[string]any{"runAsUser": nil},
			"webhook":            map[string]any{"includedNamespaces": []any{"default", "spark-jobs"}, "port": 10260},
			"commonLabels":       map[string]any{"team": "data-platform", "example.com/cost-center": "1234"},
			"metrics":            map[string]any{"port": 10261},
			"probes":             map[string]any{"port": 10262},
			"extraArgs":          []any{"--workers=8"},
			"fencing":            map[string]any{"fenceAfter": "5m"},
			"topologySpreadConstraints": []any{map[string]any{
				"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
				"labelSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "driverset"}},
			}},
		}
		objs := mustRenderChart(t, systemNamespace, values)
		hooks, err := renderChartTests(t, systemNamespace, values)
		if err != nil {
			t.Fatal(err)
		}
		applyAll(ctx, t, a, objs, true)
		// The hooks for real, as `helm test` makes them (a dry-run ServiceAccount cannot be used by
		// a pod): the pod is admitted under Pod Security restricted with its ServiceAccount. On KWOK
		// nodes its container does not run; what it runs is e2e's TestPluginCheck.
		applyAll(ctx, t, a, hooks, false)
		for _, u := range hooks {
			ri, err := a.resource(u)
			if err == nil {
				err = ri.Delete(ctx, u.GetName(), metav1.DeleteOptions{})
			}
			if err != nil {
				t.Errorf("delete %s: %v", key(u), err)
			}
		}
	})
}

// applier applies unstructured objects server-side with strict field validation: an unknown or
// misspelt field is an error, not a warning.
type applier struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func newApplier(t *testing.T, cfg *rest.Config) *applier {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

func (a *applier) resource(u *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := u.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		a.mapper.Reset() // a CRD installed since the last discovery
		m, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return a.dyn.Resource(m.Resource).Namespace(u.GetNamespace()), nil
	}
	return a.dyn.Resource(m.Resource), nil
}

func (a *applier) apply(ctx context.Context, u *unstructured.Unstructured, dryRun bool) (*unstructured.Unstructured, error) {
	ri, err := a.resource(u)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	force := true
	opts := metav1.PatchOptions{FieldManager: fieldManager, Force: &force, FieldValidation: metav1.FieldValidationStrict}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return ri.Patch(ctx, u.GetName(), types.ApplyPatchType, data, opts)
}

// applyAll applies objs in order and checks that the apiserver kept every field of each.
func applyAll(ctx context.Context, t *testing.T, a *applier, objs []*unstructured.Unstructured, dryRun bool) {
	t.Helper()
	if len(objs) == 0 {
		t.Fatal("nothing to apply")
	}
	for _, u := range objs {
		got, err := a.apply(ctx, u, dryRun)
		if err != nil {
			t.Errorf("apply %s: %v", key(u), err)
			continue
		}
		if !dryRun {
			// Read it back: what the apiserver stores, not what it answered.
			ri, _ := a.resource(u)
			if got, err = ri.Get(ctx, u.GetName(), metav1.GetOptions{}); err != nil {
				t.Errorf("%s applied, then: %v", key(u), err)
				continue
			}
		}
		if path, ok := contains(got.Object, u.Object); !ok {
			t.Errorf("%s: the apiserver dropped or changed .%s", key(u), path)
		}
	}
}

// contains says whether every field of want is in got, with the same value; got may have more
// (defaults, status). Numbers are compared as JSON (YAML gives float64, the apiserver int64).
func contains(got, want any) (string, bool) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return "", false
		}
		for k, wv := range w {
			if path, ok := contains(g[k], wv); !ok {
				return joinPath(k, path), false
			}
		}
		return "", true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return "", false
		}
		for i := range w {
			if path, ok := contains(g[i], w[i]); !ok {
				return joinPath(fmt.Sprintf("[%d]", i), path), false
			}
		}
		return "", true
	default:
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		return "", string(gj) == string(wj)
	}
}

func joinPath(a, b string) string {
	if b == "" {
		return a
	}
	if strings.HasPrefix(b, "[") {
		return a + b
	}
	return a + "." + b
}

// installCertManagerCRDs applies cert-manager's CRDs from its module download and waits until
// the apiserver serves them.
func installCertManagerCRDs(ctx context.Context, t *testing.T, cfg *rest.Config, a *applier) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", certManagerModule)
	// Outside driverset's module: this must not touch go.mod or go.sum.
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	out, err := cmd.Output()
	var mod struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &mod); err != nil || jerr != nil || mod.Error != "" {
		t.Fatalf("go mod download %s: %v %v %s", certManagerModule, err, jerr, mod.Error)
	}
	files, err := filepath.Glob(filepath.Join(mod.Dir, "deploy", "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in %s/deploy/crds: %v", mod.Dir, err)
	}
	ext, err := apiextensions.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range decodeBytes(t, data) {
			if u.GetKind() != "CustomResourceDefinition" {
				continue
			}
			if _, err := a.apply(ctx, u, false); err != nil {
				t.Fatalf("apply %s: %v", u.GetName(), err)
			}
			names = append(names, u.GetName())
		}
	}
	for _, name := range names {
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("CRD %s not established: %v", name, err)
		}
	}
	t.Logf("%d cert-manager CRDs from %s", len(names), mod.Dir)
}

// waitDeploymentAvailable waits until driverset's Deployment has want available replicas: its
// pods passed the namespace's restricted Pod Security level and were scheduled.
func waitDeploymentAvailable(ctx context.Context, t *testing.T, a *applier, want int64) {
	t.Helper()
	deploy := &unstructured.Unstructured{}
	deploy.SetAPIVersion("apps/v1")
	deploy.SetKind("Deployment")
	deploy.SetNamespace(systemNamespace)
	deploy.SetName("driverset")
	ri, err := a.resource(deploy)
	if err != nil {
		t.Fatal(err)
	}
	var last *unstructured.Unstructured
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := ri.Get(ctx, "driverset", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = got
		// The rollout of this generation is done: every replica runs the current template.
		observed, _, _ := unstructured.NestedInt64(got.Object, "status", "observedGeneration")
		for _, field := range []string{"replicas", "updatedReplicas", "availableReplicas"} {
			if n, _, _ := unstructured.NestedInt64(got.Object, "status", field); n != want {
				return false, nil
			}
		}
		return observed >= got.GetGeneration(), nil
	})
	if err != nil {
		status := "none"
		if last != nil {
			status = toYAML(last.Object["status"])
		}
		t.Fatalf("Deployment driverset never rolled out %d available replicas: %v\nstatus:\n%s", want, err, status)
	}
}

// checkPodSecurity creates (dry run) a pod from the Deployment's (or Job's) template in driverset's
// namespace, whose label enforces the restricted Pod Security level: the apiserver's answer is
// immediate and names the violation, where the Deployment would only stall. A control with one
// violation shows the level is enforced.
func checkPodSecurity(ctx context.Context, t *testing.T, c *testbed.Cluster, deploy *unstructured.Unstructured) {
	t.Helper()
	tmpl, _, err := unstructured.NestedMap(deploy.Object, "spec", "template")
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl, &pod); err != nil {
		t.Fatal(err)
	}
	pod.Name = "pod-security-probe"
	create := func(p *corev1.Pod) error {
		_, err := c.Client.CoreV1().Pods(systemNamespace).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	if err := create(&pod); err != nil {
		t.Errorf("driverset's pod is refused in %s: %v", systemNamespace, err)
	}
	control := pod.DeepCopy()
	control.Spec.Containers[0].SecurityContext.Capabilities = nil
	if err := create(control); err == nil || !strings.Contains(err.Error(), "restricted") {
		t.Errorf("a pod that keeps its capabilities was not refused by the restricted level: %v", err)
	}
}

// checkAccess asks the apiserver's authorizer what driverset's ServiceAccount may do: the
// resourceNames and namespaces of the self-managed rules must hold there, not only on paper.
func checkAccess(ctx context.Context, t *testing.T, c *testbed.Cluster) {
	t.Helper()
	for _, tc := range []struct {
		verb, group, resource, namespace, name string
		allowed                                bool
	}{
		{"get", "", "secrets", systemNamespace, "driverset-ca", true},
		{"update", "", "secrets", systemNamespace, "driverset-ca", true},
		{"create", "", "secrets", systemNamespace, "", true},
		{"get", "", "secrets", systemNamespace, "driverset-webhook-tls", false},
		// The seal key: made by the Job driverset-make-seal-key, brought by the kubelet (issue 35).
		{"get", "", "secrets", systemNamespace, "driverset-seal", false},
		{"watch", "", "secrets", systemNamespace, "driverset-seal", false},
		{"list", "", "secrets", systemNamespace, "", false},
		{"delete", "", "secrets", systemNamespace, "driverset-ca", false},
		{"get", "", "secrets", "default", "driverset-ca", false},
		{"create", "", "secrets", "default", "", false},
		{"patch", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "driverset", true},
		{"update", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "driverset", false},
		{"patch", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "someone-else", false},
		{"list", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "", false},
		{"delete", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "driverset", false},
		{"patch", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", "driverset", false},
		{"update", "coordination.k8s.io", "leases", systemNamespace, "driverset.driverset.dev", true},
		{"update", "coordination.k8s.io", "leases", "default", "driverset.driverset.dev", false},
		{"delete", "", "pods", "spark-jobs", "", true},
		{"create", "", "pods", "spark-jobs", "", false},
		{"create", "apps", "statefulsets", "spark-jobs", "", true},
		{"delete", "apps", "statefulsets", "spark-jobs", "", false},
		{"watch", "", "nodes", "", "", true},
		{"patch", "", "nodes", "", "", false},
		{"get", "", "configmaps", "spark-jobs", "", false},
	} {
		name := fmt.Sprintf("%s %s/%s %s", tc.verb, tc.resource, tc.name, tc.namespace)
		t.Run(name, func(t *testing.T) {
			review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   "system:serviceaccount:" + systemNamespace + ":driverset",
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + systemNamespace, "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Verb: tc.verb, Group: tc.group, Resource: tc.resource, Namespace: tc.namespace, Name: tc.name,
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
}
