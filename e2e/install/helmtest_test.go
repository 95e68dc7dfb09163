//go:build testbed

package install

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// `helm test driverset` makes a pod that runs `driverset check` from driverset's own image
// against tests.namespace, with a ServiceAccount allowed to create (dry-run) pods there and
// nowhere else; all of it is a test hook, deleted once it passed. (What the check does is shown
// on the test bed by e2e's TestPluginCheck, which runs the same code.)
func TestChartHelmTest(t *testing.T) {
	values := map[string]any{
		"tests": map[string]any{"namespace": "spark-jobs"},
		"image": map[string]any{"repository": "registry.example/driverset", "tag": "v1.2.3"},
	}
	objs, err := renderChartTests(t, systemNamespace, values)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := keys(objs), []string{
		"Pod/" + systemNamespace + "/driverset-test", "Role/spark-jobs/driverset-test",
		"RoleBinding/spark-jobs/driverset-test", "ServiceAccount/" + systemNamespace + "/driverset-test",
	}; !slices.Equal(got, want) {
		t.Fatalf("helm test makes %v, want %v", got, want)
	}
	for _, u := range objs {
		expect(t, u.Object, "test", "metadata", "annotations", "helm.sh/hook")
		expect(t, u.Object, "before-hook-creation,hook-succeeded", "metadata", "annotations", "helm.sh/hook-delete-policy")
	}
	pod := find(t, objs, "Pod", "driverset-test").Object
	spec, _, _ := unstructured.NestedMap(pod, "spec")
	expect(t, spec, "driverset-test", "serviceAccountName")
	expect(t, spec, "Never", "restartPolicy")
	c := container(t, spec)
	expect(t, c, "registry.example/driverset:v1.2.3", "image")
	expect(t, c, []any{"check", "--namespace=spark-jobs"}, "args")
	// Pod Security restricted, as driverset's own pods: the release namespace enforces it.
	expect(t, spec, true, "securityContext", "runAsNonRoot")
	expect(t, c, []any{"ALL"}, "securityContext", "capabilities", "drop")
	expect(t, find(t, objs, "Role", "driverset-test").Object, []any{map[string]any{
		"apiGroups": []any{""}, "resources": []any{"pods"}, "verbs": []any{"create"},
	}}, "rules")
	subjects, _, _ := unstructured.NestedSlice(find(t, objs, "RoleBinding", "driverset-test").Object, "subjects")
	if len(subjects) != 1 {
		t.Fatalf("subjects %v", subjects)
	}
	expect(t, subjects[0].(map[string]any), systemNamespace, "namespace")

	// The install itself has none of it, and none of its selectors picks the test pod (issue 35):
	// it would be a webhook endpoint while it runs, and count for the PodDisruptionBudget.
	install := mustRenderChart(t, systemNamespace, withAllObjects(values))
	for _, u := range install {
		if u.GetName() == "driverset-test" {
			t.Errorf("helm install would make %s", key(u))
		}
	}
	podLabels, _, _ := unstructured.NestedStringMap(pod, "metadata", "labels")
	expectNotSelected(t, install, "the helm test pod", podLabels)
}
