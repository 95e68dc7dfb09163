//go:build testbed

package install

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/strvals"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driverset/driverset/certs"
	"github.com/driverset/driverset/e2e/harness"
)

// renderChart renders charts/driverset the way `helm template driverset charts/driverset
// --namespace NS --set ... --skip-tests` does (Helm's own engine, values schema included): what
// `helm install` applies. The test hooks (templates/tests/) are made only by `helm test`:
// renderChartTests renders them.
func renderChart(t testing.TB, namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	t.Helper()
	return renderChartFiles(t, namespace, values, func(name string) bool { return !isTestHook(name) && !isUninstallHook(name) })
}

// renderChartUninstallHook renders the chart's pre-delete hook alone: made by `helm uninstall`,
// never by `helm install`.
func renderChartUninstallHook(t testing.TB, namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	t.Helper()
	return renderChartFiles(t, namespace, values, isUninstallHook)
}

func isUninstallHook(file string) bool {
	return strings.HasPrefix(file, "driverset/templates/uninstall/")
}

// renderChartTests renders the chart's `helm test` hooks alone.
func renderChartTests(t testing.TB, namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	t.Helper()
	return renderChartFiles(t, namespace, values, isTestHook)
}

func isTestHook(file string) bool { return strings.HasPrefix(file, "driverset/templates/tests/") }

// renderChartFiles renders the chart and decodes the files that keep selects.
func renderChartFiles(t testing.TB, namespace string, values map[string]any, keep func(file string) bool) ([]*unstructured.Unstructured, error) {
	t.Helper()
	return harness.RenderChart(filepath.Join(moduleRoot(t), "charts", "driverset"), "driverset", namespace, values, keep)
}

func mustRenderChart(t testing.TB, namespace string, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	objs, err := renderChart(t, namespace, values)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// The chart installs what the kustomize install does: the same objects, with the same content,
// for each TLS mode. Only the Namespace is left to Helm (--create-namespace), and the chart adds
// Helm's usual labels.
func TestChartDefaultsMatchTheKustomizeInstall(t *testing.T) {
	for _, tc := range []struct {
		mode    string
		overlay []*unstructured.Unstructured
	}{
		{"self-managed", readInstallYAML(t)},
		{"cert-manager", render(t, "overlays/cert-manager")},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			var values map[string]any
			if tc.mode != "self-managed" { // self-managed is the default: render it with no values at all
				values = map[string]any{"tls": map[string]any{"mode": tc.mode}}
			}
			expectChartMakes(t, mustRenderChart(t, systemNamespace, values), tc.overlay)
		})
	}
}

// expectChartMakes: the chart's objects are kustomize's, but for the Namespace (Helm's
// --create-namespace makes it), each with the same content (compareObject).
func expectChartMakes(t *testing.T, chart, kustomize []*unstructured.Unstructured) {
	t.Helper()
	c := byKey(chart)
	want := map[string]*unstructured.Unstructured{}
	for _, u := range kustomize {
		if u.GetKind() != "Namespace" {
			want[key(u)] = u
		}
	}
	if got, w := sortedKeys(c), sortedKeys(want); !reflect.DeepEqual(got, w) {
		t.Fatalf("the chart makes\n  %v\nkustomize makes\n  %v", got, w)
	}
	for k, w := range want {
		compareObject(t, k, c[k], w)
	}
}

// compareObject: the same content except labels, where the chart may add its own.
func compareObject(t *testing.T, k string, chart, kustomize *unstructured.Unstructured) {
	t.Helper()
	c, w := chart.DeepCopy().Object, kustomize.DeepCopy().Object
	if !isSubset(kustomize.GetLabels(), chart.GetLabels()) {
		t.Errorf("%s: labels %v lack some of %v", k, chart.GetLabels(), kustomize.GetLabels())
	}
	if !reflect.DeepEqual(chart.GetAnnotations(), kustomize.GetAnnotations()) {
		t.Errorf("%s: annotations %v, want %v", k, chart.GetAnnotations(), kustomize.GetAnnotations())
	}
	for _, m := range []map[string]any{c, w} {
		unstructured.RemoveNestedField(m, "metadata", "labels")
		unstructured.RemoveNestedField(m, "metadata", "annotations")
	}
	if kind := kustomize.GetKind(); kind == "Deployment" || kind == "Job" {
		cl, _, _ := unstructured.NestedStringMap(c, "spec", "template", "metadata", "labels")
		wl, _, _ := unstructured.NestedStringMap(w, "spec", "template", "metadata", "labels")
		if !isSubset(wl, cl) {
			t.Errorf("%s: pod labels %v lack some of %v", k, cl, wl)
		}
		unstructured.RemoveNestedField(c, "spec", "template", "metadata", "labels")
		unstructured.RemoveNestedField(w, "spec", "template", "metadata", "labels")
		// kustomize leaves the pull policy to the apiserver, which defaults a tagged image to
		// IfNotPresent; the chart says it, because it is a value.
		wc := container(t, podSpecOf(w))
		if _, ok := wc["imagePullPolicy"]; !ok {
			wc["imagePullPolicy"] = "IfNotPresent"
		}
	}
	if !reflect.DeepEqual(c, w) {
		t.Errorf("%s differs:\n--- chart\n%s\n--- kustomize\n%s", k, toYAML(c), toYAML(w))
	}
}

func podSpecOf(obj map[string]any) map[string]any {
	spec, _, _ := unstructured.NestedFieldNoCopy(obj, "spec", "template", "spec")
	m, _ := spec.(map[string]any)
	return m
}

