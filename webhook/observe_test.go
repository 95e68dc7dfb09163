package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/driverset/driverset/contract"
)

// TestObservedCountsEachOutcome is the counter's spec: each answer of the real handlers is
// counted once, under its webhook, outcome and (for a denial) reason class, and each conversion
// and denial is one log line naming the namespace, the pod and the reason.
func TestObservedCountsEachOutcome(t *testing.T) {
	driver := func(change func(*corev1.Pod)) []byte {
		p := sparkDriver()
		if change != nil {
			change(p)
		}
		return encode(t, p)
	}
	incarnation := func(index string) []byte {
		p := loadPod(t, filepath.Join("testdata", "incarnation", "spark-3.5-stale-executors.pod.yaml"))
		p.Labels[appsv1.PodIndexLabel] = index
		return encode(t, p)
	}
	yes := true
	cases := []struct {
		name     string
		webhook  string
		handler  admission.Handler
		raw      []byte
		want     Decision
		wantLog  string // the log line's msg; "" for none at info level
		wantWhat string // a part of the logged reason
	}{
		{"an opted-in driver is converted", "driver", &Driver{Seal: testSeal()}, driver(nil),
			Decision{Outcome: OutcomeConverted}, "admission: converted", "converted to a driverset placeholder"},
		{"a driver not opted in is skipped", "driver", &Driver{Seal: testSeal()}, driver(func(p *corev1.Pod) { delete(p.Labels, contract.LabelResilient) }),
			Decision{Outcome: OutcomeSkipped}, "", ""},
		{"a driver with an invalid setting is denied, not convertible", "driver", &Driver{Seal: testSeal()}, driver(func(p *corev1.Pod) {
			p.Annotations = map[string]string{contract.AnnotationFenceAfter: "2 minutes"}
		}), Decision{Outcome: OutcomeDenied, Reason: ReasonNotConvertible}, "admission: denied", "is not a duration"},
		{"an opted-in pod that another controller owns is denied as no spark-submit driver", "driver", &Driver{Seal: testSeal()}, driver(func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "nightly", UID: "u1", Controller: &yes}}
		}), Decision{Outcome: OutcomeDenied, Reason: ReasonNotSparkSubmit}, "admission: denied", `controlled by Job "nightly" (batch/v1)`},
		{"a second driver ordinal is denied", "incarnation", &Incarnation{Reader: cacheFrom(t, filepath.Join("testdata", "incarnation", "cache.yaml"))},
			incarnation("1"), Decision{Outcome: OutcomeDenied, Reason: ReasonSecondDriver}, "admission: denied", "one driver per app"},
		{"a pod that cannot be decoded is an error", "driver", &Driver{Seal: testSeal()}, []byte(`{"metadata":{"name":"x","namespace":"jobs"},"spec":7}`),
			Decision{Outcome: OutcomeErrored}, "admission: errored", "could not decode"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			decisions, err := NewDecisions(reg)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			ctx := log.IntoContext(context.Background(), funcr.NewJSON(func(obj string) { out.WriteString(obj + "\n") }, funcr.Options{}))
			o := Observed{Webhook: tc.webhook, Handler: tc.handler, Decisions: decisions}
			resp := o.Handle(ctx, createRequest(tc.raw, false))
			if got := decisionOf(resp); got != tc.want {
				t.Fatalf("decision %+v, want %+v (message %v)", got, tc.want, resp.Result)
			}
			if n := testutil.ToFloat64(decisions.total.WithLabelValues(tc.webhook, tc.want.Outcome, tc.want.Reason)); n != 1 {
				t.Errorf("counter for %s/%s/%s = %v, want 1", tc.webhook, tc.want.Outcome, tc.want.Reason, n)
			}
			if n := testutil.CollectAndCount(decisions.total); n != 1 {
				t.Errorf("%d series, want exactly 1", n)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if tc.wantLog == "" {
				if out.Len() != 0 {
					t.Errorf("logged %q for a skip at info level", out.String())
				}
				return
			}
			if len(lines) != 1 {
				t.Fatalf("%d log lines, want 1: %q", len(lines), out.String())
			}
			var line map[string]any
			if err := json.Unmarshal([]byte(lines[0]), &line); err != nil {
				t.Fatal(err)
			}
			if line["msg"] != tc.wantLog || line["namespace"] == "" || line["pod"] == "" || line["webhook"] != tc.webhook ||
				!strings.Contains(line["reason"].(string), tc.wantWhat) {
				t.Errorf("log line %s: want msg %q with namespace, pod, webhook %s and a reason containing %q", lines[0], tc.wantLog, tc.webhook, tc.wantWhat)
			}
			if tc.want.Outcome == OutcomeDenied && line["reasonClass"] != tc.want.Reason {
				t.Errorf("log line %s: reasonClass want %s", lines[0], tc.want.Reason)
			}
		})
	}
}

