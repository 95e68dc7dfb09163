package webhook

import (
	"encoding/json"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestFieldPatch is the short path's diff: one replace per top-level field that changed, carrying
// the field whole, and nothing for fields that did not; applied as the apiserver applies a
// webhook's patch, to the pod's encoding before the change, it gives the pod after it. A change of kind or apiVersion is not carried: the long path gets it.
func TestFieldPatch(t *testing.T) {
	base := func() *corev1.Pod {
		return &corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"spark-role": "driver"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
		}
	}
	for _, tc := range []struct {
		name   string
		change func(*corev1.Pod)
		want   []string
		notOK  bool
	}{
		{name: "the same", change: func(*corev1.Pod) {}},
		{name: "a change deep inside spec", change: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("0")
		}, want: []string{"replace /spec"}},
		{name: "metadata and spec", change: func(p *corev1.Pod) {
			p.Labels["driverset.dev/placeholder"] = "true"
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "driverset.dev/placeholder"}}
		}, want: []string{"replace /metadata", "replace /spec"}},
		{name: "status", change: func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending },
			want: []string{"replace /status"}},
		// Go values are compared as they are: a change the apiserver would decode the same is
		// carried all the same, and applies to the same pod.
		{name: "an empty list for none", change: func(p *corev1.Pod) { p.Spec.Tolerations = []corev1.Toleration{} },
			want: []string{"replace /spec"}},
		{name: "another spelling of the same quantity", change: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1000m")
		}, want: []string{"replace /spec"}},
		{name: "kind", change: func(p *corev1.Pod) { p.Kind = "NotAPod" }, notOK: true},
		{name: "apiVersion", change: func(p *corev1.Pod) { p.APIVersion = "" }, notOK: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			was, pod := base(), base()
			tc.change(pod)
			ops, ok := fieldPatch(was, pod)
			if ok == tc.notOK {
				t.Fatalf("ok %v, want %v", ok, !tc.notOK)
			}
			var got []string
			for _, op := range ops {
				got = append(got, op.Operation+" "+op.Path)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("ops %v, want %v", got, tc.want)
			}
			if !ok {
				return
			}
			before, err := json.Marshal(was)
			if err != nil {
				t.Fatal(err)
			}
			var applied corev1.Pod
			if err := json.Unmarshal(applyPatch(t, before, ops), &applied); err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(&applied, pod) {
				t.Errorf("applied: %+v\nwant %+v", applied, pod)
			}
		})
	}
}
