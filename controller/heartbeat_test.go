package controller

import (
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// Silence is counted on the controller's clock from the last change it saw, whatever the Lease
// says of itself.
func TestHeartbeatsCountSilenceFromTheLastChangeSeen(t *testing.T) {
	now := t0
	h := NewHeartbeats(func() time.Time { return now })
	key := types.NamespacedName{Namespace: "ns", Name: "d-0-heartbeat"}
	steps := []struct {
		after   time.Duration
		version string
		want    time.Duration
	}{
		{0, "", 0}, // first seen absent: the clock starts now
		{10 * time.Second, "", 10 * time.Second},
		{time.Second, "5", 0}, // created: a change
		{30 * time.Second, "5", 30 * time.Second},
		{time.Second, "7", 0}, // renewed
		{90 * time.Second, "7", 90 * time.Second},
	}
	for i, s := range steps {
		now = now.Add(s.after)
		if got := h.Observe(key, s.version); got != s.want {
			t.Errorf("step %d: Observe(%q) = %v, want %v", i, s.version, got, s.want)
		}
	}
	// A deleted Lease is forgotten: it is seen afresh, so silence starts again (never sooner).
	handler := h.EventHandler()
	handler.OnDelete(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d-0-heartbeat", ResourceVersion: "7"}})
	if got := h.Observe(key, ""); got != 0 {
		t.Errorf("after a delete, Observe = %v, want 0", got)
	}
	// The informer's events are observations too.
	now = now.Add(time.Minute)
	handler.OnUpdate(nil, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d-0-heartbeat", ResourceVersion: "9"}})
	now = now.Add(5 * time.Second)
	if got := h.Observe(key, "9"); got != 5*time.Second {
		t.Errorf("after an informer update and 5s, Observe = %v, want 5s", got)
	}
}

// The controller reads T and the Lease from what the driver pod runs: the flags convert wrote.
func TestHeartbeatFlagsReadWhatConvertWrote(t *testing.T) {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pi-driver", Namespace: "ns", UID: "p1"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: contract.DriverContainerName, Image: "spark",
			Args: []string{"driver", "--class", "Pi"}}}},
	}
	if err := convert.ToPlaceholder(p); err != nil {
		t.Fatal(err)
	}
	for _, self := range []time.Duration{0, 90 * time.Second} {
		sts, err := convert.StatefulSet(p, convert.Options{Image: "driverset", SelfFence: self})
		if err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{Spec: sts.Spec.Template.Spec}
		lease, got := heartbeatFlags(pod, contract.DriverContainerName)
		wantLease := ""
		if self > 0 {
			wantLease = contract.NamesFor(p.Name).HeartbeatLease()
		}
		if got != self || lease != wantLease {
			t.Errorf("SelfFence %v: heartbeatFlags = %q, %v; want %q, %v", self, lease, got, wantLease, self)
		}
		env := map[string]string{}
		for _, e := range pod.Spec.Containers[0].Env {
			if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
				env[e.Name] = e.ValueFrom.FieldRef.FieldPath
			}
		}
		if self > 0 && (env[contract.EnvPodUID] != "metadata.uid" || env[contract.EnvPodNamespace] != "metadata.namespace") {
			t.Errorf("wrap is not given the pod's UID and namespace: %v", env)
		}
	}
}

// Every Lease labelled as a heartbeat reaches the informer, and any user who may write Leases can
// label one so (issue 35): what the informer adds to Heartbeats stops at maxHeartbeats. A driver
// the controller reconciles is still recorded (its Observe), a Lease already recorded is still
// followed, and a deleted one makes room.
func TestHeartbeatsAreBounded(t *testing.T) {
	now := t0
	h := NewHeartbeats(func() time.Time { return now })
	handler := h.EventHandler()
	lease := func(i int, version string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("l-%06d", i), ResourceVersion: version}}
	}
	key := func(i int) types.NamespacedName {
		return types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("l-%06d", i)}
	}
	for i := range maxHeartbeats + 1000 {
		handler.OnAdd(lease(i, "1"), false)
	}
	if n := len(h.seen); n != maxHeartbeats {
		t.Fatalf("the informer's %d Leases made %d records, want at most %d", maxHeartbeats+1000, n, maxHeartbeats)
	}
	steps := []struct {
		name  string
		event func()
		key   types.NamespacedName
		ver   string
	}{
		{"a recorded Lease's renewal is still seen", func() { handler.OnUpdate(lease(0, "1"), lease(0, "2")) }, key(0), "2"},
		{"a deleted Lease makes room for the next", func() {
			handler.OnDelete(lease(1, "1"))
			handler.OnAdd(lease(maxHeartbeats+1000, "1"), false)
		}, key(maxHeartbeats + 1000), "1"},
		{"a driver the controller reconciles is recorded", func() { h.Observe(key(-1), "1") }, key(-1), "1"},
	}
	for _, s := range steps {
		s.event()
		now = now.Add(5 * time.Second)
		if got := h.Observe(s.key, s.ver); got != 5*time.Second {
			t.Errorf("%s: silent %v after 5 s, want 5s (the event was not recorded)", s.name, got)
		}
	}
}
