package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	jsonpatch5 "github.com/evanphx/json-patch/v5"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"
)

// podCreate returns the pod of a v1 Pod CREATE request. Any other request gets a response instead:
// allowed unchanged when it is not a pod CREATE (doing names what the handler does, for the
// message), 400 when the pod cannot be decoded. The exits come before decoding, so a request the
// handler has no business with is never parsed.
func podCreate(req admission.Request, doing string) (*corev1.Pod, *admission.Response) {
	answer := func(r admission.Response) (*corev1.Pod, *admission.Response) { return nil, &r }
	if req.Operation != admissionv1.Create {
		return answer(admission.Allowed(fmt.Sprintf("driverset %s on CREATE only, not on %s", doing, req.Operation)))
	}
	if req.Kind != podKind() || req.Resource.Group != "" || req.Resource.Resource != "pods" || req.SubResource != "" {
		return answer(admission.Allowed(fmt.Sprintf("driverset %s for v1 Pods only, not %s %s", doing, req.Kind.String(), resourceOf(req))))
	}
	if len(req.Object.Raw) == 0 {
		return answer(admission.Allowed("the request carries no pod"))
	}
	pod := &corev1.Pod{}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(req.Object.Raw, pod); err != nil {
		return answer(admission.Errored(http.StatusBadRequest, fmt.Errorf("driverset could not decode the pod in the admission request: %w", err)))
	}
	// The apiserver fills the namespace in before admission; fill it from the request otherwise,
	// for the lookups and the messages. Done before any "before" snapshot: it is not part of a patch.
	// It refuses an object of another namespace than its request's before admission,
	// so one here is a caller's own review: refused, as the lookups read the pod's namespace.
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	if pod.Namespace != req.Namespace {
		return answer(admission.Errored(http.StatusBadRequest, fmt.Errorf("the pod is in namespace %q, the request in %q: the apiserver sends no such review", pod.Namespace, req.Namespace)))
	}
	return pod, nil
}

// patched answers with a JSON patch that turns raw, the request's object exactly as the apiserver
// sent it, into that object with the handler's changes: was is the pod as decoded, before the
// handler changed pod. When raw is was's encoding byte for byte (the apiserver's own encoding),
// the answer replaces each top-level field that changed whole (fieldPatch). Otherwise the changes
// are the library's diff from was to pod, both encoded the same way, so fields this build's types
// do not know are never touched; they are applied to raw, creating parents raw lacks but the
// re-encoding has (a pod without spec, say), and the answer is the library's diff from raw, which
// applies to raw by construction. A change that cannot be made to raw (a parent that is not an
// object there) is an error, not a patch that would fail in the apiserver.
func patched(raw []byte, was, pod *corev1.Pod, message string) admission.Response {
	before, err := json.Marshal(was)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if bytes.Equal(raw, before) {
		// The apiserver encodes the pod from the same types as this build, so the request is
		// usually byte for byte its re-encoding: it holds no field this build does not know, and
		// whole top-level fields carry the change for less of the apiserver's CPU and the
		// handler's than the library's deep ops.
		if ops, ok := fieldPatch(was, pod); ok {
			return admission.Patched(message, ops...)
		}
	}
	after, err := json.Marshal(pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	changes, err := jsonpatch.CreatePatch(before, after)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	target := raw
	if len(changes) != 0 {
		ops, err := json.Marshal(changes)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		p, err := jsonpatch5.DecodePatch(ops)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		opts := jsonpatch5.NewApplyOptions()
		opts.EnsurePathExistsOnAdd = true
		if target, err = p.ApplyWithOptions(raw, opts); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("driverset could not make its change to the pod as sent: %w", err))
		}
	}
	resp := admission.PatchResponseFromRaw(raw, target)
	if resp.Allowed {
		resp.Result = &metav1.Status{Code: http.StatusOK, Message: message}
	}
	return resp
}
