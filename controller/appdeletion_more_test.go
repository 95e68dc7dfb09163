package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestOfStatefulSet: the deleted app's S-0 is the pod a StatefulSet of the app's name controls,
// of any UID (one deleted and made again is still the app's); nothing else of that pod name.
func TestOfStatefulSet(t *testing.T) {
	yes := true
	pod := func(refs ...metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pi-driver-0", OwnerReferences: refs}}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"controlled by the app's StatefulSet", pod(metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "pi-driver", UID: "s1", Controller: &yes}), true},
		{"controlled by a StatefulSet of that name made again", pod(metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "pi-driver", UID: "s2", Controller: &yes}), true},
		{"controlled by another StatefulSet", pod(metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: "s3", Controller: &yes}), false},
		{"owned by the app's StatefulSet, not controlled", pod(metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "pi-driver", UID: "s1"}), false},
		{"controlled by something else of that name", pod(metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "pi-driver", UID: "r1", Controller: &yes}), false},
		{"controlled by nothing", pod(), false},
	} {
		if got := ofStatefulSet(tc.pod, "pi-driver"); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestDeletedAppLooksAgainWhileItsDriverRemains: a deleted app's pass that finds S-0 still there
// (scaled to 0, its kubelet not done) looks again in outcomePoll (planDeletedApp's wait).
func TestDeletedAppLooksAgainWhileItsDriverRemains(t *testing.T) {
	h := runningCluster(t, nil, nil)
	h.deleteApp()
	if res := h.reconcile(); res.RequeueAfter != outcomePoll {
		t.Errorf("requeue %v, want %v while S-0 remains", res.RequeueAfter, outcomePoll)
	}
}
