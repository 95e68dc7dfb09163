//go:build testbed

package realnode

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// seen is when the pods' watch first saw something: seq orders what one watch delivered (the
// apiserver's order, whatever the clock), at is the test's clock, to the nanosecond.
type seen struct {
	seq int
	at  time.Time
}

func (s seen) zero() bool { return s.seq == 0 }

// podRecord is one pod's life as the watch saw it.
type podRecord struct {
	name, uid, node, role string
	driverLabel, appID    string
	ownerUID              string
	ownerKind, ownerName  string   // the pod's controller: a driver pod, or Spark's executor StatefulSet
	ip                    string   // the last pod IP seen: the address an executor registers from
	claims                []string // the claims its volumes name
	gatedAtAdmission      bool     // the first object seen carried the stale-executor gate
	added, deleting, gone seen
	scheduled, running    seen
	createdByAPI          time.Time // creationTimestamp, whole seconds
	// phase and runningNow are the last seen; phaseAtDelete and runningAtDelete what they were
	// when the deletion was first seen (an executor that had already ended goes at once).
	phase, phaseAtDelete        corev1.PodPhase
	runningNow, runningAtDelete bool
}

// podWatch records every pod of a namespace from the moment it starts: the first time each was
// seen, deleting, scheduled, with a container running, and gone.
type podWatch struct {
	mu     sync.Mutex
	seq    int
	byUID  map[string]*podRecord
	order  []*podRecord
	cancel context.CancelFunc
	done   chan struct{}
}

// watchPods starts watching ns's pods; stop ends it (also at the test's end).
func watchPods(t *testing.T, ns string) *podWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &podWatch{byUID: map[string]*podRecord{}, cancel: cancel, done: make(chan struct{})}
	list, err := kube().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	for i := range list.Items {
		w.record(watch.Added, &list.Items[i])
	}
	go func() {
		defer close(w.done)
		rv := list.ResourceVersion
		for ctx.Err() == nil {
			wi, err := kube().CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			for ev := range wi.ResultChan() {
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					continue
				}
				rv = p.ResourceVersion
				if ev.Type != watch.Bookmark {
					w.record(ev.Type, p)
				}
			}
			wi.Stop()
		}
	}()
	t.Cleanup(w.stop)
	return w
}

func (w *podWatch) stop() {
	w.cancel()
	<-w.done
}

// record notes what event type on pod p shows for the first time.
func (w *podWatch) record(typ watch.EventType, p *corev1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seq++
	now := seen{seq: w.seq, at: time.Now()}
	r := w.byUID[string(p.UID)]
	if r == nil {
		r = &podRecord{name: p.Name, uid: string(p.UID), role: p.Labels[contract.LabelSparkRole],
			driverLabel: p.Labels[contract.LabelDriver], appID: p.Labels["spark-app-selector"],
			gatedAtAdmission: convert.HasGate(&p.Spec, contract.GateStaleExecutors),
			added:            now, createdByAPI: p.CreationTimestamp.Time}
		if ref := metav1.GetControllerOf(p); ref != nil {
			r.ownerUID, r.ownerKind, r.ownerName = string(ref.UID), ref.Kind, ref.Name
		}
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				r.claims = append(r.claims, v.PersistentVolumeClaim.ClaimName)
			}
		}
		w.byUID[r.uid] = r
		w.order = append(w.order, r)
	}
	if p.Spec.NodeName != "" {
		r.node = p.Spec.NodeName
		if r.scheduled.zero() {
			r.scheduled = now
		}
	}
	if p.Status.PodIP != "" {
		r.ip = p.Status.PodIP
	}
	r.phase, r.runningNow = p.Status.Phase, false
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running != nil {
			r.runningNow = true
			if r.running.zero() {
				r.running = now
			}
		}
	}
	if (p.DeletionTimestamp != nil || typ == watch.Deleted) && r.deleting.zero() {
		r.deleting = now
		r.phaseAtDelete, r.runningAtDelete = r.phase, r.runningNow
	}
	if typ == watch.Deleted && r.gone.zero() {
		r.gone = now
	}
}

// named is every pod of that name the watch saw, in the order they were first seen.
func (w *podWatch) named(name string) []podRecord {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []podRecord
	for _, r := range w.order {
		if r.name == name {
			out = append(out, *r)
		}
	}
	return out
}

// executors is every Spark executor pod the watch saw.
func (w *podWatch) executors() []*podRecord {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*podRecord
	for _, r := range w.order {
		if r.role == contract.RoleExecutor {
			c := *r
			out = append(out, &c)
		}
	}
	return out
}
