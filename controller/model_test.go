package controller

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/driverset/driverset/contract"
)

// The model checker (issue 34, item 3). It explores breadth-first, up to a depth, every
// interleaving of the events around one app: its kubelets (model_kubelet_test.go), its nodes,
// the StatefulSet controller, the garbage collector, PodGC, users and driverset's own restarts
// (model_sts_test.go). After each event the REAL Placeholder and Outcomes reconcilers run on the
// fake apiserver of the harness (its UID-precondition and graceful-delete interceptors and its
// cacheView; model_world_test.go) until a pass writes nothing, unless driverset is down. In every
// state reached it checks driverset's four promises (violations). States are pruned by a hash of
// what they hold (hashOf), so the search is over distinct states; the shortest event sequence to
// each way a promise broke is printed. docs/testing.md, "The model checker", says what it assumes.
//
// The world is two things: the apiserver's objects, and what the apiserver does not hold
// (mstate): which machines are up, cut off or dead, and each incarnation's container and driver
// process as its node knows them. A pod removed from the apiserver keeps its process running
// while its node is cut off.

// modelTick is how much time one "time passes" event lets pass: more than every backoff
// (10 s doubled up to 5 min), kubeletCauseWait and outcomePoll, less than the restart window
// (1 h, so every failure in the model is counted).
const modelTick = 5 * time.Minute

// modelTicks bounds the time events of one trace.
const modelTicks = 3

// modelNodes are the cluster's nodes; S-0 is scheduled on the first that may take it.
var modelNodes = []string{"node-a", "node-b"}

// Kinds of events. A scenario explores some of them deeper than all of them could be in the same
// time; the deep run (DRIVERSET_MODEL_DEPTH, make model) explores each scenario deeper.
const (
	kindContainer   = "container"    // the kubelet starts the driver, restarts wrap to idle, stops and removes a pod
	kindExit        = "exit"         // the driver exits 0 or 1
	kindFailedStart = "failed start" // wrap's 125
	kindStartError  = "start error"  // the runtime's StartError
	kindUnknown     = "unknown"      // ContainerStatusUnknown
	kindKubelet     = "kubelet"      // the kubelet's own stop: graceful node shutdown, node-pressure eviction
	kindCluster     = "cluster"      // the StatefulSet controller, the scheduler, PodGC, the garbage collector
	kindNode        = "node"         // partitions, deaths, the node lifecycle controller, an admin's proof
	kindDelete      = "delete"       // kubectl delete pod S-0, a taint eviction
	kindForce       = "force"        // kubectl delete pod S-0 --force
	kindApp         = "app"          // the user deletes the placeholder
	kindDriverset   = "driverset"    // driverset stops, and starts again
	kindStale       = "stale"        // a pass on a cache one write behind
	kindTime        = "time"         // time passes
)

// modelConfig is one scenario: the app as a user submits it (the placeholder's annotations) and
// the kinds of events explored (nil: all).
type modelConfig struct {
	name        string
	annotations map[string]string
	kinds       []string
	depth       int // how deep `go test` explores it; DRIVERSET_MODEL_DEPTH=N explores every scenario N deep
	// shallower: under DRIVERSET_MODEL_DEPTH=N, explored N-shallower deep (never less than depth):
	// "everything" branches three times as much as a scenario.
	shallower int
	// fencedUnderneath: a machine cut off when time passes is fenced (turned off) first, as
	// fence-after requires of its cluster (docs/design.md, Fencing: "use it only where that holds,
	// or with real node fencing underneath"). Without it, fence-after's two drivers on a node that
	// is only cut off are the documented trade-off, not a defect.
	fencedUnderneath bool
	// stsName: S was made under this name by another build (a rollback across a naming change, a
	// legacy name), not the one this build computes; "" for this build's (contract.NamesFor).
	stsName string
}

func (c modelConfig) has(kind string) bool {
	if kind == kindClaims || kind == kindSets || kind == kindToken { // only where a scenario names them ("everything" explores without)
		return slices.Contains(c.kinds, kind)
	}
	return c.kinds == nil || slices.Contains(c.kinds, kind)
}

