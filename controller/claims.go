package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
// It is called only while the StatefulSet of p's names does not exist (provision).
func (r *Placeholder) keepClaims(ctx context.Context, p *corev1.Pod) (string, error) {
	claims := convert.DriverClaims(p)
	if len(claims) == 0 {
		return "", nil
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
