package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driverset/driverset/wrap"
)

// Heartbeat is what the controller knows of a self-fencing driver's heartbeat: its T (0: the
// driver keeps none) and how long the controller has seen no change of its Lease.
type Heartbeat struct {
	Lease  types.NamespacedName
	T      time.Duration
	Silent time.Duration
}

// Wait is how long the controller must see no renewal before it may fence: T, after which wrap has
// killed the driver, plus selfFenceMargin.
func (h Heartbeat) Wait() time.Duration { return h.T + selfFenceMargin(h.T) }

// selfFenceMargin covers what lies between wrap's deadline and the driver's end: wrap kills the
// tree with SIGKILL at once and reaps it (seconds at most), and the two clocks' rates and timer
// delays may differ (a tenth of T is far more than any clock drifts).
func selfFenceMargin(t time.Duration) time.Duration { return 5*time.Second + t/10 }

// Heartbeats is what the controller has seen of the drivers' heartbeat Leases: for each, the
// version last seen and when, on this process's monotonic clock, it was first seen. Silence is
// counted from the last change the controller itself observed, as the node lifecycle controller
// counts a node's, never from a time written by the node: a Lease's renewTime is the node's clock.
// It is fed by the Lease informer (every replica's, so a new leader has watched all along) and by
// live reads before a fence; what the informer adds is bounded (maxHeartbeats). It holds no
// package state: serve makes one and gives it to the reconciler.
type Heartbeats struct {
	mu   sync.Mutex
	seen map[types.NamespacedName]sighting
	now  func() time.Time
}

// maxHeartbeats is how many Leases the informer may add to Heartbeats: any user who may write
// Leases in a namespace can label one as a heartbeat, so the informer sees as many as a tenant
// likes (issue 35). Past it, a new Lease the informer delivers is not recorded; one recorded
// already is still followed, a driver the controller reconciles is still recorded by its
// Observe, and a deleted Lease makes room. A driver whose Lease was not recorded has its silence
// counted from the reconcile that first sees it, later than the informer would have: a fence
// comes later, never sooner. Each record keeps a Lease's name and version, a few hundred bytes at
// most: ten thousand of them are a few MiB, more self-fencing drivers than one driverset runs.
const maxHeartbeats = 10_000

type sighting struct {
	version string // the Lease's resourceVersion; "" when it does not exist
	at      time.Time
}

// NewHeartbeats starts an empty record; now is the clock (nil: time.Now, which is monotonic).
func NewHeartbeats(now func() time.Time) *Heartbeats {
	if now == nil {
		now = time.Now
	}
	return &Heartbeats{seen: map[types.NamespacedName]sighting{}, now: now}
}

// Observe records that the Lease key is at version ("": absent) now, and returns how long it has
// been at that version as far as this process has seen: 0 for a change (or a first sighting).
func (h *Heartbeats) Observe(key types.NamespacedName, version string) time.Duration {
	return h.observe(key, version, false)
}

// observe is Observe; fromInformer records a Lease not seen before only below maxHeartbeats.
func (h *Heartbeats) observe(key types.NamespacedName, version string, fromInformer bool) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	s, ok := h.seen[key]
	if !ok && fromInformer && len(h.seen) >= maxHeartbeats {
		return 0
	}
	if !ok || s.version != version {
		h.seen[key] = sighting{version: version, at: now}
		return 0
	}
	return now.Sub(s.at)
}

// forget drops what was seen of a Lease that was deleted; it is seen again from scratch.
func (h *Heartbeats) forget(key types.NamespacedName) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.seen, key)
}

// EventHandler records every change of a heartbeat Lease as the informer delivers it, of at most
// maxHeartbeats Leases.
func (h *Heartbeats) EventHandler() toolscache.ResourceEventHandler {
	observe := func(o any) {
		if l, ok := o.(*coordinationv1.Lease); ok {
			h.observe(types.NamespacedName{Namespace: l.Namespace, Name: l.Name}, l.ResourceVersion, true)
		}
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { observe(o) },
		UpdateFunc: func(_, o any) { observe(o) },
		DeleteFunc: func(o any) {
			if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if l, ok := o.(*coordinationv1.Lease); ok {
				h.forget(types.NamespacedName{Namespace: l.Namespace, Name: l.Name})
			}
		},
	}
}

// heartbeatFlags reads the heartbeat wrap keeps in driver (its lease and T) from the wrapped
// container's command, with wrap's own parser: what runs is what counts, not an annotation.
func heartbeatFlags(driver *corev1.Pod, container string) (lease string, t time.Duration) {
	for _, c := range driver.Spec.Containers {
		if c.Name != container {
			continue
		}
		o, isWrap, err := wrap.CommandOptions(c.Command)
		if !isWrap || err != nil {
			return "", 0
		}
		return o.HeartbeatLease, o.SelfFence
	}
	return "", 0
}

// heartbeatOf is the driver's heartbeat as the controller sees it now: from the informer cache,
// or, when live, from the apiserver (before a fence: a cache behind a renewal must not fence).
// T is never taken below the admin's floor: the controller waits at least as long as wrap does.
func (r *Placeholder) heartbeatOf(ctx context.Context, driver *corev1.Pod, container string, live bool) (Heartbeat, error) {
	if r.Heartbeats == nil || driver == nil || !r.Bounds.mayFence(driver.Namespace) {
		return Heartbeat{}, nil
	}
	name, t := heartbeatFlags(driver, container)
	if t <= 0 {
		return Heartbeat{}, nil
	}
	key := types.NamespacedName{Namespace: driver.Namespace, Name: name}
	var reader client.Reader = r.Client
	if live {
		reader = r.apiReader()
	}
	var lease coordinationv1.Lease
	version := ""
	switch err := reader.Get(ctx, key, &lease); {
	case err == nil:
		version = lease.ResourceVersion
	case !apierrors.IsNotFound(err):
		return Heartbeat{}, fmt.Errorf("heartbeat Lease %s: %w", key, err)
	}
	return Heartbeat{Lease: key, T: max(t, r.Bounds.SelfFenceMin), Silent: r.Heartbeats.Observe(key, version)}, nil
}

// watchHeartbeats feeds Heartbeats from the informer of heartbeat Leases (serve's cache selects
// them by contract.LabelHeartbeat).
func (r *Placeholder) watchHeartbeats(ctx context.Context, mgr ctrl.Manager) error {
	if r.Heartbeats == nil {
		return nil
	}
	inf, err := mgr.GetCache().GetInformer(ctx, &coordinationv1.Lease{})
	if err != nil {
		return err
	}
	_, err = inf.AddEventHandler(r.Heartbeats.EventHandler())
	return err
}
