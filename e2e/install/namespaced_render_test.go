//go:build testbed

package install

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// namespacedOverlayNamespaces are the namespaces overlays/namespaced lists (a fixture of the
// allow-list test; TestNamespacedInstallsAgree checks the overlay against it).
func namespacedOverlayNamespaces() []string { return []string{"spark-team-a", "spark-team-b"} }

// A namespaced install names its namespaces in three places — serve's --watch-namespaces, each
// webhook's namespaceSelector, the RoleBindings of ClusterRole driverset — and they must agree: a
// namespace in the selector but not the flag would be gated and never converted; one in the flag
// but without a RoleBinding would keep the caches from syncing. The chart, given the overlay's
// namespaces as watchNamespaces, makes the overlay's objects.
func TestNamespacedInstallsAgree(t *testing.T) {
	want := namespacedOverlayNamespaces()
	overlay := render(t, namespacedOverlay)
	chart := mustRenderChart(t, systemNamespace, map[string]any{
		"watchNamespaces": []any{want[0], want[1]}, "tests": map[string]any{"namespace": want[0]},
	})
	for name, objs := range map[string][]*unstructured.Unstructured{"overlay": overlay, "chart": chart} {
		t.Run(name, func(t *testing.T) {
			if got := watchFlag(t, find(t, objs, "Deployment", "driverset")); !reflect.DeepEqual(got, want) {
				t.Errorf("--watch-namespaces=%v, want %v", got, want)
			}
			for _, h := range webhooks(t, objs) {
				if got := selectorIn(t, h); !reflect.DeepEqual(got, want) {
					t.Errorf("webhook %s matches namespaces %v, want %v", h["name"], got, want)
				}
			}
			var bound []string
			for _, u := range objs {
				if u.GetKind() == "ClusterRoleBinding" && u.GetName() == "driverset" {
					t.Errorf("ClusterRole driverset is bound cluster-wide")
				}
				if ref, _, _ := unstructured.NestedString(u.Object, "roleRef", "name"); u.GetKind() == "RoleBinding" && ref == "driverset" {
					bound = append(bound, u.GetNamespace())
				}
			}
			sort.Strings(bound)
			if !reflect.DeepEqual(bound, want) {
				t.Errorf("ClusterRole driverset is bound in %v, want %v", bound, want)
			}
		})
	}
	t.Run("the chart makes the overlay's objects", func(t *testing.T) {
		expectChartMakes(t, chart, overlay)
	})
	t.Run("the helm test runs in a watched namespace", func(t *testing.T) {
		_, err := renderChartTests(t, systemNamespace, map[string]any{"watchNamespaces": []any{"spark-x"}})
		if err == nil || !strings.Contains(err.Error(), "tests.namespace") {
			t.Errorf("tests.namespace default outside watchNamespaces: %v, want a render error naming tests.namespace", err)
		}
	})
}

// selectorIn is the values of the webhook's `kubernetes.io/metadata.name In` expression, sorted.
func selectorIn(t *testing.T, hook map[string]any) []string {
	t.Helper()
	exprs, _, _ := unstructured.NestedSlice(hook, "namespaceSelector", "matchExpressions")
	var in []string
	for _, e := range exprs {
		m := e.(map[string]any)
		if m["key"] == "kubernetes.io/metadata.name" && m["operator"] == "In" {
			vals, _, _ := unstructured.NestedStringSlice(m, "values")
			in = append(in, vals...)
		}
	}
	sort.Strings(in)
	return in
}
