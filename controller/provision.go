package controller

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Provisioning is the part of a pass before the driver can exist: a placeholder driverset did not
// seal is refused, the driver's claims are kept, H and S are made, and S is held at the replicas
// P's phase asks for. It is planned (planProvision) and applied like the rest; making S and H is
// one step (ensureStep, create-or-get), after which it is planned again on what was made.

// ensured is what this pass's ensureStep made: S when H and S are P's now; else, with Refused,
// why the apiserver refused a create, or, without, that a name is another owner's.
type ensured struct {
	StatefulSet *appsv1.StatefulSet
	Refused     string
}

// maxProvisionRounds: a plan, and one more once ensureStep made S and H.
const maxProvisionRounds = 2

// provision plans and applies the provisioning of s. done: the pass ends here, with res.
func (r *Placeholder) provision(ctx context.Context, s *Snapshot) (res ctrl.Result, done bool, err error) {
	for range maxProvisionRounds {
		pl, err := r.planWith(ctx, s, planProvision)
		if err != nil {
			return ctrl.Result{}, true, err
		}
		if pl.Log != "" {
			log.FromContext(ctx).Info(pl.Log)
		}
		if _, err := r.apply(ctx, s, pl.Steps); err != nil {
			return ctrl.Result{}, true, err
		}
		if !pl.Again {
			return ctrl.Result{RequeueAfter: pl.Requeue}, pl.Ends, nil
		}
	}
	p := s.Placeholder.Value
	return ctrl.Result{}, true, fmt.Errorf("placeholder %s/%s: provisioning still not done after %d rounds", p.Namespace, p.Name, maxProvisionRounds)
}

// planProvision is the provisioning of s as a pure function: Ends when the pass ends with its steps
// (refused, waiting for a claim or a name, or an app that has ended), Again when S and H are to be
// made first.
func planProvision(s *Snapshot, cfg Config, now time.Time) Plan {
	p, sts := s.Placeholder.Value, s.StatefulSet.Value
	container := driverContainer(p)
	terminal := isTerminal(p.Status.Phase)
	if reason := unsealedBy(cfg.Seal, p, sts); reason != "" {
		if terminal {
			return Plan{Ends: true}
		}
		return Plan{Ends: true, Log: "not a placeholder driverset made: " + reason,
			Steps: []Step{writeStatusStep{View: View{Container: container, Blocked: reason}}}}
	}
	var steps []Step
	if !terminal && sts == nil && s.Found.Value == "" {
		// A finished app runs no driver again: its claims need no keeping. Once S exists, a driver
		// may have run, and its claims were kept before S was made: also an S that P controls
		// found only on the apiserver (Found), which the cache has not seen yet (a new leader, a
		// watch behind). A claim Spark's clean stop deleted is then never waited for.
		if !s.Claims.Taken() {
			return Plan{Need: []Need{NeedClaims}}
		}
		keep, waiting := planClaims(p, s.Claims.Value)
		if waiting != "" {
			return Plan{Ends: true, Requeue: claimPoll,
				Steps: append(keep, writeStatusStep{View: View{Container: container, Blocked: waiting}})}
		}
		steps = keep
	}
	own := s.ownStatefulSet()
	if own == nil && s.Ensured.Taken() {
		own = s.Ensured.Value.StatefulSet
	}
	switch {
	case own == nil && !s.Ensured.Taken():
		return Plan{Steps: append(steps, ensureStep{}), Again: true}
	case own == nil && s.Ensured.Value.Refused != "":
		if terminal {
			return Plan{Ends: true, Log: "create refused: " + s.Ensured.Value.Refused}
		}
		used, _ := restartsOf(p)
		return Plan{Ends: true, Requeue: retryRefused, Log: "create refused: " + s.Ensured.Value.Refused,
			Steps: append(steps, writeStatusStep{View: View{Container: container, Restarts: used, TotalRestarts: totalRestartsOf(p), Blocked: s.Ensured.Value.Refused}})}
	case own == nil:
		// The name is taken: looked at less often the longer that lasts.
		return Plan{Ends: true, Steps: steps, Requeue: waitRequeue(now.Sub(p.CreationTimestamp.Time))}
	case terminal:
		return Plan{Ends: true, Steps: append(steps, scaleToZeroStep{})}
	}
	replicas, need := planReplicas(p, own, s.LivePlaceholder)
	if len(need) > 0 {
		return Plan{Need: need}
	}
	return Plan{Steps: append(steps, replicas...)}
}

// planReplicas sets S back to replicasFor(P) (1: P is not terminal here) when someone scaled it: 2
// makes S-1, a second driver with the same app id; 0 leaves the app Running forever. Scaling up
// from 0 is done only once the apiserver confirms P has not ended (live, NeedLivePlaceholder): S is
// scaled to 0 right after P's final status is written, and the cache may not show that status yet.
func planReplicas(p *corev1.Pod, sts *appsv1.StatefulSet, live Read[*corev1.Pod]) ([]Step, []Need) {
	want := replicasFor(p)
	if sts.Spec.Replicas != nil && *sts.Spec.Replicas == want {
		return nil, nil
	}
	if sts.Spec.Replicas != nil && *sts.Spec.Replicas == 0 {
		if !live.Taken() {
			return nil, []Need{NeedLivePlaceholder}
		}
		if live.Value == nil || live.Value.UID != p.UID || replicasFor(live.Value) != want {
			return nil, nil
		}
	}
	had := "unset"
	if sts.Spec.Replicas != nil {
		had = strconv.Itoa(int(*sts.Spec.Replicas))
	}
	return []Step{setReplicasStep{Replicas: want, Then: []Step{eventStep{Related: sts, Type: corev1.EventTypeWarning, Reason: "ReplicasCorrected",
		Note: fmt.Sprintf("StatefulSet %s was scaled to %s replicas; set back to %d: driverset runs exactly one driver while the app runs", sts.Name, had, want)}}}}, nil
}

// ensureStepApplied runs ensure and keeps what it made, or why it made nothing, in s.
func (r *Placeholder) ensureStepApplied(ctx context.Context, s *Snapshot) error {
	sts, err := r.ensure(ctx, s)
	var refused *refusedError
	switch {
	case errors.As(err, &refused):
		s.Ensured = reading(ensured{Refused: refused.Error()}, FromWrite, r.now())
		return nil
	case err != nil:
		return err
	}
	s.Ensured = reading(ensured{StatefulSet: sts}, FromWrite, r.now())
	return nil
}
