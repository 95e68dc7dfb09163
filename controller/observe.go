package controller

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driverset/driverset/convert"
)

// The observe phase: every read a pass of the placeholder reconciler decides on, kept in its
// Snapshot with where and when it was read. plan (plan.go) asks for the readings it lacks (Need);
// observeNeeds takes them.

// observe reads P from the cache; nil when it is gone. For a placeholder that is not being
// deleted it also reads its names (namesOf: S found by its controller, P) and the StatefulSet and
// Service of those names (cache, whoever owns them).
func (r *Placeholder) observe(ctx context.Context, key types.NamespacedName) (*Snapshot, error) {
	var p corev1.Pod
	if err := r.Client.Get(ctx, key, &p); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	s := &Snapshot{Placeholder: reading(&p, FromCache, r.now()), LiveNodes: map[string]*corev1.Node{}}
	if !convert.IsPlaceholder(&p) || p.DeletionTimestamp != nil {
		return s, nil
	}
	names, found, err := r.namesOf(ctx, &p)
	if err != nil {
		return nil, err
	}
	s.Names, s.Found = names, found
	if s.StatefulSet, err = getCached(ctx, r, &appsv1.StatefulSet{}, p.Namespace, names.StatefulSet); err != nil {
		return nil, err
	}
	if s.Service, err = getCached(ctx, r, &corev1.Service{}, p.Namespace, names.Service); err != nil {
		return nil, err
	}
	return s, nil
}

// getCached reads the object ns/name into obj from the cache: a nil value when it does not exist.
func getCached[T client.Object](ctx context.Context, r *Placeholder, obj T, ns, name string) (Read[T], error) {
	at := r.now()
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj); err != nil {
		var none T
		return reading(none, FromCache, at), client.IgnoreNotFound(err)
	}
	return reading(obj, FromCache, at), nil
}

// reading is a Read of v.
func reading[T any](v T, from Source, at time.Time) Read[T] {
	return Read[T]{Value: v, From: from, At: at}
}

// ownStatefulSet is S when both it and H exist and are P's: what every pass after the first
// finds, with nothing to build.
func (s *Snapshot) ownStatefulSet() *appsv1.StatefulSet {
	p, sts, svc := s.Placeholder.Value, s.StatefulSet.Value, s.Service.Value
	if svc == nil || !metav1.IsControlledBy(svc, p) || sts == nil || !metav1.IsControlledBy(sts, p) {
		return nil
	}
	return sts
}

// observeDriver reads S-0 (cache), kept when S controls it, and the Node it is bound to (cache);
// while S-0 is missing past missingDriverGrace, why the StatefulSet has not made it (live).
func (r *Placeholder) observeDriver(ctx context.Context, s *Snapshot) error {
	sts := s.StatefulSet.Value
	d, err := getCached(ctx, r, &corev1.Pod{}, sts.Namespace, s.Names.DriverPodName())
	if err != nil {
		return err
	}
	if d.Value != nil && !metav1.IsControlledBy(d.Value, sts) {
		d.Value = nil
	}
	s.Driver = d
	driver := d.Value
	if driver == nil {
		from := FromAPIServer
		if !r.asksWhyMissing(sts) {
			from = Skipped
		}
		why, err := r.driverPodFailure(ctx, sts)
		s.MissingDriver = reading(why, from, r.now())
		return err
	}
	return r.observeNode(ctx, s)
}

// observeNode reads the Node S-0 is bound to from the cache (Skipped while it is not bound).
func (r *Placeholder) observeNode(ctx context.Context, s *Snapshot) error {
	driver := s.Driver.Value
	if driver == nil || driver.Spec.NodeName == "" {
		s.Node = reading[*corev1.Node](nil, Skipped, r.now())
		return nil
	}
	var err error
	s.Node, err = getCached(ctx, r, &corev1.Node{}, "", driver.Spec.NodeName)
	return err
}

// Need is a reading plan asks for before it can decide.
type Need int

const (
	// NeedLossInputs: the driver's zone and heartbeat from the cache, to assess its node.
	NeedLossInputs Need = iota + 1
	// NeedLive: the driver's Node and heartbeat from the apiserver, before a fence.
	NeedLive
	// NeedClaims: the claims the driver mounts, from the apiserver.
	NeedClaims
	// NeedLivePlaceholder: P from the apiserver, before S is scaled up from 0.
	NeedLivePlaceholder
	// NeedExecutors: the stale executors of earlier incarnations, and their Nodes, from the cache.
	NeedExecutors
	// NeedExecutorNodesLive: the Nodes of those executors the cache says are proven down, from
	// the apiserver, before they are force-deleted.
	NeedExecutorNodesLive
)

