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
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

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
	Events    events.EventRecorder
	Convert   convert.Options
	Budget    Budget // Max is taken from each pod; Backoff and MaxBackoff from here
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

// Reconcile is idempotent: every step is create-or-get or a write conditioned on what was read.
func (r *Placeholder) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	var p corev1.Pod
	if err := r.Client.Get(ctx, req.NamespacedName, &p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if convert.IsPlaceholder(&p) && heldAsDeletedApp(&p) {
		return r.stopDeletedApp(ctx, &p)
	}
	if !convert.IsPlaceholder(&p) || p.DeletionTimestamp != nil {
		// Deleting P deletes S, H, Spark's ConfigMap and Service through their ownerReferences.
		return ctrl.Result{}, nil
	}
	names, err := r.namesOf(ctx, &p)
	if err != nil {
		return ctrl.Result{}, err
	}

	container := driverContainer(&p)
	if reason, err := r.unsealed(ctx, &p, names); err != nil || reason != "" {
		if err != nil || isTerminal(p.Status.Phase) {
			return ctrl.Result{}, err
		}
		logger.Info("not a placeholder driverset made", "reason", reason)
		return ctrl.Result{}, r.writeStatus(ctx, &p, View{Container: container, Blocked: reason})
	}
	if !isTerminal(p.Status.Phase) {
		// A finished app runs no driver again: its claims need no keeping.
		if waiting, err := r.keepClaims(ctx, &p, names); err != nil || waiting != "" {
			if err != nil {
				return ctrl.Result{}, err
			}
			return ctrl.Result{RequeueAfter: claimPoll}, r.writeStatus(ctx, &p, View{Container: container, Blocked: waiting})
		}
	}
	sts, err := r.ensure(ctx, &p, names)
	var refused *refusedError
	if errors.As(err, &refused) {
		logger.Info("create refused", "error", err.Error())
		if isTerminal(p.Status.Phase) {
			return ctrl.Result{}, nil
		}
		used, _ := restartsOf(&p)
		return ctrl.Result{RequeueAfter: retryRefused}, r.writeStatus(ctx, &p, View{Container: container, Restarts: used, TotalRestarts: totalRestartsOf(&p), Blocked: refused.Error()})
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if sts == nil {
		// The name is taken: looked at less often the longer that lasts.
		return ctrl.Result{RequeueAfter: waitRequeue(r.now().Sub(p.CreationTimestamp.Time))}, nil
	}
	if isTerminal(p.Status.Phase) {
		return ctrl.Result{}, r.scaleToZero(ctx, sts)
	}
	if err := r.correctReplicas(ctx, &p, sts); err != nil {
		return ctrl.Result{}, err
	}

	driver, err := r.driverPod(ctx, p.Namespace, names.DriverPodName(), sts)
	if err != nil {
		return ctrl.Result{}, err
	}
	settings, invalid := effectiveSettings(p.Annotations, rememberedSettings(sts), r.FenceAfter)
	var bounded string
	settings.FenceAfter, _, bounded = r.fencing(&p, settings.FenceAfter)
	invalid = joinWarnings(invalid, bounded)
	budget := r.Budget
	budget.Max = settings.MaxRestarts
	budget.Window = settings.RestartWindow
	budget.Used, budget.Restarted = restartsOf(&p)
	outcome := outcomeOf(driver, container)
	if driver != nil && driver.UID == budget.Restarted {
		// driverset deleted this incarnation to restart it: while it terminates (its idle wrap still
		// "running") it is that restart, not a driver that runs.
		outcome = recordedExit(driver, container)
	}
	// A failure after a healthy run starts a new run of failures: restart counts from 0 (decide
	// judges it so too).
	counted := budget.Used
	budget = forget(outcome, budget)
	decision := decide(outcome, budget, r.now())

	if decision.Action == Restart {
		if err := r.restart(ctx, &p, driver, outcome, &budget, counted-budget.Used); err != nil {
			return ctrl.Result{}, err
		}
	}

	view := View{Driver: driver, Container: container, Decision: decision, Outcome: outcome, Restarts: budget.Used, TotalRestarts: totalRestartsOf(&p), Invalid: invalid}
	var requeue time.Duration
	if decision.Action == Observe && (driver == nil || driver.UID != budget.Restarted) {
		step, err := r.trackLoss(ctx, &p, driver, settings.FenceAfter)
		if err != nil {
			return ctrl.Result{}, err
		}
		if step.ForceDeleted {
			return ctrl.Result{}, nil
		}
		view.Note, view.Recovered, requeue = step.Note, step.Recovered, step.Requeue
		if driver != nil && convert.HasGate(&driver.Spec, contract.GateStaleExecutors) {
			if view.Note, err = r.clearStaleExecutors(ctx, &p, driver); err != nil {
				return ctrl.Result{}, err
			}
			// An executor's deletion brings a look at once; this is for one that is not deleted.
			requeue = waitRequeue(r.now().Sub(driver.CreationTimestamp.Time))
		}
	}
	if driver == nil && decision.Action == Observe {
		// S-0 is missing: after a while, ask the StatefulSet's Events why, and look again.
		if view.Blocked, err = r.driverPodFailure(ctx, sts); err != nil {
			return ctrl.Result{}, err
		}
		requeue = missingDriverGrace
	}
	if err := r.writeStatus(ctx, &p, view); err != nil {
		return ctrl.Result{}, err
	}
	if decision.Action == Succeed || decision.Action == Fail {
		// Only once the final status is written: scaling to 0 deletes S-0, and a pod being
		// deleted has no outcome, so a retry after a failed status write would lose the exit.
		if err := r.scaleToZero(ctx, sts); err != nil {
			return ctrl.Result{}, err
		}
	}
	if decision.Action == Wait {
		requeue = decision.After
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// restart counts the failed incarnation (once) and deletes it, so that the StatefulSet makes a
// new one: a new UID, so the garbage collector removes the old incarnation's executors. One left
// Terminating on a node that died is force-deleted. forgotten is how many restarts counted before
// the failure forget let go (its healthy run), for the Event.
func (r *Placeholder) restart(ctx context.Context, p, driver *corev1.Pod, outcome Outcome, budget *Budget, forgotten int) error {
	total := totalRestartsOf(p)
	if outcome.SelfFenced && outcome.PodUID != budget.Restarted {
		// wrap stopped the driver for want of a heartbeat (an apiserver out of reach for T): a
		// node-loss recovery, not the driver's failure; the incarnation is noted, not counted.
		if err := r.recordRestart(ctx, p, budget.Used, total, outcome.PodUID); err != nil {
			return err
		}
		r.event(p, driver, corev1.EventTypeWarning, "SelfFenced",
			"the driver in pod %s was stopped by driverset wrap: its heartbeat could not be renewed; starting a new incarnation (not counted as a restart)", podRef(driver))
	} else if outcome.PodUID != budget.Restarted {
		budget.Used++
		if err := r.recordRestart(ctx, p, budget.Used, total+1, outcome.PodUID); err != nil {
			return err
		}
		r.Metrics.restarted()
		var note string
		if forgotten > 0 {
			note = fmt.Sprintf("; after a run of %s, at least %s %s, the %d restart(s) before forgotten",
				outcome.FinishedAt.Sub(outcome.StartedAt).Round(time.Second), contract.AnnotationRestartWindow,
				convert.ShortDuration(budget.Window), forgotten)
		}
		r.event(p, driver, corev1.EventTypeWarning, "Restarting",
			"the driver exited with code %d in pod %s; starting a new incarnation (restart %d of %d%s)",
			outcome.Code, podRef(driver), budget.Used, budget.Max, note)
	}
	opts := []client.DeleteOption{client.Preconditions{UID: &outcome.PodUID}}
	if driver.DeletionTimestamp != nil {
		// Deleted already; only a kubelet that is gone keeps it Terminating. The recorded exit
		// proves the driver process ended, so force-deleting this incarnation cannot make two;
		// but not before the scheduler keeps the next one off that node (deadAndAvoided).
		if !r.deadNodeLetsGo(ctx, driver, true) {
			return nil
		}
		opts = append(opts, client.GracePeriodSeconds(0))
	}
	err := r.Client.Delete(ctx, driver, opts...)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}

// ensure creates H and S for P when they do not exist and returns S. It returns nil (and no
// error) while an S of the same name belongs to another owner, e.g. an earlier P of the same name
// that the garbage collector has not finished deleting.
func (r *Placeholder) ensure(ctx context.Context, p *corev1.Pod, names contract.Names) (*appsv1.StatefulSet, error) {
	if sts, err := r.existing(ctx, p, names); sts != nil || err != nil {
		return sts, err
	}
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
	if reason, err := r.unsealed(ctx, &whole, names); err != nil || reason != "" {
		if err == nil {
			err = &refusedError{what: "StatefulSet " + names.StatefulSet, err: errors.New(reason)}
		}
		return nil, err
	}
	return r.create(ctx, &whole, names)
}

// existing returns S when H and S both exist in the cache and are P's: what every reconcile after
// the first finds, with nothing to build.
func (r *Placeholder) existing(ctx context.Context, p *corev1.Pod, names contract.Names) (*appsv1.StatefulSet, error) {
	var svc corev1.Service
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: names.Service}, &svc); err != nil || !metav1.IsControlledBy(&svc, p) {
		return nil, client.IgnoreNotFound(err)
	}
	var sts appsv1.StatefulSet
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: names.StatefulSet}, &sts); err != nil || !metav1.IsControlledBy(&sts, p) {
		return nil, client.IgnoreNotFound(err)
	}
	return &sts, nil
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