func isSubset(small, big map[string]string) bool {
	for k, v := range small {
		if bv, ok := big[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func sortedKeys(m map[string]*unstructured.Unstructured) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Each knob of values.yaml reaches the objects it is meant for.
func TestChartValues(t *testing.T) {
	clientCA, err := certs.NewAuthority("apiserver-webhook-client-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		namespace string
		values    map[string]any
		check     func(t *testing.T, objs []*unstructured.Unstructured)
	}{
		{
			name: "the admin's bounds on fencing",
			values: map[string]any{"fencing": map[string]any{
				"fenceAfterMin": "1m", "fenceAfterMax": "10m", "selfFenceMin": "30s", "selfFenceMax": "5m",
				"namespaces": []any{"spark-a", "spark-b"},
			}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				args := containerArgs(t, podSpec(t, find(t, objs, "Deployment", "driverset")))
				for _, want := range []string{"--fence-after-min=1m", "--fence-after-max=10m", "--self-fence-min=30s",
					"--self-fence-max=5m", "--fence-namespaces=spark-a,spark-b"} {
					if !containsString(args, want) {
						t.Errorf("serve is not given %s: %v", want, args)
					}
				}
			},
		},
		{
			name:   "who may ask for GPUs",
			values: map[string]any{"authorizeExtendedResources": true},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				if args := containerArgs(t, podSpec(t, find(t, objs, "Deployment", "driverset"))); !containsString(args, "--authorize-extended-resources") {
					t.Errorf("serve is not given --authorize-extended-resources: %v", args)
				}
			},
		},
		{
			name:   "only the apiserver calls the webhook: its client CA mounted where serve reads it",
			values: map[string]any{"webhook": map[string]any{"clientCA": string(clientCA.CertPEM), "clientNames": []any{"kube-apiserver", "other"}}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				deploy := find(t, objs, "Deployment", "driverset")
				pod := podSpec(t, deploy)
				args := containerArgs(t, pod)
				const file = "/etc/driverset/webhook-client-ca/ca.crt"
				for _, want := range []string{"--webhook-client-ca=" + file, "--webhook-client-names=kube-apiserver,other"} {
					if !containsString(args, want) {
						t.Errorf("serve is not given %s: %v", want, args)
					}
				}
				cm := find(t, objs, "ConfigMap", "driverset-webhook-client-ca")
				if got, _, _ := unstructured.NestedString(cm.Object, "data", "ca.crt"); strings.TrimSpace(got) != strings.TrimSpace(string(clientCA.CertPEM)) {
					t.Errorf("the ConfigMap holds %q, not the CA given", got)
				}
				if at := mountedFrom(t, pod, "driverset", file); at != "ConfigMap driverset-webhook-client-ca key ca.crt" {
					t.Errorf("%s is %s, want the ConfigMap's ca.crt", file, at)
				}
				if sum, _, _ := unstructured.NestedString(deploy.Object, "spec", "template", "metadata", "annotations", "checksum/webhook-client-ca"); sum == "" {
					t.Error("the pod template carries no checksum of the CA: a new CA would not roll the pods, which read it once")
				}
			},
		},
		{
			name:   "the namespaces the webhooks skip are those serve refuses reviews about",
			values: map[string]any{"webhook": map[string]any{"excludedNamespaces": []any{"kube-system", "ops"}}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				if args := containerArgs(t, podSpec(t, find(t, objs, "Deployment", "driverset"))); !containsString(args, "--excluded-namespaces=kube-system,ops") {
					t.Errorf("serve is not given --excluded-namespaces=kube-system,ops: %v", args)
				}
			},
		},
		{
			name:   "the namespaces the webhooks are limited to are those serve answers reviews about",
			values: map[string]any{"webhook": map[string]any{"includedNamespaces": []any{"spark-a", "spark-b"}}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				if args := containerArgs(t, podSpec(t, find(t, objs, "Deployment", "driverset"))); !containsString(args, "--included-namespaces=spark-a,spark-b") {
					t.Errorf("serve is not given --included-namespaces=spark-a,spark-b: %v", args)
				}
			},
		},
		{
			name:   "no namespace skipped but driverset's own: serve told so",
			values: map[string]any{"webhook": map[string]any{"excludedNamespaces": []any{}}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				if args := containerArgs(t, podSpec(t, find(t, objs, "Deployment", "driverset"))); !containsString(args, "--excluded-namespaces=") {
					t.Errorf("serve is not given an empty --excluded-namespaces (its default is kube-system): %v", args)
				}
			},
		},
		{
			name:   "a cluster-wide fence-after",
			values: map[string]any{"fencing": map[string]any{"fenceAfter": "5m"}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				if args := containerArgs(t, podSpec(t, find(t, objs, "Deployment", "driverset"))); !containsString(args, "--fence-after=5m") {
					t.Errorf("serve is not given --fence-after=5m: %v", args)
				}
			},
		},
		{
			name:   "extraArgs come after the chart's own flags, as given",
			values: map[string]any{"extraArgs": []any{"--workers=8", "--webhook-cert-extra-hosts=a b"}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				args := containerArgs(t, podSpec(t, find(t, objs, "Deployment", "driverset")))
				if n := len(args); n < 3 || args[n-2] != "--workers=8" || args[n-1] != "--webhook-cert-extra-hosts=a b" {
					t.Errorf("args %v do not end with the extra ones", args)
				}
			},
		},
		{
			name: "security contexts: OpenShift's restricted SCC picks the user (runAsUser: null), the rest stays",
			values: map[string]any{
				"podSecurityContext": map[string]any{"runAsUser": nil, "fsGroup": 1000},
				"securityContext":    map[string]any{"readOnlyRootFilesystem": false},
			},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				for _, obj := range []*unstructured.Unstructured{find(t, objs, "Deployment", "driverset")} {
					pod := podSpec(t, obj)
					if _, ok, _ := unstructured.NestedFieldNoCopy(pod, "securityContext", "runAsUser"); ok {
						t.Errorf("runAsUser: null still renders a user: %s", toYAML(pod["securityContext"]))
					}
					expect(t, pod, true, "securityContext", "runAsNonRoot")
					expect(t, pod, "RuntimeDefault", "securityContext", "seccompProfile", "type")
					expect(t, pod, 1000, "securityContext", "fsGroup")
					c := container(t, pod)
					expect(t, c, false, "securityContext", "readOnlyRootFilesystem")
					expect(t, c, []any{"ALL"}, "securityContext", "capabilities", "drop")
					expect(t, c, false, "securityContext", "allowPrivilegeEscalation")
				}
			},
		},
		{
			name: "an include list: every webhook touches only those namespaces, the exclusions still hold",
			values: map[string]any{"webhook": map[string]any{
				"includedNamespaces": []any{"spark-a", "spark-b"}, "excludedNamespaces": []any{"kube-system"},
			}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				hooks := webhooks(t, objs)
				if len(hooks) != 8 {
					t.Fatalf("%d webhooks, want 8", len(hooks))
				}
				for _, h := range hooks {
					expect(t, h, []any{
						map[string]any{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": []any{"kube-system", systemNamespace}},
						map[string]any{"key": "kubernetes.io/metadata.name", "operator": "In", "values": []any{"spark-a", "spark-b"}},
					}, "namespaceSelector", "matchExpressions")
				}
			},
		},
		{
			name:   "image digest wins over the tag",
			values: map[string]any{"image": map[string]any{"repository": "registry.example/driverset", "tag": "v1.2.3", "digest": "sha256:" + strings.Repeat("ab", 32)}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				want := "registry.example/driverset@sha256:" + strings.Repeat("ab", 32)
				if c := container(t, podSpec(t, find(t, objs, "Deployment", "driverset"))); c["image"] != want {
					t.Errorf("image %v, want %s", c["image"], want)
				}
			},
		},
		{
			name: "topology spread",
			values: map[string]any{"topologySpreadConstraints": []any{map[string]any{
				"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
				"labelSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "driverset"}},
			}}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				pod := podSpec(t, find(t, objs, "Deployment", "driverset"))
				tsc, _, _ := unstructured.NestedSlice(pod, "topologySpreadConstraints")
				if len(tsc) != 1 {
					t.Fatalf("topologySpreadConstraints %v", tsc)
				}
				expect(t, tsc[0].(map[string]any), "topology.kubernetes.io/zone", "topologyKey")
			},
		},
		{
			name:   "webhook port: the container listens there, serve is told, the Service follows by name",
			values: map[string]any{"webhook": map[string]any{"port": 10260}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				pod := podSpec(t, find(t, objs, "Deployment", "driverset"))
				if args := containerArgs(t, pod); !containsString(args, "--webhook-port=10260") {
					t.Errorf("serve is not given --webhook-port=10260: %v", args)
				}
				expect(t, webhookContainerPort(t, pod), 10260, "containerPort")
				if _, ok := pod["hostNetwork"]; ok {
					t.Errorf("a port alone turns on hostNetwork: %v", pod["hostNetwork"])
				}
				svc := find(t, objs, "Service", "driverset-webhook")
				ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
				expect(t, ports[0].(map[string]any), "webhook", "targetPort")
			},
		},
		{
			name:   "hostNetwork: the pod on the node's network, resolving cluster names, on the admin's port",
			values: map[string]any{"hostNetwork": true, "webhook": map[string]any{"port": 10260}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				pod := podSpec(t, find(t, objs, "Deployment", "driverset"))
				expect(t, pod, true, "hostNetwork")
				expect(t, pod, "ClusterFirstWithHostNet", "dnsPolicy")
				expect(t, webhookContainerPort(t, pod), 10260, "containerPort")
				if args := containerArgs(t, pod); !containsString(args, "--webhook-port=10260") {
					t.Errorf("serve is not given --webhook-port=10260: %v", args)
				}
			},
		},
		{
			name: "hostNetwork with every port moved: metrics and probes too, serve told each, the probes and Services follow by name",
			values: map[string]any{"hostNetwork": true, "webhook": map[string]any{"port": 10260},
				"metrics": map[string]any{"port": 10261}, "probes": map[string]any{"port": 10262}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				pod := podSpec(t, find(t, objs, "Deployment", "driverset"))
				args := containerArgs(t, pod)
				for _, want := range []string{"--webhook-port=10260", "--metrics-bind-address=:10261", "--health-probe-bind-address=:10262"} {
					if !containsString(args, want) {
						t.Errorf("serve is not given %s: %v", want, args)
					}
				}
				ports, _, _ := unstructured.NestedSlice(container(t, pod), "ports")
				got := map[string]any{}
				for _, p := range ports {
					got[fmt.Sprint(p.(map[string]any)["name"])] = p.(map[string]any)["containerPort"]
				}
				expect(t, got, 10260, "webhook")
				expect(t, got, 10261, "metrics")
				expect(t, got, 10262, "probes")
				expect(t, container(t, pod), "probes", "readinessProbe", "httpGet", "port")
				svc := find(t, objs, "Service", "driverset-metrics")
				sp, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
				expect(t, sp[0].(map[string]any), "metrics", "targetPort")
			},
		},
		{
			name: "commonLabels on every object, the helm test hooks and driverset's pods; the chart's own labels stay",
			values: map[string]any{"commonLabels": map[string]any{"team": "data-platform", "cost-center": "1234"},
				"metrics": map[string]any{
					"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}},
					"prometheusRule": map[string]any{"enabled": true, "labels": map[string]any{"team": "sre"}},
					"dashboard":      map[string]any{"enabled": true},
				},
				"networkPolicy": map[string]any{"enabled": true, "webhookFrom": []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/28"}}}},
				"priorityClass": map[string]any{"create": true},
				"tls":           map[string]any{"mode": "cert-manager"},
			},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				hooks, err := renderChartTests(t, systemNamespace, map[string]any{"commonLabels": map[string]any{"team": "data-platform", "cost-center": "1234"}})
				if err != nil {
					t.Fatal(err)
				}
				if len(hooks) == 0 {
					t.Fatal("no helm test hooks rendered")
				}
				for _, u := range append(objs, hooks...) {
					l := u.GetLabels()
					want := "data-platform"
					if u.GetKind() == "PrometheusRule" {
						want = "sre" // metrics.prometheusRule.labels win: they are the more specific
					}
					if l["team"] != want || l["cost-center"] != "1234" {
						t.Errorf("%s: labels %v lack the common ones", key(u), l)
					}
					name := "driverset"
					if key(u) == "Pod/"+systemNamespace+"/driverset-test" {
						name = "driverset-test" // selected by none of driverset's Services (TestChartHelmTest)
					}
					if l["app.kubernetes.io/name"] != name || l["helm.sh/chart"] == "" {
						t.Errorf("%s: labels %v lost the chart's own", key(u), l)
					}
				}
				deploy := find(t, objs, "Deployment", "driverset")
				expect(t, deploy.Object, "data-platform", "spec", "template", "metadata", "labels", "team")
				expect(t, deploy.Object, map[string]any{"app.kubernetes.io/name": "driverset"}, "spec", "selector", "matchLabels")
				expect(t, find(t, objs, "ServiceMonitor", "driverset").Object, "prom", "metadata", "labels", "release")
				expect(t, find(t, objs, "Service", "driverset-metrics").Object, "metrics", "metadata", "labels", "app.kubernetes.io/component")
				expect(t, find(t, objs, "ConfigMap", "driverset-dashboard").Object, "1", "metadata", "labels", "grafana_dashboard")
			},
		},
		{
			name:   "ServiceMonitor by default: Prometheus's own token from its file, the self-signed certificate not verified",
			values: map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true}}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				ep := serviceMonitorEndpoint(t, objs)
				expect(t, ep, "/var/run/secrets/kubernetes.io/serviceaccount/token", "bearerTokenFile")
				expect(t, ep, map[string]any{"insecureSkipVerify": true}, "tlsConfig")
				if _, ok := ep["authorization"]; ok {
					t.Errorf("authorization set by default: %v", ep["authorization"])
				}
			},
		},
		{
			name: "ServiceMonitor with authorization from a Secret and the admin's tlsConfig: no token file, no forced skip",
			values: map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{
				"enabled":       true,
				"authorization": map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "scraper-token", "key": "token"}},
				"tlsConfig":     map[string]any{"ca": map[string]any{"secret": map[string]any{"name": "metrics-ca", "key": "ca.crt"}}, "serverName": "driverset-metrics.driverset-system.svc"},
			}}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				ep := serviceMonitorEndpoint(t, objs)
				expect(t, ep, map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "scraper-token", "key": "token"}}, "authorization")
				expect(t, ep, map[string]any{"ca": map[string]any{"secret": map[string]any{"name": "metrics-ca", "key": "ca.crt"}}, "serverName": "driverset-metrics.driverset-system.svc"}, "tlsConfig")
				if _, ok := ep["bearerTokenFile"]; ok {
					t.Errorf("bearerTokenFile beside authorization: %v", ep["bearerTokenFile"])
				}
			},
		},
		{
			name: "ServiceMonitor with a token Secret of its own: a ServiceAccount that may only read /metrics",
			values: map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{
				"enabled": true, "tokenSecret": map[string]any{"create": true},
			}}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				ep := serviceMonitorEndpoint(t, objs)
				expect(t, ep, map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "driverset-metrics-token", "key": "token"}}, "authorization")
				if _, ok := ep["bearerTokenFile"]; ok {
					t.Errorf("bearerTokenFile beside authorization: %v", ep["bearerTokenFile"])
				}
				find(t, objs, "ServiceAccount", "driverset-metrics-scraper")
				secret := find(t, objs, "Secret", "driverset-metrics-token")
				expect(t, secret.Object, "kubernetes.io/service-account-token", "type")
				expect(t, secret.Object, "driverset-metrics-scraper", "metadata", "annotations", "kubernetes.io/service-account.name")
				crb := find(t, objs, "ClusterRoleBinding", "driverset-metrics-scraper")
				expect(t, crb.Object, map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "driverset-metrics-reader"}, "roleRef")
				expect(t, crb.Object, []any{map[string]any{"kind": "ServiceAccount", "name": "driverset-metrics-scraper", "namespace": systemNamespace}}, "subjects")
			},
		},
		{
			name: "alerts: with failurePolicy Ignore no webhook fails closed, so no alert for fewer than two replicas",
			values: map[string]any{"webhook": map[string]any{"failurePolicy": "Ignore"},
				"metrics": map[string]any{"prometheusRule": map[string]any{"enabled": true}}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				alerts := ruleAlerts(t, find(t, objs, "PrometheusRule", "driverset"))
				if alerts["DriversetWebhookReplicasBelowTwo"] {
					t.Error("DriversetWebhookReplicasBelowTwo rendered with failurePolicy Ignore")
				}
				if !alerts["DriversetDown"] || !alerts["DriversetWebhookSlow"] {
					t.Errorf("the other alerts went too: %v", alerts)
				}
				// With the default, Fail, it is there (TestMonitoringManifests: the file's rules, all of them).
				fail := mustRenderChart(t, systemNamespace, map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{"enabled": true}}})
				if !ruleAlerts(t, find(t, fail, "PrometheusRule", "driverset"))["DriversetWebhookReplicasBelowTwo"] {
					t.Error("DriversetWebhookReplicasBelowTwo missing with failurePolicy Fail")
				}
			},
		},
		{
			name:   "replicas",
			values: map[string]any{"replicas": 3},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				expect(t, find(t, objs, "Deployment", "driverset").Object, 3, "spec", "replicas")
			},
		},
		{
			name: "image, and the init container pulls it the same way",
			values: map[string]any{"image": map[string]any{
				"repository": "registry.example/driverset", "tag": "v1.2.3", "pullPolicy": "Always",
			}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				pod := podSpec(t, find(t, objs, "Deployment", "driverset"))
				c := container(t, pod)
				if c["image"] != "registry.example/driverset:v1.2.3" || c["imagePullPolicy"] != "Always" {
					t.Errorf("image %v, pull policy %v", c["image"], c["imagePullPolicy"])
				}
				if !containsString(containerArgs(t, pod), "--image-pull-policy=Always") {
					t.Errorf("serve is not told the pull policy: %v", containerArgs(t, pod))
				}
			},
		},
		{
			name:   "image tag defaults to the chart's appVersion",
			values: map[string]any{"image": map[string]any{"repository": "registry.example/driverset"}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				c := container(t, podSpec(t, find(t, objs, "Deployment", "driverset")))
				if c["image"] != "registry.example/driverset:dev" {
					t.Errorf("image %v", c["image"])
				}
			},
		},
		{
			name:   "resources",
			values: map[string]any{"resources": map[string]any{"requests": map[string]any{"cpu": "1", "memory": "1Gi"}}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				c := container(t, podSpec(t, find(t, objs, "Deployment", "driverset")))
				expect(t, c, "1Gi", "resources", "requests", "memory")
			},
		},
		{
			name:   "restart backoff",
			values: map[string]any{"restartBackoff": "30s", "maxRestartBackoff": "10m"},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				args := containerArgs(t, podSpec(t, find(t, objs, "Deployment", "driverset")))
				for _, want := range []string{"--restart-backoff=30s", "--max-restart-backoff=10m"} {
					if !containsString(args, want) {
						t.Errorf("args %v lack %s", args, want)
					}
				}
			},
		},
		{
			name:   "log level",
			values: map[string]any{"logLevel": "debug"},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				args := containerArgs(t, podSpec(t, find(t, objs, "Deployment", "driverset")))
				if !containsString(args, "--log-level=debug") {
					t.Errorf("args %v lack --log-level=debug", args)
				}
			},
		},
		{
			name:   "namespace policy off: only opted-in drivers",
			values: map[string]any{"namespacePolicy": map[string]any{"enabled": false}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				if got := webhookNames(t, objs); !reflect.DeepEqual(got, []string{"drivers.driverset.dev", "executors.driverset.dev", "incarnations.driverset.dev", "creates.driverset.dev", "events.driverset.dev", "deletes.driverset.dev", "releases.driverset.dev"}) {
					t.Errorf("webhooks %v", got)
				}
			},
		},
		{
			name:   "webhook timeout and failure policy, on the pod webhooks; creates, events, deletes and releases always fail closed",
			values: map[string]any{"webhook": map[string]any{"timeoutSeconds": 2, "failurePolicy": "Ignore"}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				for _, h := range webhooks(t, objs) {
					expect(t, h, 2, "timeoutSeconds")
					// Only driverset's own creates, Events, driver-pod deletes and finalizer removals
					// reach them: failing closed blocks no user, and failing open would let a stolen
					// token's write through unchecked.
					if h["name"] == "creates.driverset.dev" || h["name"] == "events.driverset.dev" || h["name"] == "deletes.driverset.dev" || h["name"] == "releases.driverset.dev" {
						expect(t, h, "Fail", "failurePolicy")
						continue
					}
					expect(t, h, "Ignore", "failurePolicy")
				}
			},
		},
		{
			name:      "another namespace: the Service, the exclusions, the certificates and the bindings follow",
			namespace: "tools",
			values:    map[string]any{"tls": map[string]any{"mode": "cert-manager"}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				for _, h := range webhooks(t, objs) {
					expect(t, h, "tools", "clientConfig", "service", "namespace")
					sel, _, _ := unstructured.NestedSlice(h, "namespaceSelector", "matchExpressions")
					expect(t, sel[0].(map[string]any), []any{"kube-system", "tools"}, "values")
				}
				expect(t, find(t, objs, "MutatingWebhookConfiguration", "driverset").Object,
					"tools/driverset-webhook", "metadata", "annotations", "cert-manager.io/inject-ca-from")
				expect(t, find(t, objs, "Certificate", "driverset-webhook").Object,
					[]any{"driverset-webhook.tools.svc", "driverset-webhook.tools.svc.cluster.local"}, "spec", "dnsNames")
				subjects, _, _ := unstructured.NestedSlice(find(t, objs, "ClusterRoleBinding", "driverset").Object, "subjects")
				expect(t, subjects[0].(map[string]any), "tools", "namespace")
				for _, u := range objs {
					if scoped(u.GetKind()) && u.GetNamespace() != "tools" {
						t.Errorf("%s is not in the release namespace", key(u))
					}
				}
			},
		},
		{
			name: "scheduling",
			values: map[string]any{
				"nodeSelector":    map[string]any{"pool": "system"},
				"tolerations":     []any{map[string]any{"key": "dedicated", "operator": "Exists"}},
				"affinity":        nil, // Helm's way to drop a default: null
				"podAntiAffinity": "",  // and no anti-affinity: no affinity at all
			},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				pod := podSpec(t, find(t, objs, "Deployment", "driverset"))
				expect(t, pod, "system", "nodeSelector", "pool")
				expect(t, pod, []any{map[string]any{"key": "dedicated", "operator": "Exists"}}, "tolerations")
				if _, ok := pod["affinity"]; ok {
					t.Errorf("affinity: null still renders %s", toYAML(pod["affinity"]))
				}
			},
		},
		{
			name:   "no PodDisruptionBudget",
			values: map[string]any{"podDisruptionBudget": map[string]any{"enabled": false}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				for _, u := range objs {
					if u.GetKind() == "PodDisruptionBudget" {
						t.Errorf("%s rendered", key(u))
					}
				}
			},
		},
		{
			name:   "PodDisruptionBudget as a percentage",
			values: map[string]any{"podDisruptionBudget": map[string]any{"enabled": true, "minAvailable": "50%"}},
			check: func(t *testing.T, objs []*unstructured.Unstructured) {
				expect(t, find(t, objs, "PodDisruptionBudget", "driverset").Object, "50%", "spec", "minAvailable")
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := tc.namespace
			if ns == "" {
				ns = systemNamespace
			}
			tc.check(t, mustRenderChart(t, ns, tc.values))
		})
	}
}

