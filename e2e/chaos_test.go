//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/e2e/chaos"
	"github.com/driverset/driverset/e2e/testbed"
)

// Environment of the chaos run: its size ("short", the default, or "long") and its seed (random
// when unset; always printed, so that any run can be replayed).
const (
	envChaosSize = "DRIVERSET_CHAOS_SIZE"
	envChaosSeed = "DRIVERSET_CHAOS_SEED"
)

// Issue 14: many apps through random faults, every invariant held throughout. The schedule (each
// app's exits, executors and fencing; each fault, its gap and its victim choice) is drawn from the
// seed (e2e/chaos); two lanes of faults run it while the apps run:
//   - control: driverset's leader SIGKILLed, both replicas down for a while, the apiserver, etcd
//     and the controller-manager crashed and restarted;
//   - nodes: a node running a driver lost, in every way docs/limits.md covers: its Node deleted,
//     killed and tainted out-of-service once NotReady, or killed with nobody acting (fence-after
//     and self-fence apps recover by themselves; the node comes back later).
//
// Checked: never two bound driver pods of one app (the monitor) nor two driver processes (the
// ledger); every spark-submit ends with the phase the driver really had; the restart count is
// the number of non-zero exits that were not the last; after every app is deleted nothing of it
// remains; the namespace's quota charges only what exists.
func TestChaos(t *testing.T) {
	size, seed := chaosConfig(t)
	s := chaos.Plan(seed, size)
	t.Logf("chaos: seed %d, size %s: %d apps (%d at a time), %d control faults, %d node losses; replay: make chaos SIZE=%s SEED=%d",
		seed, size.Name, len(s.Apps), size.Concurrent, len(s.Control), len(s.Nodes), size.Name, seed)
	start := time.Now()
	ns := namespace(t, nil)
	chaosQuota(t, ns)
	r := newChaosRun(t, ns, s)
	r.startReplicas()

	ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout(size))
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { r.controlLane(ctx) })
	wg.Go(func() { r.nodeLane(ctx) })
	apps := make(chan chaos.App)
	for range size.Concurrent {
		wg.Go(func() {
			for a := range apps {
				r.runApp(ctx, a)
			}
		})
	}
	for _, a := range s.Apps {
		apps <- a
	}
	close(apps)
	wg.Wait()
	r.stopReplicas()
	t.Logf("chaos: the apps and faults ran in %s", time.Since(start).Round(time.Second))

	nothingLeft(t, ns)
	quotaChargesOnlyWhatExists(t, ns)
	for _, v := range r.violations() {
		t.Errorf("at-most-one driver process violated: %s", v)
	}
	t.Logf("chaos: seed %d, size %s, %s in all: %s", seed, size.Name, time.Since(start).Round(time.Second), r.summary())
}

// chaosConfig reads the size and the seed.
func chaosConfig(t *testing.T) (chaos.Size, uint64) {
	t.Helper()
	name := os.Getenv(envChaosSize)
	if name == "" {
		name = "short"
	}
	size, ok := chaos.Sizes()[name]
	if !ok {
		t.Fatalf("%s=%q: want short or long", envChaosSize, name)
	}
	seed := rand.Uint64()
	if v := os.Getenv(envChaosSeed); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", envChaosSeed, v, err)
		}
	}
	return size, seed
}

// chaosTimeout bounds the run well above what it takes, so that a stuck app fails it.
func chaosTimeout(size chaos.Size) time.Duration {
	return 5*time.Minute + time.Duration(size.Apps+size.NodeLosses+size.LeaderKills)*30*time.Second
}

// chaosQuotaName is the quota in the chaos namespace: roomy, so that it refuses nothing, but it
// counts, and what it counts is checked against what exists.
const chaosQuotaName = "chaos"

func chaosQuota(t *testing.T, ns string) {
	t.Helper()
	quota(t, ns, chaosQuotaName, corev1.ResourceList{
		corev1.ResourcePods:                resource.MustParse("10000"),
		corev1.ResourceRequestsCPU:         resource.MustParse("100000"),
		corev1.ResourceRequestsMemory:      resource.MustParse("1000Ti"),
		corev1.ResourceServices:            resource.MustParse("10000"),
		corev1.ResourceConfigMaps:          resource.MustParse("10000"),
		"count/statefulsets.apps":          resource.MustParse("10000"),
		"count/leases.coordination.k8s.io": resource.MustParse("10000"),
	})
}

