package controller

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
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

// The model checker's world (model_test.go): a state of the search brought back to life on a
// fake apiserver, the clients the reconcilers read through, and the state's hash.

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
	return modelTimes{w.rawClient(objs, interceptor.Funcs{Create: w.create, Delete: w.delete, Update: w.update, Patch: w.patch}), w, map[string]memoized{}}
}

// update and patch are the harness's (cluster.checkRelease), the pod as stored read in the
// model's time.
func (w *mworld) update(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
	w.h.checkRelease(ctx, modelTimes{c, w, nil}, obj)
	return c.Update(ctx, obj, opts...)
}

func (w *mworld) patch(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	w.h.checkRelease(ctx, modelTimes{c, w, nil}, obj)
	return c.Patch(ctx, obj, patch, opts...)
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
	return w.snapshotClaims(out)
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

// readingFrom is the apiserver, read through stale when it is not nil.
func (w *mworld) readingFrom(stale []client.Object) client.Client {
	if stale == nil {
		return w.h.c
	}
	return splitReads{Client: w.h.c, reads: modelTimes{w.rawClient(stale, interceptor.Funcs{}), w, nil}}
}

// reconciler is the Placeholder reconciler as the elected driverset runs it, reading through c's
// cache (cacheView) and the apiserver live; sets is the executor-set cache (nil: none).
func (w *mworld) reconciler(c client.Client, sets client.Reader) *Placeholder {
	return &Placeholder{
		Client:       cacheView{c},
		APIReader:    w.h.c,
		ExecutorSets: sets,
		Events:       &events.FakeRecorder{},
		Convert:      convert.Options{Image: "registry.example/driverset:test"},
		Budget:       Budget{Backoff: 10 * time.Second, MaxBackoff: 5 * time.Minute},
		Seal:         testSeal(),
		Now:          func() time.Time { return w.m.now() },
	}
}

// pass is one run of the Placeholder reconciler for P, then of the Outcomes reconciler for S-0, as
// the elected driverset runs them: reading through its caches (cacheView), or, with stale, through
// a cache that has not seen the last event's writes yet (a new leader, or a watch behind).
func (w *mworld) pass(stale []client.Object) {
	c := w.readingFrom(stale)
	now := func() time.Time { return w.m.now() }
	var sets client.Reader // the executor-set cache, where claims are modelled
	if w.cfg.modelsLeftovers() {
		sets = c
	}
	r := w.reconciler(c, sets)
	// Each force-delete of a driver the pass makes is asked of ForceDeletion, as the webhook entry
	// deletes.driverset.dev asks it (cluster.delete): in every state the search reaches.
	// Each removal of driverset's finalizer either reconciler makes is asked of MayRelease, as
	// releases.driverset.dev asks it.
	w.h.r, w.h.reconciling = r, true
	defer func() { w.h.reconciling = false }()
	_, err := r.Reconcile(w.ctx, ctrl.Request{NamespacedName: w.h.p})
	if err != nil {
		w.errs = append(w.errs, "Placeholder: "+err.Error())
	}
	o := &Outcomes{Client: cacheView{c}, APIReader: w.h.c, Now: now}
	key := types.NamespacedName{Namespace: w.h.p.Namespace, Name: w.h.names.DriverPodName()}
	if _, err := o.Reconcile(w.ctx, ctrl.Request{NamespacedName: key}); err != nil {
		w.errs = append(w.errs, "Outcomes: "+err.Error())
	}
}
