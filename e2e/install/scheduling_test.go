//go:build testbed

package install

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/driverset/driverset/e2e/testbed"
)

// The scheduling components, on top of the default install (a throw-away kustomization, as an
// admin's own overlay would be).
func renderWithComponents(t *testing.T, components ...string) []*unstructured.Unstructured {
	t.Helper()
	return renderOverlay(t, components, "")
}

// renderOverlay is renderWithComponents with more of a kustomization (patches:, say) after them.
func renderOverlay(t *testing.T, components []string, more string) []*unstructured.Unstructured {
	t.Helper()
	dir := t.TempDir()
	// kustomize takes no absolute path to a kustomization.
	manifests, err := filepath.Rel(dir, filepath.Join(moduleRoot(t), "manifests"))
	if err != nil {
		t.Fatal(err)
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - " +
		filepath.Join(manifests, "overlays", "self-managed") + "\ncomponents:\n"
	for _, c := range components {
		k += "  - " + filepath.Join(manifests, "components", c) + "\n"
	}
	k += more
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl(t), "kustomize", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v\n%s", err, out)
	}
	return decodeBytes(t, out)
}

// requiredTerm is the required anti-affinity both installs give driverset's pods: never two on one node.
func requiredTerm() map[string]any {
	return map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": []any{map[string]any{
		"topologyKey":   "kubernetes.io/hostname",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "driverset"}},
	}}}
}

// Helm's podAntiAffinity and priorityClass values, read as the spec of where driverset's pods run.
func TestChartScheduling(t *testing.T) {
	preferred := map[string]any{"preferredDuringSchedulingIgnoredDuringExecution": []any{map[string]any{
		"weight": int64(100),
		"podAffinityTerm": map[string]any{
			"topologyKey":   "kubernetes.io/hostname",
			"labelSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "driverset"}},
		},
	}}}
	// A rollout that adds no pod first: with required anti-affinity and as many nodes as
	// replicas, a surge pod has no node and (maxUnavailable rounds down to 0) the rollout stalls.
	oneAtATime := map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxSurge": int64(0), "maxUnavailable": int64(1)}}
	zone := map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
		"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "pool", "operator": "In", "values": []any{"system"}}}}},
	}}}
	for _, tc := range []struct {
		name         string
		values       map[string]any
		antiAffinity any    // the pod's affinity.podAntiAffinity; nil: none
		nodeAffinity any    // the pod's affinity.nodeAffinity; nil: none
		strategy     any    // the Deployment's strategy; nil: Kubernetes' default
		priority     string // the pod's priorityClassName
		priorityObj  bool   // a PriorityClass driverset is made
	}{
		{name: "default: preferred, no priority", antiAffinity: preferred},
		{name: "required", values: map[string]any{"podAntiAffinity": "required"}, antiAffinity: requiredTerm(), strategy: oneAtATime},
		{name: "none", values: map[string]any{"podAntiAffinity": ""}},
		{name: "the admin's affinity is kept beside it", values: map[string]any{"podAntiAffinity": "required", "affinity": zone},
			antiAffinity: requiredTerm(), nodeAffinity: zone["nodeAffinity"], strategy: oneAtATime},
		{name: "the admin's own podAntiAffinity wins", values: map[string]any{"podAntiAffinity": "required",
			"affinity": map[string]any{"podAntiAffinity": preferred}}, antiAffinity: preferred, strategy: oneAtATime},
		{name: "a PriorityClass of driverset's own", values: map[string]any{"priorityClass": map[string]any{"create": true}},
			antiAffinity: preferred, priority: "driverset", priorityObj: true},
		{name: "the admin's PriorityClass", values: map[string]any{"priorityClassName": "system-cluster-critical"},
			antiAffinity: preferred, priority: "system-cluster-critical"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := mustRenderChart(t, systemNamespace, tc.values)
			deploy := find(t, objs, "Deployment", "driverset")
			pod := podSpec(t, deploy)
			anti, _, _ := unstructured.NestedFieldNoCopy(pod, "affinity", "podAntiAffinity")
			if !sameJSON(anti, tc.antiAffinity) {
				t.Errorf("podAntiAffinity\n%s\nwant\n%s", toYAML(anti), toYAML(tc.antiAffinity))
			}
			node, _, _ := unstructured.NestedFieldNoCopy(pod, "affinity", "nodeAffinity")
			if !sameJSON(node, tc.nodeAffinity) {
				t.Errorf("nodeAffinity\n%s\nwant\n%s", toYAML(node), toYAML(tc.nodeAffinity))
			}
			if strategy, _, _ := unstructured.NestedFieldNoCopy(deploy.Object, "spec", "strategy"); !sameJSON(strategy, tc.strategy) {
				t.Errorf("strategy %s, want %s", toYAML(strategy), toYAML(tc.strategy))
			}
			if got, _ := pod["priorityClassName"].(string); got != tc.priority {
				t.Errorf("priorityClassName %q, want %q", got, tc.priority)
			}
			var pcs []*unstructured.Unstructured
			for _, u := range objs {
				if u.GetKind() == "PriorityClass" {
					pcs = append(pcs, u)
				}
			}
			if tc.priorityObj != (len(pcs) == 1) || len(pcs) > 1 {
				t.Fatalf("%d PriorityClasses, want one: %v", len(pcs), tc.priorityObj)
			}
			if tc.priorityObj {
				v, _ := pcs[0].Object["value"].(float64) // YAML numbers decode as float64
				if pcs[0].GetName() != "driverset" || v <= 0 || v > 1e9 {
					t.Errorf("PriorityClass %s of value %v, want driverset, above 0 and within the user range (1e9)", pcs[0].GetName(), v)
				}
			}
		})
	}
}

