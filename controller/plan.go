package controller

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
	"github.com/driverset/driverset/seal"
)

// The plan phase: what a pass of the placeholder reconciler does about a running app, decided from
// its Snapshot, the reconciler's Config and the time alone. No client is in reach: every reading
// it needs is in the snapshot, or it asks for it (Need) and is called again once observe took it.

// Config is what plan takes from the reconciler besides the snapshot: the cluster's settings.
type Config struct {
	// Budget's Backoff and MaxBackoff; Max and Window come from each app's settings.
	Budget     Budget
	FenceAfter time.Duration
	Bounds     Bounds
	// Seal checks that P is a placeholder driverset's webhook made (unsealedBy).
	Seal seal.Sealer
}

func (r *Placeholder) config() Config {
	return Config{Budget: r.Budget, FenceAfter: r.FenceAfter, Bounds: r.Bounds, Seal: r.Seal}
}

// Plan is what plan decided for one pass.
type Plan struct {
	// Need lists the readings plan lacks; while it is set, the plan holds nothing else to apply.
	Need []Need
	// Settings are the app's effective settings (observe's zone reading depends on FenceAfter).
	Settings Effective
	// Steps are the writes, Events and metrics, in the order apply runs them.
	Steps []Step
	// Requeue is when to look again once the steps are applied (0: on the next event only).
	Requeue time.Duration
	// For provisioning (planProvision): Ends, the pass ends once Steps are applied; Again, it is
	// planned again once they are (S and H made); Log, what to log about it.
	Ends, Again bool
	Log         string
}

// settingsOf are the settings the driver of p runs with: its annotations (or what S remembers of
// them when edited to an invalid value), within the admin's bounds; and a warning naming what was
// ignored or bounded.
func settingsOf(p *corev1.Pod, sts *appsv1.StatefulSet, cfg Config) (Effective, string) {
	var remembered map[string]string
	if sts != nil {
		remembered = rememberedSettings(sts)
	}
	settings, invalid := effectiveSettings(p.Annotations, remembered, cfg.FenceAfter)
	var bounded string
	settings.FenceAfter, _, bounded = fencingOf(cfg.Bounds, p, settings.FenceAfter)
	return settings, joinWarnings(invalid, bounded)
}

// plan is the pass over an app whose StatefulSet exists and runs (provision came first): the
// lifecycle decision on the driver's outcome (planLifecycle, planRestart), the driver's node loss
// and recovery (planLoss), the stale-executor gate, and the status P shows.
func plan(s *Snapshot, cfg Config, now time.Time) Plan {
	p, driver := s.Placeholder.Value, s.Driver.Value
	container := driverContainer(p)
	settings, invalid := settingsOf(p, s.StatefulSet.Value, cfg)
	life := planLifecycle(p, driver, container, settings, cfg.Budget, now)
	pl := Plan{Settings: settings}
	view := View{Driver: driver, Container: container, Decision: life.Decision, Outcome: life.Outcome,
		Restarts: life.Budget.Used, TotalRestarts: totalRestartsOf(p), Invalid: invalid}

	if life.Decision.Action == Restart {
		restart := planRestart(p, driver, s.Node.Value, life)
		pl.Steps = restart.Steps
		view.Restarts, view.TotalRestarts = restart.Used, restart.Total
	}
	if life.Decision.Action == Observe && (driver == nil || driver.UID != life.Budget.Restarted) {
		// A pod driverset deleted to restart it is no loss.
		loss := planLoss(s, settings.FenceAfter, now)
		if len(loss.Need) > 0 {
			return Plan{Need: loss.Need, Settings: settings}
		}
		pl.Steps = append(pl.Steps, loss.Steps...)
		view.Note, view.Recovered, pl.Requeue = loss.Note, loss.Recovered, loss.Requeue
		if driver != nil && convert.HasGate(&driver.Spec, contract.GateStaleExecutors) {
			gate := planStaleExecutors(s)
			if len(gate.Need) > 0 {
				return Plan{Need: gate.Need, Settings: settings}
			}
			pl.Steps = append(pl.Steps, gate.Steps...)
			view.Note = gate.Note
			// An executor's deletion brings a look at once; this is for one that is not deleted.
			pl.Requeue = waitRequeue(now.Sub(driver.CreationTimestamp.Time))
		}
	}
	if driver == nil && life.Decision.Action == Observe {
		// S-0 is missing: tell why when the StatefulSet's Events say, and look again.
		view.Blocked = s.MissingDriver.Value
		pl.Requeue = missingDriverGrace
	}
	pl.Steps = append(pl.Steps, writeStatusStep{View: view})
	if life.Decision.Action == Succeed || life.Decision.Action == Fail {
		// Only once the final status is written: scaling to 0 deletes S-0, and a pod being
		// deleted has no outcome, so a retry after a failed status write would lose the exit.
		pl.Steps = append(pl.Steps, scaleToZeroStep{})
	}
	if life.Decision.Action == Wait {
		pl.Requeue = life.Decision.After
	}
	return pl
}
