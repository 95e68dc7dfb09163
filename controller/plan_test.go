package controller

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/driverset/driverset/contract"
)

// TestPlan: how plan composes its parts: which steps come, in which order, what P is to show, and
// when the app is looked at again. Each part's own decisions have their own tables
// (TestPlanLifecycle, TestPlanRestart, TestPlanLoss, TestStatusEvents).
func TestPlan(t *testing.T) {
	cfg := Config{Budget: Budget{Backoff: 10 * time.Second, MaxBackoff: 5 * time.Minute}}
	now := t0
	ready := nodeWith(corev1.ConditionTrue, t0.Add(-time.Hour))
	lost := nodeWith(corev1.ConditionUnknown, t0.Add(-time.Hour), unreachableTaints()...)
	gated := planDriver("inc-1", pendingStatus())
	gated.CreationTimestamp.Time = now.Add(-20 * time.Second)
	gated.Spec.NodeName = "" // held by its gate: not scheduled
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: contract.GateStaleExecutors}}
	snapshot := func(annotations map[string]string, driver *corev1.Pod, node *corev1.Node, from Source, lossRead bool) *Snapshot {
		s := &Snapshot{
			Placeholder: reading(planPlaceholder(annotations), FromCache, now),
			Driver:      reading(driver, FromCache, now),
			Node:        reading(node, from, now),
		}
		if driver == nil {
			s.MissingDriver = reading("the StatefulSet pi-driver cannot create the driver pod: quota", FromAPIServer, now)
		}
		if lossRead {
			s.Zone, s.Heartbeat = reading(Zone{}, Skipped, now), reading(Heartbeat{}, Skipped, now)
		}
		return s
	}

	cases := []struct {
		name    string
		s       *Snapshot
		need    []Need
		steps   []string // the steps' types, in order
		requeue time.Duration
		view    func(View) string // "" when the status view is as wanted
	}{
		{name: "a running driver whose zone and heartbeat were not read: asks for them, plans nothing",
			s: snapshot(nil, planDriver("inc-1", runningStatus(t0)), ready, FromCache, false), need: []Need{NeedLossInputs}},
		{name: "a running driver on a Ready node: the status only",
			s: snapshot(nil, planDriver("inc-1", runningStatus(t0)), ready, FromCache, true), steps: []string{"writeStatusStep"},
			view: func(v View) string {
				return want(v.Decision.Action == Observe && v.Driver != nil, "observe the driver")
			}},
		{name: "exit 0: the final status written, then S scaled to zero",
			s: snapshot(nil, planDriver("inc-1", exitedStatus(0, t0.Add(-time.Minute))), ready, FromCache, false), steps: []string{"writeStatusStep", "scaleToZeroStep"},
			view: func(v View) string { return want(v.Decision.Action == Succeed, "succeed") }},
		{name: "the last restart used up: the final status, then S scaled to zero",
			s:     snapshot(map[string]string{contract.AnnotationMaxRestarts: "0"}, planDriver("inc-1", exitedStatus(1, t0.Add(-time.Minute))), ready, FromCache, false),
			steps: []string{"writeStatusStep", "scaleToZeroStep"},
			view:  func(v View) string { return want(v.Decision.Action == Fail && v.Outcome.Code == 1, "fail with code 1") }},
		{name: "a failure within its backoff: the status says restarting, looked at again when the backoff ends",
			s: snapshot(nil, planDriver("inc-1", exitedStatus(1, t0.Add(-4*time.Second))), ready, FromCache, false), steps: []string{"writeStatusStep"},
			requeue: 6 * time.Second, view: func(v View) string {
				return want(v.Decision.Action == Wait && v.Restarts == 0, "wait, nothing counted")
			}},
		{name: "a failure past its backoff: counted and deleted before the status says so",
			s:     snapshot(nil, planDriver("inc-1", exitedStatus(1, t0.Add(-time.Minute))), ready, FromCache, false),
			steps: []string{"recordRestartStep", "countRestartStep", "eventStep", "deleteDriverStep", "writeStatusStep"},
			view: func(v View) string {
				return want(v.Decision.Action == Restart && v.Restarts == 1 && v.TotalRestarts == 1, "restart, counted once")
			}},
		{name: "S-0 missing: why is the status's, looked at again after the grace",
			s: snapshot(nil, nil, nil, "", false), steps: []string{"writeStatusStep"}, requeue: missingDriverGrace,
			view: func(v View) string { return want(strings.Contains(v.Blocked, "quota"), "blocked by the quota") }},
		{name: "a driver held for stale executors not listed yet: asks for them",
			s: snapshot(nil, gated, nil, Skipped, true), need: []Need{NeedExecutors}},
		{name: "a driver held for stale executors, none left: the gate lifted before the status, looked at again by its age",
			s: withExecutors(snapshot(nil, gated, nil, Skipped, true)), steps: []string{"liftGateStep", "writeStatusStep"}, requeue: 5 * time.Second},
		{name: "a lost node fenced on the cache: asks for the apiserver's Node",
			s: snapshot(map[string]string{contract.AnnotationFenceAfter: "1m"}, planDriver("inc-1", runningStatus(t0)), lost, FromCache, true), need: []Need{NeedLive}},
		{name: "a lost node fenced on the apiserver's Node: recorded, told, fenced, and the status only if the fence did not go through",
			s:     snapshot(map[string]string{contract.AnnotationFenceAfter: "1m"}, planDriver("inc-1", runningStatus(t0)), lost, FromAPIServer, true),
			steps: []string{"recordLossStep", "eventStep", "fenceStep", "writeStatusStep"},
			view:  func(v View) string { return want(strings.Contains(v.Note, "force-delete"), "a note on the fence") }},
		{name: "an invalid setting: warned in the status, the default kept",
			s:     snapshot(map[string]string{contract.AnnotationMaxRestarts: "many"}, planDriver("inc-1", runningStatus(t0)), ready, FromCache, true),
			steps: []string{"writeStatusStep"},
			view: func(v View) string {
				return want(strings.Contains(v.Invalid, contract.AnnotationMaxRestarts), "the invalid knob named")
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pl := plan(c.s, cfg, now)
			if !slices.Equal(pl.Need, c.need) {
				t.Fatalf("needs %v, want %v", pl.Need, c.need)
			}
			var view *View
			for _, st := range pl.Steps {
				if w, ok := st.(writeStatusStep); ok {
					view = &w.View
				}
			}
			if kinds := stepKinds(pl.Steps); !slices.Equal(kinds, c.steps) {
				t.Errorf("steps %v, want %v", kinds, c.steps)
			}
			if pl.Requeue != c.requeue {
				t.Errorf("requeue after %s, want %s", pl.Requeue, c.requeue)
			}
			if c.view != nil {
				if view == nil {
					t.Fatal("no status written")
				}
				if msg := c.view(*view); msg != "" {
					t.Errorf("view %+v: %s", *view, msg)
				}
			}
		})
	}
}

// want is "" when ok, else what was wanted.
func want(ok bool, what string) string {
	if ok {
		return ""
	}
	return "want " + what
}

// withExecutors is s with its executors listed: none.
func withExecutors(s *Snapshot) *Snapshot {
	s.Executors = reading([]corev1.Pod(nil), FromCache, s.Placeholder.At)
	return s
}

// stepKinds names the type of each step, in order: what the tables of plan's order compare.
func stepKinds(steps []Step) []string {
	var kinds []string
	for _, st := range steps {
		kinds = append(kinds, strings.TrimPrefix(fmt.Sprintf("%T", st), "controller."))
	}
	return kinds
}
