//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/harness"
)

// Issue 35: driverset's ServiceAccount may record Events in every namespace it serves. The policy
// driverset-guard-events keeps them to pods of the Event's namespace reported as
// driverset.dev/controller, but a policy cannot read the pod: with a stolen token one could write
// convincing Events about any tenant pod there ("OOMKilled", "image pulled from ..."). The webhook
// entry events.driverset.dev reads the pod an Event is about and admits it only when that pod, under
// the Event's UID, is a placeholder, the one kind of pod driverset records Events about, and what it
// relates to (if anything) is that placeholder's StatefulSet or driver pod. Every write here is made
// as driverset's ServiceAccount against the test bed's apiserver.
func TestDriversetTokenRecordsEventsOnlyAboutItsOwn(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	r := startApp(t, app(ns, "evented"), 0)
	ds := asDriverset(t)
	placeholder := getPod(t, ns, r.sub.plan.DriverPodName)
	driver := getPod(t, ns, r.names.DriverPodName())
	// A tenant's pod, none of driverset's business; and a pod labelled as a placeholder by hand,
	// unsealed, on which the controller records why it builds nothing.
	web := createPod(t, ns, "web", map[string]string{"app": "web"})
	unsealed := createPod(t, ns, "by-hand", map[string]string{contract.LabelPlaceholder: "true"})
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	dryPatch := metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}

	about := func(p *corev1.Pod) corev1.ObjectReference {
		return corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID}
	}
	// event is an Event as driverset's recorder makes one, about p.
	n := 0
	event := func(p *corev1.Pod, change func(*eventsv1.Event)) *eventsv1.Event {
		n++
		e := &eventsv1.Event{
			ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.guard-%d", p.Name, n), Namespace: ns},
			EventTime:           metav1.NowMicro(),
			ReportingController: "driverset.dev/controller",
			ReportingInstance:   "driverset.dev/controller-driverset-0",
			Action:              "DriverRunning",
			Reason:              "DriverRunning",
			Type:                corev1.EventTypeNormal,
			Note:                "guard rails",
			Regarding:           about(p),
		}
		if change != nil {
			change(e)
		}
		return e
	}
	create := func(e *eventsv1.Event) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := ds.EventsV1().Events(ns).Create(ctx, e, dry)
			return err
		}
	}
	// An Event as the recorder patches it when it happens again: its series.
	series := fmt.Sprintf(`{"series":{"count":2,"lastObservedTime":%q}}`, time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"))
	patchSeries := func(name string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := ds.EventsV1().Events(ns).Patch(ctx, name, types.MergePatchType, []byte(series), dryPatch)
			return err
		}
	}
	// An Event about the tenant's pod that is already there (written with the cluster admin's
	// right, as driverset's reporter), for the token to patch; and one of driverset's own.
	theirs, err := kube().EventsV1().Events(ns).Create(ctx, event(web, nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ours, err := ds.EventsV1().Events(ns).Create(ctx, event(placeholder, nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("driverset's token could not record an Event about its placeholder: %v", err)
	}
	stsRef := corev1.ObjectReference{APIVersion: "apps/v1", Kind: "StatefulSet", Namespace: ns, Name: r.names.StatefulSet}

	const events = "events.driverset.dev"
	refused := []struct {
		name, by string
		do       func(context.Context) error
	}{
		{"an Event about a tenant's pod", events, create(event(web, nil))},
		{"an Event about the placeholder under a forged UID", events, create(event(placeholder, func(e *eventsv1.Event) {
			e.Regarding.UID = "6c4bd1e6-0000-0000-0000-000000000000"
		}))},
		{"an Event about the placeholder without its UID", events, create(event(placeholder, func(e *eventsv1.Event) {
			e.Regarding.UID = ""
		}))},
		{"an Event about a pod that does not exist", events, create(event(placeholder, func(e *eventsv1.Event) {
			e.Regarding.Name = "gone"
		}))},
		{"an Event about the placeholder related to a tenant's pod", events, create(event(placeholder, func(e *eventsv1.Event) {
			e.Related = new(about(web))
		}))},
		{"an Event about the placeholder related to another StatefulSet", events, create(event(placeholder, func(e *eventsv1.Event) {
			e.Related = &corev1.ObjectReference{APIVersion: "apps/v1", Kind: "StatefulSet", Namespace: ns, Name: "theirs"}
		}))},
		{"an Event about the driver pod itself", events, create(event(driver, nil))},
		{"a tenant's Event patched", events, patchSeries(theirs.Name)},
		// RBAC gives driverset no write of core/v1 Events (its recorder uses events.k8s.io).
		{"a core/v1 Event about a tenant's pod", `cannot create resource "events" in API group ""`, func(ctx context.Context) error {
			_, err := ds.CoreV1().Events(ns).Create(ctx, &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: "web.core", Namespace: ns},
				InvolvedObject: about(web), Reason: "Killing", Message: "guard rails", Type: corev1.EventTypeWarning,
				Source: corev1.EventSource{Component: "kubelet"},
			}, dry)
			return err
		}},
	}
	// The webhook entry is applied with the manifests before driverset is ready, so the apiserver
	// calls it already; give its configuration watch a moment all the same, and let each row
	// below say what it got.
	for deadline := time.Now().Add(10 * time.Second); refused[0].do(ctx) == nil && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
	}
	for _, tc := range refused {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			err := tc.do(ctx)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.by) {
				t.Fatalf("refused, but not by %s: %v", tc.by, err)
			}
			t.Logf("%v", err)
		})
	}
	allowed := []struct {
		name string
		do   func(context.Context) error
	}{
		{"an Event about the placeholder", create(event(placeholder, nil))},
		{"an Event about the placeholder related to its driver pod", create(event(placeholder, func(e *eventsv1.Event) {
			e.Related = new(about(driver))
		}))},
		{"an Event about the placeholder related to its StatefulSet", create(event(placeholder, func(e *eventsv1.Event) {
			e.Related = &stsRef
		}))},
		{"an Event about a pod labelled as a placeholder by hand (why nothing is built)", create(event(unsealed, func(e *eventsv1.Event) {
			e.Type, e.Reason, e.Action = corev1.EventTypeWarning, "FailedCreate", "FailedCreate"
		}))},
		{"its own Event's series patched", patchSeries(ours.Name)},
	}
	for _, tc := range allowed {
		t.Run("allowed: "+tc.name, func(t *testing.T) {
			if err := tc.do(ctx); err != nil {
				t.Fatalf("refused: %v", err)
			}
		})
	}
	// The Events driverset itself recorded for the app, through the same entry, landed.
	var own []string
	waitFor(t, 30*time.Second, "driverset's own Converted and DriverRunning Events on the placeholder", func(ctx context.Context) (bool, error) {
		list, err := kube().EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=" + placeholder.Name})
		if err != nil {
			return false, err
		}
		own = own[:0]
		for _, e := range list.Items {
			if e.ReportingController == "driverset.dev/controller" && !strings.Contains(e.Name, ".guard-") {
				own = append(own, e.Reason)
			}
		}
		return slices.Contains(own, "Converted") && slices.Contains(own, "DriverRunning"), nil
	})
	// What the entry costs each Event: one live pod read, as the apiserver times the call.
	raw, err := kube().CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sum, count := harness.HistogramTotals(string(raw), "apiserver_admission_webhook_admission_duration_seconds", `name="events.driverset.dev"`)
	if count == 0 {
		t.Fatal("the apiserver never called events.driverset.dev")
	}
	t.Logf("events.driverset.dev: %v calls, %.2f ms each on average (the apiserver's timing, this bed); driverset's own Events for this app: %v",
		count, sum/count*1000, own)
}
