package testbed

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/driverset/driverset/contract"
)

// WaitConverts is the README's install check: a server-side dry-run of an opted-in driver pod
// (running image) in namespace default comes back gated as a placeholder. It polls every second
// for at most within, since a webhook just installed may take a moment to answer; the error says
// what the last try gave.
func WaitConverts(ctx context.Context, c kubernetes.Interface, image string, within time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, within, true, func(ctx context.Context) (bool, error) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "driverset-check", Namespace: "default",
				Labels: map[string]string{contract.LabelSparkRole: contract.RoleDriver, contract.LabelResilient: "true"}},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
				Name: contract.DriverContainerName, Image: image, Args: []string{"driver", "--class", "Check", "check.jar"},
			}}},
		}
		got, err := c.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, g := range got.Spec.SchedulingGates {
			if g.Name == contract.GatePlaceholder {
				return true, nil
			}
		}
		last = fmt.Sprintf("no gate: %v", got.Spec.SchedulingGates)
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("an opted-in driver was not converted (%s): %w", last, err)
	}
	return nil
}

// PodsReport says where each pod of ns is and why it is not ready, for failure messages.
func PodsReport(ctx context.Context, c kubernetes.Interface, ns string) string {
	l, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	s := ""
	for _, p := range l.Items {
		s += fmt.Sprintf("  %s on %q: %s %s\n", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Message)
		for _, cs := range p.Status.ContainerStatuses {
			s += fmt.Sprintf("    %s image %s (%s) ready=%v restarts=%d state=%+v last=%+v\n",
				cs.Name, cs.Image, cs.ImageID, cs.Ready, cs.RestartCount, cs.State, cs.LastTerminationState)
		}
	}
	return s
}
