package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// An executor is a stale one of the app only through its owner chain, never its app id alone.
func TestStaleExecutorsByOwnerChain(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app-driver", UID: "uid-p"}}
	driver := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app-driver-0", UID: "uid-s0-now"}}
	yes := true
	owned := func(kind, name string, uid types.UID, controller bool) *corev1.Pod {
		ref := metav1.OwnerReference{APIVersion: "v1", Kind: kind, Name: name, UID: uid}
		if controller {
			ref.Controller = &yes
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{ref}}}
	}
	for _, tc := range []struct {
		name string
		e    *corev1.Pod
		want bool
	}{
		{"made by the running incarnation", owned("Pod", "app-driver-0", "uid-s0-now", true), false},
		{"made by an earlier incarnation", owned("Pod", "app-driver-0", "uid-s0-before", true), true},
		{"Spark's reference to the placeholder", owned("Pod", "app-driver", "uid-p", true), true},
		{"a reference to an earlier placeholder of the name", owned("Pod", "app-driver", "uid-p-before", true), false},
		{"another app's executor claiming the app id", owned("Pod", "other-driver-0", "uid-other", true), false},
		{"no owner at all", &corev1.Pod{}, false},
		{"a non-controller reference", owned("Pod", "app-driver-0", "uid-s0-before", false), false},
		{"controlled by something else of the name", owned("ReplicaSet", "app-driver-0", "uid-rs", true), false},
	} {
		if got := stale(tc.e, p, driver); got != tc.want {
			t.Errorf("%s: stale = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestReconcileLiftsTheGateASquatterHolds: a pod labelled as this app's executor but controlled
// by a tenant's pod, or by another app's executor, is not the app's (convert.ExecutorOfApp). A new
// incarnation held by the gate for it is let go in the first pass, and the squatter is left as it
// is: the label alone never stalls an app's recovery, nor has driverset delete another's pod.
func TestReconcileLiftsTheGateASquatterHolds(t *testing.T) {
	h := newCluster(t, nil, nil)
	h.reconcile()
	h.setNode("node-a", corev1.ConditionTrue, t0)
	app := h.placeholder().Labels[contract.LabelSparkAppSelector]
	h.makeExecutor("squatter", "node-a", app, "tenant-web-7f9c", "tenant-uid")
	h.makeExecutor("other-exec-9", "node-a", "spark-other", "other-exec-1", "other-exec-1-uid")
	h.deletes = nil

	h.startIncarnation("", contract.GateStaleExecutors)
	h.setDriverStatus(pendingStatus())
	h.reconcile()
	if d := h.driver(); convert.HasGate(&d.Spec, contract.GateStaleExecutors) {
		t.Errorf("gate kept for pods the app does not control: %+v", d.Spec.SchedulingGates)
	}
	if len(h.deletes) != 0 {
		t.Errorf("deleted %+v, want nothing", h.deletes)
	}
}
