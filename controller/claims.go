package controller

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// claimPoll is how soon a placeholder is looked at again while a claim its driver mounts does not
// exist yet: spark-submit creates it right after the pod, and PersistentVolumeClaims are not watched.
const claimPoll = 500 * time.Millisecond

// keepClaims runs before the StatefulSet exists, so before any driver JVM can start: every claim
// the driver mounts that spark-submit made for it is taken out of Spark's clean stop
// (convert.KeepClaim). It returns why the StatefulSet must wait ("" when it need not): a claim
// that does not exist yet, as the driver pod could not be scheduled without it either. Claims are
// read live (never cached: driverset watches no claims) and changed with an optimistic lock.
// names are p's as namesOf chose them: a legacy-named app's StatefulSet is found by its own name.
func (r *Placeholder) keepClaims(ctx context.Context, p *corev1.Pod, names contract.Names) (string, error) {
	claims := convert.DriverClaims(p)
	if len(claims) == 0 {
		return "", nil
	}
	var sts appsv1.StatefulSet
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: names.StatefulSet}, &sts)
	if err == nil || !apierrors.IsNotFound(err) {
		// S exists: a driver may have run, and its claims were kept before S was made.
		return "", client.IgnoreNotFound(err)
	}
	for _, name := range claims {
		var pvc corev1.PersistentVolumeClaim
		err := r.apiReader().Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: name}, &pvc)
		if apierrors.IsNotFound(err) {
			return fmt.Sprintf("waiting for PersistentVolumeClaim %s, which the driver mounts", name), nil
		}
		if err != nil {
			return "", err
		}
		before := pvc.DeepCopy()
		if !convert.KeepClaim(&pvc, p) {
			continue
		}
		if err := r.Client.Patch(ctx, &pvc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return "", fmt.Errorf("keeping PersistentVolumeClaim %s out of Spark's clean stop: %w", name, err)
		}
	}
	return "", nil
}
