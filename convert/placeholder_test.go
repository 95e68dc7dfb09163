package convert

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/driverset/driverset/contract"
)

// TestToPlaceholderShrinks: the placeholder keeps the least of cpu, memory and ephemeral storage
// wherever the driver had them, nothing of any other resource, and records the real values.
func TestToPlaceholderShrinks(t *testing.T) {
	cases := []struct {
		name string
		real corev1.ResourceRequirements
		want corev1.ResourceRequirements
	}{
		{name: "spark's cpu request and memory request = limit",
			real: corev1.ResourceRequirements{Requests: list("cpu", "1", "memory", "1408Mi"), Limits: list("memory", "1408Mi")},
			want: corev1.ResourceRequirements{Requests: list("cpu", "0", "memory", "0"), Limits: list("memory", "0")}},
		{name: "cpu limit",
			real: corev1.ResourceRequirements{Requests: list("cpu", "500m", "memory", "2Gi"), Limits: list("cpu", "4", "memory", "2Gi")},
			want: corev1.ResourceRequirements{Requests: list("cpu", "0", "memory", "0"), Limits: list("cpu", "0", "memory", "0")}},
		{name: "extended resource and hugepages are dropped, ephemeral storage shrunk",
			real: corev1.ResourceRequirements{
				Requests: list("cpu", "4", "memory", "8Gi", "nvidia.com/gpu", "2", "hugepages-2Mi", "1Gi", "ephemeral-storage", "20Gi"),
				Limits:   list("memory", "8Gi", "nvidia.com/gpu", "2", "hugepages-2Mi", "1Gi", "ephemeral-storage", "40Gi")},
			want: corev1.ResourceRequirements{
				Requests: list("cpu", "0", "memory", "0", "ephemeral-storage", "0"),
				Limits:   list("memory", "0", "ephemeral-storage", "0")}},
		{name: "only extended resources leave no lists",
			real: corev1.ResourceRequirements{Requests: list("example.com/fpga", "1"), Limits: list("example.com/fpga", "1")},
			want: corev1.ResourceRequirements{}},
		{name: "no resources", real: corev1.ResourceRequirements{}, want: corev1.ResourceRequirements{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := driverPod()
			pod.Spec.Containers[0].Resources = *tc.real.DeepCopy()
			pod.Spec.InitContainers = []corev1.Container{{Name: "fetch", Resources: *tc.real.DeepCopy()}}
			if err := ToPlaceholder(pod); err != nil {
				t.Fatal(err)
			}
			for _, c := range []corev1.Container{pod.Spec.Containers[0], pod.Spec.InitContainers[0]} {
				if !equalResources(c.Resources, tc.want) {
					t.Errorf("%s: placeholder resources %v, want %v", c.Name, c.Resources, tc.want)
				}
			}
			got, err := RealResources(pod)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{contract.DriverContainerName, "fetch"} {
				if r, ok := got[name]; !ok || !equalResources(r, tc.real) {
					t.Errorf("recorded for %s: %v (present %v), want %v", name, r, ok, tc.real)
				}
			}
		})
	}
}

func equalResources(a, b corev1.ResourceRequirements) bool {
	eq := func(x, y corev1.ResourceList) bool {
		if len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || v.Cmp(w) != 0 {
				return false
			}
		}
		return true
	}
	return eq(a.Requests, b.Requests) && eq(a.Limits, b.Limits)
}

func TestToPlaceholderMarks(t *testing.T) {
	pod := driverPod()
	pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/quota"}}
	if IsPlaceholder(pod) {
		t.Fatal("a fresh driver pod reported as a placeholder")
	}
	if err := ToPlaceholder(pod); err != nil {
		t.Fatal(err)
	}
	if pod.Labels[contract.LabelPlaceholder] != "true" || !IsPlaceholder(pod) {
		t.Errorf("labels %v, want %s=true", pod.Labels, contract.LabelPlaceholder)
	}
	wantGates := []corev1.PodSchedulingGate{{Name: "example.com/quota"}, {Name: contract.GatePlaceholder}}
	if !reflect.DeepEqual(pod.Spec.SchedulingGates, wantGates) {
		t.Errorf("gates %v, want %v", pod.Spec.SchedulingGates, wantGates)
	}
}

