package webhook

import (
	"context"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// In a namespace whose LimitRange sets a min per container, the placeholder keeps that min
// (the LimitRanger would refuse 0); elsewhere it keeps 0.
func TestDriverPlaceholderRespectsLimitRangeMin(t *testing.T) {
	raw := readPodJSON(t, "testdata/spark-3.5.pod.yaml")
	var pod corev1.Pod
	if err := json.Unmarshal(raw, &pod); err != nil {
		t.Fatal(err)
	}
	lr := &corev1.LimitRange{
		ObjectMeta: metav1.ObjectMeta{Name: "floor", Namespace: pod.Namespace},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type: corev1.LimitTypeContainer,
			Min:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		}}},
	}
	cases := []struct {
		name            string
		reader          client.Reader
		wantCPU, wantMi string
	}{
		{"no cache", nil, "0", "0"},
		{"no LimitRange in the namespace", fake.NewClientBuilder().Build(), "0", "0"},
		{"a LimitRange min", fake.NewClientBuilder().WithObjects(lr).Build(), "100m", "64Mi"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &Driver{Seal: testSeal(), LimitRanges: tc.reader}
			resp := d.Handle(context.Background(), createRequest(raw, false))
			if !resp.Allowed {
				t.Fatalf("refused: %v", resp.Result)
			}
			var got corev1.Pod
			if err := json.Unmarshal(applyPatch(t, raw, resp.Patches), &got); err != nil {
				t.Fatal(err)
			}
			r := got.Spec.Containers[0].Resources.Requests
			if cpu, mem := r[corev1.ResourceCPU], r[corev1.ResourceMemory]; cpu.Cmp(resource.MustParse(tc.wantCPU)) != 0 || mem.Cmp(resource.MustParse(tc.wantMi)) != 0 {
				t.Errorf("placeholder requests cpu %s memory %s, want %s and %s", cpu.String(), mem.String(), tc.wantCPU, tc.wantMi)
			}
		})
	}
}
