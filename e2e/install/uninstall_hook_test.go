//go:build testbed

package install

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const cleanupName = "driverset-uninstall-cleanup"

// hookRights is every permission the pre-delete hook's ServiceAccount may hold, in each namespace
// driverset serves: pods and StatefulSets read (list by label, a get after a concurrent write) and
// patched (the finalizer off). Nothing else: no delete, no update of a whole object, no Secrets.
func hookRights(namespaces []string) map[grant]struct{} {
	out := map[grant]struct{}{}
	for _, ns := range namespaces {
		for _, gr := range [][2]string{{"", "pods"}, {"apps", "statefulsets"}} {
			for _, verb := range []string{"get", "list", "patch"} {
				out[grant{ns, gr[0], gr[1], verb, ""}] = struct{}{}
			}
		}
	}
	return out
}

// `helm uninstall` runs `driverset uninstall-cleanup` from driverset's own image, as a Job whose
// ServiceAccount may do exactly what the command does, where driverset serves, before it deletes
// anything and again after (for what the webhook and the controller made in between); all of it is
// a hook, deleted once it succeeded, and `helm install` makes none of it. (What the
// command does to a cluster: e2e's TestUninstallCleanupReleasesStrandedPods.)
func TestChartUninstallHook(t *testing.T) {
	image := map[string]any{"repository": "registry.example/driverset", "tag": "v1.2.3"}
	for _, tc := range []struct {
		name   string
		values map[string]any
		served []string // "" is cluster-wide
		args   []any
	}{
		{"cluster-wide", map[string]any{"image": image}, []string{""},
			[]any{"uninstall-cleanup", "--timeout=300s"}},
		{"watchNamespaces", map[string]any{"image": image, "watchNamespaces": []any{"spark-x", "spark-y"},
			"tests": map[string]any{"namespace": "spark-x"}, "uninstallCleanup": map[string]any{"enabled": true, "timeoutSeconds": 60}},
			[]string{"spark-x", "spark-y"}, []any{"uninstall-cleanup", "--namespaces=spark-x,spark-y", "--timeout=60s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := renderChartUninstallHook(t, systemNamespace, tc.values)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"ClusterRole//" + cleanupName, "Job/" + systemNamespace + "/" + cleanupName,
				"ServiceAccount/" + systemNamespace + "/" + cleanupName}
			for _, ns := range tc.served {
				if ns == "" {
					want = append(want, "ClusterRoleBinding//"+cleanupName)
				} else {
					want = append(want, "RoleBinding/"+ns+"/"+cleanupName)
				}
			}
			slices.Sort(want)
			if got := keys(objs); !slices.Equal(got, want) {
				t.Fatalf("helm uninstall's hook makes %v, want %v", got, want)
			}
			for _, u := range objs {
				expect(t, u.Object, "pre-delete,post-delete", "metadata", "annotations", "helm.sh/hook")
				expect(t, u.Object, "before-hook-creation,hook-succeeded", "metadata", "annotations", "helm.sh/hook-delete-policy")
			}
			// The RBAC is made before the Job (a lower weight).
			expect(t, find(t, objs, "ClusterRole", cleanupName).Object, "-10", "metadata", "annotations", "helm.sh/hook-weight")
			expect(t, find(t, objs, "Job", cleanupName).Object, "0", "metadata", "annotations", "helm.sh/hook-weight")

			wantGrants(t, grantsTo(t, objs, cleanupName), hookRights(tc.served), "uninstall-cleanup")

			spec, _, _ := unstructured.NestedMap(find(t, objs, "Job", cleanupName).Object, "spec", "template", "spec")
			expect(t, spec, cleanupName, "serviceAccountName")
			expect(t, spec, "Never", "restartPolicy")
			c := container(t, spec)
			expect(t, c, "registry.example/driverset:v1.2.3", "image")
			expect(t, c, tc.args, "args")
			// Pod Security restricted, as driverset's own pods: the release namespace enforces it.
			expect(t, spec, true, "securityContext", "runAsNonRoot")
			expect(t, c, []any{"ALL"}, "securityContext", "capabilities", "drop")
			expect(t, c, false, "securityContext", "allowPrivilegeEscalation")

			// No selector of the install picks the hook's pod: a running pod the webhook Services
			// selected would be sent admission reviews it cannot answer (Fail: refused).
			podLabels, _, _ := unstructured.NestedStringMap(find(t, objs, "Job", cleanupName).Object, "spec", "template", "metadata", "labels")
			install := mustRenderChart(t, systemNamespace, withAllObjects(tc.values))
			for _, u := range install {
				if u.GetName() == cleanupName {
					t.Errorf("helm install would make %s", key(u))
				}
			}
			expectNotSelected(t, install, "the hook's pod", podLabels)
		})
	}
	t.Run("turned off", func(t *testing.T) {
		objs, err := renderChartUninstallHook(t, systemNamespace, map[string]any{"uninstallCleanup": map[string]any{"enabled": false, "timeoutSeconds": 300}})
		if err != nil {
			t.Fatal(err)
		}
		if len(objs) != 0 {
			t.Errorf("uninstallCleanup.enabled=false still makes %v", keys(objs))
		}
	})
}

// withAllObjects is values with every optional object of the install on (metrics Service,
// NetworkPolicy, PodDisruptionBudget), so that each selector is checked.
func withAllObjects(values map[string]any) map[string]any {
	out := map[string]any{"networkPolicy": map[string]any{"enabled": true, "webhookFrom": []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/24"}}}}}
	for k, v := range values {
		out[k] = v
	}
	return out
}

// expectNotSelected fails for each Service, PodDisruptionBudget or NetworkPolicy of objs whose
// selector picks a pod labelled podLabels: a running hook pod the webhook Services selected would be
// sent admission reviews it cannot answer (Fail: refused), and one the PodDisruptionBudget selected
// would count as a driverset replica.
func expectNotSelected(t *testing.T, objs []*unstructured.Unstructured, pod string, podLabels map[string]string) {
	t.Helper()
	for _, u := range objs {
		for _, path := range [][]string{{"spec", "selector"}, {"spec", "selector", "matchLabels"}, {"spec", "podSelector", "matchLabels"}} {
			sel, found, _ := unstructured.NestedStringMap(u.Object, path...)
			if found && len(sel) > 0 && selects(sel, podLabels) {
				t.Errorf("%s selects %s (labels %v) by %v", key(u), pod, podLabels, sel)
			}
		}
	}
}

func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}
