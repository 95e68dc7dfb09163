package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// proof answers as controller.Placeholder.ForceDeletion would, and counts the questions.
type proof struct {
	ok    bool
	err   error
	asked int
}

func (p *proof) ForceDeletion(context.Context, *corev1.Pod) (bool, string, error) {
	p.asked++
	if p.ok {
		return true, "its node is lost for good (node-deleted)", p.err
	}
	return false, "node n1 is Ready", p.err
}

func deleteRequest(t *testing.T, pod *corev1.Pod, opts *metav1.DeleteOptions) admission.Request {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "1", Operation: admissionv1.Delete, Namespace: "team-a", Name: pod.Name,
		Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		OldObject: runtime.RawExtension{Raw: raw},
	}}
	if opts != nil {
		if req.Options.Raw, err = json.Marshal(opts); err != nil {
			t.Fatal(err)
		}
	}
	return req
}

// The deletes entry: a graceful delete goes through as it is; one that removes the pod without
// its kubelet only when the proof admits it.
func TestDeletes(t *testing.T) {
	running := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pi-ds-0", Namespace: "team-a", UID: "uid-s0"},
		Spec:       corev1.PodSpec{NodeName: "n1", TerminationGracePeriodSeconds: new(int64(30))},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	graceZeroSpec := running.DeepCopy()
	graceZeroSpec.Spec.TerminationGracePeriodSeconds = new(int64(0))
	terminating := running.DeepCopy()
	terminating.DeletionTimestamp = &metav1.Time{Time: time.Unix(1_800_000_000, 0)}
	terminating.DeletionGracePeriodSeconds = new(int64(30))
	forcedBefore := terminating.DeepCopy()
	forcedBefore.DeletionGracePeriodSeconds = new(int64(0))
	unbound := running.DeepCopy()
	unbound.Spec.NodeName = ""
	ended := running.DeepCopy()
	ended.Status.Phase = corev1.PodFailed
	grace := func(s int64) *metav1.DeleteOptions { return &metav1.DeleteOptions{GracePeriodSeconds: &s} }

	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		opts     *metav1.DeleteOptions
		proof    proof
		allowed  bool
		asked    bool   // whether the proof was asked
		contains string // in the answer's message
	}{
		{name: "a graceful delete, its grace the pod's", pod: running, opts: &metav1.DeleteOptions{}, allowed: true, contains: "graceful"},
		{name: "a graceful delete with no options", pod: running, allowed: true, contains: "graceful"},
		{name: "a graceful delete of 1 s", pod: running, opts: grace(1), allowed: true, contains: "graceful"},
		{name: "a second graceful delete of a deleted pod", pod: terminating, opts: grace(5), allowed: true, contains: "graceful"},
		{name: "a force-delete, unproven", pod: running, opts: grace(0), asked: true, contains: "without its kubelet: node n1 is Ready"},
		{name: "a force-delete, proven", pod: running, opts: grace(0), proof: proof{ok: true}, allowed: true, asked: true, contains: "node-deleted"},
		{name: "a negative grace, held as 0", pod: running, opts: grace(-1), asked: true},
		{name: "no grace asked, the pod's own is 0", pod: graceZeroSpec, opts: &metav1.DeleteOptions{}, asked: true},
		{name: "a deleted pod's grace shortened to 0", pod: terminating, opts: grace(0), asked: true},
		{name: "any delete of a pod force-deleted before", pod: forcedBefore, opts: grace(30), asked: true},
		{name: "an unbound pod: left to the proof", pod: unbound, opts: grace(30), proof: proof{ok: true}, allowed: true, asked: true},
		{name: "an ended pod: left to the proof", pod: ended, opts: grace(30), proof: proof{ok: true}, allowed: true, asked: true},
		{name: "the proof unreadable: fails closed", pod: running, opts: grace(0), proof: proof{ok: true, err: errors.New("connection refused")}, asked: true, contains: "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.proof
			resp := (&Deletes{Proof: &p}).Handle(context.Background(), deleteRequest(t, tc.pod, tc.opts))
			if resp.Allowed != tc.allowed {
				t.Errorf("allowed = %v, want %v (%s)", resp.Allowed, tc.allowed, resp.Result.Message)
			}
			if (p.asked > 0) != tc.asked {
				t.Errorf("proof asked %d times, want asked=%v", p.asked, tc.asked)
			}
			if !strings.Contains(resp.Result.Message, tc.contains) {
				t.Errorf("message %q does not say %q", resp.Result.Message, tc.contains)
			}
			if !resp.Allowed && resp.Result.Code == 403 && resp.AuditAnnotations[AuditDenialReason] != ReasonNotProven {
				t.Errorf("denial reason = %q, want %q", resp.AuditAnnotations[AuditDenialReason], ReasonNotProven)
			}
			if len(resp.Patches) > 0 {
				t.Errorf("it patched: %v", resp.Patches)
			}
		})
	}
}

// Anything but a pod's delete is not its business (its rules send none).
func TestDeletesChecksPodDeletesOnly(t *testing.T) {
	p := proof{}
	for _, mutate := range []func(*admission.Request){
		func(r *admission.Request) { r.Operation = admissionv1.Update },
		func(r *admission.Request) { r.SubResource = "status" },
		func(r *admission.Request) { r.Resource.Resource = "services" },
		func(r *admission.Request) { r.Resource.Group = "apps" },
	} {
		req := deleteRequest(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pi-ds-0"}}, &metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
		mutate(&req)
		if resp := (&Deletes{Proof: &p}).Handle(context.Background(), req); !resp.Allowed {
			t.Errorf("%s %s refused: %s", req.Operation, resourceOf(req), resp.Result.Message)
		}
	}
	if p.asked > 0 {
		t.Errorf("the proof was asked %d times", p.asked)
	}
}
