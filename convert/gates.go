package convert

import corev1 "k8s.io/api/core/v1"

// Scheduling gates are how driverset holds pods: the placeholder forever, a new incarnation
// while stale executors exist. These three are the one place that reads and edits them.

// HasGate reports whether spec carries the scheduling gate name.
func HasGate(spec *corev1.PodSpec, name string) bool {
	for _, g := range spec.SchedulingGates {
		if g.Name == name {
			return true
		}
	}
	return false
}

// AddGate adds the scheduling gate name to spec once.
func AddGate(spec *corev1.PodSpec, name string) {
	if !HasGate(spec, name) {
		spec.SchedulingGates = append(spec.SchedulingGates, corev1.PodSchedulingGate{Name: name})
	}
}

// RemoveGate removes the scheduling gate name from spec, keeping every other gate.
func RemoveGate(spec *corev1.PodSpec, name string) {
	var kept []corev1.PodSchedulingGate
	for _, g := range spec.SchedulingGates {
		if g.Name != name {
			kept = append(kept, g)
		}
	}
	spec.SchedulingGates = kept
}
