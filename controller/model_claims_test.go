package controller

import (
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
	"github.com/driverset/driverset/webhook"
)

// Executor claims in the model (kindClaims; docs/design.md#executors-claims). A DStream app's
// incarnations share the app id its checkpoint restores, and Spark's allocator reuses any claim
// with that id, one being deleted too: the executor made with it never runs. Spark 4's driver
// labels the executor claims it makes driverset.dev/driver and owns them by its pod (S-0), so:
//
//   - the driver makes one claim while it runs and its machine reaches the apiserver;
//   - the garbage collector deletes a claim whose owner pod is gone (by UID): no executor mounts
//     one in the model, so nothing holds it (pvc-protection);
//   - the incarnations webhook creates the next S-0 with the stale-executor gate while a claim of
//     an earlier incarnation exists (the rule it and the planner share,
//     convert.ExecutorClaimsOfIncarnation), and the scheduler binds no gated pod;
//   - the promise: no driver starts while a claim an earlier incarnation's driver made exists
//     (its allocator would list it).

// kindClaims: the driver makes its executor claim; kindSets: it makes its executor StatefulSet
// (Spark's StatefulSet allocator, spark-s-<app id>-<profile>, owned by S-0: the next driver of a
// DStream makes one of the same name, whose create fails while the lost one is there). Explored
// only where a scenario names them.
const (
	kindClaims = "claims"
	kindSets   = "sets"
)

// promiseClaims is the claims' and sets' promise, beside the four of the brief.
const promiseClaims = "5 no driver meets a lost incarnation's executor claim or StatefulSet"

// modelSetName is the name of every incarnation's executor StatefulSet: a DStream's incarnations
// share one app id.
const modelSetName = "spark-s-spark-restored-0"

// claimEvents: the running driver of the last incarnation makes its executor claim, once.
func (w *mworld) claimEvents() []mevent {
	inc := w.m.lastInc()
	if inc == nil || inc.Proc != procRunning || w.m.Machines[inc.Node] != machineUp || w.podOf(inc) == nil {
		return nil
	}
	made := !w.cfg.has(kindClaims) || slices.ContainsFunc(w.claims(), func(c corev1.PersistentVolumeClaim) bool {
		ref := metav1.GetControllerOf(&c)
		return ref != nil && ref.UID == inc.UID
	})
	n := len(w.m.Incs)
	var out []mevent
	if w.cfg.has(kindSets) && len(w.executorSets()) == 0 {
		// Its create fails while a set of the name exists: only once none does.
		out = append(out, mevent{name: fmt.Sprintf("driver #%d makes its executor StatefulSet", n), kind: kindSets, apply: func(w *mworld) {
			yes := true
			s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: modelSetName, Namespace: w.h.p.Namespace,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: w.h.names.DriverPodName(),
					UID: w.m.lastInc().UID, Controller: &yes, BlockOwnerDeletion: &yes}}},
				Spec: appsv1.StatefulSetSpec{Replicas: new(int32(0))}}
			if err := w.h.c.Create(w.ctx, s); err != nil {
				w.t.Fatal(err)
			}
		}})
	}
	if made {
		return out
	}
	return append(out, mevent{name: fmt.Sprintf("driver #%d makes its executor claim", n), kind: kindClaims, apply: func(w *mworld) {
		yes := true
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("spark-exec-%d-pvc-0", n), Namespace: w.h.p.Namespace,
			Labels: map[string]string{contract.LabelDriver: w.h.names.StatefulSet, contract.LabelSparkAppSelector: "spark-restored"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: w.h.names.DriverPodName(),
				UID: w.m.lastInc().UID, Controller: &yes, BlockOwnerDeletion: &yes}}},
			Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
		if err := w.h.c.Create(w.ctx, c); err != nil {
			w.t.Fatal(err)
		}
	}})
}

// modelsLeftovers reports whether the scenario models executor claims or sets.
func (c modelConfig) modelsLeftovers() bool { return c.has(kindClaims) || c.has(kindSets) }

// executorSets are Spark's executor StatefulSets on the apiserver (not S).
func (w *mworld) executorSets() []client.Object {
	if !w.cfg.has(kindSets) {
		return nil
	}
	var list appsv1.StatefulSetList
	if err := w.h.c.List(w.ctx, &list, client.InNamespace(w.h.p.Namespace)); err != nil {
		w.t.Fatal(err)
	}
	var out []client.Object
	for i := range list.Items {
		if strings.HasPrefix(list.Items[i].Name, "spark-s-") {
			out = append(out, &list.Items[i])
		}
	}
	return out
}

// leftovers are the executor claims and sets on the apiserver.
func (w *mworld) leftovers() []client.Object {
	out := w.executorSets()
	if w.cfg.has(kindClaims) {
		for _, c := range w.claims() {
			out = append(out, c.DeepCopy())
		}
	}
	return out
}

// claims are the namespace's claims on the apiserver.
func (w *mworld) claims() []corev1.PersistentVolumeClaim {
	var list corev1.PersistentVolumeClaimList
	if err := w.h.c.List(w.ctx, &list, client.InNamespace(w.h.p.Namespace)); err != nil {
		w.t.Fatal(err)
	}
	return list.Items
}

// orphanLeftovers are the executor claims and sets whose owner pod is gone (by UID), not being
// deleted.
func (w *mworld) orphanLeftovers() []client.Object {
	var live types.UID
	if d := w.h.driver(); d != nil {
		live = d.UID
	}
	var out []client.Object
	for _, o := range w.leftovers() {
		if ref := metav1.GetControllerOf(o); o.GetDeletionTimestamp() == nil && ref != nil && ref.UID != live {
			out = append(out, o)
		}
	}
	return out
}

// heldAtAdmission is the gates the incarnations webhook gives the next S-0, which the StatefulSet
// controller submits unbound: its own decision (webhook.HoldIncarnation) on the earlier
// incarnations' executor claims and sets, read by the rules it and the planner share.
func (w *mworld) heldAtAdmission() []string {
	if !w.cfg.modelsLeftovers() {
		return nil
	}
	ns, pod := w.h.p.Namespace, w.h.names.DriverPodName()
	var left webhook.Leftovers
	var err error
	if left.Claims, err = convert.ExecutorClaimsOfIncarnation(w.ctx, w.h.c, ns, pod, ""); err != nil {
		w.t.Fatal(err)
	}
	if left.Sets, err = convert.ExecutorSetsOfIncarnation(w.ctx, w.h.c, ns, pod, ""); err != nil {
		w.t.Fatal(err)
	}
	next := &corev1.Pod{}
	webhook.HoldIncarnation(next, left)
	var gates []string
	for _, g := range next.Spec.SchedulingGates {
		gates = append(gates, g.Name)
	}
	return gates
}

// metClaims is why incarnation i's driver, starting now, meets an earlier one's executor claim
// or set ("" when it does not).
func (w *mworld) metClaims(i int) string {
	var lost []string
	for _, o := range w.leftovers() {
		if ref := metav1.GetControllerOf(o); ref != nil && ref.UID != w.m.Incs[i].UID {
			lost = append(lost, o.GetName())
		}
	}
	if len(lost) == 0 {
		return ""
	}
	return fmt.Sprintf("%s: driver #%d started while %s of an earlier incarnation existed (its allocator would reuse or collide with it)",
		promiseClaims, i+1, strings.Join(lost, ", "))
}

// snapshotClaims adds the namespace's executor claims and sets to a snapshot, where modelled (S
// is in it already).
func (w *mworld) snapshotClaims(objs []client.Object) []client.Object {
	return append(objs, w.leftovers()...)
}
