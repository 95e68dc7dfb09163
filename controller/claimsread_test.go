package controller

import (
	"context"
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/driverset/driverset/contract"
)

// TestReconcileTouchesNoClaimWhenTheStatefulSetCannotBeRead: whether S exists decides whether
// the driver's claims still need keeping; while S cannot be read, Reconcile fails (to be
// retried) and changes no claim.
func TestReconcileTouchesNoClaimWhenTheStatefulSetCannotBeRead(t *testing.T) {
	h := newCluster(t, nil, nil)
	p := h.placeholder()
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "pi-driver-pvc-0"}}})
	if err := h.c.Update(h.ctx, p); err != nil {
		t.Fatal(err)
	}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "pi-driver-pvc-0", Namespace: p.Namespace,
		Labels:          map[string]string{contract.LabelSparkAppSelector: p.Labels[contract.LabelSparkAppSelector]},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: ptr.To(true)}}}}
	if err := h.c.Create(h.ctx, claim); err != nil {
		t.Fatal(err)
	}
	errDown := errors.New("the apiserver is down")
	patched := 0
	h.r.Client = interceptor.NewClient(h.c.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*appsv1.StatefulSet); ok {
				return errDown
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, ok := obj.(*corev1.PersistentVolumeClaim); ok {
				patched++
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	if _, err := h.r.Reconcile(h.ctx, ctrl.Request{NamespacedName: h.p}); !errors.Is(err, errDown) {
		t.Errorf("Reconcile = %v, want the read's error", err)
	}
	if patched != 0 {
		t.Errorf("%d claim patches while the StatefulSet could not be read, want none", patched)
	}
}
