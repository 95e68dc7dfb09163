// Package webhook holds driverset's admission handlers. Each one decodes the request, makes its
// decision with a pure function and answers with a JSON patch computed by the library.
package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
	"github.com/driverset/driverset/seal"
)

// Paths at which the driver handlers are served, shared by cmd and the manifests.
const (
	// DriverPath serves the webhook entry that selects driver pods labelled driverset.dev/resilient=true.
	DriverPath = "/mutate-driver"
	// DriverEnforcedPath serves the entry that selects namespaces labelled driverset.dev/policy=enforce.
	DriverEnforcedPath = "/mutate-driver-enforced"
)

// Driver admits Spark driver pods: an opted-in driver becomes the gated placeholder of
// docs/design.md#the-placeholder, one that cannot be taken over safely is denied with the reason, and every other pod is
// allowed unchanged. It is a pure function of the request: no API calls (but Authorize's, when set), the same answer on
// dry-run but for the seal (which holds only within that dry-run), and no change to a pod it already converted.
type Driver struct {
	// Enforced is true for the handler behind the namespace-policy entry: every Spark driver pod is
	// converted. Otherwise only pods labelled driverset.dev/resilient=true are.
	Enforced bool
	// LimitRanges, when set, is the informer cache of LimitRanges: a namespace whose LimitRange
	// sets a min keeps the placeholder at that min rather than 0, or the LimitRanger would refuse
	// it. A read (never a write, never a live call); when it fails, the placeholder keeps 0.
	LimitRanges client.Reader
	// Seal seals each placeholder this handler makes, and tells its own placeholders, seen again
	// on re-invocation, from a pod that arrives shaped as one (docs/design.md#sealed-placeholders).
	Seal seal.Sealer
	// Authorize, when set (--authorize-extended-resources), is asked whether the requester of the
	// pod create may use each extended resource its driver asks for: S-0 gets them from the
	// placeholder's annotation, created by the StatefulSet controller, so no admission check on
	// the requester ever sees them otherwise. The handler's one API call.
	Authorize Authorizer
}

var _ admission.Handler = (*Driver)(nil)
var _ admission.Defaulter[*corev1.Pod] = (*Driver)(nil)

func podKind() metav1.GroupVersionKind { return metav1.GroupVersionKind{Version: "v1", Kind: "Pod"} }