// Values that would install a broken driverset are refused before anything is applied.
func TestChartRefusesBadValues(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
	}{
		{"unknown TLS mode", map[string]any{"tls": map[string]any{"mode": "none"}}},
		{"unknown failure policy", map[string]any{"webhook": map[string]any{"failurePolicy": "Sometimes"}}},
		{"timeout above the apiserver's 30 s", map[string]any{"webhook": map[string]any{"timeoutSeconds": 31}}},
		{"no replica", map[string]any{"replicas": 0}},
		{"a backoff that is not a duration", map[string]any{"restartBackoff": "ten seconds"}},
		{"unknown pull policy", map[string]any{"image": map[string]any{"pullPolicy": "Sometimes"}}},
		{"unknown log level", map[string]any{"logLevel": "verbose"}},
		{"a digest that is not sha256", map[string]any{"image": map[string]any{"digest": "v1.2.3"}}},
		{"a cluster-wide fence-after that is not a duration", map[string]any{"fencing": map[string]any{"fenceAfter": "soon"}}},
		{"extraArgs not a list of strings", map[string]any{"extraArgs": "--workers=8"}},
		{"an empty name in the include list", map[string]any{"webhook": map[string]any{"includedNamespaces": []any{""}}}},
		{"a spread constraint without its topology key", map[string]any{"topologySpreadConstraints": []any{map[string]any{"maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}}}},
		{"no namespace for helm test", map[string]any{"tests": map[string]any{"namespace": ""}}},
		{"an unknown anti-affinity", map[string]any{"podAntiAffinity": "always"}},
		{"a priority in the system range", map[string]any{"priorityClass": map[string]any{"create": true, "value": 2000000000}}},
		{"a watched namespace that is not a name", map[string]any{"watchNamespaces": []any{"Spark_A"}}},
		{"a webhook port that is no port", map[string]any{"webhook": map[string]any{"port": 70000}}},
		{"the webhook on the metrics port", map[string]any{"webhook": map[string]any{"port": 8080}}},
		{"the webhook on the probes port", map[string]any{"webhook": map[string]any{"port": 8081}}},
		{"the metrics on the webhook's port", map[string]any{"webhook": map[string]any{"port": 10260}, "metrics": map[string]any{"port": 10260}}},
		{"the probes on the metrics port", map[string]any{"metrics": map[string]any{"port": 10261}, "probes": map[string]any{"port": 10261}}},
		{"hostNetwork not a boolean", map[string]any{"hostNetwork": "yes"}},
		{"an excluded namespace that is not a name (serve would refuse to start)", map[string]any{"webhook": map[string]any{"excludedNamespaces": []any{"Kube_System"}}}},
		{"a webhook client CA that is no PEM certificate", map[string]any{"webhook": map[string]any{"clientCA": "/etc/kubernetes/pki/ca.crt"}}},
		{"webhook client names without their CA", map[string]any{"webhook": map[string]any{"clientNames": []any{"kube-apiserver"}}}},
		{"a webhook client name with a comma", map[string]any{"webhook": map[string]any{"clientCA": "-----BEGIN CERTIFICATE-----", "clientNames": []any{"a,b"}}}},
		{"a common label that would replace the chart's own", map[string]any{"commonLabels": map[string]any{"app.kubernetes.io/name": "other"}}},
		{"a common label that is not a string", map[string]any{"commonLabels": map[string]any{"tier": 1}}},
		{"a ServiceMonitor authorization without the Secret's key", map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"authorization": map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "t"}}}}}},
		{"a ServiceMonitor authorization and a token Secret of its own both", map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true, "tokenSecret": map[string]any{"create": true}, "authorization": map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "t", "key": "token"}}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if objs, err := renderChart(t, systemNamespace, tc.values); err == nil {
				t.Fatalf("rendered %v", keys(objs))
			}
		})
	}
}

