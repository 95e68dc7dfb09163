// Package chaos is the pure core of the chaos run (e2e/chaos_test.go): the schedule of apps and
// faults drawn from one seed, what each app must end with, and the ledger of simulated driver
// processes that holds the at-most-one invariant at the process level. Nothing here talks to a
// cluster, so the schedule is a tested pure function of the seed: a failing run is replayed by
// its seed alone.
package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Size is how big a run is: a short one for CI, a long one by hand.
type Size struct {
	Name string
	// Apps is how many Spark apps are submitted; Concurrent of them run at a time.
	Apps, Concurrent int
	// LeaderKills, BothDown, APIServer, Etcd, ControllerManager count the control-plane faults.
	LeaderKills, BothDown, APIServer, Etcd, ControllerManager int
	// NodeLosses are spread over every kind of NodeLoss, each kind at least once.
	NodeLosses int
	// Gap bounds the pause before each fault of a lane.
	MinGap, MaxGap time.Duration
}

// Sizes by name, for `make chaos SIZE=…`.
func Sizes() map[string]Size {
	return map[string]Size{
		"short": {Name: "short", Apps: 10, Concurrent: 4, LeaderKills: 2, BothDown: 1, APIServer: 1, Etcd: 1, ControllerManager: 1,
			NodeLosses: 4, MinGap: 2 * time.Second, MaxGap: 6 * time.Second},
		"long": {Name: "long", Apps: 200, Concurrent: 8, LeaderKills: 100, BothDown: 4, APIServer: 4, Etcd: 4, ControllerManager: 4,
			NodeLosses: 100, MinGap: 1 * time.Second, MaxGap: 8 * time.Second},
	}
}

// Fencing is how an app asks to be recovered from a silent node death.
type Fencing int

const (
	// NoFencing: only the Node's deletion, the out-of-service taint or the node's return help.
	NoFencing Fencing = iota
	// FenceAfter: driverset.dev/fence-after.
	FenceAfter
	// SelfFence: driverset.dev/self-fence, with the heartbeat `driverset wrap` would renew.
	SelfFence
)

func (f Fencing) String() string {
	return [...]string{"none", "fence-after", "self-fence"}[f]
}

// App is one app of the run: what its driver does in each incarnation it runs to an end.
type App struct {
	Name        string
	MaxRestarts int
	// Exits are the codes of the incarnations that end by themselves, in order; node losses come
	// between them and are not among them. The last is 0, or there are MaxRestarts+1 non-zero ones.
	Exits []int32
	// Executors each incarnation asks for; Life is how long each runs before its exit.
	Executors []int
	Life      []time.Duration
	Fencing   Fencing
}

// Want is what an app must end with: the phase spark-submit sees, and the restart count.
type Want struct {
	Succeeded bool
	Restarts  int
	LastExit  int32
}

// Want is derived from the exits alone: exit 0 succeeds after one restart per earlier failure;
// the failure that finds no restart left fails the app and is not a restart.
func (a App) Want() Want {
	last := a.Exits[len(a.Exits)-1]
	if last == 0 {
		return Want{Succeeded: true, Restarts: len(a.Exits) - 1, LastExit: 0}
	}
	return Want{Restarts: len(a.Exits) - 1, LastExit: last}
}

// Fault is one fault of a lane, after Gap.
type Fault struct {
	Kind Kind
	Gap  time.Duration
	// Down is how long what was stopped stays down (leader kill, both replicas down).
	Down time.Duration
	// Pick chooses among the candidates found when the fault runs (Pick mod their number): which
	// node is lost, among those running a driver, sorted by name.
	Pick uint32
}

// Kind of fault.
type Kind int

const (
	LeaderKill Kind = iota
	BothReplicasDown
	APIServerRestart
	EtcdRestart
	ControllerManagerRestart
	// NodeDeleted: the Node object is deleted (autoscaler, node repair).
	NodeDeleted
	// OutOfService: the node dies; once it is NotReady the admin taints it out-of-service.
	OutOfService
	// SilentDeath: the node dies and nobody acts; fence-after and self-fence apps recover by
	// themselves; the node comes back later.
	SilentDeath
)

