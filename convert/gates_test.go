package convert

import (
	"path"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestGates(t *testing.T) {
	spec := &corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: "kueue"}}}
	AddGate(spec, "ours")
	AddGate(spec, "ours")
	if want := []corev1.PodSchedulingGate{{Name: "kueue"}, {Name: "ours"}}; !reflect.DeepEqual(spec.SchedulingGates, want) {
		t.Fatalf("after adding twice: %v, want %v", spec.SchedulingGates, want)
	}
	if !HasGate(spec, "ours") || HasGate(spec, "other") {
		t.Errorf("HasGate wrong on %v", spec.SchedulingGates)
	}
	RemoveGate(spec, "ours")
	if want := []corev1.PodSchedulingGate{{Name: "kueue"}}; !reflect.DeepEqual(spec.SchedulingGates, want) {
		t.Errorf("after removing: %v, want %v (other gates kept)", spec.SchedulingGates, want)
	}
}

// wrap's state lives in the emptyDir the template mounts; else it would not survive a restart.
func TestStateDirIsInTheMountedVolume(t *testing.T) {
	if path.Dir(StateDir) != MountPath {
		t.Errorf("StateDir %s is not inside the mounted volume %s", StateDir, MountPath)
	}
}