// always are the kinds every scenario has: the driver's own life and the controllers'.
var always = []string{kindContainer, kindExit, kindCluster}

var modelConfigs = []modelConfig{
	{name: "failed starts", depth: 5,
		kinds: append([]string{kindFailedStart, kindStartError, kindDelete, kindTime}, always...)},
	{name: "failed starts, max-restarts 0", annotations: map[string]string{contract.AnnotationMaxRestarts: "0"}, depth: 5,
		kinds: append([]string{kindFailedStart, kindStartError, kindUnknown, kindTime}, always...)},
	{name: "exits while driverset is down", depth: 6,
		kinds: append([]string{kindUnknown, kindDriverset, kindDelete}, always...)},
	{name: "caches one write behind", depth: 5,
		kinds: append([]string{kindStale, kindDriverset, kindDelete, kindTime}, always...)},
	{name: "node loss", depth: 6,
		kinds: append([]string{kindFailedStart, kindNode, kindDelete, kindForce}, always...)},
	{name: "failed starts, then node loss", depth: 7,
		kinds: append([]string{kindFailedStart, kindNode, kindTime}, always...)},
	{name: "fence-after 4m, over real fencing", annotations: map[string]string{contract.AnnotationFenceAfter: "4m"},
		depth: 6, fencedUnderneath: true,
		kinds: append([]string{kindFailedStart, kindNode, kindDelete, kindTime}, always...)},
	{name: "the app deleted", depth: 5,
		kinds: append([]string{kindApp, kindNode, kindDelete, kindForce, kindDriverset}, always...)},
	{name: "the kubelet's own stops", depth: 7,
		kinds: append([]string{kindKubelet, kindTime}, always...)},
	{name: "the kubelet's own stops, max-restarts 0", annotations: map[string]string{contract.AnnotationMaxRestarts: "0"}, depth: 7,
		kinds: append([]string{kindKubelet, kindDriverset}, always...)},
	// S under a name this build would not give it, and passes on caches that have not seen S
	// (a new leader right after the old one made it): S is found by P's UID, never made again
	// under this build's name (promise 1: one StatefulSet per placeholder).
	{name: "S under another build's name, caches behind", stsName: modelThirdName, depth: 6,
		kinds: append([]string{kindStale, kindDriverset, kindDelete}, always...)},
	// A DStream app's executor claims (its incarnations share one app id): the next driver starts
	// only once the lost one's are gone.
	{name: "executor claims of a shared app id", depth: 7,
		kinds: append([]string{kindClaims, kindNode}, always...)},
	{name: "executor StatefulSets of a shared app id", depth: 7,
		kinds: append([]string{kindSets, kindNode}, always...)},
	// A stolen driverset token does at any moment whatever deletes.driverset.dev and
	// releases.driverset.dev admit (model_token_test.go): on lost nodes, and as the app is deleted.
	{name: "a stolen token, node loss", depth: 8,
		kinds: append([]string{kindToken, kindNode, kindDelete, kindForce}, always...)},
	{name: "a stolen token, the app deleted", depth: 7,
		kinds: append([]string{kindToken, kindApp, kindNode, kindDelete, kindForce}, always...)},
	{name: "everything", depth: 3, shallower: 3},
}

// modelThirdName is the name another build gave S in the scenario that has one.
const modelThirdName = "spark-pi-renamed-by-another-build"

// Machine states: what a node's machine does, whatever its Node object says.
const (
	machineUp   = "up"   // its kubelet runs and reaches the apiserver
	machineCut  = "cut"  // partitioned: its processes run on, its kubelet reports nothing
	machineDead = "dead" // off: every process on it is gone
)

