package controller

import (
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/driverset/driverset/contract"
)

// lossPlan is the node-loss part of a plan: the steps, and what the pass tells and when it looks
// again. Need is set, and nothing else, while a reading is missing.
type lossPlan struct {
	Need  []Need
	Steps []Step
	// Note is for the placeholder's status; Requeue is when to look again.
	Note    string
	Requeue time.Duration
	// Recovered: the steps tell the recovery, in an Event that names the new pod and its node
	// (no DriverRunning Event besides it).
	Recovered bool
}

// planLoss follows the driver through the loss of its node: it records when and how the driver
// was lost, fences it when asked to, and measures the recovery when a new incarnation runs. The
// node is assessed on the cache; a fence, which cannot be undone, only on the Node and heartbeat
// read again from the apiserver (NeedLive). Not for a pod driverset itself deletes to restart a
// failed driver: that is no loss.
func planLoss(s *Snapshot, fenceAfter time.Duration, now time.Time) lossPlan {
	p, driver := s.Placeholder.Value, s.Driver.Value
	rec := lostOf(p)
	stopped, stoppedOutside := stopOf(driver)
	byKubelet := stopped.ByKubelet
	var loss NodeLoss
	if !byKubelet && driver != nil {
		// Unless its kubelet stopped it and said so: then nothing of it runs, whatever its node's
		// state now (a kubelet marks a node that shuts down not Ready), so there is no node loss
		// to wait out or fence, and the kubelet's reason is the cause.
		var need []Need
		if loss, need = assessed(s, fenceAfter, now); len(need) > 0 {
			return lossPlan{Need: need}
		}
	}
	switch {
	case loss.Lost:
		var steps []Step
		after := p // P as the steps before the fence leave it
		if rec == nil || rec.Pod != driver.UID || rec.Cause != loss.Cause || rec.Fencing != loss.fencing() {
			first := rec == nil || rec.Pod != driver.UID
			record := firstLoss(driver, loss, now) // loss.Lost, and not byKubelet: the node's
			if !first {
				record.Since = rec.Since
			}
			steps = append(steps, recordLossStep{Record: record})
			after = withLoss(p, record)
			if first {
				steps = append(steps, eventStep{Related: driver, Type: corev1.EventTypeWarning, Reason: "NodeLost", Note: loss.Note})
			}
		}
		if loss.Fence {
			steps = append(steps, planFence(after, driver, loss, fenceAfter, now))
		}
		return lossPlan{Steps: steps, Note: loss.Note, Requeue: loss.FenceIn}
	case rec != nil && driver != nil && driver.UID == rec.Pod && running(driver):
		// The node is Ready again and the same pod still runs: nothing was lost after all.
		return lossPlan{Steps: []Step{recordLossStep{}}}
	case byKubelet && rec != nil && driver.UID == rec.Pod && rec.Cause != stopped.Cause: // byKubelet: driver is not nil
		// Seen lost first (its node not Ready as the shutdown began), then told by its kubelet
		// why it stopped: that is the cause.
		return lossPlan{Steps: recordStop(p, driver, &lostRecord{Pod: driver.UID, Since: rec.Since, Cause: stopped.Cause}, now)}
	case rec == nil && stoppedOutside:
		// Stopped from outside on a healthy node (eviction, drain, kubectl delete, the kubelet's
		// node shutdown): also a recovery to measure.
		return lossPlan{Steps: recordStop(p, driver, firstLoss(driver, loss, now), now)}
	case rec != nil && driver != nil && driver.UID != rec.Pod && running(driver):
		took := max(runningSince(driver).Sub(rec.Since), 0)
		// The record is cleared first, under the optimistic lock, and the recovery told only once
		// that write succeeded: a second pass on a cache that has not seen the clearing yet fails
		// there and tells nothing twice (neither the Event nor the histogram).
		return lossPlan{Recovered: true, Steps: []Step{
			recordLossStep{},
			countRecoveryStep{Cause: rec.Cause, Took: took},
			eventStep{Related: driver, Type: corev1.EventTypeNormal, Reason: "Recovered",
				Note: fmt.Sprintf("the driver runs again in pod %s on node %s, %.1fs after it was lost (%s)",
					podRef(driver), driver.Spec.NodeName, took.Seconds(), rec.Cause)},
		}}
	}
	return lossPlan{}
}

