//go:build testbed

package install

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/driverset/driverset/e2e/harness"
)

const monitoringDir = "manifests/components/monitoring"

// ruleSpec is the spec of the one PrometheusRule file: Prometheus's own rule-file format.
func ruleSpec(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), monitoringDir, "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rule map[string]any
	if err := yaml.Unmarshal(data, &rule); err != nil {
		t.Fatal(err)
	}
	spec, ok := rule["spec"].(map[string]any)
	if !ok {
		t.Fatal("prometheusrule.yaml has no spec")
	}
	return spec
}

// promtool runs promtool (hack/prometheus-build.sh) with args in dir.
func promtool(t *testing.T, dir string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	bin, err := harness.PrometheusBin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "promtool"), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	t.Logf("promtool %v:\n%s", args, out)
	if err != nil {
		t.Fatalf("promtool %v: %v", args, err)
	}
}

// The alerts are valid Prometheus rules, and each one fires in promtool's unit tests
// (rules_test.yaml): only when it should.
func TestAlertRulesFire(t *testing.T) {
	dir := t.TempDir()
	rules, err := yaml.Marshal(ruleSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join(moduleRoot(t), monitoringDir, "rules_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules_test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	promtool(t, dir, "check", "rules", "rules.yaml")
	promtool(t, dir, "test", "rules", "rules_test.yaml")
}

// The kustomize component and the chart install the same rules, from the same file, and the
// monitoring objects only when asked.
func TestMonitoringManifests(t *testing.T) {
	want := ruleSpec(t)
	kustomized := render(t, "overlays/monitoring")
	chart := mustRenderChart(t, systemNamespace, map[string]any{"metrics": map[string]any{
		"serviceMonitor": map[string]any{"enabled": true},
		"prometheusRule": map[string]any{"enabled": true},
		"dashboard":      map[string]any{"enabled": true},
	}})
	for name, objs := range map[string][]*unstructured.Unstructured{"overlays/monitoring": kustomized, "chart": chart} {
		rule := find(t, objs, "PrometheusRule", "driverset")
		if rule.GetNamespace() != systemNamespace {
			t.Errorf("%s: PrometheusRule in namespace %q", name, rule.GetNamespace())
		}
		if got := rule.Object["spec"]; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the PrometheusRule's spec differs from %s/prometheusrule.yaml", name, monitoringDir)
		}
		sm := find(t, objs, "ServiceMonitor", "driverset")
		port, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		if len(port) != 1 || port[0].(map[string]any)["port"] != "https-metrics" || port[0].(map[string]any)["scheme"] != "https" {
			t.Errorf("%s: ServiceMonitor endpoints %v, want https-metrics over https", name, port)
		}
		dash := find(t, objs, "ConfigMap", "driverset-dashboard")
		data, _, _ := unstructured.NestedString(dash.Object, "data", "driverset.json")
		file, err := os.ReadFile(filepath.Join(moduleRoot(t), monitoringDir, "dashboard.json"))
		if err != nil {
			t.Fatal(err)
		}
		if data != string(file) || dash.GetLabels()["grafana_dashboard"] != "1" {
			t.Errorf("%s: the dashboard ConfigMap is not dashboard.json with the label grafana_dashboard", name)
		}
		svc := find(t, objs, "Service", "driverset-metrics")
		if svc.GetLabels()["app.kubernetes.io/component"] != "metrics" {
			t.Errorf("%s: the metrics Service lacks the label the ServiceMonitor selects", name)
		}
	}
	// Off by default: the chart's defaults need no Prometheus operator.
	for _, u := range mustRenderChart(t, systemNamespace, nil) {
		if u.GetKind() == "ServiceMonitor" || u.GetKind() == "PrometheusRule" || u.GetName() == "driverset-dashboard" {
			t.Errorf("the chart's defaults render %s", key(u))
		}
	}
}

// runbookBase is where every alert's runbook_url points: a section of docs/runbooks.md.
const runbookBase = "https://github.com/driverset/driverset/blob/main/docs/runbooks.md#"

// alertRules are the alerting rules of prometheusrule.yaml, by alert name.
func alertRules(t *testing.T) map[string]map[string]any {
	t.Helper()
	groups, _ := ruleSpec(t)["groups"].([]any)
	alerts := map[string]map[string]any{}
	for _, g := range groups {
		rules, _ := g.(map[string]any)["rules"].([]any)
		for _, r := range rules {
			rule := r.(map[string]any)
			if name, ok := rule["alert"].(string); ok {
				alerts[name] = rule
			}
		}
	}
	if len(alerts) == 0 {
		t.Fatal("prometheusrule.yaml has no alerts")
	}
	return alerts
}

// Every alert carries a runbook_url, and it leads to a section of docs/runbooks.md named after
// the alert (GitHub's anchor for "## <Alert>" is its lower-cased name) that says what the alert
// means, how to check it and what to do.
func TestEveryAlertHasARunbook(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "docs", "runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	for _, part := range strings.Split("\n"+string(data), "\n## ")[1:] {
		title, body, _ := strings.Cut(part, "\n")
		sections[strings.ToLower(strings.TrimSpace(title))] = body
	}
	for name, rule := range alertRules(t) {
		annotations, _ := rule["annotations"].(map[string]any)
		url, _ := annotations["runbook_url"].(string)
		if want := runbookBase + strings.ToLower(name); url != want {
			t.Errorf("%s: runbook_url %q, want %q", name, url, want)
			continue
		}
		body, ok := sections[strings.ToLower(name)]
		if !ok {
			t.Errorf("%s: docs/runbooks.md has no section \"## %s\"", name, name)
			continue
		}
		for _, part := range []string{"**What it means.**", "**How to check.**", "**What to do.**"} {
			if !strings.Contains(body, part) {
				t.Errorf("%s: its runbook section lacks %s", name, part)
			}
		}
	}
	alerts := alertRules(t)
	names := map[string]bool{}
	for name := range alerts {
		names[strings.ToLower(name)] = true
	}
	for title := range sections {
		if !names[title] {
			t.Errorf("docs/runbooks.md has a section %q for no alert", title)
		}
	}
}

