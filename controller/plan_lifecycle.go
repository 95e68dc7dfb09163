package controller

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// lifecycle is the lifecycle part of a plan: the driver's outcome and what it means (decide).
type lifecycle struct {
	// Budget as decide judged with it: forget has let a healthy run's restarts go.
	Budget   Budget
	Outcome  Outcome
	Decision Decision
	// Forgotten is how many counted restarts forget let go, for the Restarting Event.
	Forgotten int
}

// planLifecycle reads the outcome of driver (S-0, nil while missing) and decides on it with the
// restarts P has counted and its settings.
func planLifecycle(p, driver *corev1.Pod, container string, settings Effective, base Budget, now time.Time) lifecycle {
	budget := base
	budget.Max = settings.MaxRestarts
	budget.Window = settings.RestartWindow
	budget.Used, budget.Restarted = restartsOf(p)
	outcome := outcomeOf(driver, container)
	if driver != nil && driver.UID == budget.Restarted {
		// driverset deleted this incarnation to restart it: while it terminates (its idle wrap still
		// "running") it is that restart, not a driver that runs.
		outcome = recordedExit(driver, container)
	}
	// A failure after a healthy run starts a new run of failures: restart counts from 0 (decide
	// judges it so too).
	counted := budget.Used
	budget = forget(outcome, budget)
	return lifecycle{Budget: budget, Outcome: outcome, Decision: decide(outcome, budget, now), Forgotten: counted - budget.Used}
}

// restartPlan is the restart of a failed incarnation: its steps, and the restarts P shows after
// them.
type restartPlan struct {
	Steps       []Step
	Used, Total int
}

// planRestart counts the failed incarnation (once) and deletes it, so that the StatefulSet makes a
// new one: a new UID, so the garbage collector removes the old incarnation's executors. One left
// Terminating on a node that died is force-deleted, once node (its Node as read, nil: gone) lets
// it go.
func planRestart(p, driver *corev1.Pod, node *corev1.Node, l lifecycle) restartPlan {
	b, o := l.Budget, l.Outcome
	total := totalRestartsOf(p)
	rp := restartPlan{Used: b.Used, Total: total}
	var record *recordRestartStep
	switch {
	case o.SelfFenced && o.PodUID != b.Restarted:
		// wrap stopped the driver for want of a heartbeat (an apiserver out of reach for T): a
		// node-loss recovery, not the driver's failure; the incarnation is noted, not counted.
		record = &recordRestartStep{Used: b.Used, Total: total, Incarnation: o.PodUID}
		rp.Steps = append(rp.Steps, *record, eventStep{Related: driver, Type: corev1.EventTypeWarning, Reason: "SelfFenced",
			Note: fmt.Sprintf("the driver in pod %s was stopped by driverset wrap: its heartbeat could not be renewed; starting a new incarnation (not counted as a restart)", podRef(driver))})
	case o.PodUID != b.Restarted:
		rp.Used++
		record = &recordRestartStep{Used: rp.Used, Total: total + 1, Incarnation: o.PodUID}
		var note string
		if l.Forgotten > 0 {
			note = fmt.Sprintf("; after a run of %s, at least %s %s, the %d restart(s) before forgotten",
				o.FinishedAt.Sub(o.StartedAt).Round(time.Second), contract.AnnotationRestartWindow,
				convert.ShortDuration(b.Window), l.Forgotten)
		}
		rp.Steps = append(rp.Steps, *record, countRestartStep{}, eventStep{Related: driver, Type: corev1.EventTypeWarning, Reason: "Restarting",
			Note: fmt.Sprintf("the driver exited with code %d in pod %s; starting a new incarnation (restart %d of %d%s)",
				o.Code, podRef(driver), rp.Used, b.Max, note)})
	}
	if record != nil {
		rp.Total = totalRestartsOf(withRestart(p, *record))
	}
	del := deleteDriverStep{UID: o.PodUID}
	if driver.DeletionTimestamp != nil {
		// Deleted already; only a kubelet that is gone keeps it Terminating. The recorded exit
		// proves the driver process ended, so force-deleting this incarnation cannot make two;
		// but not before the scheduler keeps the next one off that node (deadAndAvoided).
		if !deadNodeReleases(driver, node, true) {
			return rp
		}
		del.Force = true
	}
	rp.Steps = append(rp.Steps, del)
	return rp
}

// withRestart is a copy of p with the restart st recorded in its annotations: what
// recordRestartStep writes.
func withRestart(p *corev1.Pod, st recordRestartStep) *corev1.Pod {
	c := p.DeepCopy()
	setRestart(c, st)
	return c
}

// setRestart records st in p's annotations.
func setRestart(p *corev1.Pod, st recordRestartStep) {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[contract.AnnotationRestarts] = strconv.Itoa(st.Used)
	if st.Total > 0 {
		p.Annotations[contract.AnnotationRestartsTotal] = strconv.Itoa(st.Total)
	}
	p.Annotations[contract.AnnotationRestartedIncarnation] = string(st.Incarnation)
}
