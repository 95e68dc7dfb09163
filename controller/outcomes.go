package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// outcomePoll is how often a deleted incarnation whose exit is not read yet is looked at again:
// the placeholder's reconcile reads it (restart, success, failure) at its own pace, a backoff
// included.
const outcomePoll = 2 * time.Second

// Outcomes lets go of deleted driver pods (S-0) that carry contract.FinalizerOutcome once their
// driver's exit has been read. It is keyed by the pod itself, not by its placeholder, because it
// must also let go when the placeholder, or its StatefulSet, is already gone (the app deleted,
// `spark-submit --kill`, an orphaning delete): nothing would lead back to it otherwise.
type Outcomes struct {
	Client client.Client
	// APIReader reads the placeholder and its StatefulSet live: letting go on a stale "gone"
	// would lose the exit the finalizer is there to keep. Nil: Client.
	APIReader client.Reader
	Now       func() time.Time // nil: time.Now
}

// SetupWithManager registers the reconciler for driverset's deleted driver pods.
func (o *Outcomes) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("outcomes").
		For(&corev1.Pod{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(c client.Object) bool {
			p, ok := c.(*corev1.Pod)
			return ok && held(p)
		}))).
		Complete(o)
}

// held reports whether pod is a deleted driver pod still held by driverset's finalizer. A deleted
// placeholder carries it too, but is the placeholder reconciler's to let go (stopDeletedApp): it
// has no StatefulSet to lead back to its app, so it would look like one whose app is gone. (The
// manager's cache holds no placeholders today; this does not depend on that.)
func held(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp != nil && slices.Contains(pod.Finalizers, contract.FinalizerOutcome) && !convert.IsPlaceholder(pod)
}

// kubeletCauseWait bounds how long a pod its kubelet stopped is held for the placeholder's pass to
// record the kubelet's cause: a placeholder whose reconcile is stuck elsewhere (a claim, a name
// taken) must not keep the next incarnation from being made. Past it, only the cause is lost.
const kubeletCauseWait = 10 * time.Second

// releasable is the decision, pure: whether deleted incarnation pod can go at now, given its
// placeholder (nil when it, or the StatefulSet between them, is gone) and whether its node is
// proven down (or driverset fences it), and why.
func releasable(pod, placeholder *corev1.Pod, now time.Time, nodeDown bool) (bool, string) {
	switch {
	case placeholder == nil:
		return true, "its app is gone"
	case placeholder.DeletionTimestamp != nil && mayStillRun(pod, driverContainer(placeholder)) && !nodeDown:
		// The deleted app's placeholder waits for this pod (stopDeletedApp): letting it go would
		// let the app be submitted again beside a driver that still runs.
		return false, "its app is being deleted, and its driver may still run on its node, which is not proven down"
	case placeholder.DeletionTimestamp != nil:
		return true, "its app is being deleted"
	case isTerminal(placeholder.Status.Phase):
		return true, "its app has ended"
	}
	if _, restarted := restartsOf(placeholder); restarted == pod.UID {
		return true, "its exit is counted"
	}
	if stopped, ok := stopOf(pod); ok && stopped.ByKubelet {
		// Its kubelet said why it stopped it; the placeholder's pass records that as the loss's
		// cause (it may have seen the node not Ready first): once gone, the pod cannot tell it.
		cause, rec := stopped.Cause, lostOf(placeholder)
		switch {
		case rec != nil && rec.Pod == pod.UID && rec.Cause == cause:
			return true, "stopped by its kubelet (" + cause + "), recorded"
		case pod.DeletionTimestamp != nil && now.Sub(pod.DeletionTimestamp.Time) >= kubeletCauseWait:
			return true, "stopped by its kubelet (" + cause + "), not recorded within " + kubeletCauseWait.String()
		}
		return false, "its kubelet's " + cause + " is not recorded yet"
	}
	out := outcomeOf(pod, driverContainer(placeholder))
	if !out.Exited && mayStillRun(pod, driverContainer(placeholder)) && !nodeDown {
		return false, "deleted while its driver may still run on node " + pod.Spec.NodeName +
			": held until its kubelet reports it stopped or the node is proven down"
	}
	if !out.Exited && causeNotReported(pod, driverContainer(placeholder)) && !nodeDown {
		return false, "its driver was stopped from outside and its kubelet has not reported why yet (" + pod.Spec.NodeName +
			"): held until it does or the node is proven down"
	}
	if !out.Exited {
		return true, "stopped from outside: no exit of the driver's own to read"
	}
	return false, fmt.Sprintf("the driver's exit %d is not read yet", out.Code)
}

