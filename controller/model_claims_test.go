package controller

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
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

// kindClaims: the driver makes its executor claim. Explored only where a scenario names it.
const kindClaims = "claims"

// promiseClaims is the claims' promise, beside the four of the brief.
const promiseClaims = "5 no driver meets a lost incarnation's executor claim"

// claimEvents: the running driver of the last incarnation makes its executor claim, once.
func (w *mworld) claimEvents() []mevent {
	inc := w.m.lastInc()
	if inc == nil || inc.Proc != procRunning || w.m.Machines[inc.Node] != machineUp || w.podOf(inc) == nil {
		return nil
	}
	for _, c := range w.claims() {
		if ref := metav1.GetControllerOf(&c); ref != nil && ref.UID == inc.UID {
			return nil
		}
	}
	n := len(w.m.Incs)
	return []mevent{{name: fmt.Sprintf("driver #%d makes its executor claim", n), kind: kindClaims, apply: func(w *mworld) {
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
	}}}
}

// claims are the namespace's claims on the apiserver.
func (w *mworld) claims() []corev1.PersistentVolumeClaim {
	var list corev1.PersistentVolumeClaimList
	if err := w.h.c.List(w.ctx, &list, client.InNamespace(w.h.p.Namespace)); err != nil {
		w.t.Fatal(err)
	}
	return list.Items
}

// orphanClaims are the claims whose owner pod is gone (by UID), not being deleted.
func (w *mworld) orphanClaims() []client.Object {
	if !w.cfg.has(kindClaims) {
		return nil
	}
	var live types.UID
	if d := w.h.driver(); d != nil {
		live = d.UID
	}
	var out []client.Object
	for _, c := range w.claims() {
		if ref := metav1.GetControllerOf(&c); c.DeletionTimestamp == nil && ref != nil && ref.UID != live {
			out = append(out, &c)
		}
	}
	return out
}

// heldAtAdmission is the gate the incarnations webhook gives the next S-0: the stale-executor
// gate while an earlier incarnation's executor claim exists (the pod being admitted has no UID).
func (w *mworld) heldAtAdmission() []string {
	if !w.cfg.has(kindClaims) {
		return nil
	}
	left, err := convert.ExecutorClaimsOfIncarnation(w.ctx, w.h.c, w.h.p.Namespace, w.h.names.DriverPodName(), "")
	if err != nil {
		w.t.Fatal(err)
	}
	if len(left) == 0 {
		return nil
	}
	return []string{contract.GateStaleExecutors}
}

// metClaims is why incarnation i's driver, starting now, meets an earlier one's executor claim
// ("" when it does not).
func (w *mworld) metClaims(i int) string {
	if !w.cfg.has(kindClaims) {
		return ""
	}
	var lost []string
	for _, c := range w.claims() {
		if ref := metav1.GetControllerOf(&c); ref != nil && ref.UID != w.m.Incs[i].UID {
			lost = append(lost, c.Name)
		}
	}
	if len(lost) == 0 {
		return ""
	}
	return fmt.Sprintf("%s: driver #%d started while %s of an earlier incarnation existed (its allocator would reuse it)",
		promiseClaims, i+1, strings.Join(lost, ", "))
}

// snapshotClaims adds the namespace's claims to a snapshot, where claims are modelled.
func (w *mworld) snapshotClaims(objs []client.Object) []client.Object {
	if !w.cfg.has(kindClaims) {
		return objs
	}
	for _, c := range w.claims() {
		objs = append(objs, c.DeepCopy())
	}
	return objs
}
