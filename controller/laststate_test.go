package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/wrap"
)

// TestPlaceholderStatusLastStateOfARunningDriver: while a driver runs, the placeholder shows the
// exit that made driverset restart it (what the driver pod's lastState holds, as `kubectl
// describe` shows a restarted container's), and nothing before the first restart.
func TestPlaceholderStatusLastStateOfARunningDriver(t *testing.T) {
	for _, tc := range []struct {
		name     string
		restarts int
		wantCode int32 // -1: no lastState
	}{
		{"after a restart: the exit that caused it", 1, 3},
		{"first incarnation: none", 0, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := runningDriver(true)
			d.Status.ContainerStatuses[0].LastTerminationState = corev1.ContainerState{
				Terminated: terminated(3, wrap.TerminationMessage(3, ""), t0.Add(-time.Minute))}
			got := placeholderStatus(pendingPlaceholder(), View{Driver: d, Container: contract.DriverContainerName, Restarts: tc.restarts})
			last := containerStatus(got, contract.DriverContainerName).LastTerminationState.Terminated
			switch {
			case tc.wantCode < 0 && last != nil:
				t.Errorf("lastState.terminated = %+v, want none", last)
			case tc.wantCode >= 0 && (last == nil || last.ExitCode != tc.wantCode):
				t.Errorf("lastState.terminated = %+v, want exit code %d", last, tc.wantCode)
			}
		})
	}
}
