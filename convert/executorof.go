package convert

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ExecutorOfApp is the one rule, for the incarnation webhook and the controller alike, for "executor
// e belongs to the app whose driver pods are named driverPod (contract.Names.DriverPodName) and
// whose placeholder has the UID placeholder": e's controller reference is a v1 Pod of that name
// (any incarnation's; the UID tells which), or the placeholder itself, by UID (Spark's own
// reference from a driver that names the placeholder as its pod, before the executor patch moved
// it). An empty placeholder matches no reference.
//
// Nothing else counts: the driverset.dev/driver label and the app id are self-declared (a tenant's
// pod in the namespace, or another app's executor, may carry this app's), so a rule that took
// them would let any pod hold this app's next incarnation behind the stale-executor gate, and ask
// the controller to delete a pod that is not the app's. The reference is not self-declared in that
// way: the executor's driver wrote it (Spark's ExecutorPodsAllocator, from
// spark.kubernetes.driver.pod.name), or the executor patch did. A DStream app submitted again onto
// another app's checkpoint has executors labelled for that app (Spark restores the labels from the
// checkpoint) but controlled by its own driver pod's name: they are this app's.
func ExecutorOfApp(e *corev1.Pod, driverPod string, placeholder types.UID) bool {
	ref := metav1.GetControllerOfNoCopy(e)
	if ref == nil || ref.APIVersion != "v1" || ref.Kind != "Pod" {
		return false
	}
	return ref.Name == driverPod || placeholder != "" && ref.UID == placeholder
}
