package inspect

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/driverset/driverset/contract"
)

// CheckPodName is the name of the pod the install check asks the apiserver to admit (dry run).
const CheckPodName = "driverset-check"

// CheckPod is the opted-in driver pod of the README's install check (`kubectl run driverset-check
// --dry-run=server ... -- driver --class Check check.jar`), made to meet Pod Security's restricted
// level so that the namespace's policy does not refuse it before driverset is asked.
func CheckPod(ns string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: CheckPodName, Namespace: ns, Labels: map[string]string{
			contract.LabelSparkRole: contract.RoleDriver, contract.LabelResilient: "true",
		}},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: CheckPodName, Image: "apache/spark", Args: []string{contract.RoleDriver, "--class", "Check", "check.jar"},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
}

// CheckVerdict says whether admitted, the apiserver's answer to CheckPod, was converted by
// driverset: a placeholder, gated so that it never runs.
func CheckVerdict(admitted *corev1.Pod) error {
	for _, g := range admitted.Spec.SchedulingGates {
		if g.Name == contract.GatePlaceholder && admitted.Labels[contract.LabelPlaceholder] == "true" {
			return nil
		}
	}
	return fmt.Errorf("driverset did not convert the opted-in driver pod %s/%s: scheduling gates %v, labels %v "+
		"(is driverset's webhook configured, and is the namespace excluded?)",
		admitted.Namespace, admitted.Name, admitted.Spec.SchedulingGates, admitted.Labels)
}

// RunCheck asks the apiserver to admit CheckPod in ns as a dry run (nothing is stored, nothing
// runs) and checks the answer: the install check of the README and of `helm test`.
func RunCheck(ctx context.Context, c kubernetes.Interface, ns string) (*corev1.Pod, error) {
	got, err := c.CoreV1().Pods(ns).Create(ctx, CheckPod(ns), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return nil, fmt.Errorf("dry-run create of an opted-in driver pod in %s: %w", ns, err)
	}
	return got, CheckVerdict(got)
}
