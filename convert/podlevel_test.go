package convert

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// aggregateContainers is what the apiserver counts of spec's containers for resource name
// (k8s.io/component-helpers resource.AggregateContainerRequests/Limits): the sum of the
// containers and sidecars, or an init container with the sidecars started before it, if more.
func aggregateContainers(spec *corev1.PodSpec, name corev1.ResourceName, limits bool) resource.Quantity {
	of := func(c corev1.Container) resource.Quantity {
		l := c.Resources.Requests
		if limits {
			l = c.Resources.Limits
		}
		return l[name].DeepCopy()
	}
	var sum, sidecars resource.Quantity
	for _, c := range spec.Containers {
		sum.Add(of(c))
	}
	largest := resource.Quantity{}
	for _, c := range spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars.Add(of(c))
			continue
		}
		q := of(c)
		q.Add(sidecars)
		if q.Cmp(largest) > 0 {
			largest = q
		}
	}
	sum.Add(sidecars)
	if largest.Cmp(sum) > 0 {
		return largest
	}
	return sum
}

// quotaRequest is what a ResourceQuota charges pod for requests of name: the pod-level request
// when spec.resources names it (cpu and memory), else the containers' aggregate.
func quotaRequest(pod *corev1.Pod, name corev1.ResourceName) resource.Quantity {
	if r := pod.Spec.Resources; r != nil {
		if q, ok := r.Requests[name]; ok {
			return q
		}
	}
	return aggregateContainers(&pod.Spec, name, false)
}

// podLevelErrors is the apiserver's check of spec.resources against the containers
// (validatePodResourceConsistency, and requests within limits).
func podLevelErrors(spec *corev1.PodSpec) []string {
	r := spec.Resources
	if r == nil {
		return nil
	}
	var errs []string
	for name, q := range r.Requests {
		if agg := aggregateContainers(spec, name, false); agg.Cmp(q) > 0 {
			errs = append(errs, fmt.Sprintf("requests.%s %s < aggregate container requests %s", name, q.String(), agg.String()))
		}
		if l, ok := r.Limits[name]; ok && q.Cmp(l) > 0 {
			errs = append(errs, fmt.Sprintf("requests.%s %s > limits.%s %s", name, q.String(), name, l.String()))
		}
	}
	for name, l := range r.Limits {
		for _, c := range append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...) {
			if q, ok := c.Resources.Limits[name]; ok && q.Cmp(l) > 0 {
				errs = append(errs, fmt.Sprintf("container %s limits.%s %s > pod-level %s", c.Name, name, q.String(), l.String()))
			}
		}
	}
	return errs
}

// TestPodLevelResources: a driver with pod-level spec.resources (requests and limits) is charged
// to the namespace's quota once: the placeholder keeps the least the apiserver accepts there too,
// and S-0 gets the real values back.
func TestPodLevelResources(t *testing.T) {
	real := &corev1.ResourceRequirements{
		Requests: list("cpu", "2", "memory", "4Gi", "hugepages-2Mi", "1Gi"),
		Limits:   list("cpu", "4", "memory", "4Gi", "hugepages-2Mi", "1Gi"),
	}
	cases := []struct {
		name  string
		floor corev1.ResourceList
		// what the placeholder is charged for cpu and memory requests
		cpu, memory string
	}{
		{name: "no LimitRange: nothing", cpu: "0", memory: "0"},
		// Two containers at the floor: the pod level must hold both (init containers run before).
		{name: "a LimitRange min: the containers' floors", floor: list("cpu", "100m", "memory", "64Mi"), cpu: "200m", memory: "128Mi"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := driverPod()
			pod.Spec.Resources = real.DeepCopy()
			pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "sidecar",
				Resources: corev1.ResourceRequirements{Requests: list("cpu", "250m", "memory", "256Mi"), Limits: list("memory", "256Mi")}})
			pod.Spec.InitContainers = []corev1.Container{{Name: "fetch",
				Resources: corev1.ResourceRequirements{Requests: list("cpu", "1", "memory", "1Gi"), Limits: list("cpu", "1", "memory", "1Gi")}}}
			if err := ToPlaceholderWithin(pod, tc.floor); err != nil {
				t.Fatal(err)
			}
			for name, want := range map[corev1.ResourceName]string{corev1.ResourceCPU: tc.cpu, corev1.ResourceMemory: tc.memory} {
				if got := quotaRequest(pod, name); got.Cmp(resource.MustParse(want)) != 0 {
					t.Errorf("the quota charges the placeholder %s of %s, want %s", got.String(), name, want)
				}
			}
			if _, ok := pod.Spec.Resources.Requests["hugepages-2Mi"]; ok {
				t.Errorf("the placeholder keeps pod-level hugepages: %v", pod.Spec.Resources)
			}
			if errs := podLevelErrors(&pod.Spec); len(errs) != 0 {
				t.Errorf("the apiserver refuses the placeholder: %v", errs)
			}
			pod.UID = "u"
			tpl := buildS(t, pod).Spec.Template.Spec
			if !reflect.DeepEqual(tpl.Resources, real) {
				t.Errorf("S-0's pod-level resources %v, want the real %v", tpl.Resources, real)
			}
			if errs := podLevelErrors(&tpl); len(errs) != 0 {
				t.Errorf("the apiserver refuses S-0: %v", errs)
			}
		})
	}
}
