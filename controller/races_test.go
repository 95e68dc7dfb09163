package controller

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/wrap"
)

// The tests here are races: what the reconciler read (its informer cache) is not what the
// apiserver holds when its write arrives. Each write that acts on a read is conditioned on it —
// an optimistic lock (resourceVersion) on a patch of the placeholder, a UID precondition on a
// delete by name — and each test fails when that condition is removed.

// staleCache makes the reconciler's client (its cache) answer one Get of the placeholder with
// stale, an earlier version, while the apiserver (h.c, the APIReader) has the current one.
func (h *cluster) staleCache(stale *corev1.Pod) {
	live := h.c.(client.WithWatch)
	served := false
	h.r.Client = interceptor.NewClient(live, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if pod, ok := obj.(*corev1.Pod); ok && key == h.p && !served {
				served = true
				stale.DeepCopyInto(pod)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
}

// beforeDelete runs race once, just before the reconciler's first Delete of the pod named name
// reaches the apiserver: the world changes between the reconciler's read and its write.
func (h *cluster) beforeDelete(name string, race func()) {
	live := h.c.(client.WithWatch)
	done := false
	h.r.Client = interceptor.NewClient(live, interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if _, ok := obj.(*corev1.Pod); ok && obj.GetName() == name && !done {
				done = true
				race()
			}
			return c.Delete(ctx, obj, opts...)
		},
	})
}

// reconcileRacing runs one Reconcile that may fail, as one that lost a race does; the next one
// sees the apiserver again (the cache caught up).
func (h *cluster) reconcileRacing() error {
	h.t.Helper()
	_, err := h.r.Reconcile(h.ctx, ctrl.Request{NamespacedName: h.p})
	h.r.Client = h.c
	if err != nil && !apierrors.IsConflict(err) {
		h.t.Fatalf("Reconcile that lost a race: %v, want a conflict or nothing", err)
	}
	return err
}

// forceRemove removes pod name at once, as the StatefulSet controller or PodGC may while the
// reconciler is between its read and its write.
func (h *cluster) forceRemove(name string) {
	h.t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: h.p.Namespace, Name: name}}
	if err := h.c.Delete(h.ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		h.t.Fatal(err)
	}
	if name == h.names.DriverPodName() {
		h.releaseOutcome() // S-0 is held until driverset has read its exit
	}
	var gone corev1.Pod
	if err := h.c.Get(h.ctx, client.ObjectKeyFromObject(pod), &gone); !apierrors.IsNotFound(err) {
		h.t.Fatalf("pod %s not removed: %v", name, err)
	}
}

// TestRaceRestartCountedFromAStalePlaceholder: the second incarnation fails while the cache still
// shows the placeholder as it was before the first restart was counted. Counting from that read
// would write "1 restart" over the apiserver's 1 and lose a count (a driver that then fails
// forever is restarted once more than max-restarts allows). The optimistic lock refuses the write;
// the retry counts from the apiserver's value.
func TestRaceRestartCountedFromAStalePlaceholder(t *testing.T) {
	h := newCluster(t, nil, nil)
	h.reconcile()
	h.setNode("node-a", corev1.ConditionTrue, t0)
	beforeFirstRestart := h.placeholder()
	first := h.startIncarnation("node-a")
	h.setDriverStatus(exitedStatus(1, t0))
	h.now = t0.Add(time.Minute)
	h.reconcile()
	if used, restarted := restartsOf(h.placeholder()); used != 1 || restarted != first.UID {
		t.Fatalf("after the first failure: %d restart(s) of %s, want 1 of %s", used, restarted, first.UID)
	}
	h.stopped(h.names.DriverPodName())
	second := h.startIncarnation("node-a")
	h.setDriverStatus(exitedStatus(1, h.now))
	h.now = h.now.Add(time.Minute)

	h.staleCache(beforeFirstRestart)
	if err := h.reconcileRacing(); err == nil {
		t.Error("a restart counted from a stale placeholder was written")
	}
	h.reconcile()

	if used, restarted := restartsOf(h.placeholder()); used != 2 || restarted != second.UID {
		t.Errorf("after the second failure: %d restart(s), last of %s; want 2, of %s", used, restarted, second.UID)
	}
}

