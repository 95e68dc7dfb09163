package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// EventsPath serves the webhook entry that checks each Event driverset's own ServiceAccount
// records (its matchConditions send nothing else).
const EventsPath = "/check-events"

// Events admits an Event that driverset's ServiceAccount creates or patches only when it is about
// one of driverset's placeholders (docs/design.md#guard-rails-on-driversets-own-power): the pod
// it regards, read from the apiserver, exists in the Event's namespace under the Event's UID and
// is a placeholder (convert.IsPlaceholder: the pods the controller reconciles, and the only ones
// it records Events about), and what it relates to, if anything, is named for that placeholder:
// its StatefulSet or that StatefulSet's driver pod. The policy driverset-guard-events checks what
// the Event alone shows (namespace, reporter, a pod of the same namespace); it cannot read the
// pod, so with a stolen token one could write Events about any tenant's pod.
//
// Its entry fails closed, and so does the handler when it cannot read the pod: driverset's
// recorder writes Events in the background and drops one that is refused (client-go logs
// "Server rejected event"), so a refusal never holds a decision back.
type Events struct {
	// Pods reads the regarded pod from the apiserver: a placeholder just admitted may not be in
	// this replica's cache yet, and the UID must be the pod's as it is now. It also reads the
	// StatefulSet an Event relates to when this build would not have named it so (controls).
	Pods client.Reader
}

var _ admission.Handler = (*Events)(nil)

// Handle implements admission.Handler.
func (e *Events) Handle(ctx context.Context, req admission.Request) admission.Response {
	if (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) || req.SubResource != "" {
		return admission.Allowed(fmt.Sprintf("driverset checks Event writes only, not %s %s", req.Operation, resourceOf(req)))
	}
	regarding, related, err := eventRefs(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("driverset could not decode the Event: %w", err))
	}
	if regarding == nil {
		return admission.Allowed(fmt.Sprintf("driverset checks Events only, not %s", resourceOf(req)))
	}
	what := fmt.Sprintf("Event %s/%s", req.Namespace, req.Name)
	if why, sts := notAboutAPlaceholder(req.Namespace, *regarding, related); why != "" {
		controlled, err := e.controls(ctx, req.Namespace, sts, regarding.UID)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("driverset could not read StatefulSet %s, which %s relates to: %w", sts, what, err))
		}
		if !controlled {
			return deny(ReasonNotItsOwn, fmt.Sprintf("driverset does not record %s: %s", what, why))
		}
	}
	var p corev1.Pod
	if err := e.Pods.Get(ctx, types.NamespacedName{Namespace: req.Namespace, Name: regarding.Name}, &p); err != nil {
		if apierrors.IsNotFound(err) {
			return deny(ReasonNotItsOwn, fmt.Sprintf("driverset does not record %s: pod %s does not exist", what, regarding.Name))
		}
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("driverset could not read pod %s, which %s is about: %w", regarding.Name, what, err))
	}
	if p.UID != regarding.UID {
		return deny(ReasonNotItsOwn, fmt.Sprintf("driverset does not record %s: pod %s is %s, not %s", what, p.Name, p.UID, regarding.UID))
	}
	if !convert.IsPlaceholder(&p) {
		return deny(ReasonNotItsOwn, fmt.Sprintf("driverset does not record %s: pod %s is not a placeholder, and driverset records Events about its placeholders only", what, p.Name))
	}
	return admission.Allowed("an Event about placeholder " + p.Name)
}

// eventRefs returns what the Event in req is about and what it relates to, from either API
// (events.k8s.io's regarding is core/v1's involvedObject); regarding is nil when req is not an
// Event. The Event need not decode strictly: only these two references are judged.
func eventRefs(req admission.Request) (regarding, related *corev1.ObjectReference, err error) {
	if req.Resource.Resource != "events" {
		return nil, nil, nil
	}
	switch req.Resource.Group {
	case eventsv1.GroupName:
		var ev eventsv1.Event
		if err := json.Unmarshal(req.Object.Raw, &ev); err != nil {
			return nil, nil, err
		}
		return &ev.Regarding, ev.Related, nil
	case corev1.GroupName:
		var ev corev1.Event
		if err := json.Unmarshal(req.Object.Raw, &ev); err != nil {
			return nil, nil, err
		}
		return &ev.InvolvedObject, ev.Related, nil
	}
	return nil, nil, nil
}

// notAboutAPlaceholder says why an Event of namespace ns that regards regarding and relates to
// related (nil: nothing) is not one driverset records, judging the references alone; "" when it
// may be (the pod is then read). The controller records every Event on a placeholder, by name and
// UID, relating it to nothing, to the StatefulSet it made for it, or to that StatefulSet's pod.
// That StatefulSet is found by its controller, whatever its name (controller.namesOf): one named
// as this build names it (contract.NamesFor, or contract.LegacyNamesFor for an older app) is
// judged by name alone; for a StatefulSet of another name, or the "-0" pod of one, sts names it,
// and the Event may be only if the regarded pod controls it (Events.controls reads it).
func notAboutAPlaceholder(ns string, regarding corev1.ObjectReference, related *corev1.ObjectReference) (why, sts string) {
	if regarding.APIVersion != "v1" || regarding.Kind != "Pod" || regarding.Namespace != ns || regarding.Name == "" {
		return fmt.Sprintf("it is about %s %s %s/%s, and driverset records Events only about pods of the Event's namespace", regarding.APIVersion, regarding.Kind, regarding.Namespace, regarding.Name), ""
	}
	if regarding.UID == "" {
		return fmt.Sprintf("it names pod %s without its UID", regarding.Name), ""
	}
	if related == nil {
		return "", ""
	}
	isSts := related.APIVersion == "apps/v1" && related.Kind == "StatefulSet"
	isPod := related.APIVersion == "v1" && related.Kind == "Pod"
	for _, n := range contract.CandidateNamesFor(regarding.Name) {
		if related.Namespace == ns && (isSts && related.Name == n.StatefulSet || isPod && related.Name == n.DriverPodName()) {
			return "", ""
		}
	}
	why = fmt.Sprintf("it relates to %s %s %s/%s, which is neither the StatefulSet driverset makes for pod %s nor its driver pod",
		related.APIVersion, related.Kind, related.Namespace, related.Name, regarding.Name)
	switch {
	case related.Namespace != ns:
	case isSts:
		sts = related.Name
	case isPod && strings.HasSuffix(related.Name, "-0"):
		sts = strings.TrimSuffix(related.Name, "-0")
	}
	return why, sts
}

// controls reports whether StatefulSet ns/sts, read from the apiserver, is controlled by the pod
// of UID owner; false when sts is "" or there is no such StatefulSet.
func (e *Events) controls(ctx context.Context, ns, sts string, owner types.UID) (bool, error) {
	if sts == "" {
		return false, nil
	}
	var s appsv1.StatefulSet
	if err := e.Pods.Get(ctx, types.NamespacedName{Namespace: ns, Name: sts}, &s); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	ref := metav1.GetControllerOfNoCopy(&s)
	return ref != nil && ref.APIVersion == "v1" && ref.Kind == "Pod" && ref.UID == owner, nil
}
