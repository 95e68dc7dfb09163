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

// ExecutorSetOfApp is the rule for Spark's executor StatefulSet itself (the StatefulSet
// allocator) of the app whose driver pods are named driverPod: a set named as Spark names them,
// spark-s-<app id>-<resource profile>, whose controller is a v1 Pod of that name (the
// incarnation that made it: StatefulSetPodsAllocator owns it by its driver pod). So the garbage
// collector removes every set taken here once that incarnation is gone (a pod of S-0's name
// never exists while the next one is admitted, and the planner leaves out the current S-0's by
// UID), and a set nothing would remove (no controller, a tenant's) is never waited for. The
// incarnation gate waits for those of earlier incarnations: a DStream's next driver makes a set
// of the same name, and its create fails while the old one is still there.
//
// Not by app id, unlike a set's executor pods (ExecutorOfApp, which read only the set's name): a
// DStream app submitted again under another name onto another app's checkpoint runs with that
// app's restored id, so its sets are named for an id not its own, and controlled by its own S-0.
func ExecutorSetOfApp(set metav1.Object, driverPod string) bool {
	ref := metav1.GetControllerOfNoCopy(set)
	return IsExecutorSetName(set.GetName()) && ref != nil && ref.APIVersion == "v1" && ref.Kind == "Pod" && ref.Name == driverPod
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

// IsExecutorSetName reports whether name is one Spark's StatefulSet allocator gives its executor
// StatefulSets (spark-s-<app id>-<resource profile id>): the one test of it, for the rule
// (ExecutorSetOfApp) and for the controller's watch of their deletions.
func IsExecutorSetName(name string) bool {
	_, ok := executorSetAppID(name)
	return ok
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
