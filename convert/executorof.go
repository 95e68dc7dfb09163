package convert

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/driverset/driverset/wrap"
)

// ExecutorOfApp is the one rule, for the incarnation webhook and the controller alike, for "executor
// e belongs to the app whose driver pods are named driverPod (contract.Names.DriverPodName), whose
// placeholder has the UID placeholder and which was submitted with Spark app id appID (the
// placeholder's and S-0's spark-app-selector)": e's controller reference is
//   - a v1 Pod of that name (any incarnation's; the UID tells which), or the placeholder itself,
//     by UID (Spark's own reference from a driver that names the placeholder as its pod, before
//     the executor patch moved it); an empty placeholder matches no reference;
//   - or Spark's executor StatefulSet of one of the app's incarnations (spark.kubernetes.
//     allocation.pods.allocator=statefulset): apps/v1, named spark-s-<app id>-<resource profile>
//     (StatefulSetPodsAllocator.setName, Spark 3.5 and 4.1) with an app id wrap.IncarnationOf
//     appID. Such a set is owned by its driver pod, but it has no label, so driverset's cache does
//     not hold it and the name is all there is to read. An empty appID matches no set.
//
// Nothing else counts: the driverset.dev/driver label and the app id label are self-declared (a
// tenant's pod in the namespace, or another app's executor, may carry this app's), so a rule that
// took them would let any pod hold this app's next incarnation behind the stale-executor gate, and
// ask the controller to delete a pod that is not the app's. The reference is not self-declared in
// that way: the executor's driver wrote it (Spark's ExecutorPodsAllocator, from
// spark.kubernetes.driver.pod.name), or the executor patch, or the StatefulSet controller for the
// set the driver made. A DStream app submitted again onto another app's checkpoint has executors
// labelled for that app (Spark restores the labels from the checkpoint) but controlled by its own
// driver pod's name: they are this app's.
func ExecutorOfApp(e *corev1.Pod, driverPod string, placeholder types.UID, appID string) bool {
	ref := metav1.GetControllerOfNoCopy(e)
	if ref == nil {
		return false
	}
	if ref.APIVersion == "apps/v1" && ref.Kind == "StatefulSet" {
		return namedForApp(ref.Name, appID)
	}
	if ref.APIVersion != "v1" || ref.Kind != "Pod" {
		return false
	}
	return ref.Name == driverPod || placeholder != "" && ref.UID == placeholder
}

// ExecutorSetOfApp extends ExecutorOfApp's rule to Spark's executor StatefulSet itself, which a
// set's executor pods are the app's by: set is one of the app's when it is named for one of the
// app's incarnation ids (what ExecutorOfApp reads of it from a pod's reference) and, what only
// the set shows, its controller is a v1 Pod of the app's driver pod name (the incarnation that
// made it: StatefulSetPodsAllocator owns it by its driver pod). So the garbage collector removes
// every set taken here once that incarnation is gone, and a set nothing would remove (no
// controller, a tenant's) is never waited for. The incarnation gate waits for those of earlier
// incarnations: a DStream's next driver makes a set of the same name, and its create fails while
// the old one is still there.
func ExecutorSetOfApp(set metav1.Object, driverPod, appID string) bool {
	ref := metav1.GetControllerOfNoCopy(set)
	return ref != nil && ref.APIVersion == "v1" && ref.Kind == "Pod" && ref.Name == driverPod &&
		namedForApp(set.GetName(), appID)
}

// namedForApp reports whether name is that of one of Spark's executor StatefulSets for one of the
// app's incarnation ids (wrap.IncarnationOf appID).
func namedForApp(name, appID string) bool {
	id, ok := executorSetAppID(name)
	return ok && wrap.IncarnationOf(appID, id)
}

// ExecutorSet is the name of the StatefulSet that controls e (Spark's StatefulSet allocator), ""
// when its controller is anything else (a driver pod) or nothing.
func ExecutorSet(e *corev1.Pod) string {
	ref := metav1.GetControllerOfNoCopy(e)
	if ref == nil || ref.APIVersion != "apps/v1" || ref.Kind != "StatefulSet" {
		return ""
	}
	return ref.Name
}

// executorSetAppID is the app id in the name of one of Spark's executor StatefulSets,
// spark-s-<app id>-<resource profile id>.
func executorSetAppID(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "spark-s-")
	i := strings.LastIndexByte(rest, '-')
	if !ok || i <= 0 || i == len(rest)-1 || strings.Trim(rest[i+1:], "0123456789") != "" {
		return "", false
	}
	return rest[:i], true
}
