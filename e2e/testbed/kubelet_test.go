package testbed

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func runningPod(policy corev1.RestartPolicy, containers ...string) *corev1.Pod {
	started := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := &corev1.Pod{
		Spec: corev1.PodSpec{RestartPolicy: policy},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
			},
		},
	}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c})
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c, Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
		})
	}
	return p
}

func condition(s *corev1.PodStatus, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// TestContainerExited is the kubelet's behaviour that TerminateContainer imitates.
func TestContainerExited(t *testing.T) {
	cases := []struct {
		name       string
		policy     corev1.RestartPolicy
		containers []string
		exit       int32
		restarted  bool
		phase      corev1.PodPhase
		reason     string
	}{
		{"Never, exit 0: Succeeded", corev1.RestartPolicyNever, []string{"main"}, 0, false, corev1.PodSucceeded, "Completed"},
		{"Never, exit 3: Failed", corev1.RestartPolicyNever, []string{"main"}, 3, false, corev1.PodFailed, "Error"},
		{"OnFailure, exit 0: Succeeded", corev1.RestartPolicyOnFailure, []string{"main"}, 0, false, corev1.PodSucceeded, "Completed"},
		{"OnFailure, exit 1: restarted", corev1.RestartPolicyOnFailure, []string{"main"}, 1, true, corev1.PodRunning, "Error"},
		{"Always, exit 0: restarted", corev1.RestartPolicyAlways, []string{"main"}, 0, true, corev1.PodRunning, "Completed"},
		{"Always, exit 137: restarted", corev1.RestartPolicyAlways, []string{"main"}, 137, true, corev1.PodRunning, "Error"},
		{"Never, other container still running: Running", corev1.RestartPolicyNever, []string{"main", "side"}, 0, false, corev1.PodRunning, "Completed"},
	}
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := runningPod(c.policy, c.containers...)
			s, err := containerExited(pod, "main", c.exit, "bye", now)
			if err != nil {
				t.Fatal(err)
			}
			if s.Phase != c.phase {
				t.Errorf("phase %s, want %s", s.Phase, c.phase)
			}
			cs := s.ContainerStatuses[0]
			term := cs.State.Terminated
			if c.restarted {
				term = cs.LastTerminationState.Terminated
				if cs.State.Running == nil || !cs.State.Running.StartedAt.Equal(&now) {
					t.Errorf("not running again since now: %+v", cs.State)
				}
				if cs.RestartCount != 1 || !cs.Ready {
					t.Errorf("restartCount %d ready %v, want 1 true", cs.RestartCount, cs.Ready)
				}
				if got := condition(s, corev1.PodReady); got != corev1.ConditionTrue {
					t.Errorf("Ready %s after a restart", got)
				}
			} else {
				if cs.Ready || cs.RestartCount != 0 {
					t.Errorf("ready %v restartCount %d, want false 0", cs.Ready, cs.RestartCount)
				}
				if got := condition(s, corev1.PodReady); got != corev1.ConditionFalse {
					t.Errorf("Ready %s, want False", got)
				}
			}
			if term == nil {
				t.Fatalf("no terminated state: %+v", cs)
			}
			if term.ExitCode != c.exit || term.Message != "bye" || term.Reason != c.reason || !term.FinishedAt.Equal(&now) {
				t.Errorf("terminated %+v, want exit %d reason %s message bye finished now", term, c.exit, c.reason)
			}
			if pod.Status.ContainerStatuses[0].State.Running == nil {
				t.Error("the input pod was modified")
			}
		})
	}
}

func TestContainerExitedRefuses(t *testing.T) {
	now := metav1.Now()
	if _, err := containerExited(runningPod(corev1.RestartPolicyNever, "main"), "nope", 0, "", now); err == nil {
		t.Error("unknown container accepted")
	}
	done, err := containerExited(runningPod(corev1.RestartPolicyNever, "main"), "main", 0, "", now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := containerExited(&corev1.Pod{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever}, Status: *done}, "main", 0, "", now); err == nil {
		t.Error("a terminated container terminated again")
	}
}
