package convert

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
)

// driverPod is a minimal Spark driver pod as spark-submit posts it.
func driverPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "pi-0123456789abcdef-driver", Namespace: "jobs",
			Labels: map[string]string{
				contract.LabelSparkRole:        contract.RoleDriver,
				contract.LabelSparkAppSelector: "spark-0123456789abcdef0123456789abcdef",
				contract.LabelResilient:        "true",
			},
		},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name:  contract.DriverContainerName,
				Image: "apache/spark:3.5.3",
				Args:  []string{"driver", "--properties-file", "/opt/spark/conf/spark.properties", "--class", "Pi", "spark-internal"},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1408Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1408Mi")},
				},
			}},
		},
	}
}

// persisted turns pod into its placeholder as the apiserver stores it: converted by the webhook,
// then its matchLabelKeys/mismatchLabelKeys merged into their selectors.
func persisted(pod *corev1.Pod) *corev1.Pod {
	if err := ToPlaceholder(pod); err != nil {
		panic(err)
	}
	apiserverMergesLabelKeys(pod)
	pod.UID = "6f1c2d3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f"
	return pod
}

func list(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}
