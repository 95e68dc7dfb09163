package controller

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// makeSetExecutor makes pod <set>-0 as the StatefulSet controller makes it for Spark's executor
// StatefulSet set (spark.kubernetes.allocation.pods.allocator=statefulset): controlled by the set,
// labelled as the driver's executors are (the set's template), on node.
func (h *cluster) makeSetExecutor(set, appID, node string) string {
	h.t.Helper()
	yes := true
	e := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: set + "-0", Namespace: h.p.Namespace,
			Labels: map[string]string{contract.LabelSparkAppSelector: appID, contract.LabelSparkRole: contract.RoleExecutor,
				contract.LabelDriver: h.names.StatefulSet},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "StatefulSet", Name: set, UID: types.UID("uid-" + set), Controller: &yes,
			}},
		},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "spark-kubernetes-executor", Image: "apache/spark:3.5.6"}}},
	}
	if err := h.c.Create(h.ctx, e); err != nil {
		h.t.Fatal(err)
	}
	return e.Name
}

// TestReconcileWaitsForTheExecutorsOfSparksStatefulSet (issue 34): under Spark's StatefulSet
// allocator an earlier incarnation's executors are controlled by its StatefulSet
// spark-s-<its app id>-0, which its S-0 owns. The next S-0 is held until they are gone, as for
// executors a driver pod controls; driverset does not delete them, since their set would make them
// again at once: the garbage collector deletes the set once its owner, the earlier S-0, is gone,
// and the set's pods with it. Another app's set is not this app's. Before, the gate was lifted in
// the first pass: the rule took only executors a driver pod controls.
func TestReconcileWaitsForTheExecutorsOfSparksStatefulSet(t *testing.T) {
	h := newCluster(t, nil, nil)
	h.reconcile()
	h.setNode("node-a", corev1.ConditionTrue, t0)
	app := h.placeholder().Labels[contract.LabelSparkAppSelector]
	if app == "" {
		t.Fatal("the harness's placeholder has no app id")
	}
	old := h.makeSetExecutor("spark-s-"+app+"-5d1f0c8e-0", app+"-5d1f0c8e", "node-a")
	other := h.makeSetExecutor("spark-s-spark-other-5d1f0c8e-0", "spark-other-5d1f0c8e", "node-a")
	h.deletes = nil

	d := h.startIncarnation("", contract.GateStaleExecutors)
	h.setDriverStatus(pendingStatus())
	h.reconcile()
	if !convert.HasGate(&h.driver().Spec, contract.GateStaleExecutors) {
		t.Fatalf("gate lifted while %s, an executor of an earlier incarnation's StatefulSet, remains", old)
	}
	if len(h.deletes) != 0 {
		t.Errorf("deleted %+v: an executor of a StatefulSet is made again by its set; the garbage collector removes both", h.deletes)
	}
	checkStatus(t, h.placeholder(), corev1.PodPending, "waiting", false, "1 executor(s)")

	// The garbage collector: the set's owner is gone, so the set and its pod go (the kubelet
	// confirms the pod's end).
	if err := h.c.Delete(h.ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: h.p.Namespace, Name: old}}); err != nil {
		t.Fatal(err)
	}
	h.stopped(old)
	h.reconcile()
	if convert.HasGate(&h.driver().Spec, contract.GateStaleExecutors) {
		t.Errorf("gate still on %s after the earlier incarnation's executor is gone (%s, another app's, is not this app's)", d.Name, other)
	}
}