// A key the chart does not know is refused, at the top level and inside every object of its own
// values, naming the key: a typo never installs something other than what was meant.
func TestChartRefusesTypos(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
		typo   string
	}{
		{"--set replica=3", map[string]any{"replica": 3}, "replica"},
		{"image.tags", map[string]any{"image": map[string]any{"tags": "v1"}}, "tags"},
		{"tls.mod", map[string]any{"tls": map[string]any{"mod": "cert-manager"}}, "mod"},
		{"webhook.timeout", map[string]any{"webhook": map[string]any{"timeout": 2}}, "timeout"},
		{"fencing.fenceafter", map[string]any{"fencing": map[string]any{"fenceafter": "5m"}}, "fenceafter"},
		{"namespacePolicy.enable", map[string]any{"namespacePolicy": map[string]any{"enable": false}}, "enable"},
		{"tests.namespaces", map[string]any{"tests": map[string]any{"namespaces": "spark"}}, "namespaces"},
		{"priorityClass.name", map[string]any{"priorityClass": map[string]any{"name": "high"}}, "name"},
		{"guardRails.enable", map[string]any{"guardRails": map[string]any{"enable": false}}, "enable"},
		{"networkPolicy.enable", map[string]any{"networkPolicy": map[string]any{"enable": true}}, "enable"},
		{"podDisruptionBudget.maxUnavailable", map[string]any{"podDisruptionBudget": map[string]any{"maxUnavailable": 1}}, "maxUnavailable"},
		{"metrics.serviceMonitor.enable", map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enable": true}}}, "enable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := renderChart(t, systemNamespace, tc.values)
			if err == nil {
				t.Fatalf("rendered %d objects", len(objs))
			}
			if !strings.Contains(err.Error(), tc.typo) {
				t.Fatalf("refused, but without naming %q: %v", tc.typo, err)
			}
		})
	}
}

