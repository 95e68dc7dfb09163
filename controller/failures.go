package controller

import (
	"context"
	"fmt"
	"reflect"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Why the driver pod is not there: a Create refused by the apiserver (quota, policy, validation) is
// shown on the placeholder, so spark-submit's watch and `kubectl describe` say what is wrong.

// missingDriverGrace is how long S-0 may be missing before driverset asks the StatefulSet's
// Events why: the StatefulSet controller makes S-0 within a second when nothing is wrong.
const missingDriverGrace = 10 * time.Second

// failedCreateRecent bounds how old a FailedCreate Event may be to explain a missing S-0 now.
const failedCreateRecent = 2 * time.Minute

// ReasonFailedCreate is the Event reason with which the StatefulSet controller reports a refused
// pod, and with which driverset reports a refused Service or StatefulSet.
const ReasonFailedCreate = "FailedCreate"

// createFailure is the message of the latest FailedCreate Event among events that was seen within
// failedCreateRecent of now, or "" when there is none.
func createFailure(events []corev1.Event, now time.Time) string {
	var f latestFailure
	for i := range events {
		f.consider(&events[i], now)
	}
	return f.msg
}

// latestFailure is the latest recent FailedCreate Warning among the Events considered so far:
// when it was seen and its message, cut (cutMessage).
type latestFailure struct {
	at  time.Time
	msg string
}

func (f *latestFailure) consider(e *corev1.Event, now time.Time) {
	if e.Reason != ReasonFailedCreate || e.Type != corev1.EventTypeWarning {
		return
	}
	seen := lastSeen(e)
	if now.Sub(seen) > failedCreateRecent || !seen.After(f.at) {
		return
	}
	f.at, f.msg = seen, cutMessage(e.Message)
}

// lastSeen is when an Event was last observed, whichever API wrote it.
func lastSeen(e *corev1.Event) time.Time {
	t := e.LastTimestamp.Time
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	if e.EventTime.After(t) {
		t = e.EventTime.Time
	}
	return t
}

// driverPodFailure asks the apiserver why the StatefulSet has not made S-0: the latest
// FailedCreate Event of sts, read live and for this one object only (Events are never cached),
// within bounds (failureEvents). It asks only once S-0 has been missing past missingDriverGrace
// since sts was made.
func (r *Placeholder) driverPodFailure(ctx context.Context, sts *appsv1.StatefulSet) (string, error) {
	if !r.asksWhyMissing(sts) {
		return "", nil
	}
	msg, err := failureEvents(ctx, r.APIReader, sts, r.now())
	if err != nil || msg == "" {
		return "", err
	}
	return fmt.Sprintf("the StatefulSet %s cannot create the driver pod: %s", sts.Name, msg), nil
}

// asksWhyMissing reports whether driverPodFailure reads sts's Events: only once S-0 has been
// missing past missingDriverGrace since sts was made, and only ever live (through the cache this
// would watch every Event of the cluster).
func (r *Placeholder) asksWhyMissing(sts *appsv1.StatefulSet) bool {
	return r.APIReader != nil && sts.Spec.Replicas != nil && *sts.Spec.Replicas != 0 && r.now().Sub(sts.CreationTimestamp.Time) >= missingDriverGrace
}

// refusedError is a Create that the apiserver refused (quota, admission policy, validation): the
// reason the driver cannot be made, shown on the placeholder rather than only retried.
type refusedError struct {
	what string // e.g. "StatefulSet pi-driver"
	err  error
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("driverset cannot create %s: %v", e.what, e.err)
}

func (e *refusedError) Unwrap() error { return e.err }

// retryRefused is how often a refused Create is tried again: what refused it (a quota, a policy)
// is not watched.
const retryRefused = 10 * time.Second

// refusedByAdmission reports whether a Create was refused for what it asks (quota, policy,
// validation), as opposed to failing on the way (a timeout, a lost connection).
func refusedByAdmission(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsRequestEntityTooLargeError(err)
}

// kindOf is obj's kind for a message, from its Go type (typed objects carry no TypeMeta).
func kindOf(obj client.Object) string {
	return reflect.TypeOf(obj).Elem().Name()
}
