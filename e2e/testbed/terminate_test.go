//go:build testbed

package testbed

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testTerminateContainer checks TerminateContainer on the real apiserver and kwok: the status
// is accepted, and kwok leaves it alone afterwards.
func testTerminateContainer(t *testing.T, c *Cluster) {
	t.Parallel()
	ns := newNamespace(t, c, "terminate")
	cases := []struct {
		name      string
		policy    corev1.RestartPolicy
		exit      int32
		phase     corev1.PodPhase
		restarted bool
	}{
		{"never-ok", corev1.RestartPolicyNever, 0, corev1.PodSucceeded, false},
		{"never-fail", corev1.RestartPolicyNever, 2, corev1.PodFailed, false},
		{"onfailure-ok", corev1.RestartPolicyOnFailure, 0, corev1.PodSucceeded, false},
		{"onfailure-fail", corev1.RestartPolicyOnFailure, 1, corev1.PodRunning, true},
		{"always-ok", corev1.RestartPolicyAlways, 0, corev1.PodRunning, true},
		{"always-fail", corev1.RestartPolicyAlways, 42, corev1.PodRunning, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: tc.name, Labels: map[string]string{"app": tc.name}},
				Spec: corev1.PodSpec{
					RestartPolicy: tc.policy,
					Containers:    []corev1.Container{{Name: "main", Image: testImage}},
				},
			}
			if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			waitForPod(t, c, ns, tc.name, 60*time.Second, "the pod Running", podRunning)

			msg := "exit " + tc.name
			if err := c.TerminateContainer(ctx, ns, tc.name, "main", tc.exit, msg); err != nil {
				t.Fatal(err)
			}
			// Give kwok the chance to overwrite what the "kubelet" reported; it must not.
			time.Sleep(2 * time.Second)
			got, err := c.Client.CoreV1().Pods(ns).Get(ctx, tc.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Status.Phase != tc.phase {
				t.Errorf("phase %s, want %s", got.Status.Phase, tc.phase)
			}
			cs := got.Status.ContainerStatuses[0]
			term := cs.State.Terminated
			if tc.restarted {
				term = cs.LastTerminationState.Terminated
				if cs.RestartCount != 1 || cs.State.Running == nil || !podRunning(got) {
					t.Errorf("not running again with restartCount 1: %+v", cs)
				}
			} else if podRunning(got) || cs.Ready {
				t.Errorf("pod still Ready after its container ended: %+v", got.Status)
			}
			if term == nil || term.ExitCode != tc.exit || term.Message != msg || term.FinishedAt.IsZero() {
				t.Fatalf("terminated state %+v, want exit %d message %q", term, tc.exit, msg)
			}
			wantReason := map[bool]string{true: "Completed", false: "Error"}[tc.exit == 0]
			if term.Reason != wantReason {
				t.Errorf("reason %q, want %q", term.Reason, wantReason)
			}
		})
	}
}
