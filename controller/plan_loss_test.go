package controller

import (
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
)

// lossSnapshot is a Snapshot for planLoss: P with loss record rec (nil: none), S-0 driver, and
// driver's Node as read from where (nil node: gone); the zone and heartbeat taken unless
// untaken.
func lossSnapshot(rec *lostRecord, driver *corev1.Pod, node *corev1.Node, where Source, untaken bool) *Snapshot {
	p := planPlaceholder(nil)
	if rec != nil {
		_ = setLoss(p, rec)
	}
	s := &Snapshot{Placeholder: reading(p, FromCache, t0), Driver: reading(driver, FromCache, t0), Node: reading(node, where, t0)}
	if !untaken {
		s.Zone = reading(Zone{}, Skipped, t0)
		s.Heartbeat = reading(Heartbeat{}, Skipped, t0)
	}
	return s
}

// TestPlanLoss: the driver through the loss of its node, as the steps record, fence and tell it.
// A fence is planned only on the Node read from the apiserver; on the cache it asks for that read.
func TestPlanLoss(t *testing.T) {
	lostAt := t0.Add(-10 * time.Minute)
	now := t0
	fenceAfter := 5 * time.Minute
	running := planDriver("inc-1", runningStatus(t0.Add(-time.Hour)))
	newIncarnation := planDriver("inc-2", runningStatus(t0.Add(-30*time.Second)))
	deleted := running.DeepCopy()
	deleted.DeletionTimestamp = &metav1.Time{Time: t0.Add(-time.Minute)}
	shutDown := planDriver("inc-1", shutdownStatus(t0.Add(-time.Hour), lostAt))
	shutDownHeld := shutDown.DeepCopy()
	shutDownHeld.DeletionTimestamp = &metav1.Time{Time: lostAt.Add(time.Second)}
	shutDownHeld.Finalizers = []string{contract.FinalizerOutcome}
	ready := nodeWith(corev1.ConditionTrue, t0.Add(-time.Hour))
	unknown := nodeWith(corev1.ConditionUnknown, lostAt) // not yet tainted: no fence
	avoided := nodeWith(corev1.ConditionUnknown, lostAt, unreachableTaints()...)
	unreachable := &lostRecord{Pod: "inc-1", Since: lostAt, Cause: CauseNodeLost}
	fencing := &lostRecord{Pod: "inc-1", Since: lostAt, Cause: CauseNodeLost, Fencing: true}

	cases := []struct {
		name       string
		s          *Snapshot
		fenceAfter time.Duration
		want       lossPlan // eventSteps compared by reason alone (see below)
		note       string   // the plan's note contains it
	}{
		{name: "no driver pod: nothing to assess", s: lossSnapshot(nil, nil, nil, Skipped, true)},
		{name: "a driver on a node, its zone and heartbeat not read: asks for them",
			s: lossSnapshot(nil, running, ready, FromCache, true), want: lossPlan{Need: []Need{NeedLossInputs}}},
		{name: "its node Ready and nothing recorded: nothing", s: lossSnapshot(nil, running, ready, FromCache, false)},
		{name: "its node lost, first seen: recorded, and told once", s: lossSnapshot(nil, running, unknown, FromCache, false), fenceAfter: fenceAfter,
			want: lossPlan{Steps: []Step{recordLossStep{Record: &lostRecord{Pod: "inc-1", Since: lostAt, Cause: CauseNodeLost}}, eventStep{Reason: "NodeLost"}}},
			note: "keeps the next driver pod off it"},
		{name: "lost as recorded: nothing written again", s: lossSnapshot(unreachable, running, unknown, FromCache, false), fenceAfter: fenceAfter,
			note: "has not been Ready since"},
		{name: "fencing armed on a recorded loss: the record says so, since when it was lost", fenceAfter: time.Hour,
			s:    lossSnapshot(unreachable, running, avoided, FromCache, false),
			want: lossPlan{Steps: []Step{recordLossStep{Record: fencing}}, Requeue: 50 * time.Minute}},
		{name: "fence-after passed on the cache: asks for the Node from the apiserver first", fenceAfter: fenceAfter,
			s: lossSnapshot(fencing, running, avoided, FromCache, false), want: lossPlan{Need: []Need{NeedLive}}},
		{name: "fence-after passed on the apiserver's Node: recorded, then fenced, and told once it is done", fenceAfter: fenceAfter,
			s: lossSnapshot(fencing, running, avoided, FromAPIServer, false),
			want: lossPlan{Steps: []Step{
				recordLossStep{Record: &lostRecord{Pod: "inc-1", Since: lostAt, Cause: CauseFenced, Fencing: true}},
				fenceStep{UID: "inc-1", Release: true, Then: []Step{countFenceStep{}, eventStep{Reason: "Fenced"}}},
			}}},
		{name: "a Node that is gone, read from the apiserver: fenced at once, fence-after or not",
			s: lossSnapshot(nil, running, nil, FromAPIServer, false),
			want: lossPlan{Steps: []Step{
				recordLossStep{Record: &lostRecord{Pod: "inc-1", Since: now, Cause: CauseNodeDeleted, Fencing: true}}, eventStep{Reason: "NodeLost"},
				fenceStep{UID: "inc-1", Release: true, Then: []Step{eventStep{Reason: "NodeGone"}}},
			}}},
		{name: "the cache said lost, the apiserver says Ready: the record is cleared", fenceAfter: fenceAfter,
			s:    lossSnapshot(fencing, running, ready, FromAPIServer, false),
			want: lossPlan{Steps: []Step{recordLossStep{}}}},
		{name: "a new incarnation runs: the record cleared, then the recovery counted and told", s: lossSnapshot(fencing, newIncarnation, ready, FromCache, false),
			want: lossPlan{Recovered: true, Steps: []Step{recordLossStep{}, countRecoveryStep{Cause: CauseNodeLost, Took: 10*time.Minute - 30*time.Second}, eventStep{Reason: "Recovered"}}}},
		{name: "deleted on a healthy node: recorded since the deletion, a recovery to measure", s: lossSnapshot(nil, deleted, ready, FromCache, false),
			want: lossPlan{Steps: []Step{recordLossStep{Record: &lostRecord{Pod: "inc-1", Since: t0.Add(-time.Minute), Cause: CausePodDeleted}}}}},
		{name: "ended by its kubelet: its word needs no node reading, and is the cause", s: lossSnapshot(nil, shutDown, nil, FromCache, true),
			want: lossPlan{Steps: []Step{recordLossStep{Record: &lostRecord{Pod: "inc-1", Since: lostAt, Cause: CauseNodeShutdown}}}}},
		{name: "ended by its kubelet after it was seen lost: the kubelet's cause replaces the loss's, and the held pod goes",
			s:    lossSnapshot(unreachable, shutDownHeld, unknown, FromCache, true),
			want: lossPlan{Steps: []Step{recordLossStep{Record: &lostRecord{Pod: "inc-1", Since: lostAt, Cause: CauseNodeShutdown}}, releaseDriverStep{}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := planLoss(c.s, c.fenceAfter, now)
			note := got.Note
			got.Note = ""
			got.Steps = reasonsOnly(t, got.Steps)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("plan\n %#v\nwant\n %#v", got, c.want)
			}
			if c.note != "" && !strings.Contains(note, c.note) {
				t.Errorf("note %q, want one containing %q", note, c.note)
			}
		})
	}
}

// reasonsOnly keeps of each eventStep its reason (its note is the message's business; the tables
// check which Event is told, and when), and checks that the Event is about the driver pod.
func reasonsOnly(t *testing.T, steps []Step) []Step {
	t.Helper()
	if len(steps) == 0 {
		return nil
	}
	out := make([]Step, len(steps))
	for i, st := range steps {
		switch s := st.(type) {
		case eventStep:
			if s.Related == nil || s.Related.GetName() != "pi-driver-0" || s.Note == "" {
				t.Errorf("Event %s about %v with note %q, want one about the driver pod that says something", s.Reason, s.Related, s.Note)
			}
			st = eventStep{Reason: s.Reason}
		case fenceStep:
			s.Then = reasonsOnly(t, s.Then)
			st = s
		}
		out[i] = st
	}
	return out
}
