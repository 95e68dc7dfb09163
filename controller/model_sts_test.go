package controller

import (
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The rest of the cluster's model, after k8s v1.37:
//
//   - The StatefulSet controller (pkg/controller/statefulset/stateful_set_control.go,
//     processReplica): it creates S-0 from S's template only while S wants 1 replica and no pod
//     named S-0 exists (a Terminating one included); it deletes S-0 when its phase is Failed or
//     Succeeded and it is not being deleted yet, and when S is scaled to 0.
//   - The scheduler binds S-0 to a node whose Node is Ready and carries no NoSchedule or NoExecute
//     taint (none is tolerated in the model); it knows only what the apiserver says.
//   - The node lifecycle controller marks a node that stopped reporting Ready=Unknown and taints
//     it unreachable (NoSchedule, NoExecute); a node that reports again is Ready and untainted.
//   - The taint manager's eviction is a graceful delete, as a user's kubectl delete pod is.
//   - PodGC (pkg/controller/podgc) force-deletes a pod whose Node is gone, and a Terminating pod on
//     a node that is not Ready and tainted out-of-service, marking it Failed with a
//     DisruptionTarget condition first.
//   - The garbage collector deletes (background propagation) an object whose controller owner is
//     gone.
//   - An admin deletes a Node or taints it out-of-service only once its machine is off.
//   - The apiserver gives a pod that is not scheduled, or already terminal, no grace period
//     (the harness's delete: no kubelet to wait for).

// events is every event enabled in w.
func (w *mworld) events() []mevent {
	var out []mevent
	out = append(out, w.kubeletEvents()...)
	out = append(out, w.nodeEvents()...)
	out = append(out, w.clusterEvents()...)
	out = append(out, w.userEvents()...)
	out = append(out, w.driversetEvents()...)
	out = append(out, w.claimEvents()...)
	out = append(out, w.tokenEvents()...)
	return slices.DeleteFunc(out, func(e mevent) bool { return !w.cfg.has(e.kind) })
}

func (w *mworld) placeholder() *corev1.Pod {
	var p corev1.Pod
	if err := w.h.c.Get(w.ctx, w.h.p, &p); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		w.t.Fatal(err)
	}
	return &p
}

// statefulSetsOfP are the names of every StatefulSet P controls on the apiserver, whatever their
// names: more than one is a second driver waiting to start.
func (w *mworld) statefulSetsOfP() []string {
	p := w.placeholder()
	if p == nil {
		return nil
	}
	var list appsv1.StatefulSetList
	if err := w.h.c.List(w.ctx, &list, client.InNamespace(p.Namespace)); err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for i := range list.Items {
		if metav1.IsControlledBy(&list.Items[i], p) {
			out = append(out, list.Items[i].Name)
		}
	}
	return out
}

func (w *mworld) statefulSet() *appsv1.StatefulSet {
	var s appsv1.StatefulSet
	if err := w.h.c.Get(w.ctx, types.NamespacedName{Namespace: w.h.p.Namespace, Name: w.h.names.StatefulSet}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		w.t.Fatal(err)
	}
	return &s
}

func (w *mworld) node(name string) *corev1.Node {
	var n corev1.Node
	if err := w.h.c.Get(w.ctx, types.NamespacedName{Name: name}, &n); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		w.t.Fatal(err)
	}
	return &n
}

// deletePod deletes pod, gracefully or with grace 0, with its UID as precondition.
func (w *mworld) deletePod(pod *corev1.Pod, force bool) {
	opts := []client.DeleteOption{client.Preconditions{UID: &pod.UID}}
	if force {
		opts = append(opts, client.GracePeriodSeconds(0))
	}
	if err := w.h.c.Delete(w.ctx, pod, opts...); err != nil && !apierrors.IsNotFound(err) {
		w.t.Fatalf("delete pod %s: %v", pod.Name, err)
	}
}

// schedulable is the first node the scheduler would bind S-0 to, "" when none may take it.
func (w *mworld) schedulable() string {
	for _, name := range modelNodes {
		n := w.node(name)
		if n == nil {
			continue
		}
		if c := nodeReady(n); c == nil || c.Status != corev1.ConditionTrue {
			continue
		}
		if !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		}) {
			return name
		}
	}
	return ""
}

