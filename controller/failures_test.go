package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/driverset/driverset/contract"
)

func TestCreateFailure(t *testing.T) {
	now := t0
	ev := func(typ, reason, msg string, last time.Time) corev1.Event {
		return corev1.Event{Type: typ, Reason: reason, Message: msg, LastTimestamp: metav1.NewTime(last)}
	}
	series := ev(corev1.EventTypeWarning, "FailedCreate", "from a series", now.Add(-time.Hour))
	series.Series = &corev1.EventSeries{Count: 40, LastObservedTime: metav1.NewMicroTime(now.Add(-time.Second))}
	cases := []struct {
		name   string
		events []corev1.Event
		want   string
	}{
		{name: "no events", want: ""},
		{name: "the latest recent FailedCreate", want: "quota, later",
			events: []corev1.Event{
				ev(corev1.EventTypeWarning, "FailedCreate", "quota", now.Add(-time.Minute)),
				ev(corev1.EventTypeWarning, "FailedCreate", "quota, later", now.Add(-10*time.Second)),
				ev(corev1.EventTypeNormal, "SuccessfulCreate", "create Pod pi-driver-0 in StatefulSet pi-driver successful", now),
			}},
		{name: "an old failure explains nothing now", want: "",
			events: []corev1.Event{ev(corev1.EventTypeWarning, "FailedCreate", "quota", now.Add(-time.Hour))}},
		{name: "a series' last observation counts", want: "from a series", events: []corev1.Event{series}},
		{name: "a Normal event with that reason is not a failure", want: "",
			events: []corev1.Event{ev(corev1.EventTypeNormal, "FailedCreate", "odd", now)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := createFailure(tc.events, now); got != tc.want {
				t.Errorf("createFailure = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestReconcileShowsARefusedStatefulSet: quota refuses the StatefulSet. The placeholder says so
// (spark-submit prints it) and one Warning Event tells `kubectl describe`; once the quota allows
// it, the StatefulSet is made.
func TestReconcileShowsARefusedStatefulSet(t *testing.T) {
	h := newCluster(t, nil, nil)
	refuse := true
	h.r.Client = interceptor.NewClient(h.c.(client.WithWatch), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*appsv1.StatefulSet); ok && refuse {
				return apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "statefulsets"}, obj.GetName(),
					errors.New("exceeded quota: statefulsets, requested: count/statefulsets.apps=1, used: count/statefulsets.apps=0, limited: count/statefulsets.apps=0"))
			}
			return c.Create(ctx, obj, opts...)
		},
	})
	for range 2 {
		res, err := h.r.Reconcile(h.ctx, ctrl.Request{NamespacedName: h.p})
		if err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
		if res.RequeueAfter <= 0 {
			t.Error("no retry of a refused create")
		}
	}
	checkStatus(t, h.placeholder(), corev1.PodPending, "waiting", false, h.names.StatefulSet, "exceeded quota")
	if cs := containerStatus(h.placeholder().Status, contract.DriverContainerName); cs.State.Waiting == nil || cs.State.Waiting.Reason != "FailedCreate" {
		t.Errorf("container state %+v, want waiting with reason FailedCreate", cs.State)
	}
	h.expectEvents([]string{"Warning FailedCreate"}, map[string][]string{"FailedCreate": {h.names.StatefulSet, "exceeded quota"}})

	refuse = false
	h.reconcile()
	h.statefulSet()
	h.expectEvents([]string{"Normal Converted"}, nil)
	checkStatus(t, h.placeholder(), corev1.PodPending, "waiting", false, "waiting for the StatefulSet to create the driver pod")
}

// TestReconcileShowsWhyTheDriverPodIsMissing: the StatefulSet controller cannot make S-0 (its
// FailedCreate Event says why); after a while without S-0, the placeholder tells it.
func TestReconcileShowsWhyTheDriverPodIsMissing(t *testing.T) {
	h := newCluster(t, nil, nil)
	h.reconcile()
	h.expectEvents([]string{"Normal Converted"}, nil)
	s := h.statefulSet()
	msg := "create Pod " + h.names.DriverPodName() + " in StatefulSet " + s.Name + " failed error: pods is forbidden: exceeded quota: pods"
	e := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: s.Name + ".1", Namespace: s.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "StatefulSet", Namespace: s.Namespace, Name: s.Name, UID: s.UID},
		Type:           corev1.EventTypeWarning, Reason: "FailedCreate", Message: msg,
	}
	// Right after the StatefulSet was made, S-0 is not looked for yet.
	h.now = s.CreationTimestamp.Add(time.Second)
	e.LastTimestamp = metav1.NewTime(h.now)
	if err := h.c.Create(h.ctx, e); err != nil {
		t.Fatal(err)
	}
	if res := h.reconcile(); res.RequeueAfter <= 0 {
		t.Error("no requeue while the driver pod is missing")
	}
	checkStatus(t, h.placeholder(), corev1.PodPending, "waiting", false, "waiting for the StatefulSet to create the driver pod")

	h.now = s.CreationTimestamp.Add(20 * time.Second)
	e.LastTimestamp = metav1.NewTime(h.now)
	if err := h.c.Update(h.ctx, e); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	checkStatus(t, h.placeholder(), corev1.PodPending, "waiting", false, "cannot create the driver pod", "exceeded quota: pods")
	h.expectEvents([]string{"Warning FailedCreate"}, map[string][]string{"FailedCreate": {"exceeded quota: pods"}})

	h.setNode("node-a", corev1.ConditionTrue, t0)
	h.startIncarnation("node-a")
	h.setDriverStatus(runningStatus(h.now))
	h.reconcile()
	checkStatus(t, h.placeholder(), corev1.PodRunning, "running", true, "node-a")
}
