package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/seal"
)

// unsealed says why driverset builds nothing from P, or "" when it may. P's StatefulSet takes its
// resources from P's recorded-resources annotation and is run by the StatefulSet controller, so it
// is built only from a placeholder driverset's webhook sealed at P's creation, and unchanged since
// (docs/design.md#sealed-placeholders): a tenant's hand-shaped pod, one the webhook never saw, or
// one whose annotation was edited afterwards gets no driver. A StatefulSet P already controls was
// built when P was sound (or before seals existed): it is kept, and nothing is built again. That
// StatefulSet is read with from: the cache for the controller's pass, the apiserver for Built.
func (r *Placeholder) unsealed(ctx context.Context, from client.Reader, p *corev1.Pod, names contract.Names) (string, error) {
	if r.Seal.Verify(p, p.CreationTimestamp.Time) == nil {
		return "", nil
	}
	var sts appsv1.StatefulSet
	if err := from.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: names.StatefulSet}, &sts); err != nil {
		if client.IgnoreNotFound(err) != nil {
			return "", err
		}
		return unsealedBy(r.Seal, p, nil), nil
	}
	return unsealedBy(r.Seal, p, &sts), nil
}

// unsealedBy is unsealed's decision with sealer, given sts, the StatefulSet of P's name (nil: none).
func unsealedBy(sealer seal.Sealer, p *corev1.Pod, sts *appsv1.StatefulSet) string {
	err := sealer.Verify(p, p.CreationTimestamp.Time)
	if err == nil || sts != nil && metav1.IsControlledBy(sts, p) {
		return ""
	}
	return fmt.Sprintf("driverset builds no driver from this pod: %v", err)
}