// What the README and values.yaml tell an admin to set renders: the strict schema refuses typos,
// never a documented value.
func TestChartRendersDocumentedExamples(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
	}{
		{"the defaults", nil},
		{"Helm's global values, which a parent chart passes to driverset as its subchart", map[string]any{"global": map[string]any{"imageRegistry": "registry.example"}}},
		{"README: --set podSecurityContext.runAsUser=null (OpenShift)", map[string]any{"podSecurityContext": map[string]any{"runAsUser": nil}}},
		{"README: --set image.digest=sha256:...", map[string]any{"image": map[string]any{"digest": "sha256:" + strings.Repeat("0f", 32)}}},
		{"README: tls.mode cert-manager", map[string]any{"tls": map[string]any{"mode": "cert-manager"}}},
		{"values.yaml: networkPolicy with webhookFrom and metricsFrom", map[string]any{"networkPolicy": map[string]any{
			"enabled":     true,
			"webhookFrom": []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/28"}}},
			"metricsFrom": []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "monitoring"}}}},
		}}},
		{"docs/observability.md: every monitoring object, with labels for Prometheus's selectors", map[string]any{"metrics": map[string]any{
			"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "kube-prometheus-stack"}, "interval": "30s"},
			"prometheusRule": map[string]any{"enabled": true, "labels": map[string]any{"release": "kube-prometheus-stack"}},
			"dashboard":      map[string]any{"enabled": true},
		}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := renderChart(t, systemNamespace, tc.values); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Every `--set` the docs give an admin renders, with the other `--set`s of the same command: the
// README's, the chart README's and docs/'s. Those with a placeholder (…, <...>) are skipped; the
// one shown as refused (a typo) must be refused.
func TestChartRendersEveryDocumentedSet(t *testing.T) {
	root := moduleRoot(t)
	files := []string{"README.md", "charts/driverset/README.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		rel, _ := filepath.Rel(root, d)
		files = append(files, rel)
	}
	refused := map[string]bool{"replica=3": true}
	setFlag := regexp.MustCompile("--set[ =]([^ `]+)")
	found := 0
	for _, file := range files {
		data, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		// One command per line, a shell line continuation (\) joining the next; n is where it starts.
		lines := strings.Split(string(data), "\n")
		for n := 0; n < len(lines); n++ {
			start, line := n, lines[n]
			for strings.HasSuffix(line, "\\") && n+1 < len(lines) {
				n++
				line = strings.TrimSuffix(line, "\\") + " " + lines[n]
			}
			var sets []string
			for _, m := range setFlag.FindAllStringSubmatch(line, -1) {
				arg := strings.ReplaceAll(m[1], "'", "") // the shell's quotes
				if strings.ContainsAny(arg, "…<") || strings.Contains(arg, "...") {
					continue
				}
				sets = append(sets, arg)
			}
			if len(sets) == 0 {
				continue
			}
			found++
			name := fmt.Sprintf("%s:%d %s", file, start+1, strings.Join(sets, " "))
			t.Run(name, func(t *testing.T) {
				values := map[string]any{}
				wantRefused := false
				for _, arg := range sets {
					wantRefused = wantRefused || refused[arg]
					if err := strvals.ParseInto(arg, values); err != nil {
						t.Fatalf("--set %s: %v", arg, err)
					}
				}
				_, err := renderChart(t, systemNamespace, values)
				switch {
				case wantRefused && err == nil:
					t.Fatal("rendered; the docs say it is refused")
				case !wantRefused && err != nil:
					t.Fatal(err)
				}
			})
		}
	}
	if found == 0 {
		t.Fatal("no --set found in the docs: the test reads nothing")
	}
}

// The template itself refuses an unknown TLS mode, for `helm install --skip-schema-validation`.
func TestChartTemplateRefusesUnknownTLSMode(t *testing.T) {
	ch, err := loader.Load(filepath.Join(moduleRoot(t), "charts", "driverset"))
	if err != nil {
		t.Fatal(err)
	}
	vals, err := chartutil.ToRenderValuesWithSchemaValidation(ch, map[string]any{"tls": map[string]any{"mode": "none"}},
		chartutil.ReleaseOptions{Name: "driverset", Namespace: systemNamespace}, chartutil.DefaultCapabilities, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine.Render(ch, vals); err == nil || !strings.Contains(err.Error(), "tls.mode") {
		t.Fatalf("want an error naming tls.mode, got %v", err)
	}
}

// ruleAlerts are the names of the alerts of a PrometheusRule.
func ruleAlerts(t *testing.T, rule *unstructured.Unstructured) map[string]bool {
	t.Helper()
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	alerts := map[string]bool{}
	for _, g := range groups {
		rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, r := range rules {
			if name, ok := r.(map[string]any)["alert"].(string); ok {
				alerts[name] = true
			}
		}
	}
	return alerts
}

// serviceMonitorEndpoint is the ServiceMonitor's one endpoint.
func serviceMonitorEndpoint(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	eps, _, _ := unstructured.NestedSlice(find(t, objs, "ServiceMonitor", "driverset").Object, "spec", "endpoints")
	if len(eps) != 1 {
		t.Fatalf("ServiceMonitor endpoints %v, want one", eps)
	}
	return eps[0].(map[string]any)
}

// webhookContainerPort is the driverset container's port named webhook.
func webhookContainerPort(t *testing.T, pod map[string]any) map[string]any {
	t.Helper()
	ports, _, _ := unstructured.NestedSlice(container(t, pod), "ports")
	for _, p := range ports {
		if m := p.(map[string]any); m["name"] == "webhook" {
			return m
		}
	}
	t.Fatalf("no port named webhook in %v", ports)
	return nil
}

func webhooks(t *testing.T, objs []*unstructured.Unstructured) []map[string]any {
	t.Helper()
	raw, _, _ := unstructured.NestedSlice(find(t, objs, "MutatingWebhookConfiguration", "driverset").Object, "webhooks")
	hooks := make([]map[string]any, 0, len(raw))
	for _, h := range raw {
		hooks = append(hooks, h.(map[string]any))
	}
	return hooks
}

func webhookNames(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	var names []string
	for _, h := range webhooks(t, objs) {
		names = append(names, fmt.Sprint(h["name"]))
	}
	return names
}

// scoped says whether a kind the chart renders lives in a namespace.
func scoped(kind string) bool {
	switch kind {
	case "ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration", "Namespace",
		"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
		return false
	}
	return true
}

// expect compares as JSON: decoded YAML numbers are float64, the tables' are int.
func expect(t *testing.T, obj map[string]any, want any, path ...string) {
	t.Helper()
	got, found, err := unstructured.NestedFieldNoCopy(obj, path...)
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if err != nil || !found || string(g) != string(w) {
		t.Errorf("%s = %s (found %v, %v), want %s", strings.Join(path, "."), g, found, err, w)
	}
}

// mountedFrom says what the file at path of container comes from: "ConfigMap <name> key <key>",
// or "" when no volume of pod mounts it.
func mountedFrom(t *testing.T, pod map[string]any, container, path string) string {
	t.Helper()
	containers, _, _ := unstructured.NestedSlice(pod, "containers")
	volumes, _, _ := unstructured.NestedSlice(pod, "volumes")
	for _, c := range containers {
		if c.(map[string]any)["name"] != container {
			continue
		}
		mounts, _, _ := unstructured.NestedSlice(c.(map[string]any), "volumeMounts")
		for _, m := range mounts {
			m := m.(map[string]any)
			dir := strings.TrimSuffix(m["mountPath"].(string), "/") + "/"
			rest, ok := strings.CutPrefix(path, dir)
			if !ok {
				continue
			}
			for _, v := range volumes {
				v := v.(map[string]any)
				if v["name"] != m["name"] {
					continue
				}
				cm, _, _ := unstructured.NestedMap(v, "configMap")
				items, _, _ := unstructured.NestedSlice(v, "configMap", "items")
				for _, it := range items {
					if it.(map[string]any)["path"] == rest {
						return fmt.Sprintf("ConfigMap %s key %s", cm["name"], it.(map[string]any)["key"])
					}
				}
				return fmt.Sprintf("volume %s without %s", m["name"], rest)
			}
		}
	}
	return ""
}
