package webhook

import (
	"context"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"
)

// CreatesPath serves the webhook entry that checks each StatefulSet and Service driverset's own
// ServiceAccount creates (its matchConditions send nothing else).
const CreatesPath = "/check-creates"

// Builder is what driverset creates for a placeholder (controller.Placeholder.Built): the one
// builder the controller creates with. refusal says why it creates nothing for p.
type Builder interface {
	Built(ctx context.Context, p *corev1.Pod) (svc *corev1.Service, sts *appsv1.StatefulSet, refusal string, err error)
}

// Creates admits a StatefulSet or Service that driverset's ServiceAccount creates only when it is
// exactly what driverset builds from its owner, a sealed placeholder read from the apiserver
// (docs/design.md#what-a-create-may-be). A ValidatingAdmissionPolicy (driverset-guard-creates)
// checks the shape, but it cannot read the owner: with a stolen token, a driver-shaped
// StatefulSet for any pod, or for a placeholder with another image, ServiceAccount, volume or
// privilege, would be run by the StatefulSet controller.
//
// It only answers: it never patches. Its entry fails closed, and so does the handler when it
// cannot read the owner: driverset is the only caller, and it tries a refused create again.
type Creates struct {
	// Pods reads the owner from the apiserver: the placeholder cache keeps no spec, and the
	// controller builds from a live read too.
	Pods    client.Reader
	Builder Builder
}

var _ admission.Handler = (*Creates)(nil)

// Handle implements admission.Handler.
func (c *Creates) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create || req.SubResource != "" {
		return admission.Allowed(fmt.Sprintf("driverset checks creates only, not %s %s", req.Operation, resourceOf(req)))
	}
	var got client.Object
	switch {
	case req.Resource.Group == appsv1.GroupName && req.Resource.Resource == "statefulsets":
		got = &appsv1.StatefulSet{}
	case req.Resource.Group == "" && req.Resource.Resource == "services":
		got = &corev1.Service{}
	default:
		return admission.Allowed(fmt.Sprintf("driverset checks StatefulSets and Services only, not %s", resourceOf(req)))
	}
	// Strict: a field this build's types do not know would be dropped by decoding, and so never
	// compared; such a create is refused rather than let through unseen.
	strict, err := sigsjson.UnmarshalStrict(req.Object.Raw, got)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("driverset could not decode the %s: %w", req.Kind.Kind, err))
	}
	what := fmt.Sprintf("%s %s/%s", req.Kind.Kind, req.Namespace, req.Name)
	if len(strict) > 0 {
		return deny(ReasonNotAsBuilt, fmt.Sprintf("driverset does not create %s: it carries fields this driverset does not know (%v)", what, strict[0]))
	}
	owner := metav1.GetControllerOf(got)
	if owner == nil || owner.APIVersion != "v1" || owner.Kind != "Pod" {
		return deny(ReasonNotAsBuilt, fmt.Sprintf("driverset does not create %s: only its placeholder pod's StatefulSet and Service, which that pod controls", what))
	}
	var p corev1.Pod
	if err := c.Pods.Get(ctx, types.NamespacedName{Namespace: req.Namespace, Name: owner.Name}, &p); err != nil {
		if apierrors.IsNotFound(err) {
			return deny(ReasonNotAsBuilt, fmt.Sprintf("driverset does not create %s: its owner, pod %s, does not exist", what, owner.Name))
		}
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("driverset could not read pod %s, the owner of %s: %w", owner.Name, what, err))
	}
	svc, sts, refusal, err := c.Builder.Built(ctx, &p)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("driverset could not build what it makes for pod %s: %w", owner.Name, err))
	}
	if refusal != "" {
		return deny(ReasonNotAsBuilt, fmt.Sprintf("driverset does not create %s: %s", what, refusal))
	}
	var diff string
	switch o := got.(type) {
	case *appsv1.StatefulSet:
		diff = StatefulSetAsBuilt(o, sts)
	case *corev1.Service:
		diff = ServiceAsBuilt(o, svc)
	}
	if diff != "" {
		return deny(ReasonNotAsBuilt, fmt.Sprintf("driverset does not create %s: it is not what driverset builds from placeholder %s (%s)", what, p.Name, diff))
	}
	return admission.Allowed("what driverset builds from placeholder " + p.Name)
}
