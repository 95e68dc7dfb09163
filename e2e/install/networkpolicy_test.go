//go:build testbed

package install

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The chart's NetworkPolicy (issue 11, exposure), render-tested only: neither KWOK nodes nor the
// real nodes' bridge CNI enforce NetworkPolicy, so the test bed cannot show it refusing a packet.
// It opens the webhook port to the apiserver's addresses alone, the metrics port to the given
// scrapers alone, and names ports the Deployment really has on the pods it really runs.
func TestChartNetworkPolicy(t *testing.T) {
	controlPlane := []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/28"}}}
	monitoring := []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "monitoring"}}}}
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   []any // the ingress rules; nil: no NetworkPolicy
	}{
		{name: "off by default"},
		{name: "webhook and metrics", values: map[string]any{"enabled": true, "webhookFrom": controlPlane, "metricsFrom": monitoring},
			want: []any{rule("webhook", controlPlane), rule("metrics", monitoring)}},
		{name: "no scrapers: metrics closed", values: map[string]any{"enabled": true, "webhookFrom": controlPlane},
			want: []any{rule("webhook", controlPlane)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var values map[string]any
			if tc.values != nil {
				values = map[string]any{"networkPolicy": tc.values}
			}
			objs := mustRenderChart(t, systemNamespace, values)
			var policies []*unstructured.Unstructured
			for _, u := range objs {
				if u.GetKind() == "NetworkPolicy" {
					policies = append(policies, u)
				}
			}
			if tc.want == nil {
				if len(policies) != 0 {
					t.Fatalf("renders %d NetworkPolicies, want none", len(policies))
				}
				return
			}
			if len(policies) != 1 {
				t.Fatalf("renders %d NetworkPolicies, want 1", len(policies))
			}
			np := policies[0].Object
			expect(t, np, []any{"Ingress"}, "spec", "policyTypes")
			expect(t, np, tc.want, "spec", "ingress")
			deploy := find(t, objs, "Deployment", "driverset")
			podLabels, _, _ := unstructured.NestedStringMap(deploy.Object, "spec", "template", "metadata", "labels")
			selector, _, _ := unstructured.NestedStringMap(np, "spec", "podSelector", "matchLabels")
			if len(selector) == 0 {
				t.Fatal("the NetworkPolicy selects no pods by label")
			}
			for k, v := range selector {
				if podLabels[k] != v {
					t.Errorf("the NetworkPolicy selects %s=%s, which driverset's pods (%v) do not carry", k, v, podLabels)
				}
			}
			ports := map[string]bool{}
			containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				cps, _, _ := unstructured.NestedSlice(c.(map[string]any), "ports")
				for _, p := range cps {
					ports[p.(map[string]any)["name"].(string)] = true
				}
			}
			for _, r := range tc.want {
				name := r.(map[string]any)["ports"].([]any)[0].(map[string]any)["port"].(string)
				if !ports[name] {
					t.Errorf("the NetworkPolicy opens port %q, which driverset's container does not name (%v)", name, ports)
				}
			}
		})
	}
	_, err := renderChart(t, systemNamespace, map[string]any{"networkPolicy": map[string]any{"enabled": true}})
	if err == nil || !strings.Contains(err.Error(), "networkPolicy.webhookFrom") {
		t.Errorf("enabled without webhookFrom: %v, want a render error naming networkPolicy.webhookFrom", err)
	}
}

func rule(port string, from []any) any {
	return map[string]any{"ports": []any{map[string]any{"port": port, "protocol": "TCP"}}, "from": from}
}

// The kustomize component makes the chart's NetworkPolicy once the admin names the apiserver's
// addresses (and any scrapers) in a patch of their own overlay; left unpatched, the webhook port
// is open only to a documentation address (RFC 5737) that no apiserver has: closed, not open to all.
func TestKustomizeNetworkPolicy(t *testing.T) {
	controlPlane := []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/28"}}}
	monitoring := []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "monitoring"}}}}
	const webhookFrom = `
patches:
  - target: {kind: NetworkPolicy, name: driverset}
    patch: |
      - {op: replace, path: /spec/ingress/0/from, value: [{ipBlock: {cidr: 10.0.0.0/28}}]}
`
	const metricsFrom = `      - op: add
        path: /spec/ingress/-
        value:
          ports: [{port: metrics, protocol: TCP}]
          from: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]
`
	for _, tc := range []struct {
		name   string
		patch  string
		values map[string]any // the chart's networkPolicy values for the same rules; nil: none
		want   []any
	}{
		{name: "unpatched: closed", want: []any{rule("webhook", []any{map[string]any{"ipBlock": map[string]any{"cidr": "192.0.2.0/32"}}})}},
		{name: "webhook", patch: webhookFrom, values: map[string]any{"enabled": true, "webhookFrom": controlPlane},
			want: []any{rule("webhook", controlPlane)}},
		{name: "webhook and metrics", patch: webhookFrom + metricsFrom,
			values: map[string]any{"enabled": true, "webhookFrom": controlPlane, "metricsFrom": monitoring},
			want:   []any{rule("webhook", controlPlane), rule("metrics", monitoring)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := renderOverlay(t, []string{"network-policy"}, tc.patch)
			np := find(t, objs, "NetworkPolicy", "driverset")
			if np.GetNamespace() != systemNamespace {
				t.Errorf("NetworkPolicy in %q, want %s", np.GetNamespace(), systemNamespace)
			}
			expect(t, np.Object, tc.want, "spec", "ingress")
			if tc.values == nil {
				return
			}
			chart := find(t, mustRenderChart(t, systemNamespace, map[string]any{"networkPolicy": tc.values}), "NetworkPolicy", "driverset")
			compareObject(t, key(np), chart, np)
		})
	}
}
