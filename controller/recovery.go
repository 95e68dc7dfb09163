package controller

import (
	"context"
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/driverset/driverset/contract"
)

// lostRecord is the value of contract.AnnotationDriverLost.
type lostRecord struct {
	Pod   types.UID `json:"pod,omitempty"`
	Since time.Time `json:"since"`
	Cause string    `json:"cause"`
	// Fencing is true while driverset will force-delete the pod on its own (fence-after or
	// self-fence armed); false while only an admin can end the wait. The driverset_drivers gauge
	// tells the two apart by it.
	Fencing bool `json:"fencing,omitempty"`
}

func lostOf(p *corev1.Pod) *lostRecord {
	v, ok := p.Annotations[contract.AnnotationDriverLost]
	if !ok {
		return nil
	}
	var rec lostRecord
	if json.Unmarshal([]byte(v), &rec) != nil {
		return nil
	}
	return &rec
}

// assessLoss is assessNode on the driver's node as the cache has it and, when that says fence,
// again on the Node and the heartbeat as the apiserver has them now (kept in live).
func (r *Placeholder) assessLoss(ctx context.Context, p, driver *corev1.Pod, fenceAfter time.Duration, now time.Time,
	live map[string]*corev1.Node) (NodeLoss, error) {
	var node *corev1.Node
	if driver != nil && driver.Spec.NodeName != "" {
		node = &corev1.Node{}
		if err := r.Client.Get(ctx, types.NamespacedName{Name: driver.Spec.NodeName}, node); err != nil {
			if !apierrors.IsNotFound(err) {
				return NodeLoss{}, err
			}
			node = nil
		}
	}
	zone, err := r.zoneOf(ctx, node, fenceAfter)
	if err != nil {
		return NodeLoss{}, err
	}
	hb, err := r.heartbeatOf(ctx, driver, driverContainer(p), false)
	if err != nil {
		return NodeLoss{}, err
	}
	loss := assessNode(driver, node, zone, fenceAfter, hb, now)
	if !loss.Fence {
		return loss, nil
	}
	// The cache may be behind a node that came back, or a heartbeat that was renewed: decide
	// again on the Node and the Lease as they are now.
	return r.assessLive(ctx, p, driver, zone, fenceAfter, now, live)
}

// zoneOf counts the nodes of node's zone (informer cache) when fencing may follow.
func (r *Placeholder) zoneOf(ctx context.Context, node *corev1.Node, fenceAfter time.Duration) (Zone, error) {
	if node == nil || fenceAfter <= 0 {
		return Zone{}, nil
	}
	if c := nodeReady(node); c != nil && c.Status == corev1.ConditionTrue {
		return Zone{}, nil
	}
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes); err != nil {
		return Zone{}, err
	}
	return zoneOf(node, nodes.Items), nil
}

// assessLive assesses the driver's node as the apiserver has it now, and keeps what it read in
// live.
func (r *Placeholder) assessLive(ctx context.Context, p, driver *corev1.Pod, zone Zone, fenceAfter time.Duration, now time.Time,
	live map[string]*corev1.Node) (NodeLoss, error) {
	node, err := r.liveNode(ctx, driver.Spec.NodeName)
	if err != nil {
		return NodeLoss{}, err
	}
	live[driver.Spec.NodeName] = node
	hb, err := r.heartbeatOf(ctx, driver, driverContainer(p), true)
	if err != nil {
		return NodeLoss{}, err
	}
	return assessNode(driver, node, zone, fenceAfter, hb, now), nil
}

// running reports whether pod runs and is not being stopped from outside: a pod the kubelet is
// stopping still says Running until its containers are gone.
func running(pod *corev1.Pod) bool {
	_, _, stopping := stoppedFromOutside(pod)
	return !stopping && pod.Status.Phase == corev1.PodRunning
}

// runningSince is when the pod's containers last started running (its Ready time, else now).
func runningSince(pod *corev1.Pod) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	return time.Now()
}
