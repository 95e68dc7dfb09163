package controller

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
)

func TestOrphanedAndRunning(t *testing.T) {
	yes := true
	owner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "u", Controller: &yes}}
	one, zero := int32(1), int32(0)
	ours := map[string]string{contract.LabelDriver: "app"}
	for _, tc := range []struct {
		name     string
		labels   map[string]string
		owners   []metav1.OwnerReference
		replicas *int32
		want     bool
	}{
		{"owned by its placeholder", ours, owner, &one, false},
		{"orphaned by --cascade=orphan", ours, nil, &one, true},
		{"orphaned, replicas defaulted", ours, nil, nil, true},
		{"orphaned and already stopped", ours, nil, &zero, false},
		{"someone else's StatefulSet", map[string]string{"app": "x"}, nil, &one, false},
		{"a non-controller reference is no owner", ours, []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "u"}}, &one, true},
	} {
		s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Labels: tc.labels, OwnerReferences: tc.owners}, Spec: appsv1.StatefulSetSpec{Replicas: tc.replicas}}
		if got := orphanedAndRunning(s); got != tc.want {
			t.Errorf("%s: orphanedAndRunning = %v, want %v", tc.name, got, tc.want)
		}
	}
}
