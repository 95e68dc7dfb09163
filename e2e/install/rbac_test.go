//go:build testbed

package install

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// grant is one permission: a verb on a resource, cluster-wide (namespace "") or in one namespace,
// on any object (name "") or on one object.
type grant struct {
	namespace, group, resource, verb, name string
}

func (g grant) String() string {
	where := "cluster-wide"
	if g.namespace != "" {
		where = "in " + g.namespace
	}
	obj := "any"
	if g.name != "" {
		obj = g.name
	}
	group := g.group
	if group == "" {
		group = "core"
	}
	return fmt.Sprintf("%s %s.%s (%s) %s", g.verb, g.resource, group, obj, where)
}

// where a right is granted.
type where int

const (
	// served: in the namespaces driverset serves, cluster-wide or in each watched namespace.
	served where = iota
	// cluster: cluster-wide in every install (Nodes and the reviews are not namespaced).
	cluster
	// own: in driverset's own namespace.
	own
	// ownWhenNamespaced: in driverset's own namespace in the namespaced install only; the
	// cluster-wide install's served rights cover it.
	ownWhenNamespaced
)

// right is one permission driverset needs, where it needs it, and whether only with self-managed TLS.
type right struct {
	group, resource, verb, name string
	where                       where
	selfManaged                 bool
}

// rights is every permission driverset's ServiceAccount may hold, and why it needs it.
func rights() []right {
	return []right{
		// The informer cache of Spark's pods (driver and executor webhooks read it, never the API),
		// and reading driverset's own pod to learn its image.
		{"", "pods", "get", "", served, false},
		{"", "pods", "list", "", served, false},
		{"", "pods", "watch", "", served, false},
		{"", "pods", "get", "", ownWhenNamespaced, false},
		// A failed driver incarnation is deleted so the StatefulSet makes a new one; stale executors
		// of an earlier incarnation are deleted; a fenced driver is force-deleted.
		{"", "pods", "delete", "", served, false},
		// The restart count and the lifted gate on pods driverset owns.
		{"", "pods", "patch", "", served, false},
		// The placeholder's status mirrors the real driver's, so spark-submit's watch tells the truth.
		{"", "pods/status", "update", "", served, false},
		{"", "pods/status", "patch", "", served, false},
		// ownerReferences with blockOwnerDeletion to the placeholder pod (OwnerReferencesPermissionEnforcement).
		{"", "pods/finalizers", "update", "", served, false},
		// The node under each driver (informer cache): node loss is reported and, on request, fenced.
		{"", "nodes", "get", "", cluster, false},
		{"", "nodes", "list", "", cluster, false},
		{"", "nodes", "watch", "", cluster, false},
		// LimitRanges (informer cache): the placeholder keeps a LimitRange's min rather than 0.
		{"", "limitranges", "get", "", served, false},
		{"", "limitranges", "list", "", served, false},
		{"", "limitranges", "watch", "", served, false},
		// The driver's claims spark-submit made: read live and relabelled once, before the driver
		// first runs, out of Spark's clean stop. The executor claims drivers label as driverset's:
		// a cache by that label, which the next incarnation's gate waits on.
		{"", "persistentvolumeclaims", "get", "", served, false},
		{"", "persistentvolumeclaims", "list", "", served, false},
		{"", "persistentvolumeclaims", "watch", "", served, false},
		{"", "persistentvolumeclaims", "patch", "", served, false},
		// The driver's headless Service: created once, by create-or-get.
		{"", "services", "get", "", served, false},
		{"", "services", "list", "", served, false},
		{"", "services", "watch", "", served, false},
		{"", "services", "create", "", served, false},
		// The driver's StatefulSet: created once, scaled to 0 when the app ends.
		{"apps", "statefulsets", "get", "", served, false},
		{"apps", "statefulsets", "list", "", served, false},
		{"apps", "statefulsets", "watch", "", served, false},
		{"apps", "statefulsets", "create", "", served, false},
		{"apps", "statefulsets", "patch", "", served, false},
		// Events on the placeholder for every decision (patch: the recorder aggregates repeats).
		{"events.k8s.io", "events", "create", "", served, false},
		{"events.k8s.io", "events", "patch", "", served, false},
		// Why the StatefulSet cannot make the driver pod: one StatefulSet's Events, listed live.
		{"", "events", "list", "", served, false},
		// Self-fencing drivers' heartbeat Leases (informer cache by label; a live get before a
		// fence): read only. The ClusterRole driverset-heartbeat that lets drivers write them is
		// bound by the admin, never by driverset.
		{"coordination.k8s.io", "leases", "get", "", served, false},
		{"coordination.k8s.io", "leases", "list", "", served, false},
		{"coordination.k8s.io", "leases", "watch", "", served, false},
		// /metrics over HTTPS: the caller's token is checked (TokenReview) and its right to GET
		// /metrics (SubjectAccessReview), by controller-runtime's filter, cached. The same
		// SubjectAccessReviews, with --authorize-extended-resources, ask whether a driver's
		// submitter may use its GPUs: no wider right (a review answers, it grants nothing).
		{"authentication.k8s.io", "tokenreviews", "create", "", cluster, false},
		{"authorization.k8s.io", "subjectaccessreviews", "create", "", cluster, false},
		// Leader election of the controller, in driverset's namespace.
		{"coordination.k8s.io", "leases", "get", "", own, false},
		{"coordination.k8s.io", "leases", "list", "", own, false},
		{"coordination.k8s.io", "leases", "watch", "", own, false},
		{"coordination.k8s.io", "leases", "create", "", own, false},
		{"coordination.k8s.io", "leases", "update", "", own, false},
		{"coordination.k8s.io", "leases", "patch", "", own, false},
		// No right on the Secret driverset-seal, whose key seals placeholders: the Job
		// driverset-make-seal-key makes it as a ServiceAccount of its own (sealKeyMakerRights), and
		// the kubelet brings it to the replicas as a volume (issue 35).
		//
		// Self-managed TLS: the CA lives in the Secret driverset-ca; the first replica creates it
		// (create cannot be limited by name), every replica reads it, a renewal updates it.
		{"", "secrets", "create", "", own, true},
		{"", "secrets", "get", "driverset-ca", own, true},
		{"", "secrets", "update", "driverset-ca", own, true},
		// Self-managed TLS: the CA goes into the caBundle of driverset's own webhook configuration.
		{"admissionregistration.k8s.io", "mutatingwebhookconfigurations", "get", "driverset", cluster, true},
		{"admissionregistration.k8s.io", "mutatingwebhookconfigurations", "patch", "driverset", cluster, true},
	}
}

