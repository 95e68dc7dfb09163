package controller

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"regexp"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// The model checker (issue 34, item 3). It explores breadth-first, up to a depth, every
// interleaving of the events around one app: its kubelets (model_kubelet_test.go), its nodes,
// the StatefulSet controller, the garbage collector, PodGC, users and driverset's own restarts
// (model_sts_test.go). After each event the REAL Placeholder and Outcomes reconcilers run once on
// the fake apiserver of the harness (its UID-precondition and graceful-delete interceptors and
// its cacheView), unless driverset is down. In every state reached it checks driverset's four
// promises (mviolation). States are pruned by a hash of what they hold (mworld.hash), so the
// search is over distinct states; the shortest event sequence to a violation is printed.
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
// time; the deep run (DRIVERSET_MODEL_DEPTH) explores every kind in every scenario.
const (
	kindContainer   = "container"    // the kubelet starts the driver, restarts wrap to idle, stops and removes a pod
	kindExit        = "exit"         // the driver exits 0 or 1
	kindFailedStart = "failed start" // wrap's 125
	kindStartError  = "start error"  // the runtime's StartError
	kindUnknown     = "unknown"      // ContainerStatusUnknown
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
}

func (c modelConfig) has(kind string) bool {
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
	{name: "the app deleted", depth: 5,
		kinds: append([]string{kindApp, kindNode, kindDelete, kindForce, kindDriverset}, always...)},
	{name: "everything", depth: 3, shallower: 3},
}

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

// mworld is a state brought back to life: a fake apiserver holding its objects, the harness
// around it, and a copy of its mstate that events change.
type mworld struct {
	t      *testing.T
	ctx    context.Context
	h      *cluster
	m      *mstate
	stale  []client.Object // what a cache lagging one write holds: the state before the last event
	cfg    modelConfig
	errs   []string // reconcile errors other than lost races, for the log
	writes int      // writes through modelTimes so far
}

// restore builds a world from n (its objects deep-copied into a new fake apiserver).
func restore(t *testing.T, cfg modelConfig, names contract.Names, p types.NamespacedName, n *mnode) *mworld {
	w := &mworld{t: t, ctx: log.IntoContext(context.Background(), logr.Discard()), m: n.m.clone(), cfg: cfg}
	if n.parent != nil {
		w.stale = n.parent.objs
	}
	w.h = &cluster{t: t, ctx: w.ctx, rec: &events.FakeRecorder{}, p: p, names: names}
	w.h.c = w.newClient(n.objs)
	w.h.now = w.m.now()
	return w
}

// newClient is a fake apiserver holding copies of objs, with the harness's UID preconditions and
// graceful deletes, the model's UIDs, and deletion times in the model's time.
func (w *mworld) newClient(objs []client.Object) client.WithWatch {
	return modelTimes{w.rawClient(objs, interceptor.Funcs{Create: w.create, Delete: w.delete}), w, map[string]memoized{}}
}

// rawClient is a fake apiserver holding copies of objs. It keeps no managed fields (driverset
// never applies): the field-managed tracker builds a REST mapper on every call, most of the
// search's time.
func (w *mworld) rawClient(objs []client.Object, funcs interceptor.Funcs) client.WithWatch {
	return withEventFields(fake.NewClientBuilder()).
		WithObjectTracker(clienttesting.NewObjectTracker(scheme.Scheme, scheme.Codecs.UniversalDecoder())).
		WithObjects(copies(objs)...).
		WithStatusSubresource(&corev1.Pod{}).
		WithInterceptorFuncs(funcs).
		Build()
}

// delete is the harness's delete, noting when a pod's deletion was asked for.
func (w *mworld) delete(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
	var before corev1.Pod
	_, isPod := obj.(*corev1.Pod)
	fresh := isPod && c.Get(ctx, client.ObjectKeyFromObject(obj), &before) == nil && before.DeletionTimestamp == nil
	if err := w.h.delete(ctx, c, obj, opts...); err != nil {
		return err
	}
	if fresh {
		w.m.Deleted[before.UID] = w.m.now()
	}
	return nil
}

// modelTimes shows a pod's deletionTimestamp in the model's time, and writes it back as stored.
// It also keeps what it read until the next write through it (every write of the model goes
// through it): the fake apiserver's reads (a JSON round trip each) were most of the search's time.
type modelTimes struct {
	client.WithWatch
	w    *mworld
	memo map[string]memoized // nil: none (a lagging cache's reads)
}

// memoized is one Get's answer.
type memoized struct {
	obj client.Object
	err error
}

func (c modelTimes) forget() { clear(c.memo) }

func (c modelTimes) fix(obj runtime.Object) {
	if pod, ok := obj.(*corev1.Pod); ok && pod.DeletionTimestamp != nil {
		if at, ok := c.w.m.Deleted[pod.UID]; ok {
			pod.DeletionTimestamp = new(metaTime(at))
		}
	}
}