var kindNames = [...]string{"leader-kill", "both-replicas-down", "apiserver-restart", "etcd-restart",
	"controller-manager-restart", "node-deleted", "out-of-service", "silent-death"}

func (k Kind) String() string { return kindNames[k] }

// IsNodeLoss reports whether k loses a node.
func (k Kind) IsNodeLoss() bool { return k >= NodeDeleted }

// NodeLossKinds are every way a node is lost that docs/limits.md covers; self-fencing is a SilentDeath
// of a node running self-fence apps.
func NodeLossKinds() []Kind { return []Kind{NodeDeleted, OutOfService, SilentDeath} }

// Schedule is everything a run does, drawn from Seed.
type Schedule struct {
	Seed uint64
	Size Size
	Apps []App
	// Control is the lane of driverset and control-plane faults, Nodes the lane of node losses;
	// each runs its faults one after another, both lanes at once.
	Control, Nodes []Fault
}

// maxExitCode: codes are drawn from 1..255, as a process's exit status can be.
const maxExitCode = 255

// Plan draws the schedule of a run from seed: a pure function (math/rand/v2's PCG seeded by it).
func Plan(seed uint64, size Size) Schedule {
	r := rand.New(rand.NewPCG(seed, 0x6368616f73)) // "chaos"
	s := Schedule{Seed: seed, Size: size}
	for i := range size.Apps {
		s.Apps = append(s.Apps, planApp(r, i))
	}
	var control []Kind
	for k, n := range map[Kind]int{LeaderKill: size.LeaderKills, BothReplicasDown: size.BothDown,
		APIServerRestart: size.APIServer, EtcdRestart: size.Etcd, ControllerManagerRestart: size.ControllerManager} {
		for range n {
			control = append(control, k)
		}
	}
	// Map order is random: sort before shuffling, so that the seed alone decides.
	slices.Sort(control)
	var nodes []Kind
	kinds := NodeLossKinds()
	for i := range size.NodeLosses {
		nodes = append(nodes, kinds[i%len(kinds)])
	}
	s.Control = faults(r, control, size)
	s.Nodes = faults(r, nodes, size)
	return s
}

func planApp(r *rand.Rand, i int) App {
	a := App{Name: fmt.Sprintf("chaos-%03d", i), MaxRestarts: r.IntN(4), Fencing: Fencing(r.IntN(3))}
	for {
		// One in three incarnations ends well; the rest fail with any code.
		code := int32(0)
		if r.IntN(3) != 0 {
			code = 1 + r.Int32N(maxExitCode)
		}
		a.Exits = append(a.Exits, code)
		a.Executors = append(a.Executors, r.IntN(4))
		a.Life = append(a.Life, time.Duration(1000+r.IntN(5000))*time.Millisecond)
		if code == 0 || len(a.Exits) == a.MaxRestarts+1 {
			return a
		}
	}
}

func faults(r *rand.Rand, kinds []Kind, size Size) []Fault {
	r.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	out := make([]Fault, 0, len(kinds))
	for _, k := range kinds {
		f := Fault{Kind: k, Gap: size.MinGap + time.Duration(r.Int64N(int64(size.MaxGap-size.MinGap)+1)), Pick: r.Uint32()}
		switch k {
		case LeaderKill:
			f.Down = time.Duration(r.IntN(3000)) * time.Millisecond
		case BothReplicasDown:
			f.Down = time.Duration(3000+r.IntN(7000)) * time.Millisecond
		}
		out = append(out, f)
	}
	return out
}

// Count is how many faults of kind k the schedule holds.
func (s Schedule) Count(k Kind) int {
	n := 0
	for _, f := range append(append([]Fault{}, s.Control...), s.Nodes...) {
		if f.Kind == k {
			n++
		}
	}
	return n
}
