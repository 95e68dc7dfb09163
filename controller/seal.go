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
)

// unsealed says why driverset builds nothing from P, or "" when it may. P's StatefulSet takes its
// resources from P's recorded-resources annotation and is run by the StatefulSet controller, so it
// is built only from a placeholder driverset's webhook sealed at P's creation, and unchanged since
// (docs/design.md#sealed-placeholders): a tenant's hand-shaped pod, one the webhook never saw, or
// one whose annotation was edited afterwards gets no driver. A StatefulSet P already controls was
// built when P was sound (or before seals existed): it is kept, and nothing is built again.
func (r *Placeholder) unsealed(ctx context.Context, p *corev1.Pod, names contract.Names) (string, error) {
	err := r.Seal.Verify(p, p.CreationTimestamp.Time)
	if err == nil {
		return "", nil
	}
	var sts appsv1.StatefulSet
	switch getErr := r.Client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: names.StatefulSet}, &sts); {
	case getErr == nil && metav1.IsControlledBy(&sts, p):
		return "", nil
	case getErr != nil && client.IgnoreNotFound(getErr) != nil:
		return "", getErr
	}
	return fmt.Sprintf("driverset builds no driver from this pod: %v", err), nil
}
