package convert

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func limitRange(typ corev1.LimitType, min, ratio corev1.ResourceList) corev1.LimitRange {
	return corev1.LimitRange{Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: typ, Min: min, MaxLimitRequestRatio: ratio}}}}
}

func TestFloorOf(t *testing.T) {
	cases := []struct {
		name   string
		ranges []corev1.LimitRange
		want   corev1.ResourceList
	}{
		{"no LimitRange: 0 is fine", nil, corev1.ResourceList{}},
		{"container min", []corev1.LimitRange{limitRange(corev1.LimitTypeContainer, list("cpu", "100m", "memory", "64Mi"), nil)},
			list("cpu", "100m", "memory", "64Mi")},
		{"the largest min of several", []corev1.LimitRange{
			limitRange(corev1.LimitTypeContainer, list("cpu", "100m"), nil),
			limitRange(corev1.LimitTypePod, list("cpu", "250m"), nil)},
			list("cpu", "250m")},
		{"a ratio needs a request above 0", []corev1.LimitRange{limitRange(corev1.LimitTypeContainer, nil, list("memory", "2"))},
			list("memory", "1Mi")},
		{"PVC limits do not apply", []corev1.LimitRange{limitRange(corev1.LimitTypePersistentVolumeClaim, list("storage", "1Gi"), nil)},
			corev1.ResourceList{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := FloorOf(tc.ranges)
			if len(got) != len(tc.want) {
				t.Fatalf("floor %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if g := got[k]; g.Cmp(v) != 0 {
					t.Errorf("floor[%s] = %s, want %s", k, g.String(), v.String())
				}
			}
		})
	}
}

// Under a LimitRange min, the placeholder keeps the min instead of 0, in requests and limits.
func TestToPlaceholderWithinAFloor(t *testing.T) {
	pod := driverPod()
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Requests: list("cpu", "1", "memory", "1408Mi"),
		Limits:   list("memory", "1408Mi"),
	}
	if err := ToPlaceholderWithin(pod, list("cpu", "100m", "memory", "64Mi")); err != nil {
		t.Fatal(err)
	}
	r := pod.Spec.Containers[0].Resources
	for _, c := range []struct {
		list corev1.ResourceList
		name corev1.ResourceName
		want string
	}{{r.Requests, "cpu", "100m"}, {r.Requests, "memory", "64Mi"}, {r.Limits, "memory", "64Mi"}} {
		if got := c.list[c.name]; got.Cmp(resource.MustParse(c.want)) != 0 {
			t.Errorf("%s = %s, want %s", c.name, got.String(), c.want)
		}
	}
	real, err := RealResources(pod)
	if cpu := real[pod.Spec.Containers[0].Name].Requests[corev1.ResourceCPU]; err != nil || cpu.String() != "1" {
		t.Errorf("real resources recorded %v (%v), want the driver's own", real, err)
	}
}
