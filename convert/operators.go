package convert

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
)

// LabelKubeflowLaunched is the label the Kubeflow Spark operator gives every driver it submits
// (github.com/kubeflow/spark-operator, pkg/common LabelLaunchedBySparkOperator, set by
// driverConfOption in internal/controller/sparkapplication/submission.go). Up to v2.3.0 the
// driver pod reaches driverset without an owner: the operator's own webhook, which selects pods
// by this label, adds the SparkApplication as controller after driverset's has been called. The
// label is then the only sign at driverset's first call that the pod is the operator's.
const LabelKubeflowLaunched = "sparkoperator.k8s.io/launched-by-spark-operator"

// operatorTail is what every refusal of an operator's driver says to do. It fits both driverset
// entries: under the opt-in label it is refused, under the namespace policy left as it is.
const operatorTail = "; driverset does not take over such drivers yet: let the owner run it, without the label " +
	contract.LabelResilient + "=true, or submit the app with spark-submit rather than through that owner"

// operatorOf says why pod is an operator's or another controller's driver rather than the one
// spark-submit made, or nil. Such an owner finds, watches, restarts and deletes its driver pod
// itself: it would track the placeholder or S-0, whichever it finds, and delete S-0 (which the
// StatefulSet brings back) to start its next attempt, two drivers at once. So any owner that is not
// a core Pod counts, controller or not: apache/spark-kubernetes-operator owns its driver without
// being its controller (ModelUtils.buildOwnerReferenceTo sets no controller field), kubeflow's is
// its controller. A Pod owner is the pod spark-submit itself ran in, named by a pod template so
// the driver goes with it: the placeholder keeps that ownership and everything driverset builds
// goes with the placeholder.
func operatorOf(pod *corev1.Pod) *NotConvertible {
	if ref := foreignOwner(pod.OwnerReferences); ref != nil {
		how := "owned"
		if ref.Controller != nil && *ref.Controller {
			how = "controlled"
		}
		return notSparkSubmit(pod, "it is %s by %s %q (%s), not by a pod: the operator or controller behind it tracks and "+
			"deletes this pod itself and would not follow the driver into the pod driverset runs it in"+operatorTail,
			how, ref.Kind, ref.Name, ref.APIVersion)
	}
	if pod.Labels[LabelKubeflowLaunched] == "true" {
		return notSparkSubmit(pod, "it is labelled %s=true: a driver of the Kubeflow Spark operator, which tracks and deletes "+
			"this pod itself (its webhook makes the SparkApplication the pod's controller) and would not follow the driver "+
			"into the pod driverset runs it in"+operatorTail, LabelKubeflowLaunched)
	}
	return nil
}

// foreignOwner is the first reference in refs to an owner that is not a core Pod, its controller
// first, or nil.
func foreignOwner(refs []metav1.OwnerReference) *metav1.OwnerReference {
	var first *metav1.OwnerReference
	for i := range refs {
		r := &refs[i]
		if r.APIVersion == "v1" && r.Kind == "Pod" {
			continue
		}
		if r.Controller != nil && *r.Controller {
			return r
		}
		if first == nil {
			first = r
		}
	}
	return first
}
