//go:build testbed

package install

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Every way in that runs driverset in the cluster (all but overlays/local, which runs it as a local
// process) gives it a memory limit and GOMEMLIMIT taken from it, so the Go heap is collected
// harder near the limit instead of growing past it, and GOGC=50, the setting the memory benchmark
// measures (docs/measurements.md#memory).
func TestEveryInstallSetsTheGoRuntimesMemorySettings(t *testing.T) {
	installs := map[string][]*unstructured.Unstructured{"install.yaml": readInstallYAML(t), namespacedOverlay: render(t, namespacedOverlay)}
	for _, dir := range kustomizations() {
		if dir != "overlays/local" {
			installs[dir] = render(t, dir)
		}
	}
	for _, mode := range []string{"self-managed", "cert-manager"} {
		installs["chart "+mode] = mustRenderChart(t, systemNamespace, map[string]any{"tls": map[string]any{"mode": mode}})
	}
	for name, objs := range installs {
		t.Run(name, func(t *testing.T) {
			c := container(t, podSpec(t, find(t, objs, "Deployment", "driverset")))
			if _, ok, _ := unstructured.NestedString(c, "resources", "limits", "memory"); !ok {
				t.Errorf("the driverset container has no memory limit: %s", toYAML(c["resources"]))
			}
			env, _ := c["env"].([]any)
			byName := map[string]map[string]any{}
			for _, e := range env {
				m, _ := e.(map[string]any)
				name, _ := m["name"].(string)
				byName[name] = m
			}
			if m, ok := byName["GOMEMLIMIT"]; ok {
				expect(t, m, "limits.memory", "valueFrom", "resourceFieldRef", "resource")
				expect(t, m, "driverset", "valueFrom", "resourceFieldRef", "containerName")
			} else {
				t.Errorf("no GOMEMLIMIT in the driverset container's env: %s", toYAML(env))
			}
			if m, ok := byName["GOGC"]; ok {
				expect(t, m, "50", "value")
			} else {
				t.Errorf("no GOGC in the driverset container's env: %s", toYAML(env))
			}
		})
	}
}
