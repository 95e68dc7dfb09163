//go:build testbed

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/driverset/driverset/contract"
)

// Attack (issue 35): a self-fencing driver's heartbeat Lease decides whether driverset fences it.
// RBAC grants Lease writes by namespace only, so any pod of the driver's ServiceAccount (its own
// executors, another app's driver) and any user with edit there could take the heartbeat over
// (wrap then stops the driver, and the next incarnation is taken over in turn, forever) or renew
// it for a driver that is gone (never fenced, so never recovered). The policy
// driverset-heartbeat lets only the pod the Lease is named for write it, holding it as its own
// UID, with the pod's own token. Refused writes are dry runs.
func TestOnlyItsDriverWritesAHeartbeatLease(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	attacker := tenant(t, ns)
	gated := func(name string) *corev1.Pod {
		p, err := kube().CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{
				Containers:      []corev1.Container{{Name: "c", Image: "spark"}},
				SchedulingGates: []corev1.PodSchedulingGate{{Name: "example.com/never"}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	driver, other := gated("app-0"), gated("app-exec-1")
	asDriver, asOther := asPod(t, driver), asPod(t, other)
	name := driver.Name + "-heartbeat"
	heartbeat := func(name, holder string, owner *corev1.Pod) *coordinationv1.Lease {
		now := metav1.NewMicroTime(time.Now())
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{contract.LabelHeartbeat: "true"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: owner.Name, UID: owner.UID}}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &now, LeaseDurationSeconds: new(int32(10))},
		}
	}
	// The policy is applied with the manifests; the apiserver loads it asynchronously.
	waitFor(t, 30*time.Second, "the apiserver enforcing driverset-heartbeat", func(ctx context.Context) (bool, error) {
		_, err := attacker.CoordinationV1().Leases(ns).Create(ctx, heartbeat(name, string(driver.UID), driver),
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "driverset-heartbeat"), nil
	})
	if _, err := asDriver.CoordinationV1().Leases(ns).Create(ctx, heartbeat(name, string(driver.UID), driver), metav1.CreateOptions{}); err != nil {
		t.Fatalf("the driver pod could not create its own heartbeat: %v", err)
	}
	dryUpdate := metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}
	update := func(c kubernetes.Interface, change func(*coordinationv1.Lease)) func(context.Context) error {
		return func(ctx context.Context) error {
			l, err := kube().CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			change(l)
			_, err = c.CoordinationV1().Leases(ns).Update(ctx, l, dryUpdate)
			return err
		}
	}
	create := func(c kubernetes.Interface, l *coordinationv1.Lease) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := c.CoordinationV1().Leases(ns).Create(ctx, l, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}
	}
	renew := func(l *coordinationv1.Lease) { l.Spec.RenewTime = new(metav1.NewMicroTime(time.Now())) }
	takeOver := func(l *coordinationv1.Lease) {
		l.Spec.HolderIdentity = new(string(other.UID))
		l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: other.Name, UID: other.UID}}
	}
	unlabelled := heartbeat("x-0-heartbeat", "someone", other)
	unlabelled.Labels = nil
	refused := []struct {
		name string
		do   func(context.Context) error
	}{
		{"another pod of its ServiceAccount takes it over", update(asOther, takeOver)},
		{"another pod of its ServiceAccount renews it", update(asOther, renew)},
		{"the tenant renews it", update(attacker, renew)},
		{"the tenant takes it over", update(attacker, takeOver)},
		{"the driver pod hands it to another holder", update(asDriver, func(l *coordinationv1.Lease) {
			l.Spec.HolderIdentity = new(string(other.UID))
		})},
		{"the driver pod writes another driver's heartbeat", create(asDriver, heartbeat("app2-0-heartbeat", string(driver.UID), driver))},
		{"the tenant creates a Lease labelled as a heartbeat (the memory flood's objects)", create(attacker, floodLease(0))},
		{"the tenant creates a Lease named as a heartbeat", create(attacker, unlabelled)},
	}
	for _, tc := range refused {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			err := tc.do(ctx)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), "driverset-heartbeat") {
				t.Fatalf("refused, but not by driverset-heartbeat: %v", err)
			}
			t.Logf("%v", err)
		})
	}
	allowed := []struct {
		name string
		do   func(context.Context) error
	}{
		{"the driver pod renews its heartbeat", update(asDriver, renew)},
		{"the next incarnation (same name, new UID) takes it over", func(ctx context.Context) error {
			next := driver.DeepCopy()
			next.UID = "6c4bd1e6-0000-4000-8000-000000000001"
			c := asPod(t, next)
			return update(c, func(l *coordinationv1.Lease) {
				l.Spec.HolderIdentity = new(string(next.UID))
				l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: next.Name, UID: next.UID}}
			})(ctx)
		}},
		{"a Lease of the tenant's own", create(attacker, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "my-lock"}})},
	}
	for _, tc := range allowed {
		t.Run("allowed: "+tc.name, func(t *testing.T) {
			if err := tc.do(ctx); err != nil {
				t.Fatalf("refused: %v", err)
			}
		})
	}
}
