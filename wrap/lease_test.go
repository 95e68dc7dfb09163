package wrap

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/driverset/driverset/contract"
)

// The Lease is created owned by the pod, taken over from an earlier incarnation on the first
// renewal, renewed while held, and given up (ErrHeartbeatTaken) once a later incarnation holds it.
func TestLeaseRenewer(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	leases := cs.CoordinationV1().Leases("ns")
	renewer := func(uid string) *leaseRenewer {
		return &leaseRenewer{leases: leases, name: "d-0-heartbeat", pod: "d-0", holder: types.UID(uid), t: time.Minute, now: time.Now}
	}
	first := renewer("uid-1")
	if err := first.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := leases.Get(ctx, "d-0-heartbeat", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *l.Spec.HolderIdentity != "uid-1" || l.Labels[contract.LabelHeartbeat] != "true" || len(l.OwnerReferences) != 1 ||
		l.OwnerReferences[0].UID != "uid-1" || l.OwnerReferences[0].Kind != "Pod" || *l.Spec.LeaseDurationSeconds != 60 {
		t.Errorf("created Lease %+v", l)
	}
	if err := first.Renew(ctx); err != nil {
		t.Errorf("renewal while held: %v", err)
	}
	if l, err = leases.Get(ctx, "d-0-heartbeat", metav1.GetOptions{}); err != nil || *l.Spec.LeaseDurationSeconds != 60 {
		t.Errorf("renewed Lease %+v (%v): want a duration of 60 s still", l, err)
	}

	second := renewer("uid-2") // the next incarnation, on another node
	if err := second.Renew(ctx); err != nil {
		t.Fatalf("takeover: %v", err)
	}
	if l, _ = leases.Get(ctx, "d-0-heartbeat", metav1.GetOptions{}); *l.Spec.HolderIdentity != "uid-2" || l.OwnerReferences[0].UID != "uid-2" {
		t.Errorf("after takeover: %+v", l)
	}
	first.last = nil // as after a conflict: it reads the Lease again
	if err := first.Renew(ctx); !errors.Is(err, ErrHeartbeatTaken) {
		t.Errorf("the earlier incarnation renewed a Lease a later one holds: %v", err)
	}
	if l, _ = leases.Get(ctx, "d-0-heartbeat", metav1.GetOptions{}); *l.Spec.HolderIdentity != "uid-2" {
		t.Errorf("the earlier incarnation took the Lease back: %+v", l)
	}

	// Deleted under it (its pod's garbage collection, by hand): made again.
	if err := leases.Delete(ctx, "d-0-heartbeat", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := second.Renew(ctx); err != nil {
		t.Errorf("renewal of a deleted Lease: %v", err)
	}
}