// driverPod returns S-0 when it exists and belongs to S.
func (r *Placeholder) driverPod(ctx context.Context, ns, name string, sts *appsv1.StatefulSet) (*corev1.Pod, error) {
	var pod corev1.Pod
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &pod); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(&pod, sts) {
		return nil, nil
	}
	return &pod, nil
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

// correctReplicas sets S back to replicasFor(P) (1: P is not terminal here) when someone scaled
// it: 2 makes S-1, a second driver with the same app id; 0 leaves the app Running forever. Scaling
// up from 0 is done only once the apiserver confirms P has not ended: S is scaled to 0 right after
// P's final status is written, and the cache may not show that status yet.
func (r *Placeholder) correctReplicas(ctx context.Context, p *corev1.Pod, sts *appsv1.StatefulSet) error {
	want := replicasFor(p)
	if sts.Spec.Replicas != nil && *sts.Spec.Replicas == want {
		return nil
	}
	if sts.Spec.Replicas != nil && *sts.Spec.Replicas == 0 {
		var live corev1.Pod
		if err := r.apiReader().Get(ctx, client.ObjectKeyFromObject(p), &live); err != nil {
			return client.IgnoreNotFound(err)
		}
		if live.UID != p.UID || replicasFor(&live) != want {
			return nil
		}
	}
	had := "unset"
	if sts.Spec.Replicas != nil {
		had = strconv.Itoa(int(*sts.Spec.Replicas))
	}
	patch := client.MergeFromWithOptions(sts.DeepCopy(), client.MergeFromWithOptimisticLock{})
	sts.Spec.Replicas = &want
	if err := r.Client.Patch(ctx, sts, patch); err != nil {
		return client.IgnoreNotFound(err)
	}
	r.event(p, sts, corev1.EventTypeWarning, "ReplicasCorrected",
		"StatefulSet %s was scaled to %s replicas; set back to %d: driverset runs exactly one driver while the app runs", sts.Name, had, want)
	return nil
}