func (c modelTimes) unfix(ctx context.Context, obj client.Object) {
	var stored corev1.Pod
	if pod, ok := obj.(*corev1.Pod); ok && pod.DeletionTimestamp != nil && c.WithWatch.Get(ctx, client.ObjectKeyFromObject(pod), &stored) == nil {
		pod.DeletionTimestamp = stored.DeletionTimestamp
	}
}

func (c modelTimes) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	k := fmt.Sprintf("%T/%s", obj, key)
	if m, ok := c.memo[k]; ok {
		if m.err == nil {
			copyInto(obj, m.obj.DeepCopyObject().(client.Object))
		}
		return m.err
	}
	err := c.WithWatch.Get(ctx, key, obj, opts...)
	c.fix(obj)
	if c.memo != nil && (err == nil || apierrors.IsNotFound(err)) {
		c.memo[k] = memoized{obj.DeepCopyObject().(client.Object), err}
	}
	return err
}

func (c modelTimes) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.forget()
	c.w.writes++
	return c.WithWatch.Create(ctx, obj, opts...)
}

func (c modelTimes) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.forget()
	c.w.writes++
	return c.WithWatch.Delete(ctx, obj, opts...)
}

func (c modelTimes) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.forget()
	c.w.writes++
	defer c.fix(obj)
	return c.WithWatch.Patch(ctx, obj, patch, opts...)
}

func (c modelTimes) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	err := c.WithWatch.List(ctx, list, opts...)
	if pods, ok := list.(*corev1.PodList); ok {
		for i := range pods.Items {
			c.fix(&pods.Items[i])
		}
	}
	return err
}

func (c modelTimes) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.forget()
	c.w.writes++
	c.unfix(ctx, obj)
	defer c.fix(obj)
	return c.WithWatch.Update(ctx, obj, opts...)
}

func (c modelTimes) Status() client.SubResourceWriter { return modelStatus{c.WithWatch.Status(), c} }

type modelStatus struct {
	client.SubResourceWriter
	c modelTimes
}

func (s modelStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	s.c.forget()
	s.c.w.writes++
	defer s.c.fix(obj)
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

func (s modelStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	s.c.forget()
	s.c.w.writes++
	s.c.unfix(ctx, obj)
	defer s.c.fix(obj)
	return s.SubResourceWriter.Update(ctx, obj, opts...)
}

func copies(objs []client.Object) []client.Object {
	out := make([]client.Object, len(objs))
	for i, o := range objs {
		out[i] = o.DeepCopyObject().(client.Object)
	}
	return out
}

// create gives a new object a UID (deterministic: the same trace makes the same UIDs, so equal
// worlds hash equal) and a creationTimestamp, as the apiserver does.
func (w *mworld) create(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
	if obj.GetUID() == "" {
		w.m.NextUID++
		obj.SetUID(types.UID("uid-" + strconv.Itoa(w.m.NextUID)))
	}
	if ts := obj.GetCreationTimestamp(); ts.IsZero() {
		obj.SetCreationTimestamp(metaTime(w.m.now()))
	}
	return c.Create(ctx, obj, opts...)
}

// snapshot is every object of the app and its nodes, deep-copied: the placeholder, S, its
// Service, S-0 and the Nodes (the reconcilers make nothing else: their Events go to a recorder).
func (w *mworld) snapshot() []client.Object {
	ns := w.h.p.Namespace
	keys := []struct {
		key client.ObjectKey
		obj client.Object
	}{
		{w.h.p, &corev1.Pod{}},
		{types.NamespacedName{Namespace: ns, Name: w.h.names.DriverPodName()}, &corev1.Pod{}},
		{types.NamespacedName{Namespace: ns, Name: w.h.names.StatefulSet}, &appsv1.StatefulSet{}},
		{types.NamespacedName{Namespace: ns, Name: w.h.names.Service}, &corev1.Service{}},
	}
	for _, n := range modelNodes {
		keys = append(keys, struct {
			key client.ObjectKey
			obj client.Object
		}{types.NamespacedName{Name: n}, &corev1.Node{}})
	}
	var out []client.Object
	for _, k := range keys {
		switch err := w.h.c.Get(w.ctx, k.key, k.obj); {
		case err == nil:
			out = append(out, k.obj)
		case !apierrors.IsNotFound(err):
			w.t.Fatal(err)
		}
	}
	return out
}

// hash is the state's identity: every object as stored (without its resourceVersion and
// managedFields, which only count writes) and the rest of the world. Two traces that reach the
// same objects and processes are one state.
func hashOf(objs []client.Object, m *mstate) [32]byte {
	var parts []string
	for _, o := range objs {
		c := o.DeepCopyObject().(client.Object)
		c.SetResourceVersion("")
		c.SetManagedFields(nil)
		// What never changes (the specs but a pod's binding and gates) is left out: it only costs.
		switch c := c.(type) {
		case *corev1.Pod:
			c.Spec = corev1.PodSpec{NodeName: c.Spec.NodeName, SchedulingGates: c.Spec.SchedulingGates}
		case *appsv1.StatefulSet:
			c.Spec.Template = corev1.PodTemplateSpec{}
		case *corev1.Service:
			c.Spec = corev1.ServiceSpec{}
		}
		b, err := json.Marshal(c)
		if err != nil {
			panic(err)
		}
		parts = append(parts, fmt.Sprintf("%T/%s/%s", o, o.GetName(), b))
	}
	sort.Strings(parts)
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return sha256.Sum256([]byte(byOrder(strings.Join(parts, "\n") + "\n" + string(b))))
}

var digits = regexp.MustCompile(`[0-9]+`)

var timestamp = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)

