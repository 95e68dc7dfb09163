package convert

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
)

// DriverClaims are the names of the PersistentVolumeClaims the driver pod mounts, in volume order.
func DriverClaims(p *corev1.Pod) []string {
	var out []string
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		}
	}
	return out
}

// KeepClaim takes a claim that spark-submit made for the placeholder p out of Spark's clean stop,
// and reports whether it changed pvc.
//
// spark-submit creates a driver claim (claimName OnDemand, or one given a storage class and a
// size) after the pod, owned by it and labelled spark-app-selector=<app id>
// (MountVolumesFeatureStep). The driver JVM's clean stop deletes every claim with that label
// (KubernetesClusterSchedulerBackend.stop, 3.2+, while spark.kubernetes.driver.ownPersistentVolumeClaim
// holds, true by default since 3.4); a driver that fails with an exception stops cleanly too. Without
// driverset that pod is finished anyway; with it, the next incarnation mounts the same claim and
// would wait forever for one that is gone. So the app id moves to LabelClaimAppSelector: the claim
// is still found by app, Spark's label-based delete no longer selects it, and it is deleted with p,
// its owner, when the app is.
//
// Only a claim controlled by p is changed: a claim the user made (no owner, or another one) is
// the user's to manage, and an executor's claim (owned by the driver's StatefulSet pod or an
// executor) is Spark's, as without driverset.
func KeepClaim(pvc *corev1.PersistentVolumeClaim, p *corev1.Pod) bool {
	ref := metav1.GetControllerOfNoCopy(pvc)
	if ref == nil || ref.UID != p.UID || ref.Kind != "Pod" {
		return false
	}
	id, ok := pvc.Labels[contract.LabelSparkAppSelector]
	if !ok {
		return false
	}
	delete(pvc.Labels, contract.LabelSparkAppSelector)
	pvc.Labels[contract.LabelClaimAppSelector] = id
	return true
}
