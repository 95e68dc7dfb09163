package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// DeletesPath serves the webhook entry that checks each Spark driver pod driverset's own
// ServiceAccount deletes (its matchConditions and objectSelector send nothing else).
const DeletesPath = "/check-deletes"

// ForceDeletions is the proof driverset fences on (controller.Placeholder.ForceDeletion): whether
// a driver pod may be removed without its kubelet's confirmation, and why.
type ForceDeletions interface {
	ForceDeletion(ctx context.Context, pod *corev1.Pod) (bool, string, error)
}

// Deletes admits a delete of a Spark driver pod by driverset's ServiceAccount as it is when its
// kubelet must still confirm it (a graceful delete: the pod object stays until the kubelet has
// stopped the driver, so its StatefulSet makes no second one), and one that removes the pod
// without its kubelet (grace 0) only on the proof the controller fences on
// (docs/design.md#what-a-force-delete-may-be). driverset-guard-pods lets driverset's token delete
// Spark's pods, but cannot read a Node, a heartbeat or a zone: with a stolen token, a grace-0
// delete of a driver on a node only cut off would have a second driver started beside it.
//
// It only answers: it never patches. Its entry fails closed, and so does the handler when it
// cannot read the proof: driverset is the only caller, and it deletes again on its next pass.
type Deletes struct {
	Proof ForceDeletions
}

var _ admission.Handler = (*Deletes)(nil)

// Handle implements admission.Handler.
func (d *Deletes) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Delete || req.SubResource != "" || req.Resource.Group != "" || req.Resource.Resource != "pods" {
		return admission.Allowed(fmt.Sprintf("driverset checks pod deletes only, not %s %s", req.Operation, resourceOf(req)))
	}
	var pod corev1.Pod
	if err := json.Unmarshal(req.OldObject.Raw, &pod); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("driverset could not decode pod %s/%s: %w", req.Namespace, req.Name, err))
	}
	var opts metav1.DeleteOptions
	if len(req.Options.Raw) > 0 {
		if err := json.Unmarshal(req.Options.Raw, &opts); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("driverset could not decode the options of the delete of pod %s/%s: %w", req.Namespace, req.Name, err))
		}
	}
	if !withoutKubelet(&pod, &opts) {
		return admission.Allowed("a graceful delete: the pod stays until its kubelet confirms the driver stopped")
	}
	ok, why, err := d.Proof.ForceDeletion(ctx, &pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("driverset could not read what proves pod %s/%s's node down: %w", req.Namespace, req.Name, err))
	}
	if !ok {
		return deny(ReasonNotProven, fmt.Sprintf("driverset does not remove driver pod %s/%s without its kubelet: %s", req.Namespace, req.Name, why))
	}
	return admission.Allowed("removed without its kubelet: " + why)
}

// withoutKubelet reports whether a delete of pod with opts may remove it from the apiserver
// without its kubelet confirming first, as the apiserver's pod strategy and graceful deletion
// decide (rest.BeforeDelete, CheckGracefulDelete): a grace of 0 (asked, or the pod's own
// terminationGracePeriodSeconds when none is asked; a negative one is held to be 0 here), or a
// pod already deleted with a grace of 0 or none, which any further delete removes. Unbound and
// ended pods the apiserver removes at once whatever is asked; they are left to the proof, which
// admits them. Finalizers are not counted: one removed later would let the pod go then.
func withoutKubelet(pod *corev1.Pod, opts *metav1.DeleteOptions) bool {
	if pod.DeletionTimestamp != nil {
		pending := pod.DeletionGracePeriodSeconds
		if pending == nil || *pending <= 0 {
			return true
		}
		return opts.GracePeriodSeconds != nil && *opts.GracePeriodSeconds <= 0
	}
	grace := opts.GracePeriodSeconds
	if grace == nil {
		grace = pod.Spec.TerminationGracePeriodSeconds
	}
	return grace == nil || *grace <= 0 || pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}
