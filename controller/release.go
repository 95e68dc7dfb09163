package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// MayRelease reports whether driverset's finalizer contract.FinalizerOutcome may come off pod (a
// driver pod S-0, or a placeholder) as driverset's own ServiceAccount asks, and why: the check of
// the webhook entry releases.driverset.dev (docs/design.md#what-a-finalizer-release-may-be).
// driverset-guard-pods lets driverset's token take that finalizer off, but cannot read whether the
// driver's exit was counted or whether its node still runs it: with a stolen token, an exit not yet
// read would be lost, and a driver pod let go early is no longer held against the next
// `--force`. So a release is admitted only on what the controller itself releases on, read as the
// Outcomes reconciler reads it: the placeholder and its StatefulSet, the Node and the heartbeat
// from the apiserver.
func (r *Placeholder) MayRelease(ctx context.Context, pod *corev1.Pod) (bool, string, error) {
	if convert.IsPlaceholder(pod) {
		return r.mayReleasePlaceholder(ctx, pod)
	}
	p, sts, err := placeholderOfDriver(ctx, r.apiReader(), pod)
	if err != nil {
		return false, "", err
	}
	now := r.now()
	if pod.DeletionTimestamp != nil {
		// The node is read only when its proof could change the answer, as Outcomes reads it.
		if ok, why := mayRelease(pod, p, false, now); ok || !heldForItsNode(pod, p) {
			return ok, why, nil
		}
	}
	if pod.Spec.NodeName == "" {
		ok, why := mayRelease(pod, p, false, now)
		return ok, why, nil
	}
	// An ended pod's node is read too: the fence releases one the kubelet ended (evicted) but
	// nobody deleted yet, its Node gone.
	in, err := r.fenceInputs(ctx, pod, p, sts)
	if err != nil {
		return false, "", err
	}
	down := provenDown(pod, in.Node) != "" || assessNode(pod, in.Node, in.Zone, in.FenceAfter, in.Heartbeat, now).Fence
	ok, why := mayRelease(pod, p, down, now)
	return ok, why, nil
}

// heldForItsNode reports whether deleted pod is held only until its node is proven down
// (releasable's nodeDown): its driver may still run, or its kubelet has not said why it stopped.
func heldForItsNode(pod, placeholder *corev1.Pod) bool {
	if placeholder == nil {
		return false
	}
	c := driverContainer(placeholder)
	return mayStillRun(pod, c) || causeNotReported(pod, c)
}

// mayRelease is the decision, pure: whether driverset's finalizer may come off driver pod at now,
// given its placeholder (nil when it, or the StatefulSet between them, is gone) and whether its
// node is proven down or fenced (down: the Node gone or out of service, or assessNode fences it),
// and why. It is what both reconcilers release on, and nothing else:
//   - a deleted pod: releasable, Outcomes' decision (and the placeholder's pass's, recordStop);
//   - a pod not deleted: only when its node is down as the fence proves it and releasable lets it
//     go (planFence releases before it force-deletes); otherwise the finalizer is what holds the
//     pod's later deletion until its exit is read and its kubelet confirms.
func mayRelease(pod, placeholder *corev1.Pod, down bool, now time.Time) (bool, string) {
	if pod.DeletionTimestamp == nil && !down {
		return false, "it is not deleted, and driverset lets such a pod go only as it fences it, which nothing proves" +
			onNode(pod) + ": its finalizer holds its deletion until its exit is read and its kubelet confirms"
	}
	return releasable(pod, placeholder, now, down)
}

// mayReleasePlaceholder is MayRelease for a placeholder p: driverset lets a placeholder go only
// once it is deleted and its app's driver pod is gone, read from the apiserver (stopDeletedApp):
// until then its finalizer keeps the app from being submitted again beside a driver that still runs.
func (r *Placeholder) mayReleasePlaceholder(ctx context.Context, p *corev1.Pod) (bool, string, error) {
	if p.DeletionTimestamp == nil {
		return false, "placeholder " + p.Namespace + "/" + p.Name + " is not deleted: driverset lets a placeholder go only once its app is deleted and its driver pod gone", nil
	}
	names := contract.NamesFor(p.Name)
	d, err := getLive(ctx, r, &corev1.Pod{}, p.Namespace, names.DriverPodName())
	if err != nil {
		return false, "", err
	}
	if d.Value != nil && ofStatefulSet(d.Value, names.StatefulSet) {
		return false, "its app's driver pod " + d.Value.Name + " is still there: the placeholder is let go once it is gone", nil
	}
	return true, "its app is deleted and its driver pod is gone", nil
}

// onNode names pod's node for a message: "" when it has none.
func onNode(pod *corev1.Pod) string {
	if pod.Spec.NodeName == "" {
		return ""
	}
	return " (node " + pod.Spec.NodeName + ")"
}
