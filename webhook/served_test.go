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
		excluded   []string
		included   []string
		namespace  string
		pass       bool
		reached    bool
		message    string
	}{
		{"every namespace served: any review reaches the entry", nil, nil, nil, "anywhere", false, true, ""},
		{"a watched namespace", []string{"spark-a", "spark-b"}, nil, nil, "spark-b", false, true, ""},
		{"a namespace not watched", []string{"spark-a", "spark-b"}, nil, nil, "kube-system", false, false, "serves only namespaces spark-a"},
		{"no namespace at all", []string{"spark-a"}, nil, nil, "", false, false, "without a namespace"},
		{"a namespace not watched, on an entry that passes it", []string{"spark-a"}, nil, nil, "kube-system", true, false, ""},
		{"a watched namespace, on an entry that passes others", []string{"spark-a"}, nil, nil, "spark-a", true, true, ""},
		// A cluster-wide install does not serve the namespaces its webhooks skip either.
		{"an excluded namespace, every other served", nil, []string{"driverset-system", "kube-system"}, nil, "kube-system", false, false, "does not serve namespace \"kube-system\""},
		{"driverset's own namespace", nil, []string{"driverset-system", "kube-system"}, nil, "driverset-system", false, false, "does not serve namespace \"driverset-system\""},
		{"an excluded namespace, on an entry that passes it", nil, []string{"kube-system"}, nil, "kube-system", true, false, ""},
		{"a namespace not excluded", nil, []string{"kube-system"}, nil, "spark-a", false, true, ""},
		{"excluded though watched", []string{"spark-a"}, []string{"spark-a"}, nil, "spark-a", false, false, "does not serve namespace \"spark-a\""},
		{"no namespace at all, every namespace served", nil, nil, nil, "", false, false, "without a namespace"},
		// The chart's webhook.includedNamespaces limits the selector without limiting the caches.
		{"an included namespace", nil, []string{"kube-system"}, []string{"spark-a"}, "spark-a", false, true, ""},
		{"a namespace not included", nil, []string{"kube-system"}, []string{"spark-a"}, "spark-z", false, false, "only namespaces spark-a (--included-namespaces)"},
		{"a namespace not included, on an entry that passes it", nil, nil, []string{"spark-a"}, "spark-z", true, false, ""},
		{"watched, but not included", []string{"spark-a", "spark-b"}, nil, []string{"spark-a"}, "spark-b", false, false, "not \"spark-b\""},
		{"included, but not watched", []string{"spark-a"}, nil, []string{"spark-a", "spark-b"}, "spark-b", false, false, "not \"spark-b\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := &asked{}
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: tc.namespace, Operation: admissionv1.Create}}
			resp := Served{Namespaces: tc.namespaces, Excluded: tc.excluded, Included: tc.included, Handler: inner, Pass: tc.pass}.Handle(context.Background(), req)
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
				!strings.Contains(resp.Result.Message, tc.message) ||
				decisionOf(resp) != (Decision{Outcome: OutcomeDenied, Reason: ReasonNotServed}) {
				t.Errorf("got allowed=%v result=%+v decision %+v, want denied %q", resp.Allowed, resp.Result, decisionOf(resp), ReasonNotServed)
			}
		})
	}
}
