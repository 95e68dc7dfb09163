package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestDriverPodFailure is when the controller asks the apiserver why S-0 is missing: only with
// a live reader (through the cache it would watch every Event of the cluster), only while S
// should have a pod, and only once S is older than missingDriverGrace.
func TestDriverPodFailure(t *testing.T) {
	now := t0.Add(time.Hour)
	sts := func(replicas *int32, age time.Duration) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "pi-driver", Namespace: "spark", UID: "s1", CreationTimestamp: metav1.NewTime(now.Add(-age))},
			Spec:       appsv1.StatefulSetSpec{Replicas: replicas},
		}
	}
	event := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "pi-driver.1", Namespace: "spark"},
		InvolvedObject: corev1.ObjectReference{Kind: "StatefulSet", Namespace: "spark", Name: "pi-driver", UID: "s1"},
		Type:           corev1.EventTypeWarning, Reason: "FailedCreate", LastTimestamp: metav1.NewTime(now),
		Message: "create Pod pi-driver-0 in StatefulSet pi-driver failed error: pods is forbidden: exceeded quota: pods",
	}
	live := withEventFields(fake.NewClientBuilder()).WithObjects(event).Build()
	mustNotAsk := interceptor.NewClient(live, interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return errors.New("asked the apiserver")
		},
	})
	cases := []struct {
		name   string
		reader client.Reader
		sts    *appsv1.StatefulSet
		want   string // contained in the answer; "" for none
	}{
		{name: "past the grace: the FailedCreate Event says why", reader: live, sts: sts(ptr.To[int32](1), time.Minute),
			want: "the StatefulSet pi-driver cannot create the driver pod: create Pod pi-driver-0 in StatefulSet pi-driver failed error: pods is forbidden"},
		{name: "no live reader: not asked", sts: sts(ptr.To[int32](1), time.Minute)},
		{name: "scaled to 0: no pod expected", reader: mustNotAsk, sts: sts(ptr.To[int32](0), time.Minute)},
		{name: "replicas unset", reader: mustNotAsk, sts: sts(nil, time.Minute)},
		{name: "the grace just over: asked", reader: live, sts: sts(ptr.To[int32](1), missingDriverGrace), want: "exceeded quota: pods"},
		{name: "within the grace: not yet", reader: mustNotAsk, sts: sts(ptr.To[int32](1), missingDriverGrace-time.Second)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &Placeholder{Now: func() time.Time { return now }}
			if tc.reader != nil {
				r.APIReader = tc.reader
			}
			got, err := r.driverPodFailure(context.Background(), tc.sts)
			if err != nil || (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("driverPodFailure = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
