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

// The driver's claims are kept before the StatefulSet exists, so before any driver JVM can start:
// every claim the driver mounts that spark-submit made for it is taken out of Spark's clean stop
// (convert.KeepClaim). While a claim does not exist yet, the StatefulSet waits, as the driver pod
// could not be scheduled without it either. Claims are read live (never cached: driverset watches
// no claims) and changed with an optimistic lock.

// driverClaim is one claim the driver mounts, as read (PVC nil: it does not exist).
type driverClaim struct {
	Name string
	PVC  *corev1.PersistentVolumeClaim
}

// observeClaims reads the claims P's driver mounts from the apiserver, in order, up to the first
// that does not exist: that one is what the StatefulSet waits for.
func (r *Placeholder) observeClaims(ctx context.Context, s *Snapshot) error {
	p := s.Placeholder.Value
	at := r.now()
	names := convert.DriverClaims(p)
	if len(names) == 0 {
		s.Claims = reading([]driverClaim(nil), Skipped, at)
		return nil
	}
	var claims []driverClaim
	for _, name := range names {
		var pvc corev1.PersistentVolumeClaim
		err := r.apiReader().Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: name}, &pvc)
		if apierrors.IsNotFound(err) {
			claims = append(claims, driverClaim{Name: name})
			break
		}
		if err != nil {
			return err
		}
		claims = append(claims, driverClaim{Name: name, PVC: &pvc})
	}
	s.Claims = reading(claims, FromAPIServer, at)
	return nil
}

// planClaims keeps each claim read that spark-submit made for p's driver, and says why the
// StatefulSet must wait ("" when it need not): a claim that does not exist yet.
func planClaims(p *corev1.Pod, claims []driverClaim) (steps []Step, waiting string) {
	for _, c := range claims {
		if c.PVC == nil {
			return steps, fmt.Sprintf("waiting for PersistentVolumeClaim %s, which the driver mounts", c.Name)
		}
		kept := c.PVC.DeepCopy()
		if convert.KeepClaim(kept, p) {
			steps = append(steps, keepClaimStep{Before: c.PVC, After: kept})
		}
	}
	return steps, ""
}

// keepClaim writes st's claim as planned, under the resourceVersion it was read at.
func (r *Placeholder) keepClaim(ctx context.Context, st keepClaimStep) error {
	if err := r.Client.Patch(ctx, st.After, client.MergeFromWithOptions(st.Before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("keeping PersistentVolumeClaim %s out of Spark's clean stop: %w", st.After.Name, err)
	}
	return nil
}

// keptClaim records in s that claim was written as kept: a plan made again in this pass does not
// keep it twice.
func (s *Snapshot) keptClaim(claim *corev1.PersistentVolumeClaim) {
	for i := range s.Claims.Value {
		if s.Claims.Value[i].Name == claim.Name {
			s.Claims.Value[i].PVC = claim
		}
	}
}
