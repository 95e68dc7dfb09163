package harness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/driverset/driverset/contract"
)

// Violation is a moment when two pods of one app with spark-role=driver were bound to nodes.
type Violation struct {
	Namespace, App string
	Pods           []string
	At             time.Time
}

func (v Violation) String() string {
	return fmt.Sprintf("%s: app %s had driver pods %v bound to nodes at once (%s)", v.Namespace, v.App, v.Pods, v.At.Format(time.RFC3339Nano))
}

// Monitor watches every pod with spark-role=driver and records each moment at which two of one
// app's driver pods exist bound to nodes and not finished: the at-most-one invariant, as the
// apiserver sees it. (A placeholder is never bound, so it never counts.) Check tells whether the
// watch is alive and has seen what the apiserver holds, so that no violation was missed.
type Monitor struct {
	client kubernetes.Interface
	inf    cache.SharedIndexInformer
	ctx    context.Context
	stop   context.CancelFunc

	// alive is the cluster's liveness check (nil: none): with an apiserver down for good the
	// watch can neither sync nor catch up, so StartMonitor and Check fail at once, naming it.
	alive Liveness

	mu       sync.Mutex
	ledger   ledger
	watchErr error // the last error of the informer's list or watch, if any
}

// StartMonitor starts watching, once the watch has synced; Stop ends it. ctx is how long it may
// watch; alive is the cluster's liveness check (the test bed's CheckAlive; nil: none).
func StartMonitor(ctx context.Context, c kubernetes.Interface, alive Liveness) (*Monitor, error) {
	ctx, cancel := context.WithCancel(ctx)
	m := &Monitor{client: c, alive: alive, ctx: ctx, stop: cancel, ledger: newLedger()}
	f := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = driverSelector
	}))
	m.inf = f.Core().V1().Pods().Informer()
	if err := m.inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.watchErr = err
	}); err != nil {
		cancel()
		return nil, err
	}
	_, err := m.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { m.observe(nil, o, false) },
		UpdateFunc: func(old, o any) { m.observe(old, o, false) },
		DeleteFunc: func(o any) {
			if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			m.observe(nil, o, true)
		},
	})
	if err != nil {
		cancel()
		return nil, err
	}
	f.Start(ctx.Done())
	// Polled, not cache.WaitForCacheSync: that waits as long as ctx, the monitor's lifetime
	// (often all of the run), and knows nothing of the cluster's liveness.
	if err := alive.poll(ctx, 50*time.Millisecond, syncWithin, func(context.Context) (bool, error) {
		return m.inf.HasSynced(), nil
	}); err != nil {
		cancel()
		return nil, fmt.Errorf("the invariant monitor's informer did not sync: %w", err)
	}
	return m, nil
}

// syncWithin is how long StartMonitor waits for the first list of driver pods: a moment on a
// live apiserver.
const syncWithin = time.Minute

var driverSelector = contract.LabelSparkRole + "=" + contract.RoleDriver //nolint:gochecknoglobals // a constant built from constants

// observe records one informer event: o added or updated (from old, nil for an add), or o
// deleted.
func (m *Monitor) observe(old, o any, deleted bool) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	was, _ := old.(*corev1.Pod)
	m.mu.Lock()
	defer m.mu.Unlock()
	if deleted {
		m.ledger.observe(p, true, time.Now())
		return
	}
	m.ledger.update(was, p, time.Now())
}

// Violations returns those recorded in namespace ns ("" for all).
func (m *Monitor) Violations(ns string) []Violation {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Violation
	for _, v := range m.ledger.violations {
		if ns == "" || v.Namespace == ns {
			out = append(out, v)
		}
	}
	return out
}

// Events is the number of driver pod events the monitor has observed in ns ("" for all).
func (m *Monitor) Events(ns string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ns == "" {
		n := 0
		for _, c := range m.ledger.events {
			n += c
		}
		return n
	}
	return m.ledger.events[ns]
}

// Incarnations returns the UID of every driver pod object named name in ns the monitor has seen,
// in the order it first saw them: a StatefulSet's S-0 has one name and a UID per incarnation,
// and a short-lived one (created, then deleted by a scale to 0) is among them.
func (m *Monitor) Incarnations(ns, name string) []types.UID {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.ledger.uids[ns+"/"+name])
}

// checkWithin is how long Check waits for the watch to catch up with a List.
const checkWithin = 10 * time.Second

// Check reports an error unless the monitor's watch is alive and has seen every driver pod the
// apiserver now holds in ns ("" for all), each at its current resourceVersion. A monitor whose
// watch died sees nothing, and so records no violation: without this check a scenario would
// pass on it.
func (m *Monitor) Check(ctx context.Context, ns string) error {
	return m.check(ctx, ns, checkWithin)
}