// mstate is the part of the world that the apiserver does not hold. It is serialized whole into
// the state's hash.
type mstate struct {
	Ticks int // time events so far: now is modelStart + Ticks·modelTick + Seq seconds
	// Seq counts the events since the last tick: each event happens a second after the one
	// before, so that an exit and a deletion are never at one instant. Not in the hash (see
	// hashOf: times are compared by their order).
	Seq int `json:"-"`
	// Deleted is when each pod was asked to be deleted, in the model's time (the fake apiserver
	// stamps the wall clock).
	Deleted  map[types.UID]time.Time
	Down     bool              // driverset is not running: no reconcile after an event
	Machines map[string]string // node → machine state
	Incs     []*minc           // every incarnation (S-0 pod) ever made, in order
	NextUID  int               // the fake apiserver's next UID (deterministic, for the hash)
	// Ended: the app's end was recorded (the placeholder terminal, or an exit 0 reported): no
	// driver may start after it.
	Ended bool
	// Broken is a violation an event found (a driver started after the end, an exit lost).
	Broken string
	// Known is an open defect (model_defects_test.go) an event ran into: logged, not failed, and
	// not explored further.
	Known string
}

// modelStart is the world's time at tick 0.
var modelStart = t0.Add(time.Minute)

func (m *mstate) now() time.Time {
	return modelStart.Add(time.Duration(m.Ticks)*modelTick + time.Duration(m.Seq)*time.Second)
}

func (m *mstate) clone() *mstate {
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	var c mstate
	if err := json.Unmarshal(b, &c); err != nil {
		panic(err)
	}
	c.Seq = m.Seq
	if c.Deleted == nil {
		c.Deleted = map[types.UID]time.Time{}
	}
	return &c
}

// mnode is one state of the search: the apiserver's objects, the rest of the world, and how it
// was reached.
type mnode struct {
	objs   []client.Object
	m      *mstate
	parent *mnode
	event  string
	depth  int
}

func (n *mnode) trace() []string {
	var out []string
	for ; n.parent != nil; n = n.parent {
		out = append(out, n.event)
	}
	slices.Reverse(out)
	return out
}

// mevent is one transition of the world. apply changes the world as that part of Kubernetes (or
// a user) would; driverset then reconciles if it runs (settle), unless the event is its own.
type mevent struct {
	name  string
	kind  string // which part of the world it is (kindContainer…), for a scenario's alphabet
	apply func(w *mworld)
	// own: the event is a pass of driverset's (or its stop): no extra pass after it.
	own bool
	// process: the event is the driver's or its container's own doing (a start, an exit, a lost
	// container), which settling the world does not wait for.
	process bool
}

// step applies e to w, lets the kubelets report, and reconciles.
func (w *mworld) step(e mevent) {
	w.m.Seq++
	w.h.now = w.m.now()
	e.apply(w)
	w.kubeletSync()
	if !e.own && !w.m.Down {
		w.settle()
	}
	w.observe()
}

// settle is driverset's passes after an event, as its requeues and watches bring them, until one
// writes nothing (at most modelPasses): the model lets no other event come between them, except
// driverset's stop (after which none comes) and a pass on a lagging cache.
func (w *mworld) settle() {
	for range modelPasses {
		before := w.writes
		w.pass(nil)
		w.kubeletSync()
		if w.writes == before {
			return
		}
	}
}

// modelPasses bounds driverset's passes after one event.
const modelPasses = 4

// observe records what the invariants need of the apiserver's state: the app's end.
func (w *mworld) observe() {
	if p := w.placeholder(); p != nil && isTerminal(p.Status.Phase) {
		w.m.Ended = true
	}
	for _, inc := range w.m.Incs {
		if inc.OwnExit != nil && *inc.OwnExit == 0 && inc.OwnExitSeen {
			w.m.Ended = true
		}
	}
}

// Promises, numbered as in the README and the brief.
const (
	promiseOneDriver  = "1 never two drivers"
	promiseExits      = "2 no recorded exit lost or misread"
	promiseNoRerun    = "3 a finished app never runs again"
	promiseNoLeftover = "4 nothing left after the app ends"
)

// mviolation is a broken promise and why.
type mviolation struct{ promise, why string }

