// Package controller holds driverset's reconcilers: it turns each placeholder pod that the
// webhook admitted into a headless Service and a StatefulSet of one, mirrors the real driver's
// state onto the placeholder, and decides what happens when the driver exits.
package controller

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"golang.org/x/sync/singleflight"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
	"github.com/driverset/driverset/seal"
)

// Placeholder reconciles one placeholder pod P: it makes P's headless Service H and StatefulSet S,
// and carries the driver's lifecycle (docs/design.md: the StatefulSet, status, lifecycle decisions).
type Placeholder struct {
	Client client.Client
	// APIReader reads from the apiserver, not the informer cache: for an object the cache has not
	// seen yet, and for the facts a dangerous step must not take from a stale cache. Nil: Client.
	APIReader client.Reader
	// ExecutorSets holds the metadata of the StatefulSets of the watched namespaces and of the
	// claims labelled contract.LabelDriver (ExecutorSetCacheOptions), for Spark's executor
	// StatefulSets and the executor claims drivers made, which the gate waits for; a cache.Cache
	// is also watched for their deletions. Nil: none is read or waited for.
	ExecutorSets client.Reader
	Events       events.EventRecorder
	Convert      convert.Options
	Budget       Budget // Max is taken from each pod; Backoff and MaxBackoff from here
	// FenceAfter is the cluster-wide fence-after; a driver's own annotation wins. 0: never fence.
	FenceAfter time.Duration
	// Bounds are the admin's limits on fencing; Heartbeats what was seen of self-fencing drivers'
	// heartbeats (nil: self-fencing drivers are never fenced on their heartbeat).
	Bounds     Bounds
	Heartbeats *Heartbeats
	Metrics    *Metrics
	// Seal checks that P is a placeholder driverset's webhook made (see unsealed).
	Seal seal.Sealer
	Now  func() time.Time

	// nodeReads joins the passes that read one Node live at the same moment (liveNode).
	nodeReads singleflight.Group
}

// Reconcile is one pass over placeholder P, in three phases: observe reads what the pass decides
// on into a Snapshot (observe.go), plan decides from it alone what to do (plan.go), and apply does
// it (apply.go). The part before a driver can exist (provision.go) and a deleted app's pass
// (appdeletion.go) have the same shape. Reconcile is idempotent: every step is create-or-get or a
// write conditioned on what was read.
func (r *Placeholder) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	s, err := r.observe(ctx, req.NamespacedName)
	if s == nil || err != nil {
		return ctrl.Result{}, err
	}
	p := s.Placeholder.Value
	if convert.IsPlaceholder(p) && heldAsDeletedApp(p) {
		return r.stopDeletedApp(ctx, s)
	}
	if !convert.IsPlaceholder(p) || p.DeletionTimestamp != nil {
		// Deleting P deletes S, H, Spark's ConfigMap and Service through their ownerReferences.
		return ctrl.Result{}, nil
	}
	if res, done, err := r.provision(ctx, s); done || err != nil {
		return res, err
	}
	if err := r.observeDriver(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	pl, err := r.planWith(ctx, s, plan)
	if err != nil {
		return ctrl.Result{}, err
	}
	if ended, err := r.apply(ctx, s, pl.Steps); ended || err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: pl.Requeue}, nil
}

// maxPlanRounds bounds how often plan may ask for readings in one pass: the loss inputs from the
// cache, the driver's Node and heartbeat from the apiserver before a fence, the stale executors,
// their Nodes from the apiserver, and one round that needs nothing.
const maxPlanRounds = 5

// planWith plans the pass over s with planner, taking the readings it asks for first.
func (r *Placeholder) planWith(ctx context.Context, s *Snapshot, planner func(*Snapshot, Config, time.Time) Plan) (Plan, error) {
	cfg := r.config()
	for range maxPlanRounds {
		pl := planner(s, cfg, r.now())
		if len(pl.Need) == 0 {
			return pl, nil
		}
		if err := r.observeNeeds(ctx, s, pl.Settings.FenceAfter, pl.Need); err != nil {
			return Plan{}, err
		}
	}
	return Plan{}, fmt.Errorf("placeholder %s/%s: plan still needs readings after %d rounds", s.Placeholder.Value.Namespace, s.Placeholder.Value.Name, maxPlanRounds)
}

// ensure creates H and S for P when they do not exist and returns S, also kept in s. It returns
// nil (and no error) while an S of the same name belongs to another owner, e.g. an earlier P of
// the same name that the garbage collector has not finished deleting.
func (r *Placeholder) ensure(ctx context.Context, s *Snapshot) (*appsv1.StatefulSet, error) {
	if sts := s.ownStatefulSet(); sts != nil {
		return sts, nil
	}
	p, names := s.Placeholder.Value, s.Names
	// One is missing, or not P's: build them from P as the apiserver has it, since the cache
	// keeps P without most of its spec (placeholderTransform).
	var whole corev1.Pod
	if err := r.apiReader().Get(ctx, client.ObjectKeyFromObject(p), &whole); err != nil {
		return nil, err
	}
	if whole.UID != p.UID {
		return nil, fmt.Errorf("placeholder %s/%s was replaced while it was reconciled", p.Namespace, p.Name)
	}
	// The seal was checked on the cached placeholder; S is built from this read, which a tenant's
	// edit of the recorded resources may have reached in between: check it on what is built.
	if reason, err := r.unsealed(ctx, r.Client, &whole, names); err != nil || reason != "" {
		if err == nil {
			err = &refusedError{what: "StatefulSet " + names.StatefulSet, err: errors.New(reason)}
		}
		return nil, err
	}
	sts, err := r.create(ctx, &whole, names)
	if sts != nil {
		s.StatefulSet = reading(sts, FromWrite, r.now())
	}
	return sts, err
}

