package webhook

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// ReasonNotServed is the denial reason class of a review about a namespace a namespaced install
// does not serve (Served).
const ReasonNotServed = "not-served"

// Served answers reviews about the namespaces driverset serves (a namespaced install's
// --watch-namespaces; none: every namespace) with Handler, and refuses every other before
// Handler reads anything for it. The apiserver never sends such a review (each webhook's
// namespaceSelector names the same namespaces), so one is a caller's own: without it, a pod that
// can reach the webhook could learn about pods, executors and LimitRanges of namespaces driverset
// was not installed for (issue 35). Reviews carry the namespace of every object driverset's
// entries handle; one with none is refused too.
type Served struct {
	// Namespaces served, sorted; empty: every namespace.
	Namespaces []string
	Handler    admission.Handler
	// Pass: a review about another namespace is allowed unchanged, not refused, still with nothing
	// read. For the executors entry, which fails open: were the selector and the flag ever to
	// disagree, a plain Spark app's executors there would be refused, not left as they are.
	Pass bool
}

var _ admission.Handler = Served{}

// Handle implements admission.Handler.
func (s Served) Handle(ctx context.Context, req admission.Request) admission.Response {
	if len(s.Namespaces) == 0 || slices.Contains(s.Namespaces, req.Namespace) {
		return s.Handler.Handle(ctx, req)
	}
	if s.Pass {
		return admission.Allowed(fmt.Sprintf("driverset serves only namespaces %s (--watch-namespaces), not %q: left as it is",
			strings.Join(s.Namespaces, ", "), req.Namespace))
	}
	return deny(ReasonNotServed, fmt.Sprintf("driverset serves only namespaces %s (--watch-namespaces), not %q: the apiserver sends it no other",
		strings.Join(s.Namespaces, ", "), req.Namespace))
}
