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
