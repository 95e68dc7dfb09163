//go:build testbed

package e2e

import (
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
)

// floodStatefulSet is a StatefulSet labelled as driverset's, of about floodPayload bytes, most of
// them labels: driverset caches its metadata, never its pod template. Of 0 replicas, it makes no
// pod, and driverset's orphan reconciler leaves it alone.
func floodStatefulSet(i int) *appsv1.StatefulSet {
	sel := map[string]string{"app": "flood"}
	return &appsv1.StatefulSet{
		ObjectMeta: floodMeta("flood", i, map[string]string{contract.LabelDriver: "flood-driver"}, floodPayload-(200<<10)),
		Spec: appsv1.StatefulSetSpec{
			Replicas: new(int32),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "flood"}}},
			},
		},
	}
}

// floodService is a headless Service labelled as driverset's, of about floodPayload bytes of
// metadata, all that driverset caches of a Service.
func floodService(i int) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: floodMeta("flood", i, map[string]string{contract.LabelDriver: "flood-driver"}, floodPayload-(200<<10)),
		Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone},
	}
}

// floodLease is a Lease labelled as a driver's heartbeat, of about floodPayload bytes: labels,
// the annotation and a holder identity of 512 KiB, which the apiserver does not bound.
func floodLease(i int) *coordinationv1.Lease {
	holder := pad(512 << 10)
	return &coordinationv1.Lease{
		ObjectMeta: floodMeta("flood", i, map[string]string{contract.LabelHeartbeat: "flood-driver"}, floodPayload-(712<<10)),
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}
}

// floodClaim is a claim labelled as driverset's (as a driver labels its executor claims), of about
// floodPayload bytes of metadata, controlled by a pod of an S-0's name: the executor-set cache
// keeps its identity, owner and that label only.
func floodClaim(i int) *corev1.PersistentVolumeClaim {
	meta := floodMeta("flood", i, map[string]string{contract.LabelDriver: "flood-driver"}, floodPayload-(200<<10))
	meta.OwnerReferences = append(meta.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "flood-driver-0", UID: "flood", Controller: new(true)})
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: meta,
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}
}
