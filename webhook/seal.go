package webhook

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
	"github.com/driverset/driverset/seal"
)

// sealerFor is the Sealer for req: a dry-run's seals hold only within that dry-run, so a dry-run,
// which leaves no pod and the name free, yields no seal a real create or the controller accepts.
func sealerFor(s seal.Sealer, req admission.Request) seal.Sealer {
	if req.DryRun != nil && *req.DryRun {
		return s.DryRun()
	}
	return s
}

// unsealed says why pod, which carries a placeholder's marks, was not made by this webhook moments
// ago, in a create of the same kind (real or dry-run) by the same user (requester), or nil when it
// was: its own output, seen again on re-invocation or by the other driver entry. Such a pod was
// shaped by its creator, or is another user's placeholder posted again with its seal: refused, as
// the controller would never run the first, and the second is not this user's to run (the policy
// driverset-seal-creator refuses it too, where this webhook is not called).
func unsealed(sealer seal.Sealer, pod *corev1.Pod, requester string) *convert.NotConvertible {
	err := sealer.VerifyNow(pod)
	if creator, ok := pod.Annotations[seal.CreatorAnnotation]; err == nil && ok && creator != requester {
		err = fmt.Errorf("its seal (annotation %s) was made for another user's create (annotation %s)",
			seal.Annotation, seal.CreatorAnnotation)
	}
	if err == nil {
		return nil
	}
	name := pod.Name
	if name == "" {
		name = pod.GenerateName
	}
	return &convert.NotConvertible{Pod: pod.Namespace + "/" + name, Reason: fmt.Sprintf(
		"it arrives shaped as a driverset placeholder (label %s or annotation %s), but %v; "+
			"remove driverset's marks (and annotation %s) and let driverset convert the pod",
		contract.LabelPlaceholder, contract.AnnotationResources, err, seal.Annotation)}
}

// unnamed refuses a driver pod that has no name yet (named by generateName): the apiserver picks
// the name only after mutating admission, so its seal could cover no name and would hold for any
// pod. spark-submit always names its driver pod (spark.kubernetes.driver.pod.name, or
// "<app>-<hash>-driver"), so such a pod is not its: left alone under the namespace policy,
// refused under the opt-in label.
func unnamed(pod *corev1.Pod) *convert.NotConvertible {
	if pod.Name != "" {
		return nil
	}
	return &convert.NotConvertible{Pod: pod.Namespace + "/" + pod.GenerateName, NotSparkSubmit: true, Reason: fmt.Sprintf(
		"it has no name (only generateName %q), and driverset seals its placeholder by the name, which the apiserver "+
			"picks only after driverset has seen the pod; spark-submit always names its driver pod: give the pod a name",
		pod.GenerateName)}
}