// violations checks the promises in w (the fourth at quiescence, in settled).
func (w *mworld) violations() []mviolation {
	var out []mviolation
	var running []string
	for i, inc := range w.m.Incs {
		if inc.Proc == procRunning {
			running = append(running, fmt.Sprintf("#%d on %s (%s)", i+1, inc.Node, w.m.Machines[inc.Node]))
		}
	}
	if len(running) > 1 {
		out = append(out, mviolation{promiseOneDriver, "driver processes running at once: " + strings.Join(running, ", ")})
	}
	if sets := w.statefulSetsOfP(); len(sets) > 1 {
		out = append(out, mviolation{promiseOneDriver, "StatefulSets of one placeholder: " + strings.Join(sets, ", ")})
	}
	if w.m.Broken != "" {
		promise, why, _ := strings.Cut(w.m.Broken, ": ")
		out = append(out, mviolation{promise, why})
	}
	p := w.placeholder()
	if p == nil {
		return out
	}
	own := func(ok func(code int) bool) bool {
		for _, inc := range w.m.Incs {
			if inc.OwnExit != nil && ok(*inc.OwnExit) {
				return true
			}
		}
		return false
	}
	switch p.Status.Phase {
	case corev1.PodSucceeded:
		if !own(func(c int) bool { return c == 0 }) {
			out = append(out, mviolation{promiseExits, "the app ended Succeeded, but no driver exited 0"})
		}
	case corev1.PodFailed:
		if !own(func(c int) bool { return c != 0 }) {
			out = append(out, mviolation{promiseExits, "the app ended Failed, but no driver exited on its own (" + p.Status.Message + ")"})
		}
		if own(func(c int) bool { return c == 0 }) {
			out = append(out, mviolation{promiseExits, "the app ended Failed after a driver exited 0"})
		}
	}
	if _, counted := restartsOf(p); counted != "" {
		for i, inc := range w.m.Incs {
			switch {
			case inc.UID != counted:
			case inc.OwnExit == nil:
				out = append(out, mviolation{promiseExits, fmt.Sprintf("a restart was counted for incarnation #%d, whose driver never exited (%s)", i+1, inc.describe())})
			case *inc.OwnExit == 0:
				out = append(out, mviolation{promiseExits, fmt.Sprintf("incarnation #%d's exit 0 was counted as a failure", i+1)})
			}
		}
	}
	return out
}

// describe is what an incarnation's container shows, for a violation's message.
func (inc *minc) describe() string {
	s := "container " + ctrNames[inc.Ctr]
	if inc.Term != nil {
		s += ", state " + inc.Term.Kind
	}
	if inc.Last != nil {
		s += ", lastState " + inc.Last.Kind
	}
	return s
}

// modelResult is what one exploration found.
type modelResult struct {
	states, transitions, depth int
	found                      map[string][]string // a promise and why it broke → the shortest trace to it, its last line the why
	known                      map[string][]string // open defect → the shortest trace to it
	errs                       map[string]int
}

// explore runs the breadth-first search for cfg up to depth.
func explore(t *testing.T, cfg modelConfig, depth int) modelResult {
	root, names, p := modelRoot(t, cfg)
	res := modelResult{found: map[string][]string{}, known: map[string][]string{}, errs: map[string]int{}}
	seen := map[[32]byte]bool{hashOf(root.objs, root.m): true}
	queue := []*mnode{root}
	res.states = 1
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if n.depth >= depth {
			continue
		}
		evs := restore(t, cfg, names, p, n).events()
		for _, e := range evs {
			w := restore(t, cfg, names, p, n)
			w.step(e)
			res.transitions++
			for _, err := range w.errs {
				res.errs[err]++
			}
			child := &mnode{objs: w.snapshot(), m: w.m, parent: n, event: e.name, depth: n.depth + 1}
			key := hashOf(child.objs, child.m)
			if seen[key] {
				continue
			}
			seen[key] = true
			res.states++
			res.depth = max(res.depth, child.depth)
			vs := w.violations()
			if len(vs) == 0 {
				vs = w.settled()
			}
			for _, v := range vs {
				// One trace for each way a promise broke (its why, numbers and details in
				// parentheses aside): the shortest.
				why, _, _ := strings.Cut(v.why, " (")
				key := v.promise + ": " + digits.ReplaceAllString(why, "N")
				if _, ok := res.found[key]; !ok {
					res.found[key] = append(child.trace(), "VIOLATED "+v.promise+": "+v.why)
				}
			}
			if k := w.m.Known; k != "" {
				if _, ok := res.known[k]; !ok {
					res.known[k] = child.trace()
				}
				continue
			}
			// A state that broke a promise is explored on: what else breaks after it (two drivers
			// after a misread exit) is reported too, each promise with its shortest trace.
			queue = append(queue, child)
		}
	}
	return res
}