// nothingLeft waits until every app's objects are gone: each app's placeholder was deleted when
// its spark-submit returned, and the garbage collector removes the rest (StatefulSet, Services,
// S-0, executors, ConfigMaps, heartbeat Leases).
func nothingLeft(t *testing.T, ns string) {
	t.Helper()
	var left []string
	waitFor(t, 3*time.Minute, "nothing left of any app", func(ctx context.Context) (bool, error) {
		var err error
		left, err = leftovers(ctx, ns)
		return err == nil && len(left) == 0, nil
	})
	if len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

func leftovers(ctx context.Context, ns string) ([]string, error) {
	var left []string
	pods, err := kube().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, p := range pods.Items {
		left = append(left, "pod/"+p.Name)
	}
	sts, err := kube().AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, s := range sts.Items {
		left = append(left, "statefulset/"+s.Name)
	}
	svcs, err := kube().CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, s := range svcs.Items {
		left = append(left, "service/"+s.Name)
	}
	cms, err := kube().CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, c := range cms.Items {
		if c.Name != "kube-root-ca.crt" { // every namespace has it
			left = append(left, "configmap/"+c.Name)
		}
	}
	leases, err := kube().CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, l := range leases.Items {
		left = append(left, "lease/"+l.Name)
	}
	return left, nil
}

// quotaChargesOnlyWhatExists waits until the quota's used equals what exists in the namespace
// (pods not finished and their cpu and memory requests, Services, ConfigMaps, StatefulSets,
// Leases): quota charged for an object that does not exist would never be given back.
func quotaChargesOnlyWhatExists(t *testing.T, ns string) {
	t.Helper()
	var diff []string
	waitFor(t, 2*time.Minute, "the quota charging what exists and nothing more", func(ctx context.Context) (bool, error) {
		q, err := kube().CoreV1().ResourceQuotas(ns).Get(ctx, chaosQuotaName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		want, err := existing(ctx, ns)
		if err != nil {
			return false, nil
		}
		diff = diff[:0]
		for name, used := range q.Status.Used {
			w := want[name]
			if used.Cmp(w) != 0 {
				diff = append(diff, fmt.Sprintf("%s: used %s, existing %s", name, used.String(), w.String()))
			}
		}
		sort.Strings(diff)
		return len(diff) == 0, nil
	})
	if len(diff) > 0 {
		t.Errorf("quota charged for what does not exist: %s", strings.Join(diff, "; "))
	}
}

// existing is what the chaos quota should count in ns.
func existing(ctx context.Context, ns string) (corev1.ResourceList, error) {
	left, err := leftovers(ctx, ns)
	if err != nil {
		return nil, err
	}
	count := map[string]int64{}
	for _, l := range left {
		kind, _, _ := strings.Cut(l, "/")
		count[kind]++
	}
	count["configmap"]++ // kube-root-ca.crt
	want := corev1.ResourceList{
		corev1.ResourceServices:            *resource.NewQuantity(count["service"], resource.DecimalSI),
		corev1.ResourceConfigMaps:          *resource.NewQuantity(count["configmap"], resource.DecimalSI),
		"count/statefulsets.apps":          *resource.NewQuantity(count["statefulset"], resource.DecimalSI),
		"count/leases.coordination.k8s.io": *resource.NewQuantity(count["lease"], resource.DecimalSI),
	}
	pods, err := kube().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	cpu, mem, n := resource.Quantity{}, resource.Quantity{}, int64(0)
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		n++
		for _, c := range p.Spec.Containers {
			cpu.Add(c.Resources.Requests[corev1.ResourceCPU])
			mem.Add(c.Resources.Requests[corev1.ResourceMemory])
		}
	}
	want[corev1.ResourcePods] = *resource.NewQuantity(n, resource.DecimalSI)
	want[corev1.ResourceRequestsCPU] = cpu
	want[corev1.ResourceRequestsMemory] = mem
	return want, nil
}

// chaosRun is one run's shared state: the ledger of nodes and driver processes, and what happened.
type chaosRun struct {
	t     *testing.T
	ns    string
	sched chaos.Schedule

	mu      sync.Mutex
	ledger  *chaos.Ledger
	counts  map[string]int
	nextNod int

	replicas *replicaSet
}

func newChaosRun(t *testing.T, ns string, s chaos.Schedule) *chaosRun {
	t.Helper()
	nodes, err := kube().CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var alive []string
	for i := range nodes.Items {
		if testbed.NodeSchedulable(&nodes.Items[i]) {
			alive = append(alive, nodes.Items[i].Name)
		}
	}
	t.Logf("chaos: %d schedulable nodes at the start: %v", len(alive), alive)
	return &chaosRun{t: t, ns: ns, sched: s, ledger: chaos.NewLedger(alive...), counts: map[string]int{}}
}

// count adds one to what happened.
func (r *chaosRun) count(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts[what]++
}

func (r *chaosRun) violations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ledger.Violations()
}

func (r *chaosRun) summary() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make([]string, 0, len(r.counts))
	for k := range r.counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, r.counts[k]))
	}
	return strings.Join(parts, ", ")
}