// TestRaceLossRecordFromAStalePlaceholder: the driver's node has been unreachable since lost, and
// that is recorded; then the admin deletes the Node while the cache still shows the placeholder
// without the record. Recording the loss from that read would restart its clock at the deletion
// and measure a shorter recovery than the driver had. The optimistic lock refuses the write; the
// retry keeps when the driver was lost.
func TestRaceLossRecordFromAStalePlaceholder(t *testing.T) {
	h := runningCluster(t, nil, nil)
	first := h.driver()
	lost := t0.Add(10 * time.Minute)
	h.setNode("node-a", corev1.ConditionUnknown, lost, unreachableTaints()...)
	beforeLoss := h.placeholder()
	h.now = lost.Add(time.Minute)
	h.reconcile()
	if rec := lostOf(h.placeholder()); rec == nil || !rec.Since.Equal(lost) {
		t.Fatalf("loss record %+v, want since %v", rec, lost)
	}

	if err := h.c.Delete(h.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}); err != nil {
		t.Fatal(err)
	}
	h.now = lost.Add(5 * time.Minute)
	h.staleCache(beforeLoss)
	if err := h.reconcileRacing(); err == nil {
		t.Error("a loss record made from a stale placeholder was written")
	}
	h.reconcile()

	rec := lostOf(h.placeholder())
	if rec == nil || rec.Pod != first.UID || !rec.Since.Equal(lost) || rec.Cause != CauseNodeDeleted {
		t.Errorf("loss record %+v, want pod %s lost since %v, cause %s", rec, first.UID, lost, CauseNodeDeleted)
	}
	if h.driver() != nil {
		t.Error("the driver on the deleted node was not force-deleted")
	}
}

// TestRaceRestartDeleteSparesTheNextIncarnation: the reconciler read the failed incarnation, but by
// the time its delete arrives that pod is gone and S-0 is the next incarnation (another replica
// restarted it). Deleting S-0 by name would kill the new driver; the UID precondition makes the
// delete miss.
func TestRaceRestartDeleteSparesTheNextIncarnation(t *testing.T) {
	h := newCluster(t, nil, nil)
	h.reconcile()
	h.setNode("node-a", corev1.ConditionTrue, t0)
	h.startIncarnation("node-a")
	h.setDriverStatus(exitedStatus(1, t0))
	h.now = t0.Add(time.Minute)
	var next *corev1.Pod
	h.beforeDelete(h.names.DriverPodName(), func() {
		h.forceRemove(h.names.DriverPodName())
		next = h.startIncarnation("node-a")
		h.setDriverStatus(runningStatus(h.now))
	})
	_ = h.reconcileRacing()

	d := h.driver()
	if next == nil || d == nil || d.UID != next.UID || d.DeletionTimestamp != nil {
		t.Errorf("the next incarnation %v was deleted by the restart of the one before (S-0 now: %+v)", next, d)
	}
}

// TestRaceFenceSparesTheNextIncarnation: the driver's Node was deleted; by the time driverset's
// force-delete arrives, PodGC removed the old pod and the StatefulSet made S-0 again on a healthy
// node. Force-deleting S-0 by name would kill the driver that just recovered (and, on a node whose
// kubelet is slow to stop it, run two); the UID precondition makes the delete miss.
func TestRaceFenceSparesTheNextIncarnation(t *testing.T) {
	h := runningCluster(t, nil, nil)
	h.setNode("node-b", corev1.ConditionTrue, t0)
	if err := h.c.Delete(h.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}); err != nil {
		t.Fatal(err)
	}
	h.now = t0.Add(10 * time.Minute)
	var next *corev1.Pod
	h.beforeDelete(h.names.DriverPodName(), func() {
		h.forceRemove(h.names.DriverPodName())
		next = h.startIncarnation("node-b")
		h.setDriverStatus(runningStatus(h.now))
	})
	_ = h.reconcileRacing()

	if d := h.driver(); next == nil || d == nil || d.UID != next.UID {
		t.Errorf("the next incarnation %v on node-b was force-deleted by the fencing of the one before (S-0 now: %+v)", next, d)
	}
	for _, del := range h.deletes {
		if next != nil && del.uid == next.UID {
			t.Errorf("deleted the next incarnation: %+v", del)
		}
	}
}

