package controller

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/driverset/driverset/contract"
)

// The driver's claim that spark-submit made is taken out of Spark's clean stop before the
// StatefulSet exists, so before any driver JVM runs; a claim the user made is left as it is; and
// while a claim the driver mounts does not exist yet, the StatefulSet waits.
func TestReconcileKeepsTheDriverClaimBeforeTheStatefulSet(t *testing.T) {
	h := newCluster(t, nil, nil)
	p := h.placeholder()
	appID := p.Labels[contract.LabelSparkAppSelector]
	mount := func(name, claim string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
	}
	p.Spec.Volumes = append(p.Spec.Volumes, mount("shared", "team-data"), mount("data", "pi-driver-pvc-0"))
	if err := h.c.Update(h.ctx, p); err != nil {
		t.Fatal(err)
	}
	users := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "team-data", Namespace: p.Namespace,
		Labels: map[string]string{contract.LabelSparkAppSelector: appID}}}
	if err := h.c.Create(h.ctx, users); err != nil {
		t.Fatal(err)
	}

	res := h.reconcile()
	var sts appsv1.StatefulSet
	if err := h.c.Get(h.ctx, types.NamespacedName{Namespace: p.Namespace, Name: h.names.StatefulSet}, &sts); !apierrors.IsNotFound(err) {
		t.Fatalf("StatefulSet made before the driver's claim exists (err %v)", err)
	}
	if res.RequeueAfter != claimPoll {
		t.Errorf("RequeueAfter = %s while a claim is missing, want %s", res.RequeueAfter, claimPoll)
	}
	if msg := h.placeholder().Status.Message; !strings.Contains(msg, "waiting for PersistentVolumeClaim pi-driver-pvc-0") {
		t.Errorf("placeholder message %q does not say which claim the driver waits for", msg)
	}

	// spark-submit creates the claim right after the pod: owned by it, labelled with the app id.
	made := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "pi-driver-pvc-0", Namespace: p.Namespace,
		Labels:          map[string]string{contract.LabelSparkAppSelector: appID},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: ptr.To(true)}}}}
	if err := h.c.Create(h.ctx, made); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	h.statefulSet()
	var got corev1.PersistentVolumeClaim
	if err := h.c.Get(h.ctx, types.NamespacedName{Namespace: p.Namespace, Name: made.Name}, &got); err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Labels[contract.LabelSparkAppSelector]; ok || got.Labels[contract.LabelClaimAppSelector] != appID {
		t.Errorf("the driver's claim labels %v: want the app id under %s only", got.Labels, contract.LabelClaimAppSelector)
	}
	if err := h.c.Get(h.ctx, types.NamespacedName{Namespace: p.Namespace, Name: users.Name}, &got); err != nil {
		t.Fatal(err)
	}
	if got.Labels[contract.LabelSparkAppSelector] != appID {
		t.Errorf("the user's own claim was changed: labels %v", got.Labels)
	}

	// Once S exists its claims are not waited for again: a claim deleted since (by the user, or
	// by Spark's clean stop) does not hold back an app whose driver may already have run.
	if err := h.c.Delete(h.ctx, made); err != nil {
		t.Fatal(err)
	}
	if res := h.reconcile(); res.RequeueAfter == claimPoll {
		t.Errorf("RequeueAfter = %s once the StatefulSet exists: waiting for a claim again", res.RequeueAfter)
	}
	if msg := h.placeholder().Status.Message; strings.Contains(msg, "waiting for PersistentVolumeClaim") {
		t.Errorf("placeholder message %q once the StatefulSet exists", msg)
	}
}
