package webhook

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
	"github.com/driverset/driverset/seal"
)

// unsealed says why pod, which carries a placeholder's marks, was not made by this webhook moments
// ago (its own output, seen again on re-invocation or by the other driver entry), or nil when it
// was. Such a pod was shaped by its creator: refused, as the controller would never run it.
func (d *Driver) unsealed(pod *corev1.Pod) *convert.NotConvertible {
	err := d.Seal.VerifyNow(pod)
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