// TestRaceStaleExecutorDeleteSparesTheLiveDriversExecutor: the cache lists an executor of the
// earlier incarnation; by the time driverset's delete arrives it is gone and an executor of the
// same name (Spark 2.4/3.0 names executors by number) belongs to the live driver. Deleting by name
// would kill the live driver's executor; the UID precondition makes the delete miss.
func TestRaceStaleExecutorDeleteSparesTheLiveDriversExecutor(t *testing.T) {
	h := newCluster(t, nil, nil)
	h.reconcile()
	h.setNode("node-a", corev1.ConditionTrue, t0)
	app := h.placeholder().Labels[contract.LabelSparkAppSelector]
	const name = "pi-exec-1"
	executor := func(owner types.UID) *corev1.Pod {
		t.Helper()
		yes := true
		e := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: h.p.Namespace,
				Labels: map[string]string{contract.LabelSparkAppSelector: app, contract.LabelSparkRole: contract.RoleExecutor,
					contract.LabelDriver: h.names.StatefulSet},
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1", Kind: "Pod", Name: h.names.DriverPodName(), UID: owner, Controller: &yes,
				}},
			},
			Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "spark-kubernetes-executor", Image: "apache/spark:3.5.3"}}},
		}
		if err := h.c.Create(h.ctx, e); err != nil {
			t.Fatal(err)
		}
		return e
	}
	executor("5d1f0c8e-old-incarnation")
	d := h.startIncarnation("", contract.GateStaleExecutors)
	h.setDriverStatus(pendingStatus())
	var live *corev1.Pod
	h.beforeDelete(name, func() {
		h.forceRemove(name)
		live = executor(d.UID)
	})
	_ = h.reconcileRacing()

	var got corev1.Pod
	err := h.c.Get(h.ctx, types.NamespacedName{Namespace: h.p.Namespace, Name: name}, &got)
	if live == nil || err != nil || got.UID != live.UID || got.DeletionTimestamp != nil {
		t.Errorf("the live driver's executor %s was deleted as a stale one (now: %v, Terminating %v)", name, err, got.DeletionTimestamp != nil)
	}
}

// TestReconcileIgnoresAnotherStatefulSetsPod: S-0 exists but belongs to another StatefulSet (a
// leftover of an earlier app of the same name, whose StatefulSet is gone and whose pod the garbage
// collector has not removed yet). Its exit is not this app's: the placeholder must not end, and
// nothing is restarted or counted.
func TestReconcileIgnoresAnotherStatefulSetsPod(t *testing.T) {
	for _, code := range []int{0, 1} {
		t.Run(fmt.Sprintf("exit %d", code), func(t *testing.T) {
			h := newCluster(t, nil, nil)
			h.reconcile()
			h.expectEvents([]string{"Normal Converted"}, nil)
			h.setNode("node-a", corev1.ConditionTrue, t0)
			yes := true
			leftover := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{
					Name: h.names.DriverPodName(), Namespace: h.p.Namespace,
					Labels: h.statefulSet().Spec.Template.Labels,
					OwnerReferences: []metav1.OwnerReference{{
						APIVersion: "apps/v1", Kind: "StatefulSet", Name: h.names.StatefulSet,
						UID: "9e8d7c6b-an-earlier-statefulset", Controller: &yes,
					}},
				},
				Spec: *h.statefulSet().Spec.Template.Spec.DeepCopy(),
			}
			leftover.Spec.NodeName = "node-a"
			if err := h.c.Create(h.ctx, leftover); err != nil {
				t.Fatal(err)
			}
			h.setDriverStatus(exitedStatus(code, t0))
			h.now = t0.Add(time.Hour)
			h.reconcile()

			p := h.placeholder()
			if isTerminal(p.Status.Phase) || p.Annotations[contract.AnnotationRestarts] != "" {
				t.Errorf("placeholder %s, restarts %q: another StatefulSet's pod decided this app", p.Status.Phase, p.Annotations[contract.AnnotationRestarts])
			}
			if s := h.statefulSet(); *s.Spec.Replicas != 1 {
				t.Errorf("StatefulSet replicas = %d, want 1", *s.Spec.Replicas)
			}
			if len(h.deletes) != 0 {
				t.Errorf("deleted %+v", h.deletes)
			}
			h.expectEvents(nil, nil)
		})
	}
}

