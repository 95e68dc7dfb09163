package convert

import (
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/driverset/driverset/contract"
)

const claimAppID = "spark-0123456789abcdef0123456789abcdef"

func TestKeepClaim(t *testing.T) {
	p := driverPod()
	p.UID = "placeholder-uid"
	ref := func(kind, uid string, controller bool) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "v1", Kind: kind, Name: "x", UID: "x", Controller: ptr.To(controller)}}
	}
	byP := ref("Pod", "", true)
	byP[0].UID = p.UID
	byOther := ref("Pod", "", true)
	notController := ref("Pod", "", false)
	notController[0].UID = p.UID
	sparkLabels := map[string]string{contract.LabelSparkAppSelector: claimAppID, "team": "a"}
	kept := map[string]string{contract.LabelClaimAppSelector: claimAppID, "team": "a"}
	for _, tc := range []struct {
		name    string
		owners  []metav1.OwnerReference
		labels  map[string]string
		changed bool
		want    map[string]string
	}{
		{"spark-submit's claim for the placeholder: the app id moves", byP, sparkLabels, true, kept},
		{"already moved: unchanged", byP, kept, false, kept},
		{"no app id (a claim spark-submit did not label): unchanged", byP, map[string]string{"team": "a"}, false, map[string]string{"team": "a"}},
		{"a claim the user made, no owner: unchanged", nil, sparkLabels, false, sparkLabels},
		{"owned by another pod (an executor's, or the driver's StatefulSet pod): Spark's", byOther, sparkLabels, false, sparkLabels},
		{"the placeholder is an owner but not the controller: unchanged", notController, sparkLabels, false, sparkLabels},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", OwnerReferences: tc.owners, Labels: maps.Clone(tc.labels)}}
			if got := KeepClaim(pvc, p); got != tc.changed {
				t.Errorf("changed = %v, want %v", got, tc.changed)
			}
			if !maps.Equal(pvc.Labels, tc.want) {
				t.Errorf("labels %v, want %v", pvc.Labels, tc.want)
			}
		})
	}
}

func TestDriverClaims(t *testing.T) {
	p := driverPod()
	p.Spec.Volumes = []corev1.Volume{
		{Name: "a", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "pi-driver-pvc-0"}}},
		{Name: "b", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "c", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "shared"}}},
	}
	if got, want := DriverClaims(p), []string{"pi-driver-pvc-0", "shared"}; !slices.Equal(got, want) {
		t.Errorf("DriverClaims = %v, want %v", got, want)
	}
}
