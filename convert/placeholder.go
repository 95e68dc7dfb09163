package convert

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/driverset/driverset/contract"
)

// ContainerResources is the value of contract.AnnotationResources: the real resources of each
// container and init container of the driver, by container name, as spark-submit asked for them.
type ContainerResources map[string]corev1.ResourceRequirements

// placeholderQuantity is what a placeholder keeps of a resource. cpu, memory and ephemeral-storage
// keep their key with the value 0: a ResourceQuota that tracks a resource requires every pod to
// name it, and accepts 0 (checked on the test bed), so a quota sized for the app is not charged
// twice for its driver. Every other resource (extended resources such as GPUs, hugepages) is
// dropped, so a pod that never runs holds none of it.
func placeholderQuantity(name corev1.ResourceName) (resource.Quantity, bool) {
	switch name {
	case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		return resource.MustParse("0"), true
	}
	return resource.Quantity{}, false
}

// IsPlaceholder reports whether pod has already been turned into a placeholder: it carries the
// placeholder label or the recorded resources.
func IsPlaceholder(pod *corev1.Pod) bool {
	_, recorded := pod.Annotations[contract.AnnotationResources]
	return pod.Labels[contract.LabelPlaceholder] == "true" || recorded
}

// ToPlaceholder turns pod, in place, into the gated placeholder that no node ever runs
// (docs/design.md#the-placeholder): the placeholder gate and label, the real resources recorded in an annotation, and
// shrunk resources so the namespace's quota is not charged twice for one driver.
//
// It returns Check's error, leaving pod untouched, when pod cannot be converted. A pod that is
// already a placeholder is left exactly as it is, so re-invoking the webhook never records the
// shrunk values as the real ones; one that claims to be a placeholder without the gate is refused.
func ToPlaceholder(pod *corev1.Pod) error {
	return ToPlaceholderWithin(pod, nil)
}

// ToPlaceholderWithin is ToPlaceholder in a namespace whose LimitRanges ask more of every
// container than nothing: the placeholder keeps floor (see FloorOf) instead of 0 for the resources
// it names, so the LimitRanger admits it while the quota is charged no more than it must be.
func ToPlaceholderWithin(pod *corev1.Pod, floor corev1.ResourceList) error {
	if err := Check(pod); err != nil {
		return err
	}
	if IsPlaceholder(pod) {
		// A real placeholder got its gate in the same patch as its label; one without the gate
		// would run bare while claiming to be held.
		if !HasGate(&pod.Spec, contract.GatePlaceholder) {
			return notConvertible(pod, "it carries driverset's placeholder label %s or annotation %s but not its "+
				"scheduling gate %s; remove that label and annotation and let driverset convert the pod",
				contract.LabelPlaceholder, contract.AnnotationResources, contract.GatePlaceholder)
		}
		return nil
	}
	recorded := ContainerResources{}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			recorded[cs[i].Name] = *cs[i].Resources.DeepCopy()
			shrink(&cs[i].Resources, floor)
		}
	}
	value, err := json.Marshal(recorded)
	if err != nil {
		return fmt.Errorf("recording the resources of pod %s: %w", podRef(pod), err)
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[contract.AnnotationResources] = string(value)
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[contract.LabelPlaceholder] = "true"
	AddGate(&pod.Spec, contract.GatePlaceholder)
	return nil
}

// shrink replaces every quantity with the placeholder's, in requests and limits alike, so a
// request can never exceed its limit and a quota that requires a key still finds it. A resource
// named in floor keeps the floor's value instead, unless the real one was smaller.
func shrink(r *corev1.ResourceRequirements, floor corev1.ResourceList) {
	for _, list := range []corev1.ResourceList{r.Requests, r.Limits} {
		for name, real := range list {
			q, keep := placeholderQuantity(name)
			if !keep {
				delete(list, name)
				continue
			}
			if f, ok := floor[name]; ok && f.Cmp(q) > 0 {
				q = f
				if real.Cmp(q) < 0 {
					q = real
				}
			}
			list[name] = q
		}
	}
	// An emptied list is dropped, as the apiserver itself would omit it.
	if len(r.Requests) == 0 {
		r.Requests = nil
	}
	if len(r.Limits) == 0 {
		r.Limits = nil
	}
}

// RealResources returns the resources recorded on a placeholder, or nil when it has none recorded
// (then its containers' resources are the real ones).
func RealResources(pod *corev1.Pod) (ContainerResources, error) {
	v, ok := pod.Annotations[contract.AnnotationResources]
	if !ok {
		return nil, nil
	}
	var recorded ContainerResources
	if err := json.Unmarshal([]byte(v), &recorded); err != nil {
		return nil, fmt.Errorf("annotation %s of pod %s is not valid: %w", contract.AnnotationResources, podRef(pod), err)
	}
	return recorded, nil
}
