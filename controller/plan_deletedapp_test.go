package controller

import (
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
)

// TestPlanDeletedApp: a deleted app's placeholder goes only once its S-0 is gone; while S-0 may
// still run on a lost node, it is fenced as while the app lived, on the apiserver's Node only.
func TestPlanDeletedApp(t *testing.T) {
	now := t0
	yes := true
	p := planPlaceholder(map[string]string{contract.AnnotationFenceAfter: "1m"})
	p.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Minute)}
	p.Finalizers = []string{contract.FinalizerOutcome}
	ownRef := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: &yes}}
	own := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "pi-driver", Namespace: "jobs", UID: "s-uid", OwnerReferences: ownRef}}
	others := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "pi-driver", Namespace: "jobs", UID: "s-other"}}
	stopping := planDriver("inc-1", runningStatus(t0.Add(-time.Hour)))
	stopping.DeletionTimestamp = &metav1.Time{Time: now.Add(-30 * time.Second)}
	stopped := stopping.DeepCopy()
	stopped.Status = exitedStatus(0, now.Add(-40*time.Second))
	unscheduled := stopping.DeepCopy()
	unscheduled.Spec.NodeName = ""
	lost := nodeWith(corev1.ConditionUnknown, t0.Add(-time.Hour), unreachableTaints()...)
	ready := nodeWith(corev1.ConditionTrue, t0.Add(-time.Hour))
	snapshot := func(sts *appsv1.StatefulSet, driver *corev1.Pod, node *corev1.Node, from Source) *Snapshot {
		return &Snapshot{
			Placeholder: reading(p, FromCache, now), StatefulSet: reading(sts, FromAPIServer, now),
			Driver: reading(driver, FromAPIServer, now), Node: reading(node, from, now),
			Zone: reading(Zone{}, Skipped, now), Heartbeat: reading(Heartbeat{}, Skipped, now),
		}
	}

	stops := []struct {
		name string
		sts  *appsv1.StatefulSet
		want []Step
	}{
		{name: "its own S: scaled to 0", sts: own, want: []Step{scaleToZeroStep{}}},
		{name: "an S of its name that is not its own: left alone", sts: others},
		{name: "no S: nothing to stop", sts: nil},
	}
	for _, c := range stops {
		t.Run(c.name, func(t *testing.T) {
			if got := planStopStatefulSet(snapshot(c.sts, nil, nil, Skipped)); !slices.Equal(got, c.want) {
				t.Errorf("steps %v, want %v", got, c.want)
			}
		})
	}

	cases := []struct {
		name    string
		s       *Snapshot
		need    []Need
		steps   []string
		requeue time.Duration
	}{
		{name: "S-0 gone: the placeholder goes", s: snapshot(own, nil, nil, Skipped), steps: []string{"releasePlaceholderStep"}},
		{name: "S-0 stopping on a Ready node: waited for", s: snapshot(own, stopping, ready, FromCache), requeue: outcomePoll},
		{name: "S-0 whose exit is recorded: nothing of it runs, waited for without a fence", s: snapshot(own, stopped, lost, FromAPIServer), requeue: outcomePoll},
		{name: "S-0 never scheduled: nothing runs anywhere, waited for", s: snapshot(own, unscheduled, nil, Skipped), requeue: outcomePoll},
		{name: "S-0 may still run on a lost node, fence-after passed on the cache: asks for the apiserver's Node",
			s: snapshot(own, stopping, lost, FromCache), need: []Need{NeedLive}},
		{name: "the same on the apiserver's Node: fenced, and waited for",
			s: snapshot(own, stopping, lost, FromAPIServer), steps: []string{"fenceStep"}, requeue: outcomePoll},
		{name: "its S gone: the fence-after is still P's own", s: snapshot(nil, stopping, lost, FromAPIServer), steps: []string{"fenceStep"}, requeue: outcomePoll},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pl := planDeletedApp(c.s, Config{}, now)
			if !slices.Equal(pl.Need, c.need) {
				t.Fatalf("needs %v, want %v", pl.Need, c.need)
			}
			for _, st := range pl.Steps {
				if f, ok := st.(fenceStep); ok && (f.UID != "inc-1" || !f.Release) {
					t.Errorf("fence %+v, want one of inc-1 that lets it go (its app is being deleted)", f)
				}
			}
			if kinds := stepKinds(pl.Steps); !slices.Equal(kinds, c.steps) || pl.Requeue != c.requeue {
				t.Errorf("steps %v, requeue %s; want %v, %s", kinds, pl.Requeue, c.steps, c.requeue)
			}
		})
	}
}
