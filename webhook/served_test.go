package webhook

import (
	"context"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// asked records whether the inner handler was reached.
type asked struct{ called bool }

func (a *asked) Handle(context.Context, admission.Request) admission.Response {
	a.called = true
	return admission.Allowed("inner")
}

// TestServed: a namespaced install (--watch-namespaces) answers reviews about its namespaces
// only; the apiserver sends no other (the webhooks' namespaceSelector), so any other is a
// caller's own, refused before anything is read for it (issue 35: a crafted review must not
// tell about pods, executors or LimitRanges elsewhere).
func TestServed(t *testing.T) {
	for _, tc := range []struct {
		name       string
		namespaces []string
		namespace  string
		reached    bool
	}{
		{"every namespace served: any review reaches the entry", nil, "anywhere", true},
		{"a watched namespace", []string{"spark-a", "spark-b"}, "spark-b", true},
		{"a namespace not watched", []string{"spark-a", "spark-b"}, "kube-system", false},
		{"no namespace at all", []string{"spark-a"}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := &asked{}
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: tc.namespace, Operation: admissionv1.Create}}
			resp := Served{Namespaces: tc.namespaces, Handler: inner}.Handle(context.Background(), req)
			if inner.called != tc.reached {
				t.Fatalf("the entry reached: %v, want %v", inner.called, tc.reached)
			}
			if tc.reached {
				return
			}
			if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusForbidden ||
				!strings.Contains(resp.Result.Message, "serves only namespaces spark-a") ||
				decisionOf(resp) != (Decision{Outcome: OutcomeDenied, Reason: ReasonNotServed}) {
				t.Errorf("got allowed=%v result=%+v decision %+v, want denied %q", resp.Allowed, resp.Result, decisionOf(resp), ReasonNotServed)
			}
		})
	}
}
