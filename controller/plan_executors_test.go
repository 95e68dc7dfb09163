package controller

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/driverset/driverset/contract"
)

// TestPlanStaleExecutors: the executors earlier incarnations left go before S-0's gate is lifted;
// one is force-deleted only on a node the apiserver, not just the cache, says is proven down, or
// once it is terminating on a node no kubelet will confirm its end from.
func TestPlanStaleExecutors(t *testing.T) {
	yes := true
	p := planPlaceholder(nil)
	driver := planDriver("inc-2", pendingStatus())
	driver.Spec.NodeName = ""
	executor := func(name, node string, owner types.UID, terminating bool) corev1.Pod {
		e := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "jobs", UID: types.UID(name + "-uid"),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "pi-driver-0", UID: owner, Controller: &yes}}},
			Spec: corev1.PodSpec{NodeName: node}}
		if terminating {
			e.DeletionTimestamp = &metav1.Time{Time: t0}
		}
		return e
	}
	// Spark's StatefulSet allocator: an executor controlled by the set of an incarnation of the app.
	p.Labels = map[string]string{contract.LabelSparkAppSelector: "spark-abc"}
	setExecutor := func(name, node string, terminating bool) corev1.Pod {
		e := executor(name, node, "", terminating)
		e.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "spark-s-spark-abc-0a1b2c3d-0", UID: "set-uid", Controller: &yes}}
		return e
	}
	ready := nodeWith(corev1.ConditionTrue, t0.Add(-time.Hour))
	notReady := nodeWith(corev1.ConditionUnknown, t0.Add(-time.Hour))
	outOfService := nodeWith(corev1.ConditionUnknown, t0.Add(-time.Hour), corev1.Taint{Key: TaintOutOfService, Effect: corev1.TaintEffectNoExecute})
	snapshot := func(executors []corev1.Pod, cached map[string]*corev1.Node, live map[string]*corev1.Node) *Snapshot {
		s := &Snapshot{Placeholder: reading(p, FromCache, t0), Driver: reading(driver, FromCache, t0),
			Executors: reading(executors, FromCache, t0), ExecutorNodes: map[string]Read[*corev1.Node]{}, LiveNodes: live}
		for name, n := range cached {
			s.ExecutorNodes[name] = reading(n, FromCache, t0)
		}
		return s
	}
	on := func(n *corev1.Node) map[string]*corev1.Node { return map[string]*corev1.Node{"node-a": n} }
	// Objects the garbage collector removes after an earlier incarnation's driver pod, as their
	// readers kept them: Spark's executor StatefulSets (ExecutorSetsOfIncarnation), with or
	// without pods, and the executor claims its driver made (ExecutorClaimsOfIncarnation), once
	// no pod mounts them.
	metas := func(names ...string) Read[[]metav1.PartialObjectMetadata] {
		var out []metav1.PartialObjectMetadata
		for _, n := range names {
			out = append(out, metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "jobs"}})
		}
		return reading(out, FromCache, t0)
	}
	withSets := func(s *Snapshot, names ...string) *Snapshot { s.ExecutorSets = metas(names...); return s }
	withClaims := func(s *Snapshot, names ...string) *Snapshot { s.ExecutorClaims = metas(names...); return s }

	cases := []struct {
		name  string
		s     *Snapshot
		need  []Need
		steps []string // "delete e1", "force e1", "lift", "lift unless stale live"
		note  string
	}{
		{name: "none: the gate is lifted", s: snapshot(nil, nil, nil), steps: []string{"lift"}},
		{name: "only S-0's own executors: not stale, the gate is lifted",
			s: snapshot([]corev1.Pod{executor("e1", "node-a", "inc-2", false)}, on(ready), nil), steps: []string{"lift"}},
		{name: "a stale one on a Ready node: deleted gracefully, the gate waits",
			s: snapshot([]corev1.Pod{executor("e1", "node-a", "inc-1", false)}, on(ready), nil), steps: []string{"delete e1"}, note: "waits for 1 executor(s)"},
		{name: "a stale one terminating on a Ready node: its kubelet ends it, waited for",
			s: snapshot([]corev1.Pod{executor("e1", "node-a", "inc-1", true)}, on(ready), nil), note: "waits for 1 executor(s)"},
		{name: "a stale one terminating on a node not Ready: force-deleted, the gate lifted once the apiserver lists none",
			s: snapshot([]corev1.Pod{executor("e1", "node-a", "inc-1", true)}, on(notReady), nil), steps: []string{"force e1", "lift unless stale live"},
			note: "waits for 1 executor(s)"},
		{name: "a stale one on a node the cache says is out of service: asks for the apiserver's Node",
			s: snapshot([]corev1.Pod{executor("e1", "node-a", "inc-1", false)}, on(outOfService), map[string]*corev1.Node{}), need: []Need{NeedExecutorNodesLive}},
		{name: "the apiserver says out of service too: force-deleted",
			s: snapshot([]corev1.Pod{executor("e1", "node-a", "inc-1", false)}, on(outOfService), on(outOfService)), steps: []string{"force e1", "lift unless stale live"},
			note: "waits for 1 executor(s)"},
		{name: "the apiserver says it is back: deleted gracefully",
			s: snapshot([]corev1.Pod{executor("e1", "node-a", "inc-1", false)}, on(outOfService), on(ready)), steps: []string{"delete e1"}, note: "waits for 1 executor(s)"},
		{name: "one forced, one graceful: the gate waits for the cache",
			s:     snapshot([]corev1.Pod{executor("e1", "node-a", "inc-1", true), executor("e2", "", "inc-1", false)}, on(notReady), nil),
			steps: []string{"force e1", "delete e2"}, note: "waits for 2 executor(s)"},
		{name: "a set's executor on a Ready node: left to the garbage collector (its set would make it again), the gate waits",
			s: snapshot([]corev1.Pod{setExecutor("s1", "node-a", false)}, on(ready), nil), note: "waits for 1 executor(s)"},
		{name: "a set's executor on a node out of service: still left to the garbage collector, nothing read live",
			s: snapshot([]corev1.Pod{setExecutor("s1", "node-a", false)}, on(outOfService), nil), note: "waits for 1 executor(s)"},
		{name: "an earlier incarnation's set with no pod left (scaled to 0): never deleted here, the gate waits for it",
			s: withSets(snapshot(nil, nil, nil), "spark-s-spark-abc-1"), note: "waits for 1 executor StatefulSet(s) of the previous driver to be removed by the garbage collector (spark-s-spark-abc-1)"},
		{name: "a set and a stale executor: the executor deleted, the gate waits for both",
			s:     withSets(snapshot([]corev1.Pod{executor("e1", "node-a", "inc-1", false)}, on(ready), nil), "spark-s-spark-abc-1"),
			steps: []string{"delete e1"}, note: "waits for 1 executor(s) and 1 executor StatefulSet(s)"},
		{name: "a set and a stale executor force-deleted: not lifted in the same pass, the set is still there",
			s:     withSets(snapshot([]corev1.Pod{executor("e1", "node-a", "inc-1", true)}, on(notReady), nil), "spark-s-spark-abc-1"),
			steps: []string{"force e1"}, note: "waits for 1 executor(s) and 1 executor StatefulSet(s)"},
		{name: "an earlier incarnation's executor claim: never deleted here, the gate waits for it",
			s:    withClaims(snapshot(nil, nil, nil), "pi-exec-1-pvc-0"),
			note: "waits for 1 executor claim(s) of the previous driver to be removed by the garbage collector (pi-exec-1-pvc-0)"},
		{name: "a claim and the stale executor that mounts it force-deleted: not lifted in the same pass, the claim is still there",
			s:     withClaims(snapshot([]corev1.Pod{executor("e1", "node-a", "inc-1", true)}, on(notReady), nil), "pi-exec-1-pvc-0"),
			steps: []string{"force e1"}, note: "waits for 1 executor(s) and 1 executor claim(s) of the previous driver to be removed (pi-exec-1-pvc-0)"},
		{name: "a set and claims: the gate waits for all, each named",
			s:    withClaims(withSets(snapshot(nil, nil, nil), "spark-s-spark-abc-1"), "c1", "c2", "c3", "c4"),
			note: "waits for 1 executor StatefulSet(s) and 4 executor claim(s) of the previous driver to be removed by the garbage collector (spark-s-spark-abc-1; c1, c2, c3 and 1 more)"},
		{name: "a set's executor the garbage collector deleted, on a node not Ready: force-deleted",
			s: snapshot([]corev1.Pod{setExecutor("s1", "node-a", true)}, on(notReady), nil), steps: []string{"force s1", "lift unless stale live"},
			note: "waits for 1 executor(s)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := planStaleExecutors(c.s)
			if !slices.Equal(g.Need, c.need) {
				t.Fatalf("needs %v, want %v", g.Need, c.need)
			}
			var steps []string
			for _, st := range g.Steps {
				switch st := st.(type) {
				case deleteExecutorStep:
					verb := "delete"
					if st.Force {
						verb = "force"
					}
					steps = append(steps, verb+" "+st.Pod.Name)
				case liftGateStep:
					steps = append(steps, map[bool]string{false: "lift", true: "lift unless stale live"}[st.UnlessStaleLive])
				default:
					steps = append(steps, fmt.Sprintf("%T", st))
				}
			}
			if !slices.Equal(steps, c.steps) {
				t.Errorf("steps %v, want %v", steps, c.steps)
			}
			if c.note == "" && g.Note != "" || !strings.Contains(g.Note, c.note) {
				t.Errorf("note %q, want %q", g.Note, c.note)
			}
		})
	}
}
