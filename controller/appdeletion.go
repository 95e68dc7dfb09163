package controller

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/driverset/driverset/contract"
)

// stopDeletedApp is the pass of a deleted placeholder p that carries driverset's finalizer (the
// webhook makes every placeholder with it): the app's driver is stopped (S scaled to 0), and p is
// let go only once no pod of S is left, read live. A graceful delete of S-0 lasts until its kubelet
// confirms the stop, or its node is proven down (and a forced one is held as while the app lived,
// see releasable), so "the driver pod is gone" still means "the driver stopped": deleting an app
// and submitting it again (a stream's code upgrade, with its checkpoint) never runs two drivers,
// also when the old one sits on a node that is only cut off. Until p goes, the garbage collector
// leaves what it owns (S, H, Spark's ConfigMap and Service); then it deletes them.
//
// It observes, plans and applies twice: S is stopped before S-0 is read, since a read before the
// scale-down could miss an S-0 the StatefulSet controller makes in between, and let p go beside it.
func (r *Placeholder) stopDeletedApp(ctx context.Context, s *Snapshot) (ctrl.Result, error) {
	if err := r.observeDeletedApp(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if _, err := r.apply(ctx, s, planStopStatefulSet(s)); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.observeDeletedAppsDriver(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	pl, err := r.planWith(ctx, s, planDeletedApp)
	if err != nil {
		return ctrl.Result{}, err
	}
	if _, err := r.apply(ctx, s, pl.Steps); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: pl.Requeue}, nil
}

// planStopStatefulSet stops the deleted app's driver: S, when it is P's, is scaled to 0.
func planStopStatefulSet(s *Snapshot) []Step {
	if sts := s.StatefulSet.Value; sts != nil && metav1.IsControlledBy(sts, s.Placeholder.Value) {
		return []Step{scaleToZeroStep{}}
	}
	return nil
}

// planDeletedApp decides on the deleted app's S-0, read after S was stopped: while it is there,
// wait for it (its deletion is the StatefulSet controller's, its end the kubelet's or the proof's,
// and the Outcomes reconciler lets it go then), fencing it on a lost node as while the app lived
// (planFence) when its driver may still run and its fencing (fence-after, self-fence, within the
// admin's bounds) says so: without that, a deleted app whose node is only cut off would wait for
// an admin, its driver long stopped by wrap. Once it is gone, P is let go.
func planDeletedApp(s *Snapshot, cfg Config, now time.Time) Plan {
	p, driver := s.Placeholder.Value, s.Driver.Value
	if driver == nil {
		return Plan{Steps: []Step{releasePlaceholderStep{}}}
	}
	pl := Plan{Requeue: outcomePoll}
	if driver.Spec.NodeName == "" || !mayStillRun(driver, driverContainer(p)) {
		return pl
	}
	pl.Settings, _ = settingsOf(p, s.StatefulSet.Value, cfg)
	loss, need := assessed(s, pl.Settings.FenceAfter, now)
	if len(need) > 0 {
		return Plan{Need: need, Settings: pl.Settings}
	}
	if loss.Fence {
		pl.Steps = append(pl.Steps, planFence(p, driver, loss, pl.Settings.FenceAfter, now))
	}
	return pl
}

// ofStatefulSet reports whether pod is controlled by a StatefulSet named name (of any UID: one
// deleted and made again is still the app's).
func ofStatefulSet(pod *corev1.Pod, name string) bool {
	ref := controllerOfKind(pod, "StatefulSet")
	return ref != nil && ref.Name == name
}

// heldAsDeletedApp reports whether p is a deleted placeholder that driverset's finalizer keeps.
func heldAsDeletedApp(p *corev1.Pod) bool {
	return p.DeletionTimestamp != nil && slices.Contains(p.Finalizers, contract.FinalizerOutcome)
}