// mayStillRun reports whether deleted pod's driver may still run: it was scheduled, and its
// kubelet has reported neither the pod ended nor an end of the driver in it (an exit wrap
// recorded, now or before the container was started again to idle: wrap runs the driver once per
// pod; a start in which the driver never ran is no end, see notAnEnd). Letting such a pod
// go would let whatever comes next remove it without its kubelet: `kubectl delete pod --force`
// (what an admin does to a pod stuck Terminating) or PodGC, and the StatefulSet would make the
// next incarnation beside a driver that still runs on a node that is only cut off. That holds for
// a graceful deletion too (a taint eviction, a drain, kubectl delete): it stays Terminating only
// while someone keeps it, and after the finalizer is gone nobody does. The model checker found
// the graceful case (TestForcedDeleteAfterAnEvictionIsHeld); only the forced one was held before.
func mayStillRun(pod *corev1.Pod, container string) bool {
	if pod.DeletionTimestamp == nil || pod.Spec.NodeName == "" || isTerminal(pod.Status.Phase) {
		return false
	}
	return !recordedExit(pod, container).Exited
}

// causeNotReported reports whether deleted pod's driver ended after a stop from outside (wrap's
// stop line) whose cause the pod does not show yet (stopNotReportedYet: not terminal, no mark):
// the kill of a node shutdown (no failure) and of an eviction for the pod's own storage use (a
// failure) look the same until the kubelet reports the pod Failed with its reason. Let go then,
// the pod took the reason with it: `make model` found an own-storage eviction's 143 never counted
// when a `kubectl delete --force` came between the kill and the report. Held like a driver that
// may still run: until its kubelet reports, or its node is proven down (then there is no failure
// to count but the node's).
func causeNotReported(pod *corev1.Pod, container string) bool {
	if pod.DeletionTimestamp == nil || pod.Spec.NodeName == "" {
		return false
	}
	o := recordedExit(pod, container)
	return o.Exited && o.Code != 0 && o.Stopped && !o.SelfFenced && stopNotReportedYet(pod, container)
}

// Reconcile lets go of one deleted driver pod when releasable says so, else looks again soon.
func (o *Outcomes) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var pod corev1.Pod
	if err := o.Client.Get(ctx, req.NamespacedName, &pod); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !held(&pod) {
		return ctrl.Result{}, nil
	}
	placeholder, err := o.placeholderOf(ctx, &pod)
	if err != nil {
		return ctrl.Result{}, err
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	down := false
	if placeholder != nil && (mayStillRun(&pod, driverContainer(placeholder)) || causeNotReported(&pod, driverContainer(placeholder))) {
		// Proof as PodGC takes it, read live: a Node only missing from the cache proves nothing.
		var node corev1.Node
		err := o.reader().Get(ctx, types.NamespacedName{Name: pod.Spec.NodeName}, &node)
		switch {
		case apierrors.IsNotFound(err):
			down = true
		case err != nil:
			return ctrl.Result{}, err
		default:
			down = provenDown(&pod, &node) != ""
		}
	}
	release, why := releasable(&pod, placeholder, now(), down)
	if !release {
		return ctrl.Result{RequeueAfter: outcomePoll}, nil
	}
	if lossAtRelease(&pod, placeholder, NodeLoss{}, now()) != nil {
		// A loss to record: its node, read live, names and dates it as the placeholder's pass
		// would have (firstLoss).
		loss, err := o.nodeLoss(ctx, &pod, now())
		if err != nil {
			return ctrl.Result{}, err
		}
		rec := lossAtRelease(&pod, placeholder, loss, now())
		patch := client.MergeFromWithOptions(placeholder.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if err := setLoss(placeholder, rec); err != nil {
			return ctrl.Result{}, err
		}
		if err := o.Client.Patch(ctx, placeholder, patch); apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			// The placeholder's pass wrote first, or the app is gone: look again.
			return ctrl.Result{RequeueAfter: outcomePoll}, nil
		} else if err != nil {
			return ctrl.Result{}, err
		}
	}
	log.FromContext(ctx).Info("letting the deleted driver pod go", "pod", req.String(), "uid", pod.UID, "why", why)
	return ctrl.Result{}, letGo(ctx, o.Client, &pod)
}

