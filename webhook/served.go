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
// --watch-namespaces, none: every namespace; of those only the Included, when given; never the
// Excluded ones, which its webhooks skip: kube-system and its own namespace by default) with
// Handler, and refuses every other before
// Handler reads anything for it. The apiserver never sends such a review (each webhook's
// namespaceSelector names the same namespaces), so one is a caller's own: without it, a pod that
// can reach the webhook could learn about pods, executors and LimitRanges of namespaces driverset
// was not installed for (issue 35). Reviews carry the namespace of every object driverset's
// entries handle; one with none is refused too.
type Served struct {
	// Namespaces served, sorted; empty: every namespace but the Excluded.
	Namespaces []string
	// Excluded are never served, watched or not: --excluded-namespaces and driverset's own.
	Excluded []string
	// Included, when not empty, are the only namespaces the webhooks' selector lets through
	// (--included-namespaces, the chart's webhook.includedNamespaces), watched or not: the caches
	// are not limited to them, the webhooks are.
	Included []string
	Handler  admission.Handler
	// Pass: a review about another namespace is allowed unchanged, not refused, still with nothing
	// read. For the executors entry, which fails open: were the selector and the flags ever to
	// disagree, a plain Spark app's executors there would be refused, not left as they are.
	Pass bool
}

var _ admission.Handler = Served{}

// Handle implements admission.Handler.
func (s Served) Handle(ctx context.Context, req admission.Request) admission.Response {
	why := s.notServed(req.Namespace)
	if why == "" {
		return s.Handler.Handle(ctx, req)
	}
	if s.Pass {
		return admission.Allowed(why + ": left as it is")
	}
	return deny(ReasonNotServed, why+": the apiserver sends it no other")
}

// notServed says why a review about namespace ns is not driverset's to answer, or "" when it is.
func (s Served) notServed(ns string) string {
	switch {
	case ns == "":
		return "driverset answers no review without a namespace"
	case slices.Contains(s.Excluded, ns):
		return fmt.Sprintf("driverset does not serve namespace %q (its webhooks skip %s)", ns, strings.Join(s.Excluded, ", "))
	case len(s.Namespaces) > 0 && !slices.Contains(s.Namespaces, ns):
		return fmt.Sprintf("driverset serves only namespaces %s (--watch-namespaces), not %q", strings.Join(s.Namespaces, ", "), ns)
	case len(s.Included) > 0 && !slices.Contains(s.Included, ns):
		return fmt.Sprintf("driverset serves only namespaces %s (--included-namespaces), not %q", strings.Join(s.Included, ", "), ns)
	}
	return ""
}