// stsCreate is the StatefulSet controller making S-0, bound at once where the scheduler would.
func (w *mworld) stsCreate() mevent {
	return mevent{name: "StatefulSet controller creates S-0", kind: kindCluster, apply: func(w *mworld) {
		if prev := w.m.lastInc(); prev != nil && prev.OwnExit != nil && prev.OwnExitSeen && prev.OwnExitBeforeDelete {
			p := w.placeholder()
			var counted types.UID
			if p != nil { // gone before its StatefulSet: its finalizer taken off by someone
				_, counted = restartsOf(p)
			}
			lost := counted != prev.UID && (p == nil || !isTerminal(p.Status.Phase))
			switch {
			case *prev.OwnExit == 0:
				w.m.Broken = fmt.Sprintf("%s: S-0 made again after incarnation #%d's driver exited 0", promiseNoRerun, len(w.m.Incs))
			case lost:
				w.m.Broken = fmt.Sprintf("%s: incarnation #%d's exit %d was never counted, and the next one is made", promiseExits, len(w.m.Incs), *prev.OwnExit)
			}
		}
		node := w.schedulable()
		gates := w.heldAtAdmission()
		if len(gates) > 0 {
			node = "" // the scheduler binds no gated pod
		}
		d := w.h.startIncarnation(node, gates...)
		w.m.Incs = append(w.m.Incs, &minc{UID: d.UID, Node: node})
	}}
}

func (m *mstate) lastInc() *minc {
	if len(m.Incs) == 0 {
		return nil
	}
	return m.Incs[len(m.Incs)-1]
}

// clusterEvents are the controllers': the StatefulSet controller, the scheduler, the node
// lifecycle controller, PodGC, the garbage collector.
func (w *mworld) clusterEvents() []mevent {
	var out []mevent
	s := w.statefulSet()
	d := w.h.driver()
	if s != nil && s.DeletionTimestamp == nil && s.Spec.Replicas != nil && *s.Spec.Replicas == 1 && d == nil {
		out = append(out, w.stsCreate())
	}
	if d != nil && d.DeletionTimestamp == nil && isTerminal(d.Status.Phase) {
		out = append(out, mevent{name: "StatefulSet controller deletes " + string(d.Status.Phase) + " S-0", kind: kindCluster, apply: func(w *mworld) {
			w.deletePod(w.h.driver(), false)
		}})
	}
	if d != nil && d.DeletionTimestamp == nil && s != nil && s.Spec.Replicas != nil && *s.Spec.Replicas == 0 {
		out = append(out, mevent{name: "StatefulSet controller deletes S-0 (scaled to 0)", kind: kindCluster, apply: func(w *mworld) {
			w.deletePod(w.h.driver(), false)
		}})
	}
	if d != nil && d.Spec.NodeName == "" && d.DeletionTimestamp == nil && len(d.Spec.SchedulingGates) == 0 && w.schedulable() != "" {
		out = append(out, mevent{name: "scheduler binds S-0 to " + w.schedulable(), kind: kindCluster, apply: func(w *mworld) {
			d := w.h.driver()
			d.Spec.NodeName = w.schedulable()
			if err := w.h.c.Update(w.ctx, d); err != nil {
				w.t.Fatal(err)
			}
			w.m.lastInc().Node = d.Spec.NodeName
		}})
	}
	if d != nil && d.Spec.NodeName != "" && !forceDeleted(d) {
		n := w.node(d.Spec.NodeName)
		if n == nil || d.DeletionTimestamp != nil && provenDown(d, n) == CauseOutOfService {
			out = append(out, mevent{name: "PodGC force-deletes S-0 on " + d.Spec.NodeName, kind: kindCluster, apply: func(w *mworld) {
				d := w.h.driver()
				if !isTerminal(d.Status.Phase) {
					d.Status.Phase = corev1.PodFailed
				}
				d.Status.Conditions = append(d.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget,
					Status: corev1.ConditionTrue, Reason: "DeletionByPodGC", LastTransitionTime: metaTime(w.m.now())})
				if err := w.h.c.Status().Update(w.ctx, d); err != nil {
					w.t.Fatal(err)
				}
				w.deletePod(d, true)
				w.m.lastInc().PodGC = true
			}})
		}
	}
	if orphans := append(w.orphans(), w.orphanLeftovers()...); len(orphans) > 0 {
		out = append(out, mevent{name: "garbage collector deletes what lost its owner", kind: kindCluster, apply: func(w *mworld) {
			for _, o := range append(w.orphans(), w.orphanLeftovers()...) {
				if err := w.h.c.Delete(w.ctx, o); err != nil && !apierrors.IsNotFound(err) {
					w.t.Fatal(err)
				}
			}
		}})
	}
	return out
}

// forceDeleted reports whether pod was deleted with grace 0 (PodGC does not delete it again).
func forceDeleted(pod *corev1.Pod) bool {
	return pod.DeletionGracePeriodSeconds != nil && *pod.DeletionGracePeriodSeconds == 0
}