// assessed is assessNode on the readings of s, or the readings it needs first: the zone and the
// heartbeat, and, when the cache says fence, the Node and heartbeat from the apiserver (the cache
// may be behind a node that came back, or a heartbeat that was renewed).
func assessed(s *Snapshot, fenceAfter time.Duration, now time.Time) (NodeLoss, []Need) {
	if !s.Zone.Taken() || !s.Heartbeat.Taken() {
		return NodeLoss{}, []Need{NeedLossInputs}
	}
	loss := assessNode(s.Driver.Value, s.Node.Value, s.Zone.Value, fenceAfter, s.Heartbeat.Value, now)
	if loss.Fence && s.Node.From != FromAPIServer {
		return NodeLoss{}, []Need{NeedLive}
	}
	return loss, nil
}

// recordStop records the loss of a driver stopped from outside (by its kubelet, or by its pod's
// deletion) and, when that pod is already deleted and held for driverset (releasable waits for
// this record), lets it go in the same pass rather than one reconcile of Outcomes later, which
// the next incarnation would wait for.
func recordStop(p, driver *corev1.Pod, rec *lostRecord, now time.Time) []Step {
	steps := []Step{recordLossStep{Record: rec}}
	if !held(driver) {
		return steps
	}
	if release, _ := releasable(driver, withLoss(p, rec), now, false); release {
		steps = append(steps, releaseDriverStep{})
	}
	return steps
}

// planFence is the fence of driver, whose node is lost for good as far as fencing goes (loss.Fence:
// the node proven down, fence-after passed, or the heartbeat silent for T + margin): the one way a
// driver is fenced, while the app runs (planLoss) and once it is deleted (stopDeletedApp). It lets
// the pod go with the deletion, when releasable allows (no exit of its own to keep), rather than
// one reconcile of Outcomes later, which the recovery would wait for: fencing it is the proof that
// its node runs nothing of it any more.
func planFence(p, driver *corev1.Pod, loss NodeLoss, fenceAfter time.Duration, now time.Time) fenceStep {
	release, _ := releasable(driver, p, now, true)
	return fenceStep{UID: driver.UID, Release: release, Then: fenceEvents(driver, loss, fenceAfter)}
}

// fenceEvents tell why the driver pod was force-deleted: what proved its node down.
func fenceEvents(driver *corev1.Pod, loss NodeLoss, fenceAfter time.Duration) []Step {
	node := driver.Spec.NodeName
	warn := func(reason, format string, args ...any) eventStep {
		return eventStep{Related: driver, Type: corev1.EventTypeWarning, Reason: reason, Note: fmt.Sprintf(format, args...)}
	}
	switch loss.Cause {
	case CauseNodeDeleted:
		return []Step{warn("NodeGone",
			"force-deleted driver pod %s: its node %s no longer exists (read from the apiserver)", podRef(driver), node)}
	case CauseOutOfService:
		return []Step{warn("OutOfService",
			"force-deleted driver pod %s: its node %s is tainted %s:NoExecute and not Ready (read from the apiserver)",
			podRef(driver), node, TaintOutOfService)}
	case CauseSelfFenced:
		return []Step{countFenceStep{}, warn("Fenced",
			"force-deleted driver pod %s: node %s has not been Ready since %s and driverset has seen no renewal of its heartbeat for longer than its self-fence T plus margin, so driverset wrap has stopped it",
			podRef(driver), node, loss.Since.UTC().Format(time.RFC3339))}
	}
	return []Step{countFenceStep{}, warn("Fenced",
		"force-deleted driver pod %s: node %s has not been Ready since %s (fence-after %s)",
		podRef(driver), node, loss.Since.UTC().Format(time.RFC3339), fenceAfter)}
}

// withLoss is a copy of p with the loss record rec (nil: none): what recordLossStep writes.
func withLoss(p *corev1.Pod, rec *lostRecord) *corev1.Pod {
	c := p.DeepCopy()
	_ = setLoss(c, rec)
	return c
}

// setLoss sets (or, with nil, clears) the loss record in p's annotations.
func setLoss(p *corev1.Pod, rec *lostRecord) error {
	if rec == nil {
		delete(p.Annotations, contract.AnnotationDriverLost)
		return nil
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[contract.AnnotationDriverLost] = string(b)
	return nil
}