// allowed is every single permission an install may grant driverset's ServiceAccount: with
// self-managed TLS or not, cluster-wide (watch empty) or in the watched namespaces. A rule in the
// manifests that grants anything else fails the test; so does an entry nobody grants.
func allowed(selfManaged bool, watch []string) map[grant]struct{} {
	out := map[grant]struct{}{}
	for _, r := range rights() {
		if r.selfManaged && !selfManaged {
			continue
		}
		var namespaces []string
		switch r.where {
		case served:
			namespaces = watch
			if len(watch) == 0 {
				namespaces = []string{""}
			}
		case cluster:
			namespaces = []string{""}
		case own:
			namespaces = []string{systemNamespace}
		case ownWhenNamespaced:
			if len(watch) > 0 {
				namespaces = []string{systemNamespace}
			}
		}
		for _, ns := range namespaces {
			out[grant{ns, r.group, r.resource, r.verb, r.name}] = struct{}{}
		}
	}
	return out
}

func TestRBACGrantsExactlyTheAllowList(t *testing.T) {
	watched := []string{"spark-x", "spark-y"}
	chartWatching := func(values map[string]any) func(t *testing.T) []*unstructured.Unstructured {
		values["watchNamespaces"] = []any{watched[0], watched[1]}
		values["tests"] = map[string]any{"namespace": watched[0]}
		return func(t *testing.T) []*unstructured.Unstructured { return mustRenderChart(t, systemNamespace, values) }
	}
	for _, tc := range []struct {
		name        string
		selfManaged bool
		watch       []string
		objs        func(t *testing.T) []*unstructured.Unstructured
	}{
		{"install.yaml", true, nil, func(t *testing.T) []*unstructured.Unstructured { return readInstallYAML(t) }},
		{"overlays/self-managed", true, nil, func(t *testing.T) []*unstructured.Unstructured { return render(t, "overlays/self-managed") }},
		{"overlays/cert-manager", false, nil, func(t *testing.T) []*unstructured.Unstructured { return render(t, "overlays/cert-manager") }},
		{"overlays/namespaced", true, namespacedOverlayNamespaces(), func(t *testing.T) []*unstructured.Unstructured { return render(t, namespacedOverlay) }},
		{"chart", true, nil, func(t *testing.T) []*unstructured.Unstructured { return mustRenderChart(t, systemNamespace, nil) }},
		{"chart, cert-manager", false, nil, func(t *testing.T) []*unstructured.Unstructured {
			return mustRenderChart(t, systemNamespace, map[string]any{"tls": map[string]any{"mode": "cert-manager"}})
		}},
		{"chart, watchNamespaces", true, watched, chartWatching(map[string]any{})},
		{"chart, watchNamespaces, cert-manager", false, watched, chartWatching(map[string]any{"tls": map[string]any{"mode": "cert-manager"}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := tc.objs(t)
			got := grants(t, objs)
			wantGrants(t, got, allowed(tc.selfManaged, tc.watch), "driverset")
			if _, ok := got[grant{systemNamespace, "", "secrets", "create", ""}]; ok {
				wantSecretCreatesNamed(t, objs, "driverset-ca")
			}
			wantGrants(t, grantsTo(t, objs, sealKeyMaker), sealKeyMakerRights(), sealKeyMaker)
		})
	}
}

// grants expands the Roles and ClusterRoles bound to driverset's ServiceAccount into single
// permissions. A binding to a role the manifests do not define (cluster-admin, say), a wildcard,
// or a binding to any other subject is an error: none of them could be checked against the list.
// wantGrants fails t for each grant of granted that allowed lacks, and each of allowed that
// granted lacks (which who needs).
func wantGrants[V any](t *testing.T, granted map[grant]struct{}, allowed map[grant]V, who string) {
	t.Helper()
	for _, g := range sortedGrants(granted) {
		if _, ok := allowed[g]; !ok {
			t.Errorf("grants %s, which is not on %s's allow-list", g, who)
		}
	}
	for _, g := range sortedGrants(allowed) {
		if _, ok := granted[g]; !ok {
			t.Errorf("does not grant %s, which %s needs", g, who)
		}
	}
}

// sealKeyMaker is the ServiceAccount of the Job that makes the seal key.
const sealKeyMaker = "driverset-make-seal-key"

// installAccounts are the ServiceAccounts the install binds roles to: driverset's, the seal key
// maker's, and the chart's uninstall hook's.
var installAccounts = []string{"driverset", sealKeyMaker, cleanupName} //nolint:gochecknoglobals // the list the tests check against

// sealKeyMakerRights is every right the key-maker's ServiceAccount may hold: create Secrets in
// driverset's namespace (the authorizer cannot limit a create by name), and nothing else: not even
// a read of the Secret it makes, which it never reads.
func sealKeyMakerRights() map[grant]struct{} {
	return map[grant]struct{}{{systemNamespace, "", "secrets", "create", ""}: {}}
}

func grants(t *testing.T, objs []*unstructured.Unstructured) map[grant]struct{} {
	t.Helper()
	return grantsTo(t, objs, "driverset")
}

// grantsTo is grants for the ServiceAccount sa of driverset's namespace.
func grantsTo(t *testing.T, objs []*unstructured.Unstructured, sa string) map[grant]struct{} {
	t.Helper()
	roles := map[string]*unstructured.Unstructured{} // "ClusterRole/name" or "Role/ns/name"
	for _, u := range objs {
		switch u.GetKind() {
		case "ClusterRole":
			roles["ClusterRole/"+u.GetName()] = u
		case "Role":
			roles["Role/"+u.GetNamespace()+"/"+u.GetName()] = u
		}
	}
	out := map[grant]struct{}{}
	for _, b := range objs {
		if b.GetKind() != "ClusterRoleBinding" && b.GetKind() != "RoleBinding" {
			continue
		}
		subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
		binds := false
		for _, s := range subjects {
			s := s.(map[string]any)
			if s["kind"] != "ServiceAccount" || !slices.Contains(installAccounts, s["name"].(string)) || s["namespace"] != systemNamespace {
				t.Errorf("%s binds %v, not one of the install's ServiceAccounts %v", key(b), s, installAccounts)
			}
			if s["name"] == sa {
				binds = true
			} else if len(subjects) > 1 {
				t.Errorf("%s binds %s and another: one ServiceAccount's rights must not be another's", key(b), sa)
			}
		}
		if !binds {
			continue
		}
		refKind, _, _ := unstructured.NestedString(b.Object, "roleRef", "kind")
		refName, _, _ := unstructured.NestedString(b.Object, "roleRef", "name")
		var role *unstructured.Unstructured
		namespace := b.GetNamespace() // a ClusterRole bound by a RoleBinding grants in its namespace only
		if refKind == "ClusterRole" {
			role = roles["ClusterRole/"+refName]
		} else {
			role = roles["Role/"+namespace+"/"+refName]
		}
		if role == nil {
			t.Errorf("%s binds %s %s, which the manifests do not define", key(b), refKind, refName)
			continue
		}
		rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
		for _, r := range rules {
			expandRule(t, key(role), namespace, r.(map[string]any), out)
		}
	}
	return out
}

func expandRule(t *testing.T, role, namespace string, rule map[string]any, out map[grant]struct{}) {
	t.Helper()
	list := func(field string) []string {
		v, _, _ := unstructured.NestedStringSlice(rule, field)
		for _, s := range v {
			if s == "*" {
				t.Errorf("%s: wildcard in %s", role, field)
			}
		}
		return v
	}
	if len(list("nonResourceURLs")) > 0 {
		t.Errorf("%s grants non-resource URLs", role)
	}
	names := list("resourceNames")
	if len(names) == 0 {
		names = []string{""}
	}
	for _, group := range list("apiGroups") {
		for _, res := range list("resources") {
			for _, verb := range list("verbs") {
				for _, name := range names {
					out[grant{namespace, group, res, verb, name}] = struct{}{}
				}
			}
		}
	}
}

func sortedGrants[V any](m map[grant]V) []grant {
	gs := make([]grant, 0, len(m))
	for g := range m {
		gs = append(gs, g)
	}
	sort.Slice(gs, func(i, j int) bool { return gs[i].String() < gs[j].String() })
	return gs
}

// wantSecretCreatesNamed: RBAC cannot limit create by name, so where driverset may create Secrets
// (self-managed TLS, for its CA) the guard rail driverset-guard-secrets limits it to the one name,
// the Secret get and update are limited to; any other, the seal key's above all, is refused
// (issue 35, TestDriversetTokenCannotPlantTheSealKey).
func wantSecretCreatesNamed(t *testing.T, objs []*unstructured.Unstructured, name string) {
	t.Helper()
	policy := find(t, objs, "ValidatingAdmissionPolicy", "driverset-guard-secrets")
	validations, _, _ := unstructured.NestedSlice(policy.Object, "spec", "validations")
	want := "object.metadata.?name.orValue('') == '" + name + "'"
	if len(validations) != 1 || validations[0].(map[string]any)["expression"] != want {
		t.Errorf("driverset-guard-secrets validates %v, want only %q", validations, want)
	}
	rules, _, _ := unstructured.NestedSlice(policy.Object, "spec", "matchConstraints", "resourceRules")
	if len(rules) != 1 || !reflect.DeepEqual(rules[0].(map[string]any)["resources"], []any{"secrets"}) ||
		!reflect.DeepEqual(rules[0].(map[string]any)["operations"], []any{"CREATE"}) {
		t.Errorf("driverset-guard-secrets matches %v, want Secret creates", rules)
	}
	find(t, objs, "ValidatingAdmissionPolicyBinding", "driverset-guard-secrets")
}
