//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/client-go/util/retry"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/harness"
	"github.com/driverset/driverset/e2e/sparksim"
)

// workload is what runs on the node a benchmark sample loses: the pods whose replacement it
// waits for.
type workload struct {
	ns   string
	node string
	pods map[string]types.UID // name → UID of the incarnation on node
	// atLoss runs when the node is lost (the heartbeats of its drivers stop with it).
	atLoss func()
}

// waitReplaced waits until every pod of w has a new incarnation Running on another node, and
// returns those. It watches rather than polls: listing every pod of many apps ten times a second
// would load the apiserver that the recovery measured needs.
func (w *workload) waitReplaced(ctx context.Context, timeout time.Duration) ([]corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pending := maps.Clone(w.pods)
	var replaced []corev1.Pod
	lw := cache.NewListWatchFromClient(kube().CoreV1().RESTClient(), "pods", w.ns, fields.Everything())
	_, err := watchtools.UntilWithSync(ctx, lw, &corev1.Pod{}, nil, func(e watch.Event) (bool, error) {
		p, ok := e.Object.(*corev1.Pod)
		if !ok || e.Type == watch.Deleted {
			return false, nil
		}
		if old, ok := pending[p.Name]; ok && p.UID != old && p.DeletionTimestamp == nil &&
			p.Spec.NodeName != "" && p.Spec.NodeName != w.node && p.Status.Phase == corev1.PodRunning {
			delete(pending, p.Name)
			replaced = append(replaced, *p)
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		names := slices.Sorted(maps.Keys(pending))
		return nil, fmt.Errorf("%d of %d pods not replaced within %s (%v): %w", len(names), len(w.pods), timeout, names[:min(len(names), 5)], err)
	}
	return replaced, nil
}

// stages says where the time from the proof of the loss to the replacements went, for the
// replacements' slowest and median: created (the old pod force-deleted, a new one made), then
// scheduled (for driverset: the stale-executor gate lifted), then Running. The API's timestamps
// are whole seconds.
func stages(replaced []corev1.Pod, proven time.Time) string {
	var created, scheduled, ran harness.Samples
	for _, p := range replaced {
		created = append(created, p.CreationTimestamp.Sub(proven).Seconds())
		for _, c := range p.Status.Conditions {
			switch c.Type {
			case corev1.PodScheduled:
				scheduled = append(scheduled, c.LastTransitionTime.Sub(p.CreationTimestamp.Time).Seconds())
			case corev1.PodReady:
				ran = append(ran, c.LastTransitionTime.Sub(p.CreationTimestamp.Time).Seconds())
			}
		}
	}
	return fmt.Sprintf("after the proof, created: median %.0fs, last %.0fs; then scheduled: median %.0fs, last %.0fs; then Ready: median %.0fs, last %.0fs",
		created.Median(), created.Max(), scheduled.Median(), scheduled.Max(), ran.Median(), ran.Max())
}

// decisions says when, after the proof, driverset told each of its decisions (its Events on the
// placeholders of ns): the force-delete, the stale executors cleared, the recovery.
func decisions(ctx context.Context, ns string, proven time.Time) string {
	evs, err := kube().EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	at := map[string]harness.Samples{}
	for _, e := range evs.Items {
		t := e.EventTime.Time
		if t.IsZero() {
			t = e.DeprecatedLastTimestamp.Time
		}
		if t.After(proven.Add(-time.Second)) {
			at[e.Reason] = append(at[e.Reason], t.Sub(proven).Seconds())
		}
	}
	var out []string
	for _, reason := range slices.Sorted(maps.Keys(at)) {
		out = append(out, fmt.Sprintf("%s ×%d median %.1fs last %.1fs", reason, len(at[reason]), at[reason].Median(), at[reason].Max()))
	}
	return strings.Join(out, "; ")
}

// benchNamespace is a fresh bench-* namespace (the invariant monitor checks these too, at the
// end of the package run).
func benchNamespace(b *testing.B, ctx context.Context) string {
	b.Helper()
	ns := fmt.Sprintf("bench-%d", time.Now().UnixNano()%1_000_000_000)
	if _, err := kube().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if err := bed.cluster.WaitForDefaultServiceAccount(ctx, ns); err != nil {
		b.Fatal(err)
	}
	return ns
}

// startPlain runs a plain StatefulSet of one and waits until its pod runs.
func startPlain(b *testing.B, ctx context.Context, ns string) *workload {
	b.Helper()
	sts := plainStatefulSet(ns, "plain", map[string]string{"app": "plain"})
	if _, err := kube().AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	running := waitRunning(b, ctx, ns, []string{"plain-0"})
	return &workload{ns: ns, node: running["plain-0"].Spec.NodeName, pods: uids(running)}
}

// plainStatefulSet is the benchmarks' baseline: a StatefulSet of one, without driverset, whose
// pod carries labels and whose governing Service is named as it is.
func plainStatefulSet(ns, name string, labels map[string]string) *appsv1.StatefulSet {
	one := int32(1)
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &one, ServiceName: name, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "plain"}}},
			},
		},
	}
}