// observeNeeds takes the readings plan asked for.
func (r *Placeholder) observeNeeds(ctx context.Context, s *Snapshot, fenceAfter time.Duration, needs []Need) error {
	for _, n := range needs {
		var err error
		switch n {
		case NeedLossInputs:
			err = r.observeLossInputs(ctx, s, fenceAfter)
		case NeedLive:
			err = r.observeLive(ctx, s)
		case NeedClaims:
			err = r.observeClaims(ctx, s)
		case NeedLivePlaceholder:
			p := s.Placeholder.Value
			s.LivePlaceholder, err = getLive(ctx, r, &corev1.Pod{}, p.Namespace, p.Name)
		case NeedExecutors:
			p, driver := s.Placeholder.Value, s.Driver.Value
			err = r.observeExecutors(ctx, s, func(e *corev1.Pod) bool { return stale(e, p, driver) })
			if err == nil {
				err = r.observeExecutorLeftovers(ctx, s)
			}
		case NeedExecutorNodesLive:
			err = r.observeExecutorNodesLive(ctx, s)
		default:
			err = fmt.Errorf("plan needs %d, which observe does not read", n)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// observeLossInputs reads the zone of the driver's node (cache, only when fencing may follow on a
// node that is not Ready) and its heartbeat (cache, only for a self-fencing driver).
func (r *Placeholder) observeLossInputs(ctx context.Context, s *Snapshot, fenceAfter time.Duration) error {
	zone, err := r.zoneOf(ctx, s.Node.Value, fenceAfter)
	if err != nil {
		return err
	}
	from := FromCache
	if s.Node.Value == nil || fenceAfter <= 0 || nodeReadyTrue(s.Node.Value) {
		from = Skipped
	}
	s.Zone = reading(zone, from, r.now())
	s.Heartbeat, err = r.observeHeartbeat(ctx, s, false)
	return err
}

// observeLive reads the driver's Node and heartbeat again from the apiserver: a fence planned on
// the cache is planned again on them.
func (r *Placeholder) observeLive(ctx context.Context, s *Snapshot) error {
	name := s.Driver.Value.Spec.NodeName
	at := r.now()
	node, err := r.liveNode(ctx, name)
	if err != nil {
		return err
	}
	s.LiveNodes[name] = node
	s.Node = reading(node, FromAPIServer, at)
	s.Heartbeat, err = r.observeHeartbeat(ctx, s, true)
	return err
}

// observeHeartbeat is heartbeatOf with its provenance: Skipped when the driver keeps none.
func (r *Placeholder) observeHeartbeat(ctx context.Context, s *Snapshot, live bool) (Read[Heartbeat], error) {
	at := r.now()
	hb, err := r.heartbeatOf(ctx, s.Driver.Value, driverContainer(s.Placeholder.Value), live)
	from := FromCache
	switch {
	case hb.T <= 0:
		from = Skipped
	case live:
		from = FromAPIServer
	}
	return reading(hb, from, at), err
}

// nodeReadyTrue reports whether node says it is Ready.
func nodeReadyTrue(node *corev1.Node) bool {
	c := nodeReady(node)
	return c != nil && c.Status == corev1.ConditionTrue
}

// observeDeletedApp reads, for a deleted placeholder, its names and the StatefulSet of its name from
// the apiserver: letting P go on a stale "gone" would let the app be submitted again beside its
// driver.
func (r *Placeholder) observeDeletedApp(ctx context.Context, s *Snapshot) error {
	p := s.Placeholder.Value
	names, found, err := r.namesOf(ctx, p)
	if err != nil {
		return err
	}
	s.Names, s.Found = names, found
	s.StatefulSet, err = getLive(ctx, r, &appsv1.StatefulSet{}, p.Namespace, names.StatefulSet)
	return err
}

// observeDeletedAppsDriver reads the deleted app's S-0 from the apiserver, kept when a StatefulSet
// of the app's name (of any UID: one deleted and made again is still the app's) controls it, and
// its Node from the cache.
func (r *Placeholder) observeDeletedAppsDriver(ctx context.Context, s *Snapshot) error {
	d, err := getLive(ctx, r, &corev1.Pod{}, s.Placeholder.Value.Namespace, s.Names.DriverPodName())
	if err != nil {
		return err
	}
	if d.Value != nil && !ofStatefulSet(d.Value, s.Names.StatefulSet) {
		d.Value = nil
	}
	s.Driver = d
	return r.observeNode(ctx, s)
}

// getLive reads the object ns/name into obj from the apiserver: a nil value when it does not exist.
func getLive[T client.Object](ctx context.Context, r *Placeholder, obj T, ns, name string) (Read[T], error) {
	at := r.now()
	if err := r.apiReader().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj); err != nil {
		var none T
		return reading(none, FromAPIServer, at), client.IgnoreNotFound(err)
	}
	return reading(obj, FromAPIServer, at), nil
}
