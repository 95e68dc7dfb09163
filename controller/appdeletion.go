package controller

import (
	"context"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

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
func (r *Placeholder) stopDeletedApp(ctx context.Context, p *corev1.Pod) (ctrl.Result, error) {
	names, err := r.namesOf(ctx, p)
	if err != nil {
		return ctrl.Result{}, err
	}
	var sts appsv1.StatefulSet
	err = r.apiReader().Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: names.StatefulSet}, &sts)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return ctrl.Result{}, err
	case metav1.IsControlledBy(&sts, p):
		if err := r.scaleToZero(ctx, &sts); err != nil {
			return ctrl.Result{}, err
		}
	}
	var driver corev1.Pod
	err = r.apiReader().Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: names.DriverPodName()}, &driver)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return ctrl.Result{}, err
	case ofStatefulSet(&driver, names.StatefulSet):
		// Its deletion is the StatefulSet controller's (S at 0), its end the kubelet's or the
		// proof's; the Outcomes reconciler lets it go then. A driver that opted into fencing is
		// fenced on a lost node as while the app lived: without it, a deleted app whose node is
		// only cut off would wait for an admin, its driver long stopped by wrap.
		var admitted map[string]string
		if sts.UID != "" {
			admitted = rememberedSettings(&sts)
		}
		if err := r.fenceDeletedAppsDriver(ctx, p, &driver, admitted); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: outcomePoll}, nil
	}
	log.FromContext(ctx).Info("the deleted app's driver has stopped; letting its placeholder go", "placeholder", p.Namespace+"/"+p.Name)
	return ctrl.Result{}, letGo(ctx, r.Client, p)
}

// fenceDeletedAppsDriver fences the driver of deleted app p when its node is lost and its fencing
// (fence-after, self-fence, within the admin's bounds) says so, as trackLoss does while the app
// lives; admitted are the settings S remembers (nil when S is gone).
func (r *Placeholder) fenceDeletedAppsDriver(ctx context.Context, p, driver *corev1.Pod, admitted map[string]string) error {
	if driver.Spec.NodeName == "" || !mayStillRun(driver, driverContainer(p)) {
		return nil
	}
	settings, _ := effectiveSettings(p.Annotations, admitted, r.FenceAfter)
	fenceAfter, _, _ := r.fencing(p, settings.FenceAfter)
	live := map[string]*corev1.Node{}
	loss, err := r.assessLoss(ctx, p, driver, fenceAfter, r.now(), live)
	if err != nil || !loss.Fence {
		return err
	}
	_, err = r.fence(ctx, p, driver, planFence(p, driver, loss, fenceAfter, r.now()), live)
	return err
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