// startDriversetApps submits n opted-in apps, each a driver with benchExecutors executors, all
// drivers on one node (for n > 1 a fresh node, with the others cordoned while they start).
func startDriversetApps(b *testing.B, ctx context.Context, ns string, n int, annotations map[string]string) *workload {
	b.Helper()
	if n > 1 {
		uncordon := bed.onlyNode(b, ctx, bed.spareNode(b, ctx))
		defer uncordon()
	}
	var names []string
	for i := range n {
		a := app(ns, fmt.Sprintf("bench-%d", i))
		a.DriverAnnotations = annotations
		// A tenth of a core each, so that the many-drivers row fits on one node (32 cores).
		a.Conf = map[string]string{"spark.kubernetes.driver.request.cores": "100m", "spark.kubernetes.executor.request.cores": "100m"}
		plan, err := a.Plan()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := sparksim.SubmitPlan(ctx, kube(), plan, sparksim.SubmitOptions{}); err != nil {
			b.Fatal(err)
		}
		names = append(names, contract.NamesFor(plan.DriverPodName).DriverPodName())
	}
	running := waitRunning(b, ctx, ns, names)
	node := running[names[0]].Spec.NodeName
	for name, p := range running {
		if p.Spec.NodeName != node {
			b.Fatalf("driver %s runs on %s, not with the others on %s", name, p.Spec.NodeName, node)
		}
	}
	startDrivers(b, ctx, ns, names)
	w := &workload{ns: ns, node: node, pods: uids(running)}
	if _, ok := annotations[contract.AnnotationSelfFence]; ok {
		var beats []*heartbeat
		for _, name := range names {
			beats = append(beats, keepHeartbeat(b, running[name]))
		}
		w.atLoss = func() {
			for _, h := range beats {
				h.stop()
			}
		}
	}
	return w
}

// startDrivers starts the simulated driver JVM in each S-0 and has it make its executors, a few
// at once, and waits until every executor runs.
func startDrivers(b *testing.B, ctx context.Context, ns string, names []string) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(names))
	slots := make(chan struct{}, 8)
	for _, name := range names {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			drv, err := sparksim.StartDriver(ctx, kube(), ns, name)
			if err == nil {
				_, err = drv.RequestExecutors(ctx, benchExecutors)
			}
			if err != nil {
				errs <- fmt.Errorf("driver in %s: %w", name, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	want := len(names) * benchExecutors
	if err := poll(ctx, 2*time.Minute, func() bool {
		l, err := kube().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: contract.LabelSparkRole + "=" + contract.RoleExecutor})
		if err != nil {
			return false
		}
		return len(slices.DeleteFunc(l.Items, func(p corev1.Pod) bool { return p.Status.Phase != corev1.PodRunning })) == want
	}); err != nil {
		b.Fatalf("the %d executors did not all run: %v", want, err)
	}
}

