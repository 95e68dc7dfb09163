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
		pass       bool
		reached    bool
	}{
		{"every namespace served: any review reaches the entry", nil, "anywhere", false, true},
		{"a watched namespace", []string{"spark-a", "spark-b"}, "spark-b", false, true},
		{"a namespace not watched", []string{"spark-a", "spark-b"}, "kube-system", false, false},
		{"no namespace at all", []string{"spark-a"}, "", false, false},
		{"a namespace not watched, on an entry that passes it", []string{"spark-a"}, "kube-system", true, false},
		{"a watched namespace, on an entry that passes others", []string{"spark-a"}, "spark-a", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := &asked{}
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: tc.namespace, Operation: admissionv1.Create}}
			resp := Served{Namespaces: tc.namespaces, Handler: inner, Pass: tc.pass}.Handle(context.Background(), req)
			if inner.called != tc.reached {
				t.Fatalf("the entry reached: %v, want %v", inner.called, tc.reached)
			}
			if tc.reached {
				return
			}
			if tc.pass {
				if !resp.Allowed || len(resp.Patches) != 0 || !strings.Contains(resp.Result.Message, "left as it is") {
					t.Errorf("got allowed=%v result=%+v patches %v, want allowed unchanged", resp.Allowed, resp.Result, resp.Patches)
				}
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
