package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Outcomes of an admission decision, the outcome label of driverset_admission_decisions_total.
const (
	// OutcomeConverted: driverset changed the pod (the driver entries: made it a placeholder; the
	// executor entry: pointed it at its driver; the incarnation entry: held it behind a gate).
	OutcomeConverted = "converted"
	// OutcomeDenied: the pod was refused; the reason label says why, as a class.
	OutcomeDenied = "denied"
	// OutcomeSkipped: allowed unchanged (not driverset's pod, already converted, or a lookup
	// that failed and is let through with a warning).
	OutcomeSkipped = "skipped"
	// OutcomeErrored: the handler failed (a pod it could not decode, say); the apiserver applies
	// the webhook's failurePolicy.
	OutcomeErrored = "errored"
)

// Denial reason classes: the reason label, and the audit annotation AuditDenialReason.
const (
	// ReasonNotConvertible: an opted-in spark-submit cluster driver that cannot be held safely
	// (an owner reference, a volume or setting driverset cannot carry, an invalid annotation).
	ReasonNotConvertible = "not-convertible"
	// ReasonNotSparkSubmit: a pod labelled for driverset that is not spark-submit's cluster driver.
	ReasonNotSparkSubmit = "not-spark-submit"
	// ReasonNotAuthorized: with --authorize-extended-resources, a driver whose requester may not
	// use an extended resource the driver asks for.
	ReasonNotAuthorized = "not-authorized"
	// ReasonSecondDriver: a pod of a driverset StatefulSet with an ordinal other than 0.
	ReasonSecondDriver = "second-driver"
	// ReasonNotAsBuilt: a StatefulSet or Service that driverset's ServiceAccount asked to create
	// and that is not what driverset builds from a sealed placeholder (the creates entry).
	ReasonNotAsBuilt = "not-as-built"
	// ReasonNotItsOwn: an Event that driverset's ServiceAccount asked to record and that is not
	// about one of driverset's placeholders (the events entry).
	ReasonNotItsOwn = "not-its-own"
	// ReasonNotProven: a driver pod that driverset's ServiceAccount asked to remove without its
	// kubelet (a grace-0 delete) while nothing proves that its node runs it no more (the deletes
	// entry), or to let go of (its finalizer taken off) while the controller would hold it (the
	// releases entry).
	ReasonNotProven = "not-proven"
	// reasonOther: a denial whose handler gave no class.
	reasonOther = "other"
)

// AuditDenialReason is the audit annotation in which a denial carries its reason class: the
// apiserver writes it to the audit log (as <webhook name>/denial-reason), and Observed counts by it.
const AuditDenialReason = "denial-reason"

// deny refuses a pod with msg, its reason class in the response's audit annotations.
func deny(class, msg string) admission.Response {
	resp := admission.Denied(msg)
	resp.AuditAnnotations = map[string]string{AuditDenialReason: class}
	return resp
}

// Decision is what an admission answer amounts to.
type Decision struct {
	Outcome string
	// Reason is the class of a denial; "" otherwise.
	Reason string
}

// decisionOf classifies resp: the one place an answer becomes an outcome.
func decisionOf(resp admission.Response) Decision {
	switch {
	case resp.Allowed && len(resp.Patches) > 0:
		return Decision{Outcome: OutcomeConverted}
	case resp.Allowed:
		return Decision{Outcome: OutcomeSkipped}
	case resp.Result != nil && resp.Result.Code == http.StatusForbidden:
		reason := resp.AuditAnnotations[AuditDenialReason]
		if reason == "" {
			reason = reasonOther
		}
		return Decision{Outcome: OutcomeDenied, Reason: reason}
	}
	return Decision{Outcome: OutcomeErrored}
}

// Decisions is the counter of admission decisions by webhook entry, outcome and denial reason.
type Decisions struct{ total *prometheus.CounterVec }

// NewDecisions makes the counter and registers it with reg (controller-runtime's metrics.Registry
// in production).
func NewDecisions(reg prometheus.Registerer) (*Decisions, error) {
	d := &Decisions{total: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "driverset_admission_decisions_total",
		Help: "Admission decisions by webhook entry, outcome (converted, denied, skipped, errored) and, for denials, reason class.",
	}, []string{"webhook", "outcome", "reason"})}
	if err := reg.Register(d.total); err != nil {
		return nil, err
	}
	return d, nil
}

// Observed is an admission handler that answers as Handler does, and counts each answer and
// writes one log line per conversion and per denial (errors at error level; skips at debug).
type Observed struct {
	// Webhook names the entry: the webhook label.
	Webhook   string
	Handler   admission.Handler
	Decisions *Decisions
}

var _ admission.Handler = Observed{}

// Handle implements admission.Handler.
func (o Observed) Handle(ctx context.Context, req admission.Request) admission.Response {
	resp := o.Handler.Handle(ctx, req)
	d := decisionOf(resp)
	if o.Decisions != nil {
		o.Decisions.total.WithLabelValues(o.Webhook, d.Outcome, d.Reason).Inc()
	}
	logger := log.FromContext(ctx)
	if d.Outcome == OutcomeSkipped && !logger.V(1).Enabled() {
		return resp // most answers: nothing to log, and the pod's name is not looked for
	}
	logger = logger.WithValues("webhook", o.Webhook, "namespace", req.Namespace, objectKey(req), podNameOf(req),
		"dryRun", req.DryRun != nil && *req.DryRun)
	msg := ""
	if resp.Result != nil {
		msg = resp.Result.Message
	}
	switch d.Outcome {
	case OutcomeConverted:
		logger.Info("admission: converted", "reason", msg)
	case OutcomeDenied:
		logger.Info("admission: denied", "reasonClass", d.Reason, "reason", msg)
	case OutcomeErrored:
		logger.Info("admission: errored", "reason", msg)
	default:
		logger.V(1).Info("admission: skipped", "reason", msg)
	}
	return resp
}

// objectKey is the log key naming req's object: its kind in lower case ("pod", "statefulset",
// "service"), so that a StatefulSet's name is not logged as a pod's.
func objectKey(req admission.Request) string {
	if req.Kind.Kind == "" {
		return "pod" // every entry but creates sees pods alone
	}
	return strings.ToLower(req.Kind.Kind)
}

// podNameOf is the name of the pod in req, or its generateName when it has no name yet.
func podNameOf(req admission.Request) string {
	if req.Name != "" {
		return req.Name
	}
	var m metav1.PartialObjectMetadata
	if json.Unmarshal(req.Object.Raw, &m) == nil {
		if m.Name != "" {
			return m.Name
		}
		return m.GenerateName
	}
	return ""
}