// Handle implements admission.Handler.
//
// It does not use admission.WithDefaulter, though Default has that shape: that handler runs on
// every operation but DELETE and diffs the raw request against the pod re-encoded from Go types,
// so fields an older client library does not know would show up as removals. Handle exits early
// on anything that is not a pod CREATE, and diffs the pod before and after Default (patched: as
// Go values when the request is the pod's own encoding, else both encoded the same way), so the
// patch holds exactly what Default changed.
func (d *Driver) Handle(ctx context.Context, req admission.Request) admission.Response {
	pod, answer := podCreate(req, "converts driver pods")
	if answer != nil {
		return *answer
	}
	if reason := d.skip(pod); reason != "" {
		return admission.Allowed(reason)
	}
	// A placeholder comes back when the apiserver re-invokes the webhook; it is left as it is while
	// driverset may still keep it, and refused when a later webhook made it a pod driverset may not
	// keep. One that driverset did not seal was shaped by its creator: its recorded resources would
	// reach S-0 unseen by any policy on who may ask for them.
	placeholder := convert.IsPlaceholder(pod)
	sealer := sealerFor(d.Seal, req)
	if nc := unsealed(sealer, pod, req.UserInfo.Username); placeholder && nc != nil {
		return admission.Denied(nc.Error())
	}
	was := pod.DeepCopy()
	if err := d.Default(ctx, pod); err != nil {
		var nc *convert.NotConvertible
		if errors.As(err, &nc) {
			if placeholder {
				// Re-invoked after a later webhook changed driverset's own placeholder (an operator's
				// webhook added itself as owner, say). Gated and shrunk, it cannot run as it is, and
				// left so it would stay Pending forever: refused, under either entry.
				return deny(denialClass(nc), nc.Error()+changedPlaceholder)
			}
			if d.leavesAlone(pod, nc) {
				return admission.Allowed("not a spark-submit cluster driver: left as it is").WithWarnings(
					fmt.Sprintf("%s; under the namespace policy %s=%s it runs as it is, without driverset",
						nc.Error(), contract.LabelPolicy, contract.PolicyEnforce))
			}
			return deny(denialClass(nc), nc.Error())
		}
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if d.Authorize != nil {
		// Asked on every call, its own placeholder seen again included: it is the same requester,
		// and a seal says nothing of who asked.
		why, err := unauthorized(ctx, d.Authorize, req.UserInfo, pod)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		if why != "" {
			return deny(ReasonNotAuthorized, why)
		}
	}
	if !placeholder {
		if err := sealer.Sign(pod, req.UserInfo.Username); err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
	}
	resp := patched(req.Object.Raw, was, pod, "converted to a driverset placeholder")
	if !resp.Allowed {
		return resp
	}
	if len(resp.Patches) == 0 && placeholder {
		return admission.Allowed("already a driverset placeholder")
	}
	if pod.Name != "" {
		n := contract.NamesFor(pod.Name)
		resp = resp.WithWarnings(fmt.Sprintf("driverset: pod %s is a placeholder; the driver runs in pod %s",
			pod.Name, n.DriverPodName()))
	}
	return resp
}

// Default converts pod in place when it is an opted-in Spark driver that driverset does not run
// yet, and leaves every other pod alone. A pod that cannot be converted safely gives a
// *convert.NotConvertible, to be answered with a denial.
func (d *Driver) Default(ctx context.Context, pod *corev1.Pod) error {
	if d.skip(pod) != "" {
		return nil
	}
	if err := convert.ToPlaceholderWithin(pod, d.floor(ctx, pod.Namespace)); err != nil {
		return err
	}
	if nc := unnamed(pod); nc != nil {
		// Checked last, so that a pod with other defects hears convert's reason first.
		return nc
	}
	return nil
}

// changedPlaceholder ends the refusal of a placeholder that driverset made and a later mutating
// webhook changed into a pod driverset may not keep.
const changedPlaceholder = "; another mutating webhook changed the pod so after driverset had made it a placeholder, " +
	"which never runs by itself: the pod is refused rather than left Pending"

// leavesAlone decides what becomes of a driver pod driverset cannot convert: the namespace policy
// converts every spark-submit cluster driver, but a spark-role=driver pod that is not one (an
// operator's, a Deployment's, a client-mode driver) was never driverset's to refuse, so it runs as
// it is. A pod opted in with the label asked for driverset explicitly and is refused with the
// reason. Never asked of driverset's own placeholder: that one can no longer run as it is.
func (d *Driver) leavesAlone(pod *corev1.Pod, nc *convert.NotConvertible) bool {
	return d.Enforced && nc.NotSparkSubmit && pod.Labels[contract.LabelResilient] != "true"
}

// denialClass is the reason class of a refused driver pod.
func denialClass(nc *convert.NotConvertible) string {
	if nc.NotSparkSubmit {
		return ReasonNotSparkSubmit
	}
	return ReasonNotConvertible
}

// floor is what the namespace's LimitRanges require of each placeholder container.
func (d *Driver) floor(ctx context.Context, ns string) corev1.ResourceList {
	if d.LimitRanges == nil {
		return nil
	}
	var list corev1.LimitRangeList
	if err := d.LimitRanges.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil
	}
	return convert.FloorOf(list.Items)
}

// skip says why pod is not for this handler to convert, or "" when it is.
func (d *Driver) skip(pod *corev1.Pod) string {
	switch {
	case pod.Labels[contract.LabelSparkRole] != contract.RoleDriver:
		return "not a Spark driver pod"
	case hasLabel(pod, contract.LabelDriver):
		// The StatefulSet's own pod carries the driver label; converting it would loop forever.
		return "already run by driverset"
	case !d.Enforced && pod.Labels[contract.LabelResilient] != "true":
		return "not opted in to driverset"
	}
	return ""
}

func hasLabel(pod *corev1.Pod, key string) bool {
	_, ok := pod.Labels[key]
	return ok
}

func resourceOf(req admission.Request) string {
	r := req.Resource.Resource
	if req.Resource.Group != "" {
		r += "." + req.Resource.Group
	}
	if req.SubResource != "" {
		r += "/" + req.SubResource
	}
	return r
}
