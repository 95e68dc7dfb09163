//go:build testbed

package install

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/seal"
)

// Every way in ships the ValidatingAdmissionPolicies that keep a placeholder held (its gate and
// label cannot be removed) and its seal its creator's, bound with Deny, and cluster-scoped as the API has it: kustomize's
// namespace transformer would give it a namespace (manifests/base/cluster-scoped removes it).
func TestEveryInstallKeepsPlaceholdersHeld(t *testing.T) {
	installs := map[string][]*unstructured.Unstructured{"install.yaml": readInstallYAML(t), namespacedOverlay: render(t, namespacedOverlay)}
	for _, dir := range kustomizations() {
		installs[dir] = render(t, dir)
	}
	for _, mode := range []string{"self-managed", "cert-manager"} {
		installs["chart "+mode] = mustRenderChart(t, systemNamespace, map[string]any{"tls": map[string]any{"mode": mode}})
	}
	for name, objs := range installs {
		t.Run(name, func(t *testing.T) {
			for _, n := range placeholderPolicies {
				policy := find(t, objs, "ValidatingAdmissionPolicy", n)
				binding := find(t, objs, "ValidatingAdmissionPolicyBinding", n)
				for _, u := range []*unstructured.Unstructured{policy, binding} {
					if u.GetNamespace() != "" {
						t.Errorf("%s has namespace %q; it is cluster-scoped", key(u), u.GetNamespace())
					}
				}
				expect(t, binding.Object, n, "spec", "policyName")
				expect(t, binding.Object, []any{"Deny"}, "spec", "validationActions")
				expect(t, policy.Object, "Fail", "spec", "failurePolicy")
				// Only placeholders are looked at, by label before any expression: the policies
				// cost nothing on other pods' writes.
				expect(t, policy.Object, map[string]any{"driverset.dev/placeholder": "true"}, "spec", "matchConstraints", "objectSelector", "matchLabels")
			}
			// The seal's annotations, as the webhook writes them.
			spec := toYAML(find(t, objs, "ValidatingAdmissionPolicy", "driverset-seal-creator").Object["spec"])
			for _, a := range []string{seal.Annotation, seal.CreatorAnnotation} {
				if !strings.Contains(spec, "'"+a+"'") {
					t.Errorf("driverset-seal-creator does not read annotation %s", a)
				}
			}
		})
	}
}

// placeholderPolicies hold every placeholder, whoever writes it: driverset-placeholder keeps it held,
// driverset-seal-creator keeps its seal to the user it was made for (issue 35).
var placeholderPolicies = []string{"driverset-placeholder", "driverset-seal-creator"} //nolint:gochecknoglobals // a constant list

// guardRails are the ValidatingAdmissionPolicies that narrow driverset's own ServiceAccount.
var guardRails = []string{"driverset-guard-creates", "driverset-guard-pods", "driverset-guard-webhooks", "driverset-guard-updates", "driverset-guard-events", "driverset-guard-secrets"} //nolint:gochecknoglobals // a constant list