// waitRunning waits until each named pod of ns runs on a node, and returns them.
func waitRunning(b *testing.B, ctx context.Context, ns string, names []string) map[string]*corev1.Pod {
	b.Helper()
	running := map[string]*corev1.Pod{}
	if err := poll(ctx, 3*time.Minute, func() bool {
		l, err := kube().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for i := range l.Items {
			if p := &l.Items[i]; slices.Contains(names, p.Name) && p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning {
				running[p.Name] = p
			}
		}
		return len(running) == len(names)
	}); err != nil {
		b.Fatalf("%d of %d pods running: %v", len(running), len(names), err)
	}
	return running
}

func uids(pods map[string]*corev1.Pod) map[string]types.UID {
	out := map[string]types.UID{}
	for name, p := range pods {
		out[name] = p.UID
	}
	return out
}

// spareNode adds a KWOK node (110 pods) for the workload of the node a sample loses.
func (e *env) spareNode(b *testing.B, ctx context.Context) string {
	b.Helper()
	name := fmt.Sprintf("kwok-bench-%d", time.Now().UnixNano()%1_000_000_000)
	if err := e.cluster.AddNode(ctx, name); err != nil {
		b.Fatal(err)
	}
	return name
}

// forgetNode deletes a lost node's object, when it still exists.
func (e *env) forgetNode(ctx context.Context, name string) {
	_ = e.cluster.DeleteNode(ctx, name)
}

// onlyNode cordons every schedulable node but keep, so that what is created next lands on keep;
// the returned func uncordons them.
func (e *env) onlyNode(b *testing.B, ctx context.Context, keep string) func() {
	b.Helper()
	nodes, err := kube().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var cordoned []string
	for _, n := range nodes.Items {
		if n.Name != keep && !n.Spec.Unschedulable {
			if err := setUnschedulable(ctx, n.Name, true); err != nil {
				b.Fatal(err)
			}
			cordoned = append(cordoned, n.Name)
		}
	}
	return func() {
		for _, name := range cordoned {
			if err := setUnschedulable(ctx, name, false); err != nil {
				b.Error(err)
			}
		}
	}
}

func setUnschedulable(ctx context.Context, name string, cordon bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := kube().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Spec.Unschedulable = cordon
		_, err = kube().CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// controllerCounters reads the placeholder controller's work counters from driverset's /metrics
// (queue adds and retries, time queued, reconciles and their time, by result), to tell where a
// slow recovery of many drivers spends its time.
func controllerCounters(b *testing.B) map[string]float64 {
	b.Helper()
	code, body, err := harness.Scrape(context.Background(), bed.driverset.MetricsURL, bed.metricsToken)
	if err != nil || code != http.StatusOK {
		b.Fatalf("metrics: %d %v", code, err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		placeholder := strings.Contains(line, `"placeholder"`) && slices.ContainsFunc([]string{"workqueue_adds_total", "workqueue_retries_total",
			"workqueue_queue_duration_seconds_sum", "workqueue_queue_duration_seconds_count", "workqueue_work_duration_seconds_sum",
			"controller_runtime_reconcile_total", "controller_runtime_reconcile_errors_total"}, func(m string) bool { return strings.HasPrefix(line, m+"{") })
		// Every request driverset made, by method and answer: what each app's recovery costs the
		// apiserver.
		if !placeholder && !strings.HasPrefix(line, "rest_client_requests_total{") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// counterDeltas says how each counter grew from before to after.
func counterDeltas(before, after map[string]float64) string {
	var s []string
	for _, k := range slices.Sorted(maps.Keys(after)) {
		if d := after[k] - before[k]; d != 0 {
			s = append(s, fmt.Sprintf("%s +%.2f", k, d))
		}
	}
	return strings.Join(s, "; ")
}
