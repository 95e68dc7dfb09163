package controller

import (
	"context"
	"time"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Reading why S-0 is missing must cost driverset little whatever a tenant writes (issue 35): any
// user who may write Events in a namespace (`edit` may) can write Events about the StatefulSets
// there, a core/v1 Event's message has no size limit (the apiserver took one of 1.4 MiB), and the
// leader reads them every missingDriverGrace for each app whose S-0 is missing. Listed whole, a
// tenant's 96 such Events of 1 MiB took the leader's RSS up by 365 MiB. So the read
// (failureEvents):
//   - asks the apiserver only for the Warning FailedCreate Events about this StatefulSet (a field
//     selector: the apiserver filters before it sends, so no other Event costs driverset a byte);
//   - takes them failureEventsPage at a time: an Event may be as large as etcd takes (1.5 MiB),
//     so one is the most a request holds, and --workers reads at once the most held together;
//   - stops after failureEventPages pages or failureEventBytes read, whichever comes first;
//   - keeps only the latest recent message, cut to failureMessageMax bytes (cutMessage: a new
//     string, so that the rest of a large message does not stay alive in the placeholder's view).
//
// The StatefulSet's status cannot say it instead: the StatefulSet controller reports a refused pod
// in Events only. A tenant's Events may still hide the StatefulSet controller's from the read, or
// be what it tells: they mislead only the tenant's own placeholder, which any Event of theirs
// could already, and what is read costs driverset at most the bounds.
const (
	failureEventsPage = 1
	// failureEventPages is more than the StatefulSet controller writes about one StatefulSet: one
	// Event per distinct message, similar ones combined after ten (client-go's correlator).
	failureEventPages = 16
	// failureEventBytes is far more than those Events weigh (a few hundred bytes each), and
	// less than one Event made to be large: such a page is the last.
	failureEventBytes = 1 << 20
	// failureMessageMax leaves room, in driverset's own FailedCreate Event on the placeholder, for
	// the sentence around the message: an events.k8s.io Event's note may have at most 1 KiB.
	failureMessageMax = 512
)

// failureEvents is the latest recent FailedCreate message among sts's Events, read within the
// bounds above, or "" when none was read.
func failureEvents(ctx context.Context, r client.Reader, sts *appsv1.StatefulSet, now time.Time) (string, error) {
	selector := fields.SelectorFromSet(fields.Set{
		"involvedObject.uid": string(sts.UID), "reason": ReasonFailedCreate, "type": corev1.EventTypeWarning,
	})
	var latest latestFailure
	next, read := "", 0
	for page := 0; page < failureEventPages && read < failureEventBytes; page++ {
		opts := []client.ListOption{client.InNamespace(sts.Namespace), client.MatchingFieldsSelector{Selector: selector},
			client.Limit(failureEventsPage)}
		if next != "" {
			opts = append(opts, client.Continue(next))
		}
		var events corev1.EventList
		if err := r.List(ctx, &events, opts...); err != nil {
			if page > 0 && apierrors.IsResourceExpired(err) {
				break // the next page's token expired (compacted): what was read says enough
			}
			return "", err
		}
		for i := range events.Items {
			read += events.Items[i].Size()
			latest.consider(&events.Items[i], now)
		}
		if next = events.Continue; next == "" {
			break
		}
	}
	return latest.msg, nil
}

// cutMessage is msg when it has at most failureMessageMax bytes, else its start, cut on a
// character's boundary, with an ellipsis: a new string, which does not keep msg alive.
func cutMessage(msg string) string {
	if len(msg) <= failureMessageMax {
		return msg
	}
	n := failureMessageMax - len("…")
	for n > 0 && !utf8.RuneStart(msg[n]) {
		n--
	}
	return msg[:n] + "…"
}
