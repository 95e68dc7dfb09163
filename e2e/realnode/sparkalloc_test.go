//go:build testbed

package realnode

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/e2e/spark"
)

// sparkAllocEnv runs the cases of Spark's other executor allocations on real nodes (make
// e2e-spark-alloc): each is a whole Spark app through a node loss, too long for CI's budget.
const sparkAllocEnv = "DRIVERSET_SPARK_ALLOC"

// reRegisteredFrom is the driver's line for an executor that registered, with its address.
var reRegisteredFrom = regexp.MustCompile(`Registered executor \S+ \(([0-9.]+):\d+\) with ID (\d+)`) //nolint:gochecknoglobals // constant pattern

// TestRealSparkStatefulSetAllocatorThroughNodeLoss (issue 34, "Spark's StatefulSet executor
// allocator"): a real Spark batch job (each version chosen) with spark.kubernetes.allocation.pods.allocator=
// statefulset, its executors kept off the drivers' nodes, its driver's node killed mid-job and
// declared out of service. Spark makes one StatefulSet of executors per app id
// (spark-s-<app id>-<profile>, owned by the driver pod), so the executors' controller is that
// StatefulSet, not the driver pod. The same job without driverset comes first: what the user
// must see again. The job must finish once, and no executor of the lost
// incarnation may be left beside the next one: each is gone before the next S-0 is scheduled (what
// the incarnation gate promises for executors the driver owns), and none registers with the next
// driver.
func TestRealSparkStatefulSetAllocatorThroughNodeLoss(t *testing.T) {
	eachSparkAllocVersion(t, statefulSetAllocatorThroughNodeLoss)
}

// eachSparkAllocVersion runs run as a subtest for each real Spark version chosen, in make
// e2e-spark-alloc only.
func eachSparkAllocVersion(t *testing.T, run func(*testing.T, spark.Dist)) {
	t.Helper()
	if os.Getenv(sparkAllocEnv) == "" {
		t.Skipf("a make e2e-spark-alloc case (%s=1)", sparkAllocEnv)
	}
	if len(bed.images.spark) == 0 {
		t.Skipf("no real Spark version chosen (%s=none)", sparkVersionsEnv)
	}
	for _, d := range bed.images.spark {
		t.Run(d.Version, func(t *testing.T) { run(t, d) })
	}
}

func statefulSetAllocatorThroughNodeLoss(t *testing.T, d spark.Dist) {
	// Without driverset first: the allocator works with Spark's own app id.
	allocator := map[string]string{"spark.kubernetes.allocation.pods.allocator": "statefulset"}
	plain := runSparkJob(t, d, sparkJob{conf: allocator}, nil)
	plain.expectSucceeded(t)
	if t.Failed() {
		t.FailNow()
	}
	ns := namespace(t, nil)
	template := filepath.Join(t.TempDir(), "executor.yaml")
	if err := os.WriteFile(template, []byte(executorAntiAffinity), 0o644); err != nil {
		t.Fatal(err)
	}
	pods := watchPods(t, ns)
	sets := pollStatefulSets(t, ns)
	r := runSparkJob(t, d, sparkJob{resilient: true, namespace: ns, conf: map[string]string{
		"spark.kubernetes.allocation.pods.allocator": "statefulset",
		"spark.kubernetes.executor.podTemplateFile":  template,
	}}, killDriverNodeMidJob)
	pods.stop()
	sets.stop()
	r.expectSucceeded(t)
	r.expectSameAs(t, plain)
	// Labelled driverset.dev/driver by the set's template (S-0's --conf) and given the stable
	// name. (The StatefulSet controller made them: the audit log, which leaves out the test bed's
	// components, has no create of theirs to check webhooks in.)
	r.expectExecutorsLabelled(t)
	ids := r.attempts()
	t.Logf("app ids of the driver JVMs: %v", ids)
	for _, s := range sets.seen() {
		t.Logf("StatefulSet %s (uid %s), controlled by %s %s: seen %s, gone %s", s.name, s.uid, s.ownerKind, s.ownerName,
			s.first.Format("15:04:05.0"), s.goneAt())
	}
	if len(ids) != 2 {
		r.logDrivers(t)
		t.Fatalf("want the driver started twice (before and after its node died), saw %v", ids)
	}
	expectOwnAppIDs(t, ids)
	checkLostIncarnationsExecutorsGone(t, pods, r, ids[0])
}