func (m *Monitor) check(ctx context.Context, ns string, within time.Duration) error {
	var unseen []string
	err := m.alive.poll(ctx, 50*time.Millisecond, within, func(ctx context.Context) (bool, error) {
		if m.ctx.Err() != nil || m.inf.IsStopped() {
			return false, errors.New("the invariant monitor's watch has stopped")
		}
		list, err := m.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: driverSelector})
		if err != nil {
			unseen = []string{"(List: " + err.Error() + ")"}
			return false, nil
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		unseen = m.ledger.unseen(list.Items)
		return len(unseen) == 0, nil
	})
	if err == nil {
		return nil
	}
	if m.ctx.Err() != nil || m.inf.IsStopped() {
		return errors.New("the invariant monitor's watch has stopped: violations after that were not seen")
	}
	if !wait.Interrupted(err) {
		return err // not a timeout: a component of the cluster is down for good (m.alive)
	}
	m.mu.Lock()
	watchErr := m.watchErr
	m.mu.Unlock()
	return fmt.Errorf("the invariant monitor's watch is not alive: after %s it has not seen driver pods %v the apiserver holds (last watch error: %v)",
		within, unseen, watchErr)
}

// Stop ends the watch.
func (m *Monitor) Stop() { m.stop() }

// ledger is the monitor's pure core: it is told each driver pod event and records violations.
type ledger struct {
	bound      map[string]map[types.UID]string // group (see group) -> uid -> pod name
	seen       map[types.UID]string            // uid -> last resourceVersion observed ("" once deleted)
	events     map[string]int                  // namespace -> events observed
	uids       map[string][]types.UID          // namespace/name -> each pod object of that name, in order seen
	violations []Violation
}

func newLedger() ledger {
	return ledger{bound: map[string]map[types.UID]string{}, seen: map[types.UID]string{}, events: map[string]int{}, uids: map[string][]types.UID{}}
}

// group is what at most one bound driver pod may exist of: the app (spark-app-selector), or, for
// a driver pod without one, the pod itself by name (every incarnation of a StatefulSet's S-0 has
// one name). Pods without an app id are not one app.
func group(p *corev1.Pod) (key, app string) {
	if id := p.Labels[contract.LabelSparkAppSelector]; id != "" {
		return p.Namespace + "/app/" + id, id
	}
	return p.Namespace + "/pod/" + p.Name, "(no " + contract.LabelSparkAppSelector + ", pod " + p.Name + ")"
}

// occupies reports whether p counts as a driver that may run: bound to a node and not finished.
// A Terminating pod still counts: on a dead node it is exactly the driver that may still run
// there, and the pod that must keep its successor away.
func occupies(p *corev1.Pod) bool {
	finished := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	return p.Spec.NodeName != "" && !finished
}

// update is an informer's update from old to p. Its store keys pods by name, so when a relist
// (after the watch broke: an apiserver or etcd restart) finds the name held by a new object,
// the old one's deletion comes as this update and never as an event of its own. A name is held
// by one object at a time, so the old one was gone from the apiserver before p was made. old is
// nil for an add.
func (l *ledger) update(old, p *corev1.Pod, at time.Time) {
	if old != nil && old.UID != p.UID {
		l.observe(old, true, at)
	}
	l.observe(p, false, at)
}

func (l *ledger) observe(p *corev1.Pod, deleted bool, at time.Time) {
	l.events[p.Namespace]++
	if _, ok := l.seen[p.UID]; !ok {
		l.uids[p.Namespace+"/"+p.Name] = append(l.uids[p.Namespace+"/"+p.Name], p.UID)
	}
	if deleted {
		l.seen[p.UID] = ""
	} else {
		l.seen[p.UID] = p.ResourceVersion
	}
	key, app := group(p)
	pods := l.bound[key]
	if pods == nil {
		pods = map[types.UID]string{}
		l.bound[key] = pods
	}
	if deleted || !occupies(p) {
		delete(pods, p.UID)
		if len(pods) == 0 {
			delete(l.bound, key)
		}
		return
	}
	pods[p.UID] = p.Name
	if len(pods) > 1 {
		var names []string
		for uid, n := range pods {
			names = append(names, n+"("+shortUID(uid)+")")
		}
		sort.Strings(names)
		l.violations = append(l.violations, Violation{Namespace: p.Namespace, App: app, Pods: names, At: at})
	}
}

// unseen names the pods of list that the ledger has not observed at their resourceVersion.
func (l *ledger) unseen(list []corev1.Pod) []string {
	var out []string
	for i := range list {
		p := &list[i]
		if rv, ok := l.seen[p.UID]; !ok || rv != p.ResourceVersion {
			out = append(out, p.Namespace+"/"+p.Name+"@"+p.ResourceVersion)
		}
	}
	return out
}

func shortUID(uid types.UID) string {
	s := string(uid)
	if i := strings.IndexByte(s, '-'); i > 0 && i <= 8 {
		return s[:i]
	}
	return s[:min(8, len(s))]
}