// recordRestart counts a restart on P before the pod is deleted, under optimistic locking, so a
// crash between the two never loses or doubles a count.
func (r *Placeholder) recordRestart(ctx context.Context, p *corev1.Pod, used, total int, uid types.UID) error {
	patch := client.MergeFromWithOptions(p.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[contract.AnnotationRestarts] = strconv.Itoa(used)
	if total > 0 {
		p.Annotations[contract.AnnotationRestartsTotal] = strconv.Itoa(total)
	}
	p.Annotations[contract.AnnotationRestartedIncarnation] = string(uid)
	return r.Client.Patch(ctx, p, patch)
}

// writeStatus writes P's status when it changed, and records an Event for each transition that a
// user watching the placeholder would want to know about.
func (r *Placeholder) writeStatus(ctx context.Context, p *corev1.Pod, v View) error {
	want := placeholderStatus(p.Status, v)
	if equality.Semantic.DeepEqual(p.Status, want) {
		return nil
	}
	old := p.Status
	// A patch of the difference, under the optimistic lock: p is the cache's copy, without most
	// of its spec (placeholderTransform), which an update would send back.
	patch := client.MergeFromWithOptions(p.DeepCopy(), client.MergeFromWithOptimisticLock{})
	p.Status = want
	if err := r.Client.Status().Patch(ctx, p, patch); err != nil {
		return err
	}
	if v.Invalid != "" && !strings.Contains(old.Message, v.Invalid) {
		r.event(p, nil, corev1.EventTypeWarning, "InvalidSetting", "%s", v.Invalid)
	}
	switch {
	case v.Blocked != "" && want.Message != old.Message:
		r.event(p, nil, corev1.EventTypeWarning, ReasonFailedCreate, "%s", v.Blocked)
	case want.Phase == corev1.PodSucceeded && old.Phase != corev1.PodSucceeded:
		r.event(p, v.Driver, corev1.EventTypeNormal, "Completed", "the driver completed (exit code 0) in pod %s", podRef(v.Driver))
	case want.Phase == corev1.PodFailed && old.Phase != corev1.PodFailed:
		r.event(p, v.Driver, corev1.EventTypeWarning, "Failed", "the driver failed with exit code %d in pod %s after %d restart(s)",
			v.Outcome.Code, podRef(v.Driver), v.Restarts)
	case v.Driver != nil && v.Driver.Spec.NodeName != "" && runningOn(want, v.Driver) && !runningOn(old, v.Driver) && !v.Recovered:
		r.event(p, v.Driver, corev1.EventTypeNormal, "DriverRunning", "the driver runs in pod %s on node %s", podRef(v.Driver), v.Driver.Spec.NodeName)
	}
	return nil
}

// runningOn reports whether st says the driver runs in pod d on its node.
func runningOn(st corev1.PodStatus, d *corev1.Pod) bool {
	m := runningMessage(d)
	return st.Phase == corev1.PodRunning && (st.Message == m || strings.HasPrefix(st.Message, m+"; "))
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
