package inspect

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/driverset/driverset/contract"
)

func TestLogTarget(t *testing.T) {
	custom := placeholder()
	custom.Spec.Containers = []corev1.Container{{Name: "sidecar"}, {Name: "main", Args: []string{"driver"}}}
	customDriver := driverPod("d0", "n1")
	customDriver.Spec.Containers = []corev1.Container{{Name: "sidecar"}, {Name: "main"}}
	waiting := placeholder()
	waiting.Status.Message = "driverset: waiting for the StatefulSet to create the driver pod"
	cases := []struct {
		name                string
		snap                *Snapshot
		pod, container, err string
	}{
		{name: "the current incarnation's driver container, not a sidecar",
			snap: &Snapshot{Placeholder: placeholder(), Driver: driverPod("d1", "n1")}, pod: "pi-driver-0", container: contract.DriverContainerName},
		{name: "a driver container that spark-submit named otherwise (found by its driver argument)",
			snap: &Snapshot{Placeholder: custom, Driver: customDriver}, pod: "pi-driver-0", container: "main"},
		{name: "no driver pod: the placeholder's message says why",
			snap: &Snapshot{Placeholder: waiting}, err: "waiting for the StatefulSet to create the driver pod"},
		{name: "a driver pod without the driver container",
			snap: &Snapshot{Placeholder: custom, Driver: driverPod("d0", "n1")}, err: `no container "main"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod, container, err := LogTarget(tc.snap)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one mentioning %q", err, tc.err)
				}
				return
			}
			if err != nil || pod != tc.pod || container != tc.container {
				t.Errorf("LogTarget = %q, %q, %v; want %q, %q", pod, container, err, tc.pod, tc.container)
			}
		})
	}
}