// The kustomize components make what the chart's values make.
func TestSchedulingComponentsMatchTheChart(t *testing.T) {
	for _, tc := range []struct {
		components []string
		values     map[string]any
	}{
		{[]string{"required-anti-affinity"}, map[string]any{"podAntiAffinity": "required"}},
		{[]string{"priority-class"}, map[string]any{"priorityClass": map[string]any{"create": true}}},
		{[]string{"required-anti-affinity", "priority-class"}, map[string]any{"podAntiAffinity": "required", "priorityClass": map[string]any{"create": true}}},
	} {
		t.Run(toYAML(tc.components), func(t *testing.T) {
			expectChartMakes(t, mustRenderChart(t, systemNamespace, tc.values), renderWithComponents(t, tc.components...))
		})
	}
}

// With both components on two KWOK nodes, driverset's two replicas run on two nodes at the
// PriorityClass's priority, and a rollout (a new pod template) finishes: the required
// anti-affinity cannot stall it with as many nodes as replicas.
func TestRequiredAntiAffinityOnTwoNodes(t *testing.T) {
	objs := renderWithComponents(t, "required-anti-affinity", "priority-class")
	c := testbed.StartT(t, testbed.Options{Nodes: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	a := newApplier(t, c.Config)
	applyAll(ctx, t, a, objs, false)
	spread := func(what string) {
		t.Helper()
		waitDeploymentAvailable(ctx, t, a, 2)
		pods, err := c.Client.CoreV1().Pods(systemNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=driverset"})
		if err != nil {
			t.Fatal(err)
		}
		nodes := map[string]bool{}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
				continue
			}
			nodes[p.Spec.NodeName] = true
			if p.Spec.PriorityClassName != "driverset" || p.Spec.Priority == nil || *p.Spec.Priority <= 0 {
				t.Errorf("%s: priority class %q, priority %v", p.Name, p.Spec.PriorityClassName, p.Spec.Priority)
			}
		}
		if len(nodes) != 2 {
			t.Errorf("%s: running replicas on nodes %v, want two nodes", what, nodes)
		}
		t.Logf("%s: replicas on %v", what, nodes)
	}
	spread("installed")
	patch := `{"spec":{"template":{"metadata":{"annotations":{"driverset.dev/rollout":"` + time.Now().Format(time.RFC3339Nano) + `"}}}}}`
	if _, err := c.Client.AppsV1().Deployments(systemNamespace).Patch(ctx, "driverset", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	spread("after a rollout")
}

// sameJSON compares as JSON: YAML gives float64 where the test's literals are int64.
func sameJSON(a, b any) bool {
	_, ok := contains(a, b)
	_, back := contains(b, a)
	return ok && back
}