// lossAtRelease is the loss record to write on placeholder before its deleted incarnation pod,
// stopped from outside with no exit of its own, is let go; nil when there is none to write (the
// app is gone, deleted or ended; the placeholder already has a record; the pod's exit counts).
// The placeholder's pass records such a loss when it sees the pod (planLoss); the Outcomes
// reconciler may see it first (a new leader, after driverset was evicted with the driver in one
// drain), and once the pod is gone nothing tells that the next incarnation is a recovery: it was
// told as DriverRunning, never Recovered (TestRecoveryToldWhenOutcomesGoesFirst). The record is
// planLoss's, from the same decision (firstLoss): the kubelet's cause when it stopped the pod,
// else its node's loss (loss), else the deletion's.
func lossAtRelease(pod, placeholder *corev1.Pod, loss NodeLoss, now time.Time) *lostRecord {
	if placeholder == nil || placeholder.DeletionTimestamp != nil || isTerminal(placeholder.Status.Phase) || lostOf(placeholder) != nil {
		return nil
	}
	if _, restarted := restartsOf(placeholder); restarted == pod.UID || outcomeOf(pod, driverContainer(placeholder)).Exited {
		return nil
	}
	return firstLoss(pod, loss, now)
}

// nodeLoss is the loss of pod's node as assessNode has it, on the Node read live (a Node only
// missing from the cache proves nothing), with no fencing armed: the Outcomes reconciler fences
// nothing, and the placeholder's pass corrects the record's fencing when it next sees the app.
func (o *Outcomes) nodeLoss(ctx context.Context, pod *corev1.Pod, now time.Time) (NodeLoss, error) {
	if pod.Spec.NodeName == "" {
		return NodeLoss{}, nil
	}
	var node corev1.Node
	err := o.reader().Get(ctx, types.NamespacedName{Name: pod.Spec.NodeName}, &node)
	switch {
	case apierrors.IsNotFound(err):
		return assessNode(pod, nil, Zone{}, 0, Heartbeat{}, now), nil
	case err != nil:
		return NodeLoss{}, err
	}
	return assessNode(pod, &node, Zone{}, 0, Heartbeat{}, now), nil
}

// letGo removes driverset's finalizer from pod, conditioned on the pod being as it was read.
func letGo(ctx context.Context, c client.Client, pod *corev1.Pod) error {
	if !slices.Contains(pod.Finalizers, contract.FinalizerOutcome) {
		return nil
	}
	patch := client.MergeFromWithOptions(pod.DeepCopy(), client.MergeFromWithOptimisticLock{})
	pod.Finalizers = slices.DeleteFunc(slices.Clone(pod.Finalizers), func(f string) bool { return f == contract.FinalizerOutcome })
	return client.IgnoreNotFound(c.Patch(ctx, pod, patch))
}

// placeholderOf is pod's placeholder (placeholderOfDriver), read live.
func (o *Outcomes) placeholderOf(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	p, _, err := placeholderOfDriver(ctx, o.reader(), pod)
	return p, err
}

func (o *Outcomes) reader() client.Reader {
	if o.APIReader != nil {
		return o.APIReader
	}
	return o.Client
}

func ignoreGone(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
