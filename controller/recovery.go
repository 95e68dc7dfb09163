package controller

import (
	"context"
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
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
