package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/driverset/driverset/contract"
)

// ReleasesPath serves the webhook entry that checks each removal of driverset's finalizer from a
// Spark driver pod or placeholder by driverset's own ServiceAccount (its matchConditions and
// objectSelector send nothing else).
const ReleasesPath = "/check-releases"

// FinalizerReleases is what the controller lets go on (controller.Placeholder.MayRelease): whether
// driverset's finalizer may come off a pod, and why.
type FinalizerReleases interface {
	MayRelease(ctx context.Context, pod *corev1.Pod) (bool, string, error)
}

// Releases admits an update by driverset's ServiceAccount that takes contract.FinalizerOutcome off
// a Spark driver pod or placeholder only when the controller would let that pod go itself
// (docs/design.md#what-a-finalizer-release-may-be): the driver's exit read, or none of its own to
// read, and the driver no longer able to run (its kubelet confirmed, or its node proven down or
// fenced); a placeholder once it is deleted and its driver pod gone. driverset-guard-pods lets
// driverset's token remove that finalizer but cannot read a placeholder, a Node or a heartbeat:
// with a stolen token an exit not yet read would be lost, and a driver pod let go early would no
// longer be held against the next `--force`.
//
// It only answers: it never patches. Its entry fails closed, and so does the handler when it
// cannot read what it decides on: driverset is the only caller, and it lets go again on its next
// pass.
type Releases struct {
	Proof FinalizerReleases
}

var _ admission.Handler = (*Releases)(nil)

// Handle implements admission.Handler.
func (h *Releases) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Update || req.SubResource != "" || req.Resource.Group != "" || req.Resource.Resource != "pods" {
		return admission.Allowed(fmt.Sprintf("driverset checks pod updates only, not %s %s", req.Operation, resourceOf(req)))
	}
	var old, pod corev1.Pod
	if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("driverset could not decode pod %s/%s as it was: %w", req.Namespace, req.Name, err))
	}
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("driverset could not decode pod %s/%s: %w", req.Namespace, req.Name, err))
	}
	if !slices.Contains(old.Finalizers, contract.FinalizerOutcome) || slices.Contains(pod.Finalizers, contract.FinalizerOutcome) {
		return admission.Allowed("driverset's finalizer " + contract.FinalizerOutcome + " stays as it was")
	}
	ok, why, err := h.Proof.MayRelease(ctx, &old)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("driverset could not read whether pod %s/%s may be let go: %w", req.Namespace, req.Name, err))
	}
	if !ok {
		return deny(ReasonNotProven, fmt.Sprintf("driverset does not take its finalizer %s off pod %s/%s: %s", contract.FinalizerOutcome, req.Namespace, req.Name, why))
	}
	return admission.Allowed("let go: " + why)
}
