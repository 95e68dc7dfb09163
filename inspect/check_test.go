package inspect

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/driverset/driverset/contract"
)

func TestCheckVerdict(t *testing.T) {
	converted := func() *corev1.Pod {
		p := CheckPod("spark-jobs")
		p.Labels[contract.LabelPlaceholder] = "true"
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "kueue"}, {Name: contract.GatePlaceholder}}
		return p
	}
	gateOnly, labelOnly := converted(), converted()
	delete(gateOnly.Labels, contract.LabelPlaceholder)
	labelOnly.Spec.SchedulingGates = nil
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		ok   bool
	}{
		{"converted: the placeholder gate and label", converted(), true},
		{"left alone (webhook not called, namespace excluded)", CheckPod("spark-jobs"), false},
		{"a gate without the label", gateOnly, false},
		{"the label without the gate", labelOnly, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := CheckVerdict(tc.pod); (err == nil) != tc.ok {
				t.Errorf("CheckVerdict = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// The check pod is an opted-in spark-submit driver as the README's kubectl run makes it.
func TestCheckPod(t *testing.T) {
	p := CheckPod("ns")
	if p.Labels[contract.LabelSparkRole] != contract.RoleDriver || p.Labels[contract.LabelResilient] != "true" ||
		p.Spec.Containers[0].Args[0] != contract.RoleDriver || p.Namespace != "ns" {
		t.Errorf("check pod %+v", p)
	}
}