// create makes H and S from p, the whole placeholder, when they do not exist (create-or-get),
// and returns S; nil while a name is another owner's.
func (r *Placeholder) create(ctx context.Context, p *corev1.Pod, names contract.Names) (*appsv1.StatefulSet, error) {
	svc, err := convert.ServiceNamed(p, names)
	if err != nil {
		return nil, err
	}
	if _, err := r.createOrGet(ctx, svc); err != nil {
		return nil, fmt.Errorf("headless Service %s: %w", svc.Name, err)
	}
	if !metav1.IsControlledBy(svc, p) {
		// Someone else's Service of that name would decide where the driver's stable name points.
		r.event(p, nil, corev1.EventTypeWarning, "NameTaken",
			"Service %s exists and is not owned by this pod; waiting for it to go away", svc.Name)
		return nil, nil
	}
	// The creates webhook checks this create against the same builder (Built).
	want, err := r.statefulSetFor(ctx, p, names)
	if conv := (*conversionError)(nil); errors.As(err, &conv) {
		r.event(p, nil, corev1.EventTypeWarning, "ConversionFailed", "%v", conv.err)
	}
	if err != nil {
		return nil, err
	}
	created, err := r.createOrGet(ctx, want)
	if err != nil {
		return nil, fmt.Errorf("StatefulSet %s: %w", want.Name, err)
	}
	if !metav1.IsControlledBy(want, p) {
		r.event(p, nil, corev1.EventTypeWarning, "NameTaken",
			"StatefulSet %s exists and is not owned by this pod; waiting for it to go away", want.Name)
		return nil, nil
	}
	if created {
		r.event(p, want, corev1.EventTypeNormal, "Converted",
			"driverset runs this driver as StatefulSet %s (pod %s) behind headless Service %s; this pod is its placeholder",
			want.Name, names.DriverPodName(), svc.Name)
	}
	return want, nil
}

// createOrGet reads the object of obj's name into obj, or creates obj when none exists. created
// says which. It reads first: ResourceQuota admission charges a Create before the apiserver finds
// the name taken, so a Create of an existing object fails in a namespace at its quota and inflates
// the quota's used below it. A cache miss is confirmed by a live read before creating.
func (r *Placeholder) createOrGet(ctx context.Context, obj client.Object) (created bool, err error) {
	key := client.ObjectKeyFromObject(obj)
	want := obj.DeepCopyObject().(client.Object)
	err = r.Client.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		err = r.apiReader().Get(ctx, key, obj)
	}
	if !apierrors.IsNotFound(err) {
		return false, err
	}
	copyInto(obj, want)
	err = r.Client.Create(ctx, obj)
	if err == nil {
		return true, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		if refusedByAdmission(err) {
			return false, &refusedError{what: kindOf(obj) + " " + obj.GetName(), err: err}
		}
		return false, err
	}
	return false, r.apiReader().Get(ctx, key, obj)
}

// copyInto restores obj to want after a failed Get left it in an undefined state.
func copyInto(obj, want client.Object) {
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(want).Elem())
}

func (r *Placeholder) apiReader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

func (r *Placeholder) scaleToZero(ctx context.Context, sts *appsv1.StatefulSet) error {
	if sts.Spec.Replicas != nil && *sts.Spec.Replicas == 0 {
		return nil
	}
	patch := client.MergeFrom(sts.DeepCopy())
	zero := int32(0)
	sts.Spec.Replicas = &zero
	return client.IgnoreNotFound(r.Client.Patch(ctx, sts, patch))
}

// event records an Event on P; related, when not nil, is the object the decision was about.
func (r *Placeholder) event(p *corev1.Pod, related client.Object, eventType, reason, note string, args ...any) {
	if r.Events == nil {
		return
	}
	var rel runtime.Object
	if related != nil && !reflect.ValueOf(related).IsNil() {
		rel = related
	}
	r.Events.Eventf(p, rel, eventType, reason, reason, note, args...)
}

func (r *Placeholder) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// totalRestartsOf is P's count of every process-failure restart of its life. An app restarted by
// a driverset before the total existed has its lifetime count in the restarts annotation.
func totalRestartsOf(p *corev1.Pod) int {
	total, _ := strconv.Atoi(p.Annotations[contract.AnnotationRestartsTotal])
	used, _ := restartsOf(p)
	return max(total, used)
}

// restartsOf reads P's restart count and the incarnation last restarted.
func restartsOf(p *corev1.Pod) (int, types.UID) {
	n, _ := strconv.Atoi(p.Annotations[contract.AnnotationRestarts])
	return n, types.UID(p.Annotations[contract.AnnotationRestartedIncarnation])
}

// driverContainer is the name of P's driver container, as convert chose it.
func driverContainer(p *corev1.Pod) string {
	if i, err := convert.DriverContainerIndex(p); err == nil {
		return p.Spec.Containers[i].Name
	}
	return contract.DriverContainerName
}

// replicasFor is how many pods P's StatefulSet must have: its driver while the app runs, none
// once it has ended.
func replicasFor(p *corev1.Pod) int32 {
	if isTerminal(p.Status.Phase) {
		return 0
	}
	return 1
}

func isTerminal(phase corev1.PodPhase) bool {
	return phase == corev1.PodSucceeded || phase == corev1.PodFailed
}