// byOrder replaces every time in s by its tick and its rank among the times of s: events a
// second apart within a tick are told apart only by their order, as every decision of the
// controller between two ticks is (its shortest wait, a 10 s backoff, is more than the events
// of one tick at the model's depths; a tick is longer than its longest).
func byOrder(s string) string {
	seen := map[string]bool{}
	var all []string
	for _, ts := range timestamp.FindAllString(s, -1) {
		if !seen[ts] {
			seen[ts] = true
			all = append(all, ts)
		}
	}
	sort.Slice(all, func(i, j int) bool { return parseTime(all[i]).Before(parseTime(all[j])) })
	rank := map[string]string{}
	for i, ts := range all {
		if parseTime(ts).After(modelStart.AddDate(0, 1, 0)) {
			// The wall clock: the placeholder's condition times (status.go stamps metav1.Now).
			rank[ts] = "wall"
			continue
		}
		tick := int(math.Floor(float64(parseTime(ts).Sub(modelStart)) / float64(modelTick)))
		rank[ts] = fmt.Sprintf("t%d.%d", tick, i)
	}
	return timestamp.ReplaceAllStringFunc(s, func(ts string) string { return rank[ts] })
}

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

// splitReads reads from one client (a lagging cache) and writes to another (the apiserver).
type splitReads struct {
	client.Client
	reads client.Reader
}

func (s splitReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return s.reads.Get(ctx, key, obj, opts...)
}

func (s splitReads) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return s.reads.List(ctx, list, opts...)
}

// pass is one run of the Placeholder reconciler for P, then of the Outcomes reconciler for S-0, as
// the elected driverset runs them: reading through its caches (cacheView), or, with stale, through
// a cache that has not seen the last event's writes yet (a new leader, or a watch behind).
func (w *mworld) pass(stale []client.Object) {
	var c client.Client = w.h.c
	if stale != nil {
		c = splitReads{Client: w.h.c, reads: modelTimes{w.rawClient(stale, interceptor.Funcs{}), w, nil}}
	}
	now := func() time.Time { return w.m.now() }
	r := &Placeholder{
		Client:    cacheView{c},
		APIReader: w.h.c,
		Events:    &events.FakeRecorder{},
		Convert:   convert.Options{Image: "registry.example/driverset:test"},
		Budget:    Budget{Backoff: 10 * time.Second, MaxBackoff: 5 * time.Minute},
		Seal:      testSeal(),
		Now:       now,
	}
	if _, err := r.Reconcile(w.ctx, ctrl.Request{NamespacedName: w.h.p}); err != nil {
		w.errs = append(w.errs, "Placeholder: "+err.Error())
	}
	o := &Outcomes{Client: cacheView{c}, APIReader: w.h.c, Now: now}
	key := types.NamespacedName{Namespace: w.h.p.Namespace, Name: w.h.names.DriverPodName()}
	if _, err := o.Reconcile(w.ctx, ctrl.Request{NamespacedName: key}); err != nil {
		w.errs = append(w.errs, "Outcomes: "+err.Error())
	}
}

// mevent is one transition of the world. apply changes the world as that part of Kubernetes (or
// a user) would; driverset then reconciles once if it runs (pass), unless the event is
// driverset's own.
type mevent struct {
	name  string
	kind  string // which part of the world it is (kindContainer…), for a scenario's alphabet
	apply func(w *mworld)
	// own: the event is a pass of driverset's (or its stop): no extra pass after it.
	own bool
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
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	for _, cfg := range modelConfigs {
		depth := cfg.depth
		if deep > 0 {
			depth = max(cfg.depth, deep-cfg.shallower)
		}
		t.Run(cfg.name, func(t *testing.T) {
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