// TestReconcilePodDeletedIsARecovery: the driver pod is deleted on a healthy node (an eviction, a
// drain, kubectl delete of S-0). That is no process failure but a recovery, measured from the
// deletion to the next incarnation running: one observation with cause pod-deleted.
func TestReconcilePodDeletedIsARecovery(t *testing.T) {
	reg, m := newMetrics(t)
	h := runningCluster(t, map[string]string{contract.AnnotationMaxRestarts: "0"}, m)
	first := h.driver()
	if err := h.c.Delete(h.ctx, first); err != nil { // graceful: Terminating until its kubelet is done
		t.Fatal(err)
	}
	// wrap records the kill (143) just after the deletion; it is not the application's exit.
	h.setDriverStatus(exitedStatus(143, h.driver().DeletionTimestamp.Add(time.Second)))
	h.reconcile()
	p := h.placeholder()
	rec := lostOf(p)
	if rec == nil || rec.Cause != CausePodDeleted || rec.Pod != first.UID {
		t.Fatalf("loss record %+v after the driver pod was deleted, want cause %s for pod %s", rec, CausePodDeleted, first.UID)
	}
	if isTerminal(p.Status.Phase) || p.Annotations[contract.AnnotationRestarts] != "" {
		t.Errorf("placeholder %s, restarts %q: a deletion from outside was taken for the driver's failure", p.Status.Phase, p.Annotations[contract.AnnotationRestarts])
	}

	h.stopped(h.names.DriverPodName())
	h.startIncarnation("node-a")
	h.setDriverStatus(runningStatus(rec.Since.Add(12 * time.Second)))
	h.reconcile()
	h.expectEvents([]string{"Normal Recovered"}, map[string][]string{"Recovered": {"12.0s", CausePodDeleted}})
	if count, sum := histogram(t, reg, "driverset_driver_recovery_seconds", CausePodDeleted); count != 1 || sum != 12 {
		t.Errorf("recovery histogram {cause=%s}: count %d sum %v, want 1 observation of 12s", CausePodDeleted, count, sum)
	}
	if lostOf(h.placeholder()) != nil {
		t.Error("loss record kept after the recovery")
	}
}