// checkLostIncarnationsExecutorsGone holds the recovery to the gate's promise, from the pods'
// watch: every executor of the lost incarnation (app id lost) is gone before the next S-0 is
// scheduled, at least one of them ran on a live node, and none registered with the next driver.
func checkLostIncarnationsExecutorsGone(t *testing.T, pods *podWatch, r *sparkRun, lost string) {
	t.Helper()
	drivers := pods.named(r.names.DriverPodName())
	if len(drivers) < 2 {
		t.Fatalf("want two incarnations of %s in the pods' watch, saw %d", r.names.DriverPodName(), len(drivers))
	}
	first, next := drivers[0], drivers[1]
	t.Logf("first S-0 %s on %s: delete seen #%d, gone #%d; next S-0 %s: gated at admission %v, scheduled on %s #%d, running #%d",
		first.uid, first.node, first.deleting.seq, first.gone.seq, next.uid, next.gatedAtAdmission, next.node, next.scheduled.seq, next.running.seq)
	var old []*podRecord
	oldIPs := map[string]string{}
	for _, e := range pods.executors() {
		t.Logf("executor %s (app %s) on %s, ip %s, controlled by %s %s: running #%d, delete seen #%d (running then: %v), gone #%d",
			e.name, e.appID, e.node, e.ip, e.ownerKind, e.ownerName, e.running.seq, e.deleting.seq, e.runningAtDelete, e.gone.seq)
		if e.appID == lost {
			old = append(old, e)
			if e.ip != "" {
				oldIPs[e.ip] = e.name
			}
		}
	}
	if len(old) == 0 {
		t.Fatalf("the lost incarnation (app %s) made no executor seen by the watch", lost)
	}
	onLive := 0
	for _, e := range old {
		if e.node != first.node {
			onLive++
		}
		switch {
		case e.gone.zero():
			t.Errorf("executor %s of the lost incarnation was never removed", e.name)
		case next.scheduled.zero():
		case e.gone.seq > next.scheduled.seq:
			t.Errorf("the next S-0 was scheduled (#%d) while executor %s of the lost incarnation (controlled by %s %s) still existed (gone #%d, delete seen #%d)",
				next.scheduled.seq, e.name, e.ownerKind, e.ownerName, e.gone.seq, e.deleting.seq)
		}
	}
	if onLive == 0 {
		t.Errorf("no executor of the lost incarnation ran on a live node (all on %s): nothing shown", first.node)
	}
	logs := r.driverLogs()
	registered := reRegisteredFrom.FindAllStringSubmatch(logs[len(logs)-1].log, -1)
	if len(registered) == 0 {
		t.Errorf("no executor's address read in the next driver's log (%q): nothing shown", reRegisteredFrom)
	}
	for _, m := range registered {
		if name, ok := oldIPs[m[1]]; ok {
			t.Errorf("executor %s of the lost incarnation registered with the next driver (ID %s from %s)", name, m[2], m[1])
		}
	}
}

// stsRecord is one StatefulSet of a namespace as the poll saw it.
type stsRecord struct {
	name, uid            string
	ownerKind, ownerName string
	first, gone          time.Time
}

func (s stsRecord) goneAt() string {
	if s.gone.IsZero() {
		return "never"
	}
	return s.gone.Format("15:04:05.0")
}

// stsPoll lists a namespace's StatefulSets every 500 ms: driverset's S and Spark's executor sets.
type stsPoll struct {
	*lister
	mu    sync.Mutex
	byUID map[string]*stsRecord
}

func pollStatefulSets(t *testing.T, ns string) *stsPoll {
	t.Helper()
	p := &stsPoll{byUID: map[string]*stsRecord{}}
	p.lister = listEvery(t, func(ctx context.Context) {
		if list, err := kube().AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{}); err == nil {
			p.record(list.Items)
		}
	})
	return p
}

// lister runs a list every 500 ms until stopped or the test ends (the pollers of the
// e2e-spark-alloc cases).
type lister struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func listEvery(t *testing.T, list func(context.Context)) *lister {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &lister{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for ctx.Err() == nil {
			list(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(l.stop)
	return l
}

// stop ends the lists and waits for the last one; it may be called again.
func (l *lister) stop() {
	l.cancel()
	<-l.done
}

func (p *stsPoll) record(items []appsv1.StatefulSet) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	live := map[string]bool{}
	for i := range items {
		s := &items[i]
		uid := string(s.UID)
		live[uid] = true
		if p.byUID[uid] == nil {
			rec := &stsRecord{name: s.Name, uid: uid, first: now}
			if ref := metav1.GetControllerOf(s); ref != nil {
				rec.ownerKind, rec.ownerName = ref.Kind, ref.Name
			}
			p.byUID[uid] = rec
		}
	}
	for uid, rec := range p.byUID {
		if !live[uid] && rec.gone.IsZero() {
			rec.gone = now
		}
	}
}

func (p *stsPoll) seen() []stsRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []stsRecord
	for _, r := range p.byUID {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b stsRecord) int { return a.first.Compare(b.first) })
	return out
}
