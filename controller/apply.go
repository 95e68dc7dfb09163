package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// The apply phase: the writes a plan decided, each under its precondition (the UID of the
// incarnation decided on, the resourceVersion of the object as read), in the order planned.

// apply runs steps on the objects of s, in order, and stops at the first write that fails. It
// reports whether a step ended the pass early (a fence that force-deleted S-0: that deletion brings
// the next pass at once, which says what follows; on a node that held many drivers a status write
// here would be one request per driver before the last one's force-delete).
func (r *Placeholder) apply(ctx context.Context, s *Snapshot, steps []Step) (ended bool, err error) {
	p, driver := s.Placeholder.Value, s.Driver.Value
	// What lifting the gate found on the apiserver, or in S-0's change, is the status's note.
	var executorsNote *string
	for _, st := range steps {
		switch st := st.(type) {
		case recordRestartStep:
			err = r.recordRestart(ctx, p, st)
		case deleteDriverStep:
			err = r.deleteDriver(ctx, driver, st)
		case recordLossStep:
			err = r.recordLoss(ctx, p, st.Record)
		case releaseDriverStep:
			if err = letGo(ctx, r.Client, driver); apierrors.IsConflict(err) {
				err = nil
			}
		case fenceStep:
			var deleted bool
			if deleted, err = r.fence(ctx, s, st); err == nil && deleted {
				return true, nil
			}
		case deleteExecutorStep:
			err = r.deleteExecutor(ctx, st)
		case liftGateStep:
			var note string
			note, err = r.liftGate(ctx, p, driver, st)
			executorsNote = &note
		case writeStatusStep:
			v := st.View
			if executorsNote != nil {
				v.Note = *executorsNote
			}
			err = r.writeStatus(ctx, p, v)
		case keepClaimStep:
			if err = r.keepClaim(ctx, st); err == nil {
				s.keptClaim(st.After)
			}
		case ensureStep:
			err = r.ensureStepApplied(ctx, s)
		case setReplicasStep:
			err = r.setReplicas(ctx, p, s.StatefulSet.Value, st)
		case releasePlaceholderStep:
			log.FromContext(ctx).Info("the deleted app's driver has stopped; letting its placeholder go", "placeholder", p.Namespace+"/"+p.Name)
			err = letGo(ctx, r.Client, p)
		case scaleToZeroStep:
			err = r.scaleToZero(ctx, s.StatefulSet.Value)
		default:
			if !r.tell(p, st) {
				err = fmt.Errorf("apply: %T is no step apply knows", st)
			}
		}
		if err != nil {
			return false, err
		}
	}
	return false, nil
}

// tell records what st tells, an Event or a metric, and reports whether st is one of those.
func (r *Placeholder) tell(p *corev1.Pod, st Step) bool {
	switch st := st.(type) {
	case eventStep:
		r.event(p, st.Related, st.Type, st.Reason, "%s", st.Note)
	case countRestartStep:
		r.Metrics.restarted()
	case countFenceStep:
		r.Metrics.fenced()
	case countRecoveryStep:
		r.Metrics.recovered(st.Cause, st.Took)
	default:
		return false
	}
	return true
}

// recordRestart counts a restart on P before the pod is deleted, under optimistic locking, so a
// crash between the two never loses or doubles a count.
func (r *Placeholder) recordRestart(ctx context.Context, p *corev1.Pod, st recordRestartStep) error {
	patch := client.MergeFromWithOptions(p.DeepCopy(), client.MergeFromWithOptimisticLock{})
	setRestart(p, st)
	return r.Client.Patch(ctx, p, patch)
}

// deleteDriver deletes the incarnation st names; one already gone or replaced is no error.
func (r *Placeholder) deleteDriver(ctx context.Context, driver *corev1.Pod, st deleteDriverStep) error {
	uid := st.UID
	opts := []client.DeleteOption{client.Preconditions{UID: &uid}}
	if st.Force {
		opts = append(opts, client.GracePeriodSeconds(0))
	}
	err := r.Client.Delete(ctx, driver, opts...)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}

// recordLoss sets (or, with nil, clears) the loss record on P under optimistic locking.
func (r *Placeholder) recordLoss(ctx context.Context, p *corev1.Pod, rec *lostRecord) error {
	patch := client.MergeFromWithOptions(p.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if err := setLoss(p, rec); err != nil {
		return err
	}
	return r.Client.Patch(ctx, p, patch)
}

// fence force-deletes S-0 as st says, with its executors, and reports whether this call deleted
// it; then it tells why (st.Then).
func (r *Placeholder) fence(ctx context.Context, s *Snapshot, st fenceStep) (bool, error) {
	p, driver := s.Placeholder.Value, s.Driver.Value
	r.dropExecutorsOf(ctx, s)
	if st.Release {
		if err := letGo(ctx, r.Client, driver); err != nil && !apierrors.IsConflict(err) {
			return false, err
		}
	}
	uid := st.UID
	err := r.Client.Delete(ctx, driver, client.GracePeriodSeconds(0), client.Preconditions{UID: &uid})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return false, err
	}
	if err != nil {
		return false, nil
	}
	for _, then := range st.Then {
		r.tell(p, then)
	}
	return true, nil
}

// writeStatus writes P's status when it changed, and records an Event for each transition that a
// user watching the placeholder would want to know about (statusEvents).
func (r *Placeholder) writeStatus(ctx context.Context, p *corev1.Pod, v View) error {
	want := placeholderStatus(p.Status, v)
	if equality.Semantic.DeepEqual(p.Status, want) {
		return nil
	}
	old := p.Status
	// A patch of the difference, under the optimistic lock: p is the cache's copy, without most
	// of its spec (placeholderTransform), which an update would send back.
	patch := client.MergeFromWithOptions(p.DeepCopy(), client.MergeFromWithOptimisticLock{})
	p.Status = want
	if err := r.Client.Status().Patch(ctx, p, patch); err != nil {
		return err
	}
	for _, e := range statusEvents(old, want, v) {
		r.tell(p, e)
	}
	return nil
}

// setReplicas sets sts's replicas as st says, under its resourceVersion; one gone is no error, and
// nothing is told of it.
func (r *Placeholder) setReplicas(ctx context.Context, p *corev1.Pod, sts *appsv1.StatefulSet, st setReplicasStep) error {
	patch := client.MergeFromWithOptions(sts.DeepCopy(), client.MergeFromWithOptimisticLock{})
	replicas := st.Replicas
	sts.Spec.Replicas = &replicas
	if err := r.Client.Patch(ctx, sts, patch); err != nil {
		return client.IgnoreNotFound(err)
	}
	for _, then := range st.Then {
		r.tell(p, then)
	}
	return nil
}
