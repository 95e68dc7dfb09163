package controller

import (
	"context"
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// lossStep is what trackLoss did, for the rest of the pass.
type lossStep struct {
	// Note is for the placeholder's status; Requeue is when to look again.
	Note    string
	Requeue time.Duration
	// ForceDeleted: this pass force-deleted the driver pod. The pass then writes no status: the
	// pod's deletion brings the next pass at once, which says what follows; on a node that held
	// many drivers that write is one request per driver before the last one's force-delete.
	ForceDeleted bool
	// Recovered: this pass told the recovery, in an Event that names the new pod and its node
	// (no DriverRunning Event besides it).
	Recovered bool
}

// trackLoss follows the driver through the loss of its node: it records when and how the driver
// was lost, fences it when asked to, and measures the recovery when a new incarnation runs. It
// is not called for a pod that driverset itself deletes to restart a failed driver: that is no
// loss.
func (r *Placeholder) trackLoss(ctx context.Context, p *corev1.Pod, driver *corev1.Pod, fenceAfter time.Duration) (lossStep, error) {
	now := r.now()
	rec := lostOf(p)
	cause, since, stoppedOutside := stoppedFromOutside(driver)
	// live holds the Nodes read from the apiserver in this pass (nil: NotFound).
	live := map[string]*corev1.Node{}
	var loss NodeLoss
	kubeletCause, kubeletSince, byKubelet := endedByItsKubelet(driver)
	if byKubelet {
		// Its kubelet stopped it and said so: nothing of it runs, whatever its node's state now
		// (a kubelet marks a node that shuts down not Ready), so there is no node loss to wait
		// out or fence, and the kubelet's reason is the cause.
		cause, since = kubeletCause, kubeletSince
	} else {
		var err error
		if loss, err = r.assessLoss(ctx, p, driver, fenceAfter, now, live); err != nil {
			return lossStep{}, err
		}
	}
	switch {
	case loss.Lost:
		if rec == nil || rec.Pod != driver.UID || rec.Cause != loss.Cause || rec.Fencing != loss.fencing() {
			first := rec == nil || rec.Pod != driver.UID
			since := loss.Since
			if !first {
				since = rec.Since
			}
			if err := r.recordLoss(ctx, p, &lostRecord{Pod: driver.UID, Since: since, Cause: loss.Cause, Fencing: loss.fencing()}); err != nil {
				return lossStep{}, err
			}
			if first {
				r.event(p, driver, corev1.EventTypeWarning, "NodeLost", "%s", loss.Note)
			}
		}
		if loss.Fence {
			deleted, err := r.fence(ctx, p, driver, loss, fenceAfter, live)
			if err != nil || deleted {
				return lossStep{ForceDeleted: deleted}, err
			}
		}
		return lossStep{Note: loss.Note, Requeue: loss.FenceIn}, nil
	case rec != nil && driver != nil && driver.UID == rec.Pod && running(driver):
		// The node is Ready again and the same pod still runs: nothing was lost after all.
		return lossStep{}, r.recordLoss(ctx, p, nil)
	case byKubelet && rec != nil && driver.UID == rec.Pod && rec.Cause != cause: // byKubelet: driver is not nil
		// Seen lost first (its node not Ready as the shutdown began), then told by its kubelet
		// why it stopped: that is the cause.
		return lossStep{}, r.recordKubeletStop(ctx, p, driver, &lostRecord{Pod: driver.UID, Since: rec.Since, Cause: cause})
	case rec == nil && stoppedOutside:
		// Stopped from outside on a healthy node (eviction, drain, kubectl delete, the kubelet's
		// node shutdown): also a recovery to measure.
		if since.IsZero() {
			since = now
		}
		rec := &lostRecord{Pod: driver.UID, Since: since, Cause: cause}
		if byKubelet {
			return lossStep{}, r.recordKubeletStop(ctx, p, driver, rec)
		}
		return lossStep{}, r.recordLoss(ctx, p, rec)
	case rec != nil && driver != nil && driver.UID != rec.Pod && running(driver):
		took := runningSince(driver).Sub(rec.Since)
		if took < 0 {
			took = 0
		}
		// The record is cleared first, under the optimistic lock, and the recovery told only once
		// that write succeeded: a second pass on a cache that has not seen the clearing yet fails
		// there and tells nothing twice (neither the Event nor the histogram).
		if err := r.recordLoss(ctx, p, nil); err != nil {
			return lossStep{}, err
		}
		r.Metrics.recovered(rec.Cause, took)
		r.event(p, driver, corev1.EventTypeNormal, "Recovered",
			"the driver runs again in pod %s on node %s, %.1fs after it was lost (%s)",
			podRef(driver), driver.Spec.NodeName, took.Seconds(), rec.Cause)
		return lossStep{Recovered: true}, nil
	}
	return lossStep{}, nil
}

// recordKubeletStop records the loss of a driver its kubelet stopped and, when that pod is already
// deleted and held for driverset (releasable waits for this record), lets it go in the same pass
// rather than one reconcile of Outcomes later, which the next incarnation would wait for.
func (r *Placeholder) recordKubeletStop(ctx context.Context, p, driver *corev1.Pod, rec *lostRecord) error {
	if err := r.recordLoss(ctx, p, rec); err != nil {
		return err
	}
	if !held(driver) {
		return nil
	}
	if release, _ := releasable(driver, p, r.now(), false); release {
		if err := letGo(ctx, r.Client, driver); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
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

// fence force-deletes driver, whose node is lost for good as far as fencing goes (loss.Fence:
// the node proven down, fence-after passed, or the heartbeat silent for T + margin), with its
// executors, and reports whether this call deleted it. It is the one place a driver is fenced:
// while the app runs (trackLoss) and once it is deleted (stopDeletedApp).
func (r *Placeholder) fence(ctx context.Context, p, driver *corev1.Pod, loss NodeLoss, fenceAfter time.Duration, live map[string]*corev1.Node) (bool, error) {
	r.dropExecutorsOf(ctx, p, driver, live)
	// Let it go with the deletion, when releasable allows (no exit of its own to keep), rather
	// than one reconcile of Outcomes later, which the recovery would wait for. Fencing it is the
	// proof that its node runs nothing of it any more.
	if release, _ := releasable(driver, p, r.now(), true); release {
		if err := letGo(ctx, r.Client, driver); err != nil && !apierrors.IsConflict(err) {
			return false, err
		}
	}
	uid := driver.UID
	err := r.Client.Delete(ctx, driver, client.GracePeriodSeconds(0), client.Preconditions{UID: &uid})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return false, err
	}
	if err != nil {
		return false, nil
	}
	r.forceDeleted(p, driver, loss, fenceAfter)
	return true, nil
}

// forceDeleted records why the driver pod was force-deleted: what proved its node down.
func (r *Placeholder) forceDeleted(p, driver *corev1.Pod, loss NodeLoss, fenceAfter time.Duration) {
	node := driver.Spec.NodeName
	switch loss.Cause {
	case CauseNodeDeleted:
		r.event(p, driver, corev1.EventTypeWarning, "NodeGone",
			"force-deleted driver pod %s: its node %s no longer exists (read from the apiserver)", podRef(driver), node)
	case CauseOutOfService:
		r.event(p, driver, corev1.EventTypeWarning, "OutOfService",
			"force-deleted driver pod %s: its node %s is tainted %s:NoExecute and not Ready (read from the apiserver)",
			podRef(driver), node, TaintOutOfService)
	case CauseSelfFenced:
		r.Metrics.fenced()
		r.event(p, driver, corev1.EventTypeWarning, "Fenced",
			"force-deleted driver pod %s: node %s has not been Ready since %s and driverset has seen no renewal of its heartbeat for longer than its self-fence T plus margin, so driverset wrap has stopped it",
			podRef(driver), node, loss.Since.UTC().Format(time.RFC3339))
	default:
		r.Metrics.fenced()
		r.event(p, driver, corev1.EventTypeWarning, "Fenced",
			"force-deleted driver pod %s: node %s has not been Ready since %s (fence-after %s)",
			podRef(driver), node, loss.Since.UTC().Format(time.RFC3339), fenceAfter)
	}
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

// recordLoss sets (or, with nil, clears) the loss record on P under optimistic locking.
func (r *Placeholder) recordLoss(ctx context.Context, p *corev1.Pod, rec *lostRecord) error {
	patch := client.MergeFromWithOptions(p.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if rec == nil {
		delete(p.Annotations, contract.AnnotationDriverLost)
	} else {
		b, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[contract.AnnotationDriverLost] = string(b)
	}
	return r.Client.Patch(ctx, p, patch)
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