// rules_test.yaml tests every alert both ways: at some eval_time it fires (exp_alerts not empty)
// and at another it does not (exp_alerts empty). An alert added without both stays untested here
// even though promtool passes.
func TestEveryAlertIsTestedFiringAndNot(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), monitoringDir, "rules_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range file.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	for name := range alertRules(t) {
		if !fires[name] {
			t.Errorf("%s: rules_test.yaml never expects it to fire", name)
		}
		if !silent[name] {
			t.Errorf("%s: rules_test.yaml never expects it to stay silent", name)
		}
	}
}

// The kustomize way to a token Secret of its own (manifests/components/monitoring-token-secret,
// after the monitoring component) makes what the chart's metrics.serviceMonitor.tokenSecret.create
// does: the scraper's ServiceAccount, its token Secret, its binding to driverset-metrics-reader, and
// a ServiceMonitor that sends that token instead of reading Prometheus's own from a file.
func TestMonitoringTokenSecretComponent(t *testing.T) {
	root := moduleRoot(t)
	dir := t.TempDir()
	// kustomize takes relative paths only.
	rel := func(path string) string {
		r, err := filepath.Rel(dir, filepath.Join(root, "manifests", path))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [%s]
components: [%s]
`, rel("overlays/monitoring"), rel("components/monitoring-token-secret"))
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl(t), "kustomize", dir).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("kubectl kustomize: %v: %s", err, stderr)
	}
	kustomized, err := harness.Decode(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	chart := mustRenderChart(t, systemNamespace, map[string]any{"metrics": map[string]any{
		"serviceMonitor": map[string]any{"enabled": true, "tokenSecret": map[string]any{"create": true}},
	}})
	for _, kn := range [][2]string{
		{"ServiceAccount", "driverset-metrics-scraper"},
		{"Secret", "driverset-metrics-token"},
		{"ClusterRoleBinding", "driverset-metrics-scraper"},
		{"ServiceMonitor", "driverset"},
	} {
		k, c := find(t, kustomized, kn[0], kn[1]), find(t, chart, kn[0], kn[1])
		for _, field := range [][]string{{"spec"}, {"type"}, {"roleRef"}, {"subjects"}, {"automountServiceAccountToken"}, {"metadata", "annotations"}, {"metadata", "namespace"}} {
			kv, _, _ := unstructured.NestedFieldNoCopy(k.Object, field...)
			cv, _, _ := unstructured.NestedFieldNoCopy(c.Object, field...)
			if !reflect.DeepEqual(kv, cv) {
				t.Errorf("%s/%s %v: kustomize %s, chart %s", kn[0], kn[1], field, toYAML(kv), toYAML(cv))
			}
		}
	}
}

// The kustomize patch docs/observability.md gives for one's own token Secret renders, and makes the
// ServiceMonitor send that Secret's token and no token file.
func TestObservabilityDocsServiceMonitorPatch(t *testing.T) {
	root := moduleRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The one ```yaml block that starts with "patches:", unindented.
	var patch string
	for _, block := range strings.Split(string(doc), "```yaml\n")[1:] {
		body, _, _ := strings.Cut(block, "```")
		lines := strings.Split(body, "\n")
		indent := len(lines[0]) - len(strings.TrimLeft(lines[0], " "))
		if strings.TrimSpace(lines[0]) != "patches:" {
			continue
		}
		for _, l := range lines {
			if len(l) >= indent {
				l = l[indent:]
			}
			patch += l + "\n"
		}
	}
	if patch == "" {
		t.Fatal("docs/observability.md has no ```yaml block starting with patches:")
	}
	dir := t.TempDir()
	overlay, err := filepath.Rel(dir, filepath.Join(root, "manifests", "overlays", "monitoring"))
	if err != nil {
		t.Fatal(err)
	}
	kustomization := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [" + overlay + "]\n" + patch
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl(t), "kustomize", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize with the documented patch: %v: %s\n%s", err, out, kustomization)
	}
	objs, err := harness.Decode(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	ep := serviceMonitorEndpoint(t, objs)
	expect(t, ep, map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "my-token", "key": "token"}}, "authorization")
	if _, ok := ep["bearerTokenFile"]; ok {
		t.Errorf("the documented patch leaves bearerTokenFile: %v", ep)
	}
}