// A denial's class also reaches the apiserver's audit log, as the response's audit annotation.
func TestDenialCarriesItsClassToTheAuditLog(t *testing.T) {
	resp := deny(ReasonSecondDriver, "no")
	if resp.Allowed || resp.Result.Code != 403 || resp.AuditAnnotations[AuditDenialReason] != ReasonSecondDriver {
		t.Errorf("deny = %+v", resp)
	}
	if d := decisionOf(admission.Denied("unclassified")); d != (Decision{Outcome: OutcomeDenied, Reason: reasonOther}) {
		t.Errorf("a denial without a class = %+v, want reason %s", d, reasonOther)
	}
}

// TestPodNameOf is the pod a log line names: the request's name, else the object's name, else
// its generateName (a pod created with one has no name yet when it is admitted).
func TestPodNameOf(t *testing.T) {
	cases := []struct {
		name    string
		reqName string
		object  string
		want    string
	}{
		{"the request's name", "spark-pi-driver", `{"metadata":{"namespace":"jobs"}}`, "spark-pi-driver"},
		{"the request's name over the object's", "spark-pi-driver", `{"metadata":{"name":"other"}}`, "spark-pi-driver"},
		{"no request name: the object's name", "", `{"metadata":{"name":"spark-pi-driver"}}`, "spark-pi-driver"},
		{"no name at all: the generateName", "", `{"metadata":{"generateName":"spark-pi-"}}`, "spark-pi-"},
		{"no request name and an object that does not decode", "", `{"metadata":7}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := admission.Request{}
			req.Name = tc.reqName
			req.Object.Raw = []byte(tc.object)
			if got := podNameOf(req); got != tc.want {
				t.Errorf("podNameOf = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestObservedNamesTheObjectByItsKind: a log line names its object under its kind, so the creates
// entry's StatefulSets and Services are not logged as pods.
func TestObservedNamesTheObjectByItsKind(t *testing.T) {
	for _, kind := range []string{"Pod", "StatefulSet", "Service"} {
		var out bytes.Buffer
		ctx := log.IntoContext(context.Background(), funcr.NewJSON(func(obj string) { out.WriteString(obj + "\n") }, funcr.Options{}))
		o := Observed{Webhook: "creates", Handler: admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
			return deny(ReasonSecondDriver, "no")
		})}
		req := createRequest([]byte(`{"metadata":{"name":"spark-pi-driver","namespace":"jobs"}}`), false)
		req.Kind = metav1.GroupVersionKind{Kind: kind}
		o.Handle(ctx, req)
		var line map[string]any
		if err := json.Unmarshal(out.Bytes(), &line); err != nil {
			t.Fatalf("%s: %v (%q)", kind, err, out.String())
		}
		key := strings.ToLower(kind)
		if line[key] != "spark-pi-driver" || (key != "pod" && line["pod"] != nil) {
			t.Errorf("%s: log line %s, want the name under %q alone", kind, out.String(), key)
		}
	}
}
