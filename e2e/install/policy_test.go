//go:build testbed

package install

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Every way in ships the ValidatingAdmissionPolicy that keeps a placeholder held (its gate and
// label cannot be removed), bound with Deny, and cluster-scoped as the API has it: kustomize's
// namespace transformer would give it a namespace (manifests/base/cluster-scoped removes it).
func TestEveryInstallKeepsPlaceholdersHeld(t *testing.T) {
	installs := map[string][]*unstructured.Unstructured{"install.yaml": readInstallYAML(t)}
	for _, dir := range kustomizations() {
		installs[dir] = render(t, dir)
	}
	for _, mode := range []string{"self-managed", "cert-manager"} {
		installs["chart "+mode] = mustRenderChart(t, systemNamespace, map[string]any{"tls": map[string]any{"mode": mode}})
	}
	for name, objs := range installs {
		t.Run(name, func(t *testing.T) {
			policy := find(t, objs, "ValidatingAdmissionPolicy", "driverset-placeholder")
			binding := find(t, objs, "ValidatingAdmissionPolicyBinding", "driverset-placeholder")
			for _, u := range []*unstructured.Unstructured{policy, binding} {
				if u.GetNamespace() != "" {
					t.Errorf("%s has namespace %q; it is cluster-scoped", key(u), u.GetNamespace())
				}
			}
			expect(t, binding.Object, "driverset-placeholder", "spec", "policyName")
			expect(t, binding.Object, []any{"Deny"}, "spec", "validationActions")
			expect(t, policy.Object, "Fail", "spec", "failurePolicy")
		})
	}
}
