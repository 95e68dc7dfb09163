package controller

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
)

// Source is where a reading of a Snapshot was taken. A decision that cannot be undone (a
// force-delete) is taken only on readings from the apiserver: the cache may be behind a node that
// came back or a heartbeat that was renewed.
type Source string

const (
	// FromCache: the informer cache, which may lag the apiserver.
	FromCache Source = "cache"
	// FromAPIServer: a live read, as the apiserver has the object at At.
	FromAPIServer Source = "apiserver"
	// FromWrite: what this pass's own create (or create-or-get) returned.
	FromWrite Source = "write"
	// Skipped: looked at and not read, since nothing this pass decides depends on it (a zone
	// counted only when the driver's node is lost and fencing is on, a heartbeat only for a
	// self-fencing driver, the Node of a pod not bound to one).
	Skipped Source = "skipped"
)

// Read is one reading of a Snapshot: the value, where it came from and when. From "" means the
// reading has not been taken in this pass; plan asks for it (Need) before it decides on it.
type Read[T any] struct {
	Value T
	From  Source
	At    time.Time
}

// Taken reports whether the reading was taken (or skipped on purpose) in this pass.
func (r Read[T]) Taken() bool { return r.From != "" }

// Snapshot is everything the placeholder reconciler's decisions may use in one pass, read by
// observe (observe.go) and decided on by plan (plan.go), which reads nothing else. Each field says
// where it was read and when.
type Snapshot struct {
	// Placeholder is P; Names its objects' names (namesOf). Found is the name of the StatefulSet P
	// controls, found by P's UID, and where: FromCache (the cache's index), FromAPIServer (a live
	// list, when the cache had none), or "" and Skipped when neither had one (Names are then this
	// build's, contract.NamesFor, and S is yet to be created).
	Placeholder Read[*corev1.Pod]
	Names       contract.Names
	Found       Read[string]
	// StatefulSet and Service are the objects of P's names, whoever owns them (nil: none).
	StatefulSet Read[*appsv1.StatefulSet]
	Service     Read[*corev1.Service]
	// Driver is S-0 when it exists and S controls it (nil otherwise).
	Driver Read[*corev1.Pod]
	// Node is the driver's Node (nil: NotFound); read from the apiserver before a fence.
	Node Read[*corev1.Node]
	// Zone counts the nodes of the driver's node's zone, when fencing may follow.
	Zone Read[Zone]
	// Heartbeat is what was seen of a self-fencing driver's heartbeat Lease.
	Heartbeat Read[Heartbeat]
	// MissingDriver is why the StatefulSet has not made S-0 (its latest FailedCreate Event, read
	// live), while S-0 is missing past missingDriverGrace; "" when none is known.
	MissingDriver Read[string]
	// Executors are the executors of S-0's app that a step is about (the stale ones, for the
	// gate; all of the app's, for a fence), and ExecutorNodes their Nodes from the cache.
	Executors     Read[[]corev1.Pod]
	ExecutorNodes map[string]Read[*corev1.Node]
	// ExecutorSets are Spark's executor StatefulSets of earlier incarnations of S-0's app
	// (ExecutorSetsOfIncarnation), read from their cache with the stale executors, for the gate.
	ExecutorSets Read[[]metav1.PartialObjectMetadata]
	// ExecutorClaims are the executor claims that drivers of earlier incarnations made
	// (ExecutorClaimsOfIncarnation), read from the same cache with the sets.
	ExecutorClaims Read[[]metav1.PartialObjectMetadata]
	// Claims are the claims the driver mounts, read live while S does not exist yet (provision).
	Claims Read[[]driverClaim]
	// LivePlaceholder is P read from the apiserver, before S is scaled up from 0 (nil: gone).
	LivePlaceholder Read[*corev1.Pod]
	// Ensured is what this pass's create-or-get of H and S made (ensureStep).
	Ensured Read[ensured]
	// LiveNodes are the Nodes read from the apiserver in this pass (nil value: NotFound), so that a
	// pass reads a Node live once, whichever of its steps needs it.
	LiveNodes map[string]*corev1.Node
}
