package convert

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// smallest is the least positive amount of each resource a placeholder may keep.
func smallest(name corev1.ResourceName) resource.Quantity {
	switch name {
	case corev1.ResourceMemory:
		return resource.MustParse("1Mi")
	case corev1.ResourceEphemeralStorage:
		return resource.MustParse("1Ki")
	}
	return resource.MustParse("1m")
}

// FloorOf is what a namespace's LimitRanges require of each of a placeholder's containers for
// cpu, memory and ephemeral-storage: the largest Container or Pod `min`, and, where a
// maxLimitRequestRatio is set, at least the smallest positive amount (the LimitRanger refuses a
// request of 0 under a ratio). An empty floor means 0 is fine. A Pod min is applied to each
// container, which may ask a little more of a multi-container placeholder than the minimum.
func FloorOf(ranges []corev1.LimitRange) corev1.ResourceList {
	floor := corev1.ResourceList{}
	raise := func(name corev1.ResourceName, q resource.Quantity) {
		if cur, ok := floor[name]; !ok || q.Cmp(cur) > 0 {
			floor[name] = q
		}
	}
	for _, lr := range ranges {
		for _, item := range lr.Spec.Limits {
			if item.Type != corev1.LimitTypeContainer && item.Type != corev1.LimitTypePod {
				continue
			}
			for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
				if q, ok := item.Min[name]; ok {
					raise(name, q)
				}
				if _, ok := item.MaxLimitRequestRatio[name]; ok {
					raise(name, smallest(name))
				}
			}
		}
	}
	return floor
}
