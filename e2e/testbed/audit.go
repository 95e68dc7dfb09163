package testbed

import (
	"os"
	"path/filepath"
)

// auditPolicy records what a Spark application's clients do, at Metadata level (who, which verb,
// which object, the request URI with its selectors), one event per request once its response is
// complete (a watch: when it ends). Everything the test bed's own components and driverset do is
// left out, so that the log holds the calls of the workloads' users, ServiceAccounts and agents.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
  - level: None
    resources:
      - group: ""
        resources: [events]
      - group: events.k8s.io
      - group: coordination.k8s.io
  - level: None
    userGroups:
      - system:nodes
      - system:masters
      - system:serviceaccounts:kube-system
      - system:serviceaccounts:driverset-system
  - level: None
    users: [system:kube-scheduler, system:kube-controller-manager, system:apiserver, system:kube-proxy]
  - level: Metadata
    resources:
      - group: ""
        resources: [pods, pods/*, configmaps, services, persistentvolumeclaims, secrets]
  - level: None
`

// auditFiles are the policy the apiserver reads and the JSON-lines log it writes, both in dir.
func auditFiles(dir string) (policy, log string) {
	return filepath.Join(dir, "audit-policy.yaml"), filepath.Join(dir, "logs", "audit.log")
}

// writeAuditPolicy writes the policy into dir and returns the apiserver's audit settings.
func writeAuditPolicy(dir string) (policy, log string, err error) {
	policy, log = auditFiles(dir)
	return policy, log, os.WriteFile(policy, []byte(auditPolicy), 0o600)
}

// auditArgs are the apiserver's audit flags, none when the layout has no audit log. The log
// backend blocks each request until its event is written, so no event is dropped, and it never
// rotates: a test bed lives for one test run.
func auditArgs(l layout) []string {
	if l.AuditLog == "" {
		return nil
	}
	return []string{
		"--audit-policy-file=" + l.AuditPolicy,
		"--audit-log-path=" + l.AuditLog,
		"--audit-log-format=json",
		"--audit-log-mode=blocking",
		"--audit-log-maxsize=0",
	}
}

// AuditLogPath is the apiserver's audit log (JSON lines, audit.k8s.io/v1 Events), or "" when
// Options.AuditLog was not set.
func (c *Cluster) AuditLogPath() string { return c.lay.AuditLog }