// TestReconcileWaitsForAnEarlierIncarnationsExecutorSet (issue 34): a DStream app's incarnations
// share the id restored from its checkpoint, so the next driver makes an executor StatefulSet of
// the same name as the lost one's, and its create fails while that is there. A lost set with no
// pod left (dynamic allocation scaled it to 0) holds no executor: the set itself holds the next
// S-0 (convert.ExecutorSetOfApp) until the garbage collector removes it, after its owner, the lost
// S-0. driverset never deletes it; one named for another app's id (a DStream resubmitted onto that
// app's checkpoint restores it) is waited for too. A set the current S-0 controls, or another
// app's, is not.
func TestReconcileWaitsForAnEarlierIncarnationsExecutorSet(t *testing.T) {
	h := newCluster(t, nil, nil)
	h.r.ExecutorSets = h.c
	h.reconcile()
	app := h.placeholder().Labels[contract.LabelSparkAppSelector]
	yes := true
	set := func(name, pod string, owner types.UID) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.p.Namespace,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod, UID: owner, Controller: &yes}}}}
		if err := h.c.Create(h.ctx, s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	lost := set("spark-s-"+app+"-0", h.names.DriverPodName(), "uid-lost-s0")
	// A DStream app submitted again under another name onto another app's checkpoint: its sets are
	// named for that app's restored id, and controlled by this app's S-0.
	restored := set("spark-s-spark-restored-0", h.names.DriverPodName(), "uid-lost-s0")
	set("spark-s-spark-other-0", "other-driver-0", "uid-other-s0") // another app's
	h.deletes = nil

	d := h.startIncarnation("", contract.GateStaleExecutors)
	set("spark-s-"+app+"-1", h.names.DriverPodName(), d.UID) // the current incarnation's own: not stale
	h.setDriverStatus(pendingStatus())
	h.reconcile()
	if !convert.HasGate(&h.driver().Spec, contract.GateStaleExecutors) {
		t.Fatalf("gate lifted while %s, the lost incarnation's executor StatefulSet, remains", lost.Name)
	}
	if len(h.deletes) != 0 {
		t.Errorf("deleted %+v: the garbage collector removes the set", h.deletes)
	}
	checkStatus(t, h.placeholder(), corev1.PodPending, "waiting", false, "2 executor StatefulSet(s)")

	// The garbage collector removes the sets once the lost S-0 is gone.
	if err := h.c.Delete(h.ctx, lost); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	if !convert.HasGate(&h.driver().Spec, contract.GateStaleExecutors) {
		t.Fatalf("gate lifted while %s, the lost incarnation's set named for a restored id, remains", restored.Name)
	}
	if err := h.c.Delete(h.ctx, restored); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	if convert.HasGate(&h.driver().Spec, contract.GateStaleExecutors) {
		t.Errorf("gate still on %s after the lost incarnation's set is gone", d.Name)
	}
}

// TestReconcileWaitsForAnEarlierIncarnationsExecutorClaims (issue 34): a DStream app's next
// driver reuses any claim labelled with its restored app id, a lost incarnation's still
// Terminating too, and the executor made with one stays Pending. The claims a lost S-0 made
// (labelled driverset's by wrap's volume settings, controlled by that S-0) hold the next S-0
// until the garbage collector has removed them; driverset never deletes them. The current S-0's
// own claims, unlabelled ones and the placeholder's are not waited for.
func TestReconcileWaitsForAnEarlierIncarnationsExecutorClaims(t *testing.T) {
	h := newCluster(t, nil, nil)
	h.r.ExecutorSets = h.c
	h.reconcile()
	yes := true
	claim := func(name, owner string, uid types.UID, labelled bool) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.p.Namespace,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: owner, UID: uid, Controller: &yes}}}}
		if labelled {
			c.Labels = map[string]string{contract.LabelDriver: h.names.StatefulSet}
		}
		if err := h.c.Create(h.ctx, c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	lost := claim("spark-exec-1-pvc-0", h.names.DriverPodName(), "uid-lost-s0", true)
	claim("spark-exec-2-pvc-0", h.names.DriverPodName(), "uid-lost-s0", false)
	claim("spark-driver-pvc-0", h.p.Name, h.placeholder().UID, true)
	h.deletes = nil

	d := h.startIncarnation("", contract.GateStaleExecutors)
	claim("spark-exec-3-pvc-0", h.names.DriverPodName(), d.UID, true) // the current incarnation's own
	h.setDriverStatus(pendingStatus())
	h.reconcile()
	if !convert.HasGate(&h.driver().Spec, contract.GateStaleExecutors) {
		t.Fatalf("gate lifted while %s, the lost incarnation's executor claim, remains", lost.Name)
	}
	if len(h.deletes) != 0 {
		t.Errorf("deleted %+v: the garbage collector removes the claim", h.deletes)
	}
	checkStatus(t, h.placeholder(), corev1.PodPending, "waiting", false, "1 executor claim(s) of the previous driver")

	if err := h.c.Delete(h.ctx, lost); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	if convert.HasGate(&h.driver().Spec, contract.GateStaleExecutors) {
		t.Errorf("gate still on %s after the lost incarnation's claim is gone", d.Name)
	}
}
