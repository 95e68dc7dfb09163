package chaos

import (
	"fmt"
	"slices"
	"time"
)

// Ledger is what the run knows of the simulated world: which nodes are alive, which driver
// process runs where, and which nodes must not be lost now. It is the process-level half of the
// at-most-one invariant (the apiserver-level half is e2e/harness's Monitor): a driver process
// starts only in a pod driverset let run, and ends only by its exit, its node's death or its
// self-fence. Two processes of one app at once is a violation. Not safe for concurrent use.
type Ledger struct {
	alive map[string]bool
	// procs: app -> pod UID -> node, every process that runs.
	procs map[string]map[string]string
	// pins: node -> count of exits under way there; a pinned node is not lost, so that an exit
	// the run made is never mistaken for a node loss (and the restart count stays exact).
	pins       map[string]int
	violations []string
}

// NewLedger knows nodes alive.
func NewLedger(nodes ...string) *Ledger {
	l := &Ledger{alive: map[string]bool{}, procs: map[string]map[string]string{}, pins: map[string]int{}}
	for _, n := range nodes {
		l.alive[n] = true
	}
	return l
}

// AddNode records a node that runs.
func (l *Ledger) AddNode(n string) { l.alive[n] = true }

// Alive reports whether node n runs.
func (l *Ledger) Alive(n string) bool { return l.alive[n] }

// AliveCount is how many nodes run.
func (l *Ledger) AliveCount() int {
	n := 0
	for _, ok := range l.alive {
		if ok {
			n++
		}
	}
	return n
}

// Start records the driver process of app starting in pod on node. It refuses (false) on a dead
// node, where no process can start; it records a violation when another process of app runs.
func (l *Ledger) Start(app, pod, node string, at time.Time) bool {
	if !l.alive[node] {
		return false
	}
	ps := l.procs[app]
	if ps == nil {
		ps = map[string]string{}
		l.procs[app] = ps
	}
	for other, on := range ps {
		if other != pod {
			l.violations = append(l.violations, fmt.Sprintf("%s: app %s: a driver process started in pod %s on %s while the one in pod %s on %s still ran",
				at.Format(time.RFC3339Nano), app, short(pod), node, short(other), on))
		}
	}
	ps[pod] = node
	return true
}

// Running reports whether app's process in pod runs.
func (l *Ledger) Running(app, pod string) bool {
	_, ok := l.procs[app][pod]
	return ok
}

// End records that app's process in pod ended (it exited, or self-fenced).
func (l *Ledger) End(app, pod string) {
	delete(l.procs[app], pod)
	if len(l.procs[app]) == 0 {
		delete(l.procs, app)
	}
}

// EndApp records that every process of app ended: its pods were deleted on live nodes, where
// the kubelet stops their containers.
func (l *Ledger) EndApp(app string) { delete(l.procs, app) }

// Pin holds node alive while an exit there is under way; Unpin releases it.
func (l *Ledger) Pin(node string) { l.pins[node]++ }

// Unpin releases one Pin.
func (l *Ledger) Unpin(node string) {
	if l.pins[node]--; l.pins[node] <= 0 {
		delete(l.pins, node)
	}
}

// Candidates are the nodes a node loss may take now, sorted: alive, not pinned, and running a
// driver process (withDriver), or, when none runs one, any alive unpinned node.
func (l *Ledger) Candidates() (nodes []string, withDriver bool) {
	busy := map[string]bool{}
	for _, ps := range l.procs {
		for _, n := range ps {
			busy[n] = true
		}
	}
	var driven, any []string
	for n, ok := range l.alive {
		if !ok || l.pins[n] > 0 {
			continue
		}
		any = append(any, n)
		if busy[n] {
			driven = append(driven, n)
		}
	}
	slices.Sort(driven)
	slices.Sort(any)
	if len(driven) > 0 {
		return driven, true
	}
	return any, false
}

// Kill records node n's death: every process on it ends with it. It returns the apps that lost
// one, sorted.
func (l *Ledger) Kill(n string) []string {
	l.alive[n] = false
	var apps []string
	for app, ps := range l.procs {
		for pod, on := range ps {
			if on == n {
				delete(ps, pod)
				apps = append(apps, app)
			}
		}
		if len(ps) == 0 {
			delete(l.procs, app)
		}
	}
	slices.Sort(apps)
	return apps
}

// Remove forgets a node that is gone for good (deleted).
func (l *Ledger) Remove(n string) { delete(l.alive, n) }

// Violations are every moment two processes of one app ran.
func (l *Ledger) Violations() []string { return slices.Clone(l.violations) }

func short(uid string) string { return uid[:min(8, len(uid))] }
