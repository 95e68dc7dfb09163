package controller

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// TestHeartbeatOf: which drivers the controller reads a heartbeat for (only a self-fencing
// driver, where serve records heartbeats and the admin lets its namespace be fenced), and what
// it reads: the Lease named in what the driver runs, and T, never below the admin's floor.
func TestHeartbeatOf(t *testing.T) {
	driver := func(selfFence time.Duration) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "pi-driver", Namespace: "spark", UID: "p1"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: contract.DriverContainerName, Image: "spark",
				Args: []string{"driver", "--class", "Pi"}}}},
		}
		if err := convert.ToPlaceholder(p); err != nil {
			t.Fatal(err)
		}
		sts, err := convert.StatefulSet(p, convert.Options{Image: "driverset", SelfFence: selfFence})
		if err != nil {
			t.Fatal(err)
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pi-driver-0", Namespace: "spark"}, Spec: sts.Spec.Template.Spec}
	}
	lease := types.NamespacedName{Namespace: "spark", Name: contract.NamesFor("pi-driver").HeartbeatLease()}
	cases := []struct {
		name     string
		noRecord bool // serve keeps no record of heartbeats
		driver   *corev1.Pod
		bounds   Bounds
		want     Heartbeat
	}{
		{name: "a self-fencing driver: its Lease and T", driver: driver(90 * time.Second),
			want: Heartbeat{Lease: lease, T: 90 * time.Second}},
		{name: "T below the admin's floor: raised to it", driver: driver(90 * time.Second), bounds: Bounds{SelfFenceMin: 2 * time.Minute},
			want: Heartbeat{Lease: lease, T: 2 * time.Minute}},
		{name: "in a namespace the admin allows: read", driver: driver(90 * time.Second), bounds: Bounds{Namespaces: []string{"spark"}},
			want: Heartbeat{Lease: lease, T: 90 * time.Second}},
		{name: "in a namespace the admin does not allow: none", driver: driver(90 * time.Second), bounds: Bounds{Namespaces: []string{"other"}}},
		{name: "serve keeps no record of heartbeats: none", noRecord: true, driver: driver(90 * time.Second)},
		{name: "no driver pod: none"},
		{name: "a driver that keeps no heartbeat: none", driver: driver(0)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &Placeholder{Client: fake.NewClientBuilder().Build(), Bounds: tc.bounds}
			if !tc.noRecord {
				r.Heartbeats = NewHeartbeats(func() time.Time { return t0 })
			}
			got, err := r.heartbeatOf(context.Background(), tc.driver, contract.DriverContainerName, false)
			if err != nil || got != tc.want {
				t.Errorf("heartbeatOf = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
