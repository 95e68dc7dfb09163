package testbed

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/audit/policy"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// TestAuditArgs: the apiserver gets the audit flags only when the test bed writes a log.
func TestAuditArgs(t *testing.T) {
	if args := apiserverArgs(testLayout()); slices.ContainsFunc(args, func(a string) bool { return len(a) > 8 && a[:8] == "--audit-" }) {
		t.Errorf("audit flags without an audit log: %v", args)
	}
	l := testLayout()
	l.AuditPolicy, l.AuditLog = "/d/audit-policy.yaml", "/d/logs/audit.log"
	args := apiserverArgs(l)
	for _, want := range []string{"--audit-policy-file=/d/audit-policy.yaml", "--audit-log-path=/d/logs/audit.log",
		"--audit-log-format=json", "--audit-log-mode=blocking"} {
		if !slices.Contains(args, want) {
			t.Errorf("apiserver flags lack %s", want)
		}
	}
}

// TestAuditPolicy reads the policy as the apiserver does and checks, request by request, which
// are recorded: what a Spark application's clients do, not what the test bed or driverset do.
func TestAuditPolicy(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o700); err != nil {
		t.Fatal(err)
	}
	path, _, err := writeAuditPolicy(dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.LoadPolicyFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	eval := policy.NewPolicyRuleEvaluator(p)
	tenant := &user.DefaultInfo{Name: "system:serviceaccount:team-a:default",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:team-a", "system:authenticated"}}
	for _, tc := range []struct {
		name             string
		user             user.Info
		verb, resource   string
		subresource, grp string
		want             audit.Level
	}{
		{"a tenant creates a pod", tenant, "create", "pods", "", "", audit.LevelMetadata},
		{"a tenant watches pods", tenant, "watch", "pods", "", "", audit.LevelMetadata},
		{"a tenant reads a pod's status", tenant, "get", "pods", "status", "", audit.LevelMetadata},
		{"a tenant reads a pod's log", tenant, "get", "pods", "log", "", audit.LevelMetadata},
		{"a tenant deletes configmaps", tenant, "deletecollection", "configmaps", "", "", audit.LevelMetadata},
		{"a tenant applies a service", tenant, "patch", "services", "", "", audit.LevelMetadata},
		{"a tenant creates a claim", tenant, "create", "persistentvolumeclaims", "", "", audit.LevelMetadata},
		{"a tenant reads a secret", tenant, "get", "secrets", "", "", audit.LevelMetadata},
		{"a tenant's events are noise", tenant, "create", "events", "", "", audit.LevelNone},
		{"a tenant's leases are noise", tenant, "update", "leases", "", "coordination.k8s.io", audit.LevelNone},
		{"other resources are not recorded", tenant, "create", "statefulsets", "", "apps", audit.LevelNone},
		{"the admin (the tests)", &user.DefaultInfo{Name: "admin", Groups: []string{"system:masters"}}, "create", "pods", "", "", audit.LevelNone},
		{"a kubelet", &user.DefaultInfo{Name: "system:node:node-1", Groups: []string{"system:nodes"}}, "patch", "pods", "status", "", audit.LevelNone},
		{"the scheduler", &user.DefaultInfo{Name: "system:kube-scheduler"}, "create", "pods", "binding", "", audit.LevelNone},
		{"a controller", &user.DefaultInfo{Name: "system:serviceaccount:kube-system:statefulset-controller",
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system"}}, "create", "pods", "", "", audit.LevelNone},
		{"driverset", &user.DefaultInfo{Name: "system:serviceaccount:driverset-system:driverset",
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:driverset-system"}}, "update", "pods", "status", "", audit.LevelNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attrs := authorizer.AttributesRecord{User: tc.user, Verb: tc.verb, Namespace: "team-a", APIGroup: tc.grp,
				Resource: tc.resource, Subresource: tc.subresource, ResourceRequest: true}
			if got := eval.EvaluatePolicyRule(attrs).Level; got != tc.want {
				t.Errorf("level %s, want %s", got, tc.want)
			}
		})
	}
}