// orphans are the objects of the app whose controller owner is gone (by UID), not being deleted.
func (w *mworld) orphans() []client.Object {
	var out []client.Object
	var pUID, sUID types.UID // "" when gone
	if p := w.placeholder(); p != nil {
		pUID = p.UID
	}
	s := w.statefulSet()
	if s != nil {
		sUID = s.UID
	}
	var svc corev1.Service
	hasSvc := w.h.c.Get(w.ctx, types.NamespacedName{Namespace: w.h.p.Namespace, Name: w.h.names.Service}, &svc) == nil
	orphaned := func(o metav1.Object, owner types.UID) bool {
		ref := metav1.GetControllerOf(o)
		return o.GetDeletionTimestamp() == nil && ref != nil && ref.UID != owner
	}
	if s != nil && orphaned(s, pUID) {
		out = append(out, s)
	}
	if hasSvc && orphaned(&svc, pUID) {
		out = append(out, &svc)
	}
	if d := w.h.driver(); d != nil && orphaned(d, sUID) {
		out = append(out, d)
	}
	return out
}

// nodeEvents are the machines' and the Node objects': partitions, deaths, the node lifecycle
// controller, an admin's proof. Only nodes where something of the app is are involved.
func (w *mworld) nodeEvents() []mevent {
	var out []mevent
	involved := map[string]bool{}
	for _, inc := range w.m.Incs {
		if inc.Node != "" && (inc.Proc == procRunning || w.podOf(inc) != nil) {
			involved[inc.Node] = true
		}
	}
	for _, name := range modelNodes {
		machine, n := w.m.Machines[name], w.node(name)
		if machine == machineCut {
			out = append(out, mevent{name: "partition of " + name + " heals", kind: kindNode, apply: func(w *mworld) {
				w.m.Machines[name] = machineUp
				w.setNode(name, corev1.ConditionTrue)
			}})
		}
		if !involved[name] {
			continue
		}
		if machine == machineUp {
			out = append(out, mevent{name: name + " is cut off (its processes run on)", kind: kindNode, apply: func(w *mworld) {
				w.m.Machines[name] = machineCut
			}})
		}
		if machine != machineDead {
			out = append(out, mevent{name: name + " dies", kind: kindNode, apply: func(w *mworld) { w.kill(name) }})
		}
		if machine != machineUp && n != nil && (nodeReady(n) == nil || nodeReady(n).Status == corev1.ConditionTrue) {
			out = append(out, mevent{name: "node lifecycle controller: " + name + " Unknown, tainted unreachable", kind: kindNode, apply: func(w *mworld) {
				w.setNode(name, corev1.ConditionUnknown, unreachableTaints()...)
			}})
		}
		if machine == machineDead && n != nil && !hasTaint(n, TaintOutOfService) && nodeReady(n) != nil && nodeReady(n).Status != corev1.ConditionTrue {
			out = append(out, mevent{name: "admin taints " + name + " out-of-service", kind: kindNode, apply: func(w *mworld) {
				n := w.node(name)
				n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: TaintOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})
				if err := w.h.c.Update(w.ctx, n); err != nil {
					w.t.Fatal(err)
				}
			}})
		}
		if machine == machineDead && n != nil {
			out = append(out, mevent{name: "admin deletes Node " + name, kind: kindNode, apply: func(w *mworld) {
				if err := w.h.c.Delete(w.ctx, w.node(name)); err != nil {
					w.t.Fatal(err)
				}
			}})
		}
	}
	return out
}

// kill turns machine name off: every process on it ends.
func (w *mworld) kill(name string) {
	w.m.Machines[name] = machineDead
	for _, inc := range w.m.Incs {
		if inc.Node == name {
			if inc.Proc == procRunning {
				inc.Proc = procEnded
			}
			inc.Ctr = ctrGone
		}
	}
}

// setNode writes node name's Ready condition (since now, when it changes) and taints; a missing
// Node is registered again by its kubelet.
func (w *mworld) setNode(name string, ready corev1.ConditionStatus, taints ...corev1.Taint) {
	since := w.m.now()
	if n := w.node(name); n != nil {
		if c := nodeReady(n); c != nil && c.Status == ready {
			since = c.LastTransitionTime.Time
		}
	}
	w.h.now = w.m.now()
	w.h.setNode(name, ready, since, taints...)
}

