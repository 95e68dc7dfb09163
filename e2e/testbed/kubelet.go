package testbed

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// TerminateContainer plays the kubelet: container `container` of pod ns/pod exits with
// exitCode and termination message msg.
//
//   - restartPolicy Never, or OnFailure with exit code 0: the container is terminated
//     (reason Completed or Error), the pod is not Ready, and once every container has
//     terminated the pod's phase is Succeeded (all exit codes 0) or Failed.
//   - restartPolicy Always, or OnFailure with a non-zero code: the container shows
//     lastState.terminated{exitCode, message, reason, finishedAt} and runs again
//     (state.running.startedAt now) with restartCount+1, as after a kubelet restart.
//
// There is no restart back-off: the container is running again at once.
func (c *Cluster) TerminateContainer(ctx context.Context, ns, pod, container string, exitCode int32, msg string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return err
		}
		status, err := containerExited(p, container, exitCode, msg, metav1.Now())
		if err != nil {
			return fmt.Errorf("testbed: pod %s/%s: %w", ns, pod, err)
		}
		p.Status = *status
		_, err = c.Client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
}

// containerExited computes the status a kubelet would report after the container exited.
// Pure, so the rules are unit-tested without a cluster.
func containerExited(pod *corev1.Pod, container string, exitCode int32, msg string, now metav1.Time) (*corev1.PodStatus, error) {
	s := pod.Status.DeepCopy()
	idx := -1
	for i := range s.ContainerStatuses {
		if s.ContainerStatuses[i].Name == container {
			idx = i
		}
	}
	if idx < 0 {
		return nil, fmt.Errorf("no status for container %q yet (has the pod started?)", container)
	}
	cs := &s.ContainerStatuses[idx]
	if cs.State.Running == nil {
		return nil, fmt.Errorf("container %q is not running", container)
	}
	reason := "Completed"
	if exitCode != 0 {
		reason = "Error"
	}
	terminated := &corev1.ContainerStateTerminated{
		ExitCode:    exitCode,
		Reason:      reason,
		Message:     msg,
		StartedAt:   cs.State.Running.StartedAt,
		FinishedAt:  now,
		ContainerID: cs.ContainerID,
	}

	restart := false
	switch pod.Spec.RestartPolicy {
	case corev1.RestartPolicyAlways, "": // the API defaults "" to Always
		restart = true
	case corev1.RestartPolicyOnFailure:
		restart = exitCode != 0
	}

	if restart {
		cs.LastTerminationState = corev1.ContainerState{Terminated: terminated}
		cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}
		cs.RestartCount++
		cs.Ready = true
		cs.Started = new(true)
		return s, nil
	}

	cs.State = corev1.ContainerState{Terminated: terminated}
	cs.Ready = false
	cs.Started = new(false)

	allDone, allZero := true, true
	for _, other := range s.ContainerStatuses {
		switch {
		case other.State.Terminated == nil:
			allDone = false
		case other.State.Terminated.ExitCode != 0:
			allZero = false
		}
	}
	condReason := "ContainersNotReady"
	if allDone {
		condReason = "PodCompleted"
		s.Phase = corev1.PodFailed
		if allZero {
			s.Phase = corev1.PodSucceeded
		}
	}
	for _, t := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady} {
		setCondition(s, t, corev1.ConditionFalse, condReason, now)
	}
	return s, nil
}

func setCondition(s *corev1.PodStatus, t corev1.PodConditionType, status corev1.ConditionStatus, reason string, now metav1.Time) {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			if s.Conditions[i].Status != status {
				s.Conditions[i].LastTransitionTime = now
			}
			s.Conditions[i].Status = status
			s.Conditions[i].Reason = reason
			return
		}
	}
	s.Conditions = append(s.Conditions, corev1.PodCondition{Type: t, Status: status, Reason: reason, LastTransitionTime: now})
}
