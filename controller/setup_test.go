package controller

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// A StatefulSet's status changes are not the placeholder reconciler's business; what it decides on
// is.
func TestStatefulSetChanged(t *testing.T) {
	base := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{
		Name: "s", Namespace: "ns", Generation: 1,
		Labels: map[string]string{"a": "1"}, Annotations: map[string]string{"b": "2"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "u"}},
	}}
	yes := true
	for _, tc := range []struct {
		name   string
		change func(s *appsv1.StatefulSet)
		want   bool
	}{
		{"status only", func(s *appsv1.StatefulSet) { s.Status.Replicas, s.Status.ReadyReplicas = 1, 1 }, false},
		{"resourceVersion only", func(s *appsv1.StatefulSet) { s.ResourceVersion = "7" }, false},
		{"spec (scaled by hand)", func(s *appsv1.StatefulSet) { s.Generation = 2 }, true},
		{"labels", func(s *appsv1.StatefulSet) { s.Labels["a"] = "x" }, true},
		{"annotations", func(s *appsv1.StatefulSet) { s.Annotations = nil }, true},
		{"owner (orphaned)", func(s *appsv1.StatefulSet) { s.OwnerReferences = nil }, true},
		{"owner made controller", func(s *appsv1.StatefulSet) { s.OwnerReferences[0].Controller = &yes }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			updated := base.DeepCopy()
			tc.change(updated)
			if got := statefulSetChanged().Update(event.UpdateEvent{ObjectOld: base.DeepCopy(), ObjectNew: updated}); got != tc.want {
				t.Errorf("reconcile on this update: %v, want %v", got, tc.want)
			}
		})
	}
	p := statefulSetChanged()
	if !p.Create(event.CreateEvent{Object: base}) || !p.Delete(event.DeleteEvent{Object: base}) {
		t.Error("a StatefulSet's creation and deletion must reach the reconciler")
	}
}

// A node's heartbeat is not a change to the drivers on it; its readiness and taints are.
func TestNodeHealthChanged(t *testing.T) {
	base := nodeWith(corev1.ConditionTrue, t0)
	for _, tc := range []struct {
		name   string
		change func(n *corev1.Node)
		want   bool
	}{
		{"heartbeat", func(n *corev1.Node) { nodeReady(n).LastHeartbeatTime = metav1.NewTime(t0.Add(time.Minute)) }, false},
		{"images and allocatable", func(n *corev1.Node) { n.Status.Images = []corev1.ContainerImage{{Names: []string{"x"}}} }, false},
		{"not Ready", func(n *corev1.Node) { nodeReady(n).Status = corev1.ConditionUnknown }, true},
		{"Ready condition gone", func(n *corev1.Node) { n.Status.Conditions = nil }, true},
		{"tainted out of service", func(n *corev1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: TaintOutOfService, Effect: corev1.TaintEffectNoExecute})
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			updated := base.DeepCopy()
			tc.change(updated)
			if got := nodeHealthChanged().Update(event.UpdateEvent{ObjectOld: base.DeepCopy(), ObjectNew: updated}); got != tc.want {
				t.Errorf("reconcile the node's drivers on this update: %v, want %v", got, tc.want)
			}
		})
	}
	p := nodeHealthChanged()
	if !p.Create(event.CreateEvent{Object: base}) || !p.Delete(event.DeleteEvent{Object: base}) {
		t.Error("a Node's creation and deletion must reach the drivers on it")
	}
}
