package controller

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driverset/driverset/convert"
)

// ForceDeletion reports whether driver pod pod may be removed without its kubelet's confirmation
// (a grace-0 delete) as driverset's own ServiceAccount asks, and why: the check of the webhook
// entry deletes.driverset.dev (docs/design.md#what-a-force-delete-may-be). driverset's token may
// delete Spark's pods (driverset-guard-pods), but a grace-0 delete of a driver that still runs on a
// node that is only cut off has its StatefulSet make a second driver. So such a delete is admitted
// only on the proof the controller itself fences on, read here as the controller reads it before
// a fence: the Node and the heartbeat from the apiserver.
//
// The settings come from pod's placeholder (S-0 → S → P, read from the apiserver); when that
// chain is broken (the app gone), from pod itself, which carries no driverset annotation: the
// cluster's. driverset fences no driver whose placeholder it cannot read.
func (r *Placeholder) ForceDeletion(ctx context.Context, pod *corev1.Pod) (bool, string, error) {
	if pod.Spec.NodeName == "" || isTerminal(pod.Status.Phase) {
		ok, why := forceDeletable(pod, nil, Zone{}, 0, Heartbeat{}, "", r.now())
		return ok, why, nil
	}
	p, sts, err := placeholderOfDriver(ctx, r.apiReader(), pod)
	if err != nil {
		return false, "", err
	}
	in, err := r.fenceInputs(ctx, pod, p, sts)
	if err != nil {
		return false, "", err
	}
	ok, why := forceDeletable(pod, in.Node, in.Zone, in.FenceAfter, in.Heartbeat, in.Container, r.now())
	return ok, why, nil
}

// fenceInputs are the readings assessNode fences driver pod on, read as the controller reads them
// before a fence: the Node and the heartbeat Lease from the apiserver, the zone from the cached
// Nodes, the settings from its placeholder p (or, with no placeholder, from pod itself, which
// carries no driverset annotation: the cluster's).
type fenceInputs struct {
	Node       *corev1.Node // nil: gone
	Zone       Zone
	FenceAfter time.Duration
	Heartbeat  Heartbeat
	Container  string
}

// fenceInputs reads them for bound driver pod, whose placeholder p and StatefulSet sts were read
// by placeholderOfDriver.
func (r *Placeholder) fenceInputs(ctx context.Context, pod, p *corev1.Pod, sts *appsv1.StatefulSet) (fenceInputs, error) {
	settingsFrom := p
	if settingsFrom == nil {
		settingsFrom = pod
	}
	settings, _ := settingsOf(settingsFrom, sts, r.config())
	in := fenceInputs{FenceAfter: settings.FenceAfter, Container: driverContainer(settingsFrom)}
	var err error
	if in.Node, err = r.liveNode(ctx, pod.Spec.NodeName); err != nil {
		return in, err
	}
	if in.Zone, err = r.zoneOf(ctx, in.Node, in.FenceAfter); err != nil {
		return in, err
	}
	in.Heartbeat, err = r.heartbeatOf(ctx, pod, in.Container, true)
	return in, err
}

// placeholderOfDriver follows driver pod's controller references to its StatefulSet and that
// set's placeholder (S-0 → S → P), both read with reader; either is nil when its link is missing,
// gone, or not driverset's.
func placeholderOfDriver(ctx context.Context, reader client.Reader, pod *corev1.Pod) (*corev1.Pod, *appsv1.StatefulSet, error) {
	ref := controllerOfKind(pod, "StatefulSet")
	if ref == nil {
		return nil, nil, nil
	}
	var sts appsv1.StatefulSet
	if err := reader.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name}, &sts); err != nil || sts.UID != ref.UID {
		return nil, nil, ignoreGone(err)
	}
	ref = controllerOfKind(&sts, "Pod")
	if ref == nil {
		return nil, &sts, nil
	}
	var p corev1.Pod
	if err := reader.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name}, &p); err != nil || p.UID != ref.UID || !convert.IsPlaceholder(&p) {
		return nil, &sts, ignoreGone(err)
	}
	return &p, &sts, nil
}

// forceDeletable is the decision, pure: whether driver pod, bound to node (as read from the
// apiserver; nil: gone), may be removed without its kubelet at now, and why. It is the proof of
// every force-delete the controller makes of a driver, and nothing else:
//   - the pod was never bound, or its kubelet reported it ended: no kubelet runs it;
//   - assessNode fences it (the node deleted or out of service; fence-after over on an
//     unreachable node in an undisrupted zone; a self-fencing driver's heartbeat silent for T
//     plus its margin): fenceStep;
//   - it is deleted already, its driver's exit is recorded, and its node is down and keeps the
//     next incarnation off (deadNodeReleases): planRestart's forced deleteDriverStep.
func forceDeletable(pod *corev1.Pod, node *corev1.Node, zone Zone, fenceAfter time.Duration, hb Heartbeat, container string, now time.Time) (bool, string) {
	switch {
	case pod.Spec.NodeName == "":
		return true, "it was never bound to a node: no kubelet runs it"
	case isTerminal(pod.Status.Phase):
		return true, fmt.Sprintf("its kubelet reported it %s", pod.Status.Phase)
	}
	loss := assessNode(pod, node, zone, fenceAfter, hb, now)
	if loss.Fence {
		return true, "its node is lost for good (" + loss.Cause + ")"
	}
	if pod.DeletionTimestamp != nil && recordedExit(pod, container).Exited && deadNodeReleases(pod, node, true) {
		return true, "its driver's exit is recorded and node " + pod.Spec.NodeName + " is down and avoided"
	}
	if !loss.Lost {
		return false, "node " + pod.Spec.NodeName + " is Ready: its kubelet confirms a graceful delete, and a forced one would let the StatefulSet start a second driver beside this one"
	}
	return false, "nothing proves node " + pod.Spec.NodeName + " runs it no more: " + loss.Note
}