// modelRoot is the first state: P converted (S and its Service made), two Ready nodes, and S-0
// made by the StatefulSet controller on node-a, its container not started yet.
func modelRoot(t *testing.T, cfg modelConfig) (*mnode, contract.Names, types.NamespacedName) {
	h := newCluster(t, cfg.annotations, nil)
	h.ctx = log.IntoContext(h.ctx, logr.Discard())
	h.now = t0
	if cfg.stsName != "" {
		// Another build made S and H under its own name; this build's driverset takes over.
		h.names = contract.NamesOfStatefulSet(cfg.stsName)
		var p corev1.Pod
		if err := h.c.Get(h.ctx, h.p, &p); err != nil {
			t.Fatal(err)
		}
		if _, err := h.r.create(h.ctx, &p, h.names); err != nil {
			t.Fatal(err)
		}
	}
	h.reconcile()
	for _, n := range modelNodes {
		h.setNode(n, corev1.ConditionTrue, t0)
	}
	w := &mworld{t: t, ctx: h.ctx, h: h, m: &mstate{Machines: map[string]string{}, Deleted: map[types.UID]time.Time{}}, cfg: cfg}
	objs := w.snapshot()
	for _, n := range modelNodes {
		w.m.Machines[n] = machineUp
	}
	root := &mnode{objs: objs, m: w.m}
	w = restore(t, cfg, h.names, h.p, root)
	w.step(w.stsCreate())
	return &mnode{objs: w.snapshot(), m: w.m}, h.names, h.p
}

// modelDepthFor is the depth DRIVERSET_MODEL_DEPTH asks for, 0 when unset.
func modelDepthFor(t *testing.T) int {
	if s := os.Getenv("DRIVERSET_MODEL_DEPTH"); s != "" {
		d, err := strconv.Atoi(s)
		if err != nil || d < 1 {
			t.Fatalf("DRIVERSET_MODEL_DEPTH=%q: want a positive number", s)
		}
		return d
	}
	return 0
}

// TestModel explores every interleaving of the events around one app, for each configuration,
// and fails with the shortest trace to each promise broken.
func TestModel(t *testing.T) {
	if testing.Short() {
		t.Skip("the model checker explores for a minute; -short skips it")
	}
	deep := modelDepthFor(t)
	// The search allocates much and keeps little: collect less often.
	old := debug.SetGCPercent(400)
	t.Cleanup(func() { debug.SetGCPercent(old) }) // after the parallel scenarios
	for _, cfg := range modelConfigs {
		depth := cfg.depth
		if deep > 0 {
			depth = max(cfg.depth, deep-cfg.shallower)
		}
		t.Run(cfg.name, func(t *testing.T) {
			t.Parallel() // each scenario has its own worlds: two cores halve the time
			start := time.Now()
			res := explore(t, cfg, depth)
			t.Logf("%d distinct states, %d transitions, depth %d (bound %d), %s",
				res.states, res.transitions, res.depth, depth, time.Since(start).Round(time.Millisecond))
			for err, n := range res.errs {
				t.Logf("reconcile error (%d×): %s", n, err)
			}
			for defect, tr := range res.known {
				t.Logf("open defect (its test in model_defects_test.go is skipped), after %d events: %s:\n  %s", len(tr), defect, strings.Join(tr, "\n  "))
			}
			for _, key := range slices.Sorted(maps.Keys(res.found)) {
				tr := res.found[key]
				t.Errorf("promise %s broken after %d events:\n  %s", key, len(tr)-1, strings.Join(tr, "\n  "))
			}
		})
	}
}