// TestReconcileLeavesAPlaceholderBeingDeleted: deleting the placeholder stops the app (its
// StatefulSet and Service go with it through their ownerReferences). One that is being deleted,
// held by someone's finalizer, must not get a new StatefulSet (a driver that starts as the app is
// being stopped) or a status write; driverset's own finalizer goes (no driver pod to wait for),
// the other's stays.
func TestReconcileLeavesAPlaceholderBeingDeleted(t *testing.T) {
	h := newCluster(t, nil, nil)
	p := h.placeholder()
	p.Finalizers = append(p.Finalizers, "example.com/audit")
	if err := h.c.Update(h.ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Delete(h.ctx, p); err != nil {
		t.Fatal(err)
	}
	if p = h.placeholder(); p.DeletionTimestamp == nil {
		t.Fatal("the placeholder is not being deleted")
	}
	h.reconcile()
	if len(h.creates) != 0 {
		t.Errorf("created %v for a placeholder being deleted", h.creates)
	}
	if got := h.placeholder(); !equality.Semantic.DeepEqual(got.Status, p.Status) || !slices.Equal(got.Finalizers, []string{"example.com/audit"}) {
		t.Errorf("the placeholder being deleted was written: %+v, finalizers %v", got.Status, got.Finalizers)
	}
	h.expectEvents(nil, nil)
}

// TestRecoveryIsToldOnceOnAStaleCache: right after driverset recorded a recovery (the Recovered
// Event, the recovery histogram) and cleared the loss record, a second pass reads the placeholder
// from a cache that has not seen the clearing yet. It must tell nothing twice: the record is
// cleared under the optimistic lock first, and only that write's success tells the recovery.
func TestRecoveryIsToldOnceOnAStaleCache(t *testing.T) {
	reg, m := newMetrics(t)
	h := runningCluster(t, nil, m)
	lost := t0.Add(10 * time.Minute)
	h.setNode("node-a", corev1.ConditionUnknown, lost,
		corev1.Taint{Key: TaintOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})
	h.now = lost.Add(time.Second)
	h.reconcile()
	h.expectEvents([]string{"Warning NodeLost", "Warning OutOfService"}, nil)
	h.setNode("node-b", corev1.ConditionTrue, t0)
	h.startIncarnation("node-b")
	h.setDriverStatus(runningStatus(lost.Add(5 * time.Second)))
	h.now = lost.Add(6 * time.Second)
	stale := h.placeholder() // still with its loss record
	h.reconcile()
	h.expectEvents([]string{"Normal Recovered"}, nil)

	h.staleCache(stale)
	_ = h.reconcileRacing()
	h.expectEvents(nil, nil)
	if count, _ := histogram(t, reg, "driverset_driver_recovery_seconds", CauseOutOfService); count != 1 {
		t.Errorf("recoveries measured = %d, want 1", count)
	}
}

// TestRecoveryToldWhenOutcomesGoesFirst: driverset's leader is evicted with the driver (a drain
// of their node): S-0 is deleted while nobody leads, and wrap records the deletion's SIGTERM. The
// new leader's Outcomes reconciler may look at the held S-0 before the placeholder's pass has
// recorded the loss. It let the pod go at once ("stopped from outside"), the StatefulSet made the
// next incarnation, and the placeholder's pass, which never saw the deleted pod, told it as
// DriverRunning: no Recovered Event, no recovery measured. The pod is now held until the loss is
// recorded (bounded, as for the kubelet's cause), and the placeholder's pass lets it go itself.
func TestRecoveryToldWhenOutcomesGoesFirst(t *testing.T) {
	reg, m := newMetrics(t)
	h := runningCluster(t, nil, m)
	first := h.driver()
	if err := h.c.Delete(h.ctx, first); err != nil { // graceful: the eviction of a drain
		t.Fatal(err)
	}
	st := runningStatus(t0.Add(30 * time.Second))
	st.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 143, Reason: "Error", Message: wrap.Record(143, "", true),
		StartedAt: metav1.NewTime(t0.Add(30 * time.Second)), FinishedAt: metav1.NewTime(h.driver().DeletionTimestamp.Add(time.Second))}}
	h.setDriverStatus(st)
	h.releaseOutcome() // the new leader's Outcomes reconciler, before any placeholder pass
	h.stopped(h.names.DriverPodName())
	h.reconcile()
	if d := h.driver(); d != nil {
		t.Fatalf("S-0 %s still there after the placeholder's pass (finalizers %v)", d.UID, d.Finalizers)
	}
	h.startIncarnation("node-a")
	h.setDriverStatus(runningStatus(h.now.Add(12 * time.Second)))
	h.now = h.now.Add(13 * time.Second)
	h.reconcile()
	h.expectEvents([]string{"Normal Recovered"}, map[string][]string{"Recovered": {CausePodDeleted}})
	if count, _ := histogram(t, reg, "driverset_driver_recovery_seconds", CausePodDeleted); count != 1 {
		t.Errorf("recoveries measured = %d, want 1", count)
	}
}
