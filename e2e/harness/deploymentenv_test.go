package harness

import (
	"slices"
	"strings"
	"testing"
)

func TestDeploymentEnv(t *testing.T) {
	const install = `apiVersion: v1
kind: Namespace
metadata:
  name: driverset-system
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: driverset
  namespace: driverset-system
spec:
  template:
    spec:
      containers:
        - name: sidecar
          env:
            - name: NOT_OURS
              value: "1"
        - name: driverset
          env:
            - name: GOMEMLIMIT
              valueFrom:
                resourceFieldRef:
                  resource: limits.memory
            - name: GOGC
              value: "50"
            - name: POD_NAME
              valueFrom:
                fieldRef:
                  fieldPath: metadata.name
`
	got, err := DeploymentEnv(strings.NewReader(install))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"GOGC=50"}) {
		t.Errorf("DeploymentEnv = %q, want [GOGC=50]", got)
	}
	if _, err := DeploymentEnv(strings.NewReader("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n")); err == nil {
		t.Error("no error without a driverset Deployment")
	}
}

// The memory limit is read from the driverset container, in bytes, and its absence is an error.
func TestDeploymentMemoryLimit(t *testing.T) {
	const install = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: driverset
spec:
  template:
    spec:
      containers:
        - name: sidecar
          resources: {limits: {memory: 1Gi}}
        - name: driverset
          resources: {limits: {memory: 256Mi}}
`
	if got, err := DeploymentMemoryLimit(strings.NewReader(install)); err != nil || got != 256<<20 {
		t.Errorf("DeploymentMemoryLimit = %d, %v; want %d", got, err, 256<<20)
	}
	none := strings.Replace(install, "resources: {limits: {memory: 256Mi}}", "env: []", 1)
	if _, err := DeploymentMemoryLimit(strings.NewReader(none)); err == nil {
		t.Error("no error without a memory limit")
	}
}
