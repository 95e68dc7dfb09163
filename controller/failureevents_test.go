package controller

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// pagedEvents serves Event lists as the apiserver does: filtered by the field selector, at most
// Limit a page, the next page named by Continue. It counts the requests and the bytes it sends.
type pagedEvents struct {
	events   []corev1.Event
	requests []client.ListOptions
	sent     int
}

func (p *pagedEvents) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errors.New("only lists")
}

func (p *pagedEvents) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	var o client.ListOptions
	o.ApplyOptions(opts)
	p.requests = append(p.requests, o)
	var match []corev1.Event
	for _, e := range p.events {
		f := fields.Set{"involvedObject.uid": string(e.InvolvedObject.UID), "reason": e.Reason, "type": e.Type}
		if o.FieldSelector == nil || o.FieldSelector.Matches(f) {
			match = append(match, e)
		}
	}
	start, _ := strconv.Atoi(o.Continue)
	end := len(match)
	if o.Limit > 0 {
		end = min(end, start+int(o.Limit))
	}
	out := list.(*corev1.EventList)
	out.Items = match[start:end]
	if end < len(match) {
		out.Continue = strconv.Itoa(end)
	}
	for i := range out.Items {
		p.sent += out.Items[i].Size()
	}
	return nil
}

// Why S-0 is missing is read without taking a tenant's Events whole (issue 35): a tenant may write
// any number of Events about its StatefulSet, each with a message as large as the apiserver takes.
// The read asks only for Warning FailedCreate Events about this StatefulSet, one a page, and stops
// after failureEventPages pages or failureEventBytes; the message it returns is cut to
// failureMessageMax bytes.
func TestDriverPodFailureReadIsBounded(t *testing.T) {
	now := t0
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "pi-driver", Namespace: "ns", UID: "sts-uid",
		CreationTimestamp: metav1.NewTime(now.Add(-time.Minute))}, Spec: appsv1.StatefulSetSpec{Replicas: new(int32(1))}}
	event := func(i int, typ, reason, msg string) corev1.Event {
		return corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("pi-driver.%06d", i), Namespace: "ns"},
			InvolvedObject: corev1.ObjectReference{Kind: "StatefulSet", Namespace: "ns", Name: "pi-driver", UID: sts.UID},
			Type:           typ, Reason: reason, Message: msg, LastTimestamp: metav1.NewTime(now.Add(-time.Second)),
		}
	}
	quota := "create Pod pi-driver-0 in StatefulSet pi-driver failed error: pods \"pi-driver-0\" is forbidden: exceeded quota: pods"
	many := func(n int, typ, reason, msg string) []corev1.Event {
		var out []corev1.Event
		for i := range n {
			out = append(out, event(i+1, typ, reason, msg))
		}
		return out
	}
	mib := strings.Repeat("x", 1<<20)
	cases := []struct {
		name     string
		events   []corev1.Event
		want     string // in the reason told
		requests int    // at most
		sent     int    // bytes, at most
	}{
		{"the StatefulSet controller's refusal is told", []corev1.Event{
			event(0, corev1.EventTypeNormal, "SuccessfulDelete", "delete Pod pi-driver-0 in StatefulSet pi-driver successful"),
			event(1, corev1.EventTypeWarning, ReasonFailedCreate, quota),
		}, "exceeded quota: pods", 2, 4 << 10},
		{"other Events about the StatefulSet are not sent", append(many(96, corev1.EventTypeNormal, "Flood", mib),
			event(97, corev1.EventTypeWarning, ReasonFailedCreate, quota)), "exceeded quota: pods", 2, 4 << 10},
		{"a tenant's large FailedCreate Events are read up to the byte bound", append([]corev1.Event{event(0, corev1.EventTypeWarning, ReasonFailedCreate, quota)},
			many(96, corev1.EventTypeWarning, ReasonFailedCreate, mib)...), "cannot create the driver pod", failureEventPages, failureEventBytes + 2<<20},
		{"a tenant's many small FailedCreate Events are read up to the page bound", many(10000, corev1.EventTypeWarning, ReasonFailedCreate, quota),
			"exceeded quota: pods", failureEventPages, failureEventPages * (1 << 10)},
		{"a long message is cut on a character's boundary", []corev1.Event{event(0, corev1.EventTypeWarning, ReasonFailedCreate, strings.Repeat("é", 4<<10))},
			"éé…", 2, 16 << 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			api := &pagedEvents{events: tc.events}
			r := &Placeholder{APIReader: api, Now: func() time.Time { return now }}
			got, err := r.driverPodFailure(context.Background(), sts)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("told %.200q, want it to say %q", got, tc.want)
			}
			if len(got) > 1<<10 || !utf8.ValidString(got) {
				t.Errorf("told %d bytes (valid UTF-8: %v): an Event's note may have at most 1 KiB", len(got), utf8.ValidString(got))
			}
			if len(api.requests) > tc.requests || api.sent > tc.sent {
				t.Errorf("read %d requests and %d KiB, want at most %d and %d KiB", len(api.requests), api.sent>>10, tc.requests, tc.sent>>10)
			}
			for _, o := range api.requests {
				if o.Limit < 1 || o.Limit > failureEventsPage {
					t.Errorf("a request of limit %d, want 1 to %d Events a page", o.Limit, failureEventsPage)
				}
			}
		})
	}
}

// cutMessage keeps a message of failureMessageMax bytes whole and cuts a longer one to at most
// that many bytes, on a character's boundary, ending in an ellipsis. (make mutate, seed 808: the
// bound taken as exclusive lived.)
func TestCutMessage(t *testing.T) {
	atMax := strings.Repeat("x", failureMessageMax)
	for _, tc := range []struct {
		name, msg, want string
	}{
		{"short: whole", "exceeded quota", "exceeded quota"},
		{"exactly the bound: whole", atMax, atMax},
		{"one byte over: cut", atMax + "y", strings.Repeat("x", failureMessageMax-len("…")) + "…"},
		{"cut inside a character: before it", strings.Repeat("é", failureMessageMax), strings.Repeat("é", (failureMessageMax-len("…"))/2) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := cutMessage(tc.msg)
			if got != tc.want || len(got) > failureMessageMax {
				t.Errorf("cutMessage: %d bytes %.20q…, want %d bytes %.20q…", len(got), got, len(tc.want), tc.want)
			}
		})
	}
}
