package webhook

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"
)

// admitted is one admission of a fuzzed pod CREATE, checked against what every handler promises
// the apiserver, whatever the input:
//   - a refusal carries no patch;
//   - a patch applies to the request's object exactly as sent (the apiserver applies it there);
//   - a second admission of the patched pod (the apiserver's reinvocation) is allowed and
//     changes nothing;
//   - a dry-run gets the same answer, but for the seal (which holds only within that dry-run).
//
// It returns the response and, when it is allowed and the result decodes as a pod, the pod the
// apiserver would persist.
func admitted(t *testing.T, h admission.Handler, raw []byte) (admission.Response, *corev1.Pod) {
	t.Helper()
	resp := h.Handle(context.Background(), createRequest(raw, false))
	if !resp.Allowed && len(resp.Patches) != 0 {
		t.Fatalf("a refusal with a patch: %+v", resp)
	}
	if dry, want := sealBlind(t, h.Handle(context.Background(), createRequest(raw, true))), sealBlind(t, resp); dry != want {
		t.Fatalf("dry-run answered\n%s\nwant the same as without dry-run but for the seal\n%s", dry, want)
	}
	if !resp.Allowed {
		return resp, nil
	}
	out := applyPatch(t, raw, resp.Patches)
	if len(resp.Patches) != 0 {
		again := h.Handle(context.Background(), createRequest(out, false))
		if !again.Allowed || len(again.Patches) != 0 {
			t.Fatalf("second admission of the patched pod: allowed=%v patches=%v result=%+v, want allowed with no patch\npatched pod: %s",
				again.Allowed, again.Patches, again.Result, out)
		}
	}
	pod := &corev1.Pod{}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(out, pod); err != nil {
		return resp, nil
	}
	return resp, pod
}

// decodedPod is the pod a handler decodes from raw, or nil when raw is not one.
func decodedPod(raw []byte) *corev1.Pod {
	pod := &corev1.Pod{}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, pod); err != nil {
		return nil
	}
	return pod
}