// userEvents are a user's: kubectl delete pod S-0, with and without --force, and deleting the
// app (its placeholder). A graceful delete is also what the taint manager's eviction does.
func (w *mworld) userEvents() []mevent {
	var out []mevent
	if d := w.h.driver(); d != nil {
		if d.DeletionTimestamp == nil {
			out = append(out, mevent{name: "kubectl delete pod S-0 (or a taint eviction)", kind: kindDelete, apply: func(w *mworld) {
				w.deletePod(w.h.driver(), false)
			}})
		}
		if !forceDeleted(d) {
			out = append(out, mevent{name: "kubectl delete pod S-0 --force", kind: kindForce, apply: func(w *mworld) {
				w.deletePod(w.h.driver(), true)
				w.m.lastInc().ForcedByUser = true
			}})
		}
	}
	if p := w.placeholder(); p != nil && p.DeletionTimestamp == nil {
		out = append(out, mevent{name: "user deletes the placeholder (the app)", kind: kindApp, apply: func(w *mworld) {
			p := w.placeholder()
			if err := w.h.c.Delete(w.ctx, p, client.Preconditions{UID: &p.UID}); err != nil {
				w.t.Fatal(err)
			}
		}})
	}
	return out
}

// driversetEvents are driverset's own and time's: another pass, a stop, a new leader (fresh
// cache), a pass on a cache one write behind, and time passing.
func (w *mworld) driversetEvents() []mevent {
	var out []mevent
	if w.m.Down {
		out = append(out, mevent{name: "driverset starts again (new leader, cache synced)", kind: kindDriverset, own: true, apply: func(w *mworld) {
			w.m.Down = false
			w.settle()
		}})
	} else {
		out = append(out,
			mevent{name: "driverset stops (crash, leader lost)", kind: kindDriverset, own: true, apply: func(w *mworld) { w.m.Down = true }})
		if w.stale != nil {
			out = append(out, mevent{name: "driverset passes on a cache one write behind (new leader, lagging watch)", kind: kindStale, own: true, apply: func(w *mworld) {
				w.pass(w.stale)
			}})
		}
		out = append(out, mevent{name: "driverset passes on a cache that has not seen S (new leader, just after S was made)", kind: kindStale, own: true, apply: func(w *mworld) {
			w.pass(slices.DeleteFunc(w.snapshot(), func(o client.Object) bool { _, isSts := o.(*appsv1.StatefulSet); return isSts }))
		}})
	}
	if w.m.Ticks < modelTicks {
		out = append(out, mevent{name: fmt.Sprintf("time passes (%s)", modelTick), kind: kindTime, apply: func(w *mworld) {
			w.m.Ticks++
			w.m.Seq = 0
			w.h.now = w.m.now()
			if w.cfg.fencedUnderneath {
				for name, machine := range w.m.Machines {
					if machine == machineCut {
						w.kill(name)
					}
				}
			}
		}})
	}
	return out
}

// settled checks the fourth promise: once the app is deleted and every machine is up or proven
// down, the cluster's own actors (kubelets, controllers, driverset) leave nothing of the app.
// It plays them in a fixed order until none has anything to do, a minute between steps.
func (w *mworld) settled() []mviolation {
	p := w.placeholder()
	if p != nil && p.DeletionTimestamp == nil {
		return nil
	}
	for _, name := range modelNodes {
		n := w.node(name)
		switch w.m.Machines[name] {
		case machineCut:
			return nil // held until proof, by design
		case machineDead:
			if n != nil && !hasTaint(n, TaintOutOfService) {
				return nil
			}
		}
	}
	// A copy: settling must not change the state the search goes on from.
	s := &mworld{t: w.t, ctx: w.ctx, m: w.m.clone(), cfg: w.cfg}
	s.h = &cluster{t: w.t, ctx: w.ctx, rec: w.h.rec, p: w.h.p, names: w.h.names}
	s.h.c = s.newClient(w.snapshot())
	var trail []string
	s.m.Down = false
	for i := 0; i < 40; i++ {
		s.m.Ticks++ // a tick crosses every wait of driverset's (outcomePoll, kubeletCauseWait)
		s.m.Seq = 0
		s.h.now = s.m.now()
		var next *mevent
		for _, e := range append(s.kubeletEvents(), s.clusterEvents()...) {
			if !e.process {
				next = &e
				break
			}
		}
		if next == nil {
			before := s.writes
			s.settle()
			if s.writes == before {
				break
			}
			trail = append(trail, "driverset passes")
			continue
		}
		trail = append(trail, next.name)
		s.step(*next)
	}
	var left []string
	if s.placeholder() != nil {
		left = append(left, "the placeholder")
	}
	if s.statefulSet() != nil {
		left = append(left, "StatefulSet")
	}
	if d := s.h.driver(); d != nil {
		left = append(left, fmt.Sprintf("S-0 (Terminating %v, finalizers %v)", d.DeletionTimestamp != nil, d.Finalizers))
	}
	for i, inc := range s.m.Incs {
		if inc.Proc == procRunning {
			left = append(left, fmt.Sprintf("the driver process of #%d", i+1))
		}
	}
	if len(left) == 0 {
		return nil
	}
	return []mviolation{{promiseNoLeftover, fmt.Sprintf("left %v after the app was deleted (settled by %v)", left, trail)}}
}
