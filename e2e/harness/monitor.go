package harness

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
// apiserver sees it. (A placeholder is never bound, so it never counts.)
type Monitor struct {
	mu         sync.Mutex
	bound      map[string]map[types.UID]string // ns/app -> uid -> pod name
	violations []Violation
	stop       context.CancelFunc
}

// StartMonitor starts watching; Stop ends it.
func StartMonitor(ctx context.Context, c kubernetes.Interface) (*Monitor, error) {
	ctx, cancel := context.WithCancel(ctx)
	m := &Monitor{bound: map[string]map[types.UID]string{}, stop: cancel}
	f := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = contract.LabelSparkRole + "=" + contract.RoleDriver
	}))
	inf := f.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { m.observe(o, false) },
		UpdateFunc: func(_, o any) { m.observe(o, false) },
		DeleteFunc: func(o any) {
			if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			m.observe(o, true)
		},
	})
	if err != nil {
		cancel()
		return nil, err
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		return nil, fmt.Errorf("the invariant monitor's informer did not sync")
	}
	return m, nil
}

func (m *Monitor) observe(o any, deleted bool) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	key := p.Namespace + "/" + p.Labels[contract.LabelSparkAppSelector]
	m.mu.Lock()
	defer m.mu.Unlock()
	pods := m.bound[key]
	if pods == nil {
		pods = map[types.UID]string{}
		m.bound[key] = pods
	}
	finished := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	if deleted || p.Spec.NodeName == "" || finished {
		delete(pods, p.UID)
		return
	}
	pods[p.UID] = p.Name
	if len(pods) > 1 {
		var names []string
		for uid, n := range pods {
			names = append(names, n+"("+string(uid)[:8]+")")
		}
		sort.Strings(names)
		m.violations = append(m.violations, Violation{Namespace: p.Namespace, App: p.Labels[contract.LabelSparkAppSelector], Pods: names, At: time.Now()})
	}
}

// Violations returns those recorded in namespace ns ("" for all).
func (m *Monitor) Violations(ns string) []Violation {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Violation
	for _, v := range m.violations {
		if ns == "" || v.Namespace == ns {
			out = append(out, v)
		}
	}
	return out
}

// Stop ends the watch.
func (m *Monitor) Stop() { m.stop() }
