//go:build testbed

package install

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// metricsJob is the job name every alert selects (`up{job="driverset-metrics"}` in DriversetDown):
// the ServiceMonitor's targets take it from the metrics Service's name, the PodMonitor's from a
// relabeling.
const metricsJob = "driverset-metrics"

// The chart's PodMonitor, for a Prometheus that selects PodMonitors only (issue 36, "and a
// PodMonitor"): it scrapes what the ServiceMonitor scrapes, with the same job name, and never
// with Prometheus's own token.
func TestChartPodMonitor(t *testing.T) {
	podMonitor := func(extra map[string]any) map[string]any {
		pm := map[string]any{"enabled": true}
		for k, v := range extra {
			pm[k] = v
		}
		return map[string]any{"metrics": map[string]any{"podMonitor": pm}}
	}
	tokenSecret := map[string]any{"tokenSecret": map[string]any{"create": true}}
	ownSecret := map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "scraper-token", "key": "token"}}
	tls := map[string]any{"ca": map[string]any{"secret": map[string]any{"name": "metrics-ca", "key": "ca.crt"}}, "serverName": "driverset"}

	t.Run("with a token Secret of its own: every replica's metrics port, over https, as the job the alerts select", func(t *testing.T) {
		objs, err := renderChart(t, systemNamespace, podMonitor(map[string]any{"tokenSecret": map[string]any{"create": true}, "labels": map[string]any{"release": "prom"}, "interval": "30s"}))
		if err != nil {
			t.Fatal(err)
		}
		pm := find(t, objs, "PodMonitor", "driverset")
		expect(t, pm.Object, "prom", "metadata", "labels", "release")
		expectSelectsDriversetPods(t, objs, pm)
		ep := podMetricsEndpoint(t, pm)
		expect(t, ep, "https", "scheme")
		expect(t, ep, "/metrics", "path")
		expect(t, ep, "30s", "interval")
		expect(t, ep, map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "driverset-metrics-token", "key": "token"}}, "authorization")
		expect(t, ep, map[string]any{"insecureSkipVerify": true}, "tlsConfig")
		expect(t, ep, []any{map[string]any{"action": "replace", "targetLabel": "job", "replacement": metricsJob}}, "relabelings")
		for _, field := range []string{"bearerTokenFile", "bearerTokenSecret"} {
			if _, ok := ep[field]; ok {
				t.Errorf("%s set: %v", field, ep[field])
			}
		}
		find(t, objs, "ServiceAccount", "driverset-metrics-scraper")
		find(t, objs, "Secret", "driverset-metrics-token")
		find(t, objs, "ClusterRoleBinding", "driverset-metrics-scraper")
		for _, u := range objs {
			if u.GetKind() == "ServiceMonitor" {
				t.Errorf("a ServiceMonitor beside the PodMonitor: %s", key(u))
			}
		}
		// The ServiceMonitor's job is the metrics Service's name: the same one.
		find(t, objs, "Service", metricsJob)
	})

	t.Run("with the admin's Secret and TLS settings: exactly those, no scraper of driverset's own", func(t *testing.T) {
		objs, err := renderChart(t, systemNamespace, podMonitor(map[string]any{"authorization": ownSecret, "tlsConfig": tls}))
		if err != nil {
			t.Fatal(err)
		}
		ep := podMetricsEndpoint(t, find(t, objs, "PodMonitor", "driverset"))
		expect(t, ep, ownSecret, "authorization")
		expect(t, ep, tls, "tlsConfig")
		for _, u := range objs {
			if u.GetName() == "driverset-metrics-scraper" || u.GetName() == "driverset-metrics-token" {
				t.Errorf("%s rendered without tokenSecret.create", key(u))
			}
		}
	})

	refused := []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"no way to authenticate: a PodMonitor has no token file to fall back on", podMonitor(nil), "give authorization or set tokenSecret.create"},
		{"both a Secret and a token Secret of its own", podMonitor(map[string]any{"authorization": ownSecret, "tokenSecret": map[string]any{"create": true}}), "not both"},
		{"beside the ServiceMonitor: each replica scraped twice", map[string]any{"metrics": map[string]any{
			"podMonitor":     map[string]any{"enabled": true, "tokenSecret": map[string]any{"create": true}},
			"serviceMonitor": map[string]any{"enabled": true},
		}}, "choose one"},
		{"a typo", podMonitor(map[string]any{"intervall": "30s", "tokenSecret": tokenSecret["tokenSecret"]}), "intervall"},
	}
	for _, tc := range refused {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			_, err := renderChart(t, systemNamespace, tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// expectSelectsDriversetPods checks that pm selects the Deployment's pods (its selector's labels
// are all on the pod template) and that the port it scrapes is the container's metrics port.
func expectSelectsDriversetPods(t *testing.T, objs []*unstructured.Unstructured, pm *unstructured.Unstructured) {
	t.Helper()
	deploy := find(t, objs, "Deployment", "driverset")
	podLabels, _, _ := unstructured.NestedStringMap(deploy.Object, "spec", "template", "metadata", "labels")
	selector, _, _ := unstructured.NestedStringMap(pm.Object, "spec", "selector", "matchLabels")
	if len(selector) == 0 {
		t.Fatal("the PodMonitor selects every pod of the namespace")
	}
	for k, v := range selector {
		if podLabels[k] != v {
			t.Errorf("the PodMonitor selects %s=%s; driverset's pods have %v", k, v, podLabels)
		}
	}
	port := podMetricsEndpoint(t, pm)["port"]
	containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	for _, c := range containers {
		ports, _, _ := unstructured.NestedSlice(c.(map[string]any), "ports")
		for _, p := range ports {
			if p.(map[string]any)["name"] == port {
				return
			}
		}
	}
	t.Errorf("the PodMonitor scrapes port %v, which no container of driverset names", port)
}

// podMetricsEndpoint is pm's one endpoint.
func podMetricsEndpoint(t *testing.T, pm *unstructured.Unstructured) map[string]any {
	t.Helper()
	eps, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
	if len(eps) != 1 {
		t.Fatalf("PodMonitor podMetricsEndpoints %v, want one", eps)
	}
	return eps[0].(map[string]any)
}
