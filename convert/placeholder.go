package convert

import (
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/driverset/driverset/contract"
)

// ContainerResources is the value of contract.AnnotationResources: the real resources of each
// container and init container of the driver, by container name, as spark-submit asked for them,
// and the pod-level ones (spec.resources) under PodLevelKey when the pod has them.
type ContainerResources map[string]corev1.ResourceRequirements

// PodLevelKey is the key of the pod-level resources in ContainerResources: a container name is a
// DNS label, which has no dot, so no container can take it.
const PodLevelKey = "spec.resources"

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
		// A real placeholder got its gate, label and annotation in one patch. One without the gate
		// would run bare while claiming to be held; one without the recorded resources would give
		// S-0 the shrunk ones as the real ones.
		if !HasGate(&pod.Spec, contract.GatePlaceholder) {
			return notConvertible(pod, "it carries driverset's placeholder label %s or annotation %s but not its "+
				"scheduling gate %s; remove that label and annotation and let driverset convert the pod",
				contract.LabelPlaceholder, contract.AnnotationResources, contract.GatePlaceholder)
		}
		if _, recorded := pod.Annotations[contract.AnnotationResources]; !recorded {
			return notConvertible(pod, "it carries driverset's placeholder label %s and gate %s but not the annotation %s "+
				"that records the driver's resources; remove that label and gate and let driverset convert the pod",
				contract.LabelPlaceholder, contract.GatePlaceholder, contract.AnnotationResources)
		}
		// The label is what the install's admission policy keys on to keep the gate; a
		// placeholder that lost it gets it back.
		pod.Labels = setLabel(pod.Labels, contract.LabelPlaceholder, "true")
		return nil
	}
	recorded := ContainerResources{}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			recorded[cs[i].Name] = *cs[i].Resources.DeepCopy()
			shrink(&cs[i].Resources, floor)
		}
	}
	if r := pod.Spec.Resources; r != nil {
		recorded[PodLevelKey] = *r.DeepCopy()
		shrinkPodLevel(&pod.Spec)
	}
	value, err := json.Marshal(recorded)
	if err != nil {
		return fmt.Errorf("recording the resources of pod %s: %w", podRef(pod), err)
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[contract.AnnotationResources] = string(value)
	pod.Labels = setLabel(pod.Labels, contract.LabelPlaceholder, "true")
	AddGate(&pod.Spec, contract.GatePlaceholder)
	// A deleted placeholder stays until its driver has stopped (the controller's stopDeletedApp):
	// without the finalizer a pod that never ran is removed at once, while S-0 still stops.
	if !slices.Contains(pod.Finalizers, contract.FinalizerOutcome) {
		pod.Finalizers = append(pod.Finalizers, contract.FinalizerOutcome)
	}
	return nil
}

func setLabel(labels map[string]string, key, value string) map[string]string {
	if labels == nil {
		labels = map[string]string{}
	}
	labels[key] = value
	return labels
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

// shrinkPodLevel shrinks spec.resources after the containers were shrunk. A quota charges the
// pod-level value of a resource named there instead of the containers' (cpu, memory), so it keeps
// the least the apiserver accepts: at least what the shrunk containers add up to, as the apiserver
// counts them (requests), and no less than any one container's limit (limits). Without a
// LimitRange floor that is 0. Every other resource (hugepages) is dropped, as in the containers.
func shrinkPodLevel(spec *corev1.PodSpec) {
	r := spec.Resources
	for _, list := range []corev1.ResourceList{r.Requests, r.Limits} {
		for name := range list {
			if _, keep := placeholderQuantity(name); !keep {
				delete(list, name)
			}
		}
	}
	for name := range r.Requests {
		r.Requests[name] = aggregateRequests(spec, name)
	}
	for name := range r.Limits {
		q := aggregateRequests(spec, name)
		for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
			for _, c := range cs {
				if l, ok := c.Resources.Limits[name]; ok && l.Cmp(q) > 0 {
					q = l.DeepCopy()
				}
			}
		}
		r.Limits[name] = q
	}
	if len(r.Requests) == 0 {
		r.Requests = nil
	}
	if len(r.Limits) == 0 {
		r.Limits = nil
	}
}

// aggregateRequests is the request of spec's containers for name as the apiserver adds them up
// against pod-level requests (k8s.io/component-helpers resource.AggregateContainerRequests): the
// containers and sidecars together, or an init container with the sidecars started before it,
// whichever is more.
func aggregateRequests(spec *corev1.PodSpec, name corev1.ResourceName) resource.Quantity {
	var running, sidecars resource.Quantity
	for _, c := range spec.Containers {
		running.Add(c.Resources.Requests[name])
	}
	var most resource.Quantity
	for _, c := range spec.InitContainers {
		q := c.Resources.Requests[name]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars.Add(q)
			continue
		}
		q = q.DeepCopy()
		q.Add(sidecars)
		if q.Cmp(most) > 0 {
			most = q
		}
	}
	running.Add(sidecars)
	if most.Cmp(running) > 0 {
		return most
	}
	return running
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