// Every way in ships the guard rails on driverset's own power (issue 11), each bound with Deny and
// matched to driverset's ServiceAccount in the namespace it is installed in; the chart can leave
// them out (guardRails.enabled=false).
func TestEveryInstallShipsTheGuardRails(t *testing.T) {
	type install struct {
		objs []*unstructured.Unstructured
		ns   string
	}
	installs := map[string]install{"install.yaml": {readInstallYAML(t), systemNamespace}, namespacedOverlay: {render(t, namespacedOverlay), systemNamespace}}
	for _, dir := range kustomizations() {
		installs[dir] = install{render(t, dir), systemNamespace}
	}
	for _, mode := range []string{"self-managed", "cert-manager"} {
		installs["chart "+mode] = install{mustRenderChart(t, systemNamespace, map[string]any{"tls": map[string]any{"mode": mode}}), systemNamespace}
	}
	installs["chart in namespace spark-ops"] = install{mustRenderChart(t, "spark-ops", nil), "spark-ops"}
	for name, in := range installs {
		t.Run(name, func(t *testing.T) {
			for _, n := range guardRails {
				policy := find(t, in.objs, "ValidatingAdmissionPolicy", n)
				binding := find(t, in.objs, "ValidatingAdmissionPolicyBinding", n)
				expect(t, binding.Object, n, "spec", "policyName")
				expect(t, binding.Object, []any{"Deny"}, "spec", "validationActions")
				expect(t, policy.Object, "Fail", "spec", "failurePolicy")
				conds, _, _ := unstructured.NestedSlice(policy.Object, "spec", "matchConditions")
				want := "request.userInfo.username == 'system:serviceaccount:" + in.ns + ":driverset'"
				if len(conds) != 1 || conds[0].(map[string]any)["expression"] != want {
					t.Errorf("%s matches %v, want only %q", n, conds, want)
				}
			}
			// What a policy cannot check (the owner is a sealed placeholder, the template is what
			// driverset builds from it) is the creates webhook's: the same ServiceAccount only,
			// and always closed.
			// So is what an Event is about (the pod is a placeholder, under the Event's UID): the
			// events webhook's. And whether a driver pod may go without its kubelet's word (the
			// proof driverset fences on, read from the apiserver): the deletes webhook's.
			for _, entry := range []string{"creates.driverset.dev", "events.driverset.dev", "deletes.driverset.dev"} {
				h := webhookNamed(t, in.objs, entry)
				expect(t, h, "Fail", "failurePolicy")
				expect(t, h, "Never", "reinvocationPolicy")
				expect(t, h, []any{map[string]any{"name": "driverset",
					"expression": "request.userInfo.username == 'system:serviceaccount:" + in.ns + ":driverset'"}}, "matchConditions")
			}
			// And whether driverset may take its finalizer off a driver pod or placeholder (the
			// driver's exit read, the driver unable to run, read from the apiserver): the releases
			// webhook's, sent only the updates that remove that finalizer.
			h := webhookNamed(t, in.objs, "releases.driverset.dev")
			expect(t, h, "Fail", "failurePolicy")
			expect(t, h, "Never", "reinvocationPolicy")
			expect(t, h, []any{
				map[string]any{"name": "driverset",
					"expression": "request.userInfo.username == 'system:serviceaccount:" + in.ns + ":driverset'"},
				map[string]any{"name": "removes-outcome-finalizer",
					"expression": "has(oldObject.metadata.finalizers) && 'driverset.dev/outcome' in oldObject.metadata.finalizers && !(has(object.metadata.finalizers) && 'driverset.dev/outcome' in object.metadata.finalizers)"},
			}, "matchConditions")
		})
	}
	for _, u := range mustRenderChart(t, systemNamespace, map[string]any{"guardRails": map[string]any{"enabled": false}}) {
		if slices.Contains(guardRails, u.GetName()) {
			t.Errorf("guardRails.enabled=false still renders %s %s", u.GetKind(), u.GetName())
		}
	}
	off := webhookNames(t, mustRenderChart(t, systemNamespace, map[string]any{"guardRails": map[string]any{"enabled": false}}))
	for _, entry := range []string{"creates.driverset.dev", "events.driverset.dev", "deletes.driverset.dev", "releases.driverset.dev"} {
		if slices.Contains(off, entry) {
			t.Errorf("guardRails.enabled=false still renders the webhook %s", entry)
		}
	}
}

// webhookNamed is the entry name of driverset's MutatingWebhookConfiguration in objs.
func webhookNamed(t *testing.T, objs []*unstructured.Unstructured, name string) map[string]any {
	t.Helper()
	for _, h := range webhooks(t, objs) {
		if h["name"] == name {
			return h
		}
	}
	t.Fatalf("no webhook %s in %v", name, webhookNames(t, objs))
	return nil
}

// The annotations the controller writes on a placeholder are the ones driverset-guard-pods lets
// its ServiceAccount write: a new one missing from the policy's list has every such write refused
// by the apiserver (restarts-total once was, and no restart happened), which the controller's unit
// tests, run without the policies, cannot see.
func TestGuardRailsAllowTheAnnotationsDriversetWrites(t *testing.T) {
	policy := find(t, readInstallYAML(t), "ValidatingAdmissionPolicy", "driverset-guard-pods")
	vars, _, _ := unstructured.NestedSlice(policy.Object, "spec", "variables")
	var listed string
	for _, v := range vars {
		if m := v.(map[string]any); m["name"] == "driversetAnnotations" {
			listed, _ = m["expression"].(string)
		}
	}
	for _, a := range []string{contract.AnnotationRestarts, contract.AnnotationRestartsTotal, contract.AnnotationRestartedIncarnation, contract.AnnotationDriverLost} {
		if !strings.Contains(listed, "'"+a+"'") {
			t.Errorf("driverset-guard-pods' driversetAnnotations %q lacks %s, which the controller writes", listed, a)
		}
	}
}