// TestToPlaceholderIsIdempotent: converting a placeholder again changes nothing, above all not the
// recorded resources (which would otherwise become the shrunk ones).
func TestToPlaceholderIsIdempotent(t *testing.T) {
	pod := driverPod()
	if err := ToPlaceholder(pod); err != nil {
		t.Fatal(err)
	}
	once := pod.DeepCopy()
	if err := ToPlaceholder(pod); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(pod, once) {
		t.Errorf("second ToPlaceholder changed the pod:\n%+v\nwas\n%+v", pod, once)
	}
	// A placeholder that lost its label (what the install's admission policy keys on) gets it back,
	// and nothing else changes: above all not the recorded resources.
	for _, lost := range []func(*corev1.Pod){
		func(p *corev1.Pod) { delete(p.Labels, contract.LabelPlaceholder) },
		func(p *corev1.Pod) { p.Labels[contract.LabelPlaceholder] = "false" },
	} {
		p := once.DeepCopy()
		lost(p)
		if err := ToPlaceholder(p); err != nil || !reflect.DeepEqual(p, once) {
			t.Errorf("ToPlaceholder on a placeholder without its label: err=%v, pod\n%+v\nwant\n%+v", err, p, once)
		}
	}
}

func TestToPlaceholderRefuses(t *testing.T) {
	t.Run("not convertible leaves the pod untouched", func(t *testing.T) {
		pod := driverPod()
		pod.Annotations = map[string]string{contract.AnnotationMaxRestarts: "x"}
		before := pod.DeepCopy()
		var nc *NotConvertible
		if err := ToPlaceholder(pod); !errors.As(err, &nc) || !reflect.DeepEqual(pod, before) {
			t.Errorf("ToPlaceholder: %v, changed=%v; want a *NotConvertible and no change", err, !reflect.DeepEqual(pod, before))
		}
	})
	for _, tc := range []struct {
		name, reason string
		mark         func(*corev1.Pod)
	}{
		{"placeholder label without the gate", "but not its scheduling gate", func(p *corev1.Pod) { p.Labels[contract.LabelPlaceholder] = "true" }},
		{"recorded resources without the gate", "but not its scheduling gate", func(p *corev1.Pod) {
			p.Annotations = map[string]string{contract.AnnotationResources: "{}"}
		}},
		// S-0 would get the placeholder's shrunk resources as the real ones.
		{"label and gate without the recorded resources", "not the annotation driverset.dev/resources", func(p *corev1.Pod) {
			p.Labels[contract.LabelPlaceholder] = "true"
			AddGate(&p.Spec, contract.GatePlaceholder)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := driverPod()
			tc.mark(pod)
			var nc *NotConvertible
			if err := ToPlaceholder(pod); !errors.As(err, &nc) || !strings.Contains(nc.Reason, tc.reason) {
				t.Errorf("ToPlaceholder: %v, want a *NotConvertible saying %q", err, tc.reason)
			}
		})
	}
}

func TestRealResources(t *testing.T) {
	pod := driverPod()
	if got, err := RealResources(pod); got != nil || err != nil {
		t.Errorf("no annotation: %v, %v; want nil, nil", got, err)
	}
	pod.Annotations = map[string]string{contract.AnnotationResources: "{not json"}
	if _, err := RealResources(pod); err == nil {
		t.Error("invalid annotation accepted")
	}
	want := ContainerResources{"c": {Requests: list("cpu", "2")}}
	b, _ := json.Marshal(want)
	pod.Annotations[contract.AnnotationResources] = string(b)
	if got, err := RealResources(pod); err != nil || !equalResources(got["c"], want["c"]) || len(got) != 1 {
		t.Errorf("RealResources = %v, %v; want %v", got, err, want)
	}
}
