package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/driverset/driverset/contract"
)

// letGo answers as controller.Placeholder.MayRelease would, and records what it was asked about.
type letGo struct {
	ok    bool
	err   error
	asked []*corev1.Pod
}

func (l *letGo) MayRelease(_ context.Context, pod *corev1.Pod) (bool, string, error) {
	l.asked = append(l.asked, pod)
	if l.ok {
		return true, "its exit is counted", l.err
	}
	return false, "the driver's exit 1 is not read yet", l.err
}

func updateRequest(t *testing.T, old, pod *corev1.Pod) admission.Request {
	t.Helper()
	oldRaw, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "1", Operation: admissionv1.Update, Namespace: "team-a", Name: pod.Name,
		Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Object:    runtime.RawExtension{Raw: raw},
		OldObject: runtime.RawExtension{Raw: oldRaw},
	}}
}

// The releases entry: taking driverset's finalizer off is admitted only when the controller would
// let the pod go itself; asked about the pod as it was; any other update is not its business.
func TestReleases(t *testing.T) {
	held := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pi-ds-0", Namespace: "team-a", UID: "uid-s0",
			Finalizers: []string{"example.com/other", contract.FinalizerOutcome}},
		Spec: corev1.PodSpec{NodeName: "n1"},
	}
	released := held.DeepCopy()
	released.Finalizers = []string{"example.com/other"}
	relabelled := held.DeepCopy()
	relabelled.Labels = map[string]string{"a": "b"}
	bare := held.DeepCopy()
	bare.Finalizers = nil
	added := bare.DeepCopy()
	added.Finalizers = []string{contract.FinalizerOutcome}

	for _, tc := range []struct {
		name     string
		old, pod *corev1.Pod
		proof    letGo
		allowed  bool
		asked    bool
		contains string
	}{
		{name: "released, as the controller would", old: held, pod: released, proof: letGo{ok: true}, allowed: true, asked: true, contains: "exit is counted"},
		{name: "released while the controller would hold it", old: held, pod: released, asked: true, contains: "exit 1 is not read yet"},
		{name: "released, the proof unreadable: fails closed", old: held, pod: released, proof: letGo{ok: true, err: errors.New("connection refused")}, asked: true, contains: "connection refused"},
		{name: "the finalizer kept", old: held, pod: relabelled, allowed: true, contains: "stays"},
		{name: "the finalizer added", old: bare, pod: added, allowed: true, contains: "stays"},
		{name: "never held", old: bare, pod: bare, allowed: true, contains: "stays"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.proof
			resp := (&Releases{Proof: &p}).Handle(context.Background(), updateRequest(t, tc.old, tc.pod))
			if resp.Allowed != tc.allowed {
				t.Errorf("allowed = %v, want %v (%s)", resp.Allowed, tc.allowed, resp.Result.Message)
			}
			if (len(p.asked) > 0) != tc.asked {
				t.Errorf("asked %d times, want asked=%v", len(p.asked), tc.asked)
			}
			if len(p.asked) > 0 && len(p.asked[0].Finalizers) != 2 {
				t.Errorf("asked about the pod as it is to be (finalizers %v), not as it was", p.asked[0].Finalizers)
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

// Anything but a pod's update is not its business (its rules send none).
func TestReleasesChecksPodUpdatesOnly(t *testing.T) {
	p := letGo{}
	held := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pi-ds-0", Finalizers: []string{contract.FinalizerOutcome}}}
	for _, mutate := range []func(*admission.Request){
		func(r *admission.Request) { r.Operation = admissionv1.Delete },
		func(r *admission.Request) { r.SubResource = "status" },
		func(r *admission.Request) { r.Resource.Resource = "services" },
		func(r *admission.Request) { r.Resource.Group = "apps" },
	} {
		req := updateRequest(t, held, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pi-ds-0"}})
		mutate(&req)
		if resp := (&Releases{Proof: &p}).Handle(context.Background(), req); !resp.Allowed {
			t.Errorf("%s %s refused: %s", req.Operation, resourceOf(req), resp.Result.Message)
		}
	}
	if len(p.asked) > 0 {
		t.Errorf("asked %d times", len(p.asked))
	}
}
