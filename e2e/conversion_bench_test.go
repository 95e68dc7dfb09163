//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/harness"
)

// conversionBound is how much slower than as many plain StatefulSets the opted-in apps may come
// up before BenchmarkConversion fails: issue 11 asks for "as fast as" (1.04× when it was filed);
// the bound leaves room for the noise of one run on 2 shared cores.
const conversionBound = 1.2

// BenchmarkConversion measures how fast driverset takes a burst of spark-submit driver pods
// through to Running, against the same number of plain StatefulSets of one (each with its
// headless Service) in the same run: from the first create to the last pod Running, as a watch on
// the namespace sees it. The driverset side is every step of a conversion: spark-submit's calls
// (sparksim), the drivers webhook, the controller's Service and StatefulSet, the StatefulSet
// controller's pod, the scheduler, KWOK. Both sides create with 8 clients at once. Rounds
// alternate which side goes first, each side in a namespace of its own, all kept until the end so
// that no deletion loads a later round. It reports the median of each and their ratio, and fails
// above conversionBound. The median, of three rounds by default: the first round runs on an empty
// cluster and every later one beside the pods of those before (35 s against 47 s for the plain
// side in one run), so two rounds would hand one side that advantage.
//
// DRIVERSET_BENCH_CONVERSION_APPS (default 200) and DRIVERSET_BENCH_CONVERSION_ROUNDS (default 3)
// change the size.
func BenchmarkConversion(b *testing.B) {
	n := envInt(b, "DRIVERSET_BENCH_CONVERSION_APPS", 200)
	rounds := envInt(b, "DRIVERSET_BENCH_CONVERSION_ROUNDS", 3)
	ctx := context.Background()
	c := benchClient(b)
	suffix := time.Now().UnixNano() % 1_000_000
	var nodes, namespaces []string
	// Registered first, so it runs after every namespace's own cleanup has asked for its deletion:
	// the benchmarks after this one in `make bench` must not run beside hundreds of apps being
	// torn down, nor beside their nodes.
	b.Cleanup(func() { removeConversionRounds(b, c, namespaces, nodes) })
	// Room for every pod of every round at once: 110 pods per KWOK node, the three there already
	// left to the rest of the package.
	for i := range (2*rounds*n + 99) / 100 {
		name := fmt.Sprintf("kwok-conv-%d-%d", suffix, i)
		if err := bed.cluster.AddNode(ctx, name); err != nil {
			b.Fatal(err)
		}
		nodes = append(nodes, name)
	}
	sides := []struct {
		name  string
		start func(ns string)
		// running selects the pods the side waits for.
		running string
	}{
		{"plain", func(ns string) { createPlainStatefulSets(b, ctx, c, ns, n) }, "app=conversion-plain"},
		{"driverset", func(ns string) { submitApps(b, ctx, c, ns, "conv", n) }, contract.LabelDriver + "," + contract.LabelSparkRole + "=" + contract.RoleDriver},
	}
	took := map[string]harness.Samples{}
	b.ResetTimer()
	for r := range rounds {
		for i := range sides {
			side := sides[(i+r)%len(sides)]
			ns := fmt.Sprintf("bench-conv-%s-%d-%d", side.name, suffix, r)
			tempNamespace(b, ctx, c, ns)
			namespaces = append(namespaces, ns)
			d := timeToRunning(b, ctx, c, ns, side.running, n, func() { side.start(ns) })
			took[side.name] = append(took[side.name], d.Seconds())
			b.Logf("round %d, %s: %d pods Running %.1fs after the first create", r, side.name, n, d.Seconds())
		}
	}
	b.StopTimer()
	plain, converted := took["plain"].Median(), took["driverset"].Median()
	ratio := converted / plain
	b.ReportMetric(plain, "s-plain")
	b.ReportMetric(converted, "s-driverset")
	b.ReportMetric(ratio, "x-plain")
	b.Logf("%d apps: driverset %.1fs (%v), plain StatefulSets %.1fs (%v), %.2f×", n, converted, took["driverset"], plain, took["plain"], ratio)
	if ratio > conversionBound {
		b.Errorf("%d opted-in apps took %.2f× as long as %d plain StatefulSets to run, over %.1f×", n, ratio, n, conversionBound)
	}
}

// removeConversionRounds waits until the benchmark's namespaces, whose deletion tempNamespace's
// cleanups asked for, are gone (their pods through driverset's finalizer included), then removes
// its nodes.
func removeConversionRounds(b *testing.B, c kubernetes.Interface, namespaces, nodes []string) {
	ctx := context.Background()
	err := poll(ctx, 5*time.Minute, func() bool {
		for _, ns := range namespaces {
			if _, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false
			}
		}
		return true
	})
	if err != nil {
		b.Errorf("the conversion benchmark's namespaces were not gone within 5 minutes: %v", err)
	}
	for _, node := range nodes {
		if err := bed.cluster.DeleteNode(ctx, node); err != nil {
			b.Errorf("remove node %s: %v", node, err)
		}
	}
}

// timeToRunning runs start and returns how long after it began n pods matching selector in ns
// were Running, as a watch saw them (the watch starts first, so no pod is missed).
func timeToRunning(b *testing.B, ctx context.Context, c kubernetes.Interface, ns, selector string, n int, start func()) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Duration(n)*time.Second+3*time.Minute)
	defer cancel()
	lw := cache.NewFilteredListWatchFromClient(c.CoreV1().RESTClient(), "pods", ns, func(o *metav1.ListOptions) { o.LabelSelector = selector })
	synced := make(chan struct{})
	done := make(chan error, 1)
	var last time.Time
	go func() {
		running := map[string]bool{}
		_, err := watchtools.UntilWithSync(ctx, lw, &corev1.Pod{}, func(cache.Store) (bool, error) {
			close(synced)
			return false, nil
		}, func(e watch.Event) (bool, error) {
			if p, ok := e.Object.(*corev1.Pod); ok && e.Type != watch.Deleted && p.Status.Phase == corev1.PodRunning && !running[p.Name] {
				running[p.Name] = true
				last = time.Now()
			}
			return len(running) >= n, nil
		})
		done <- err
	}()
	select {
	case <-synced:
	case err := <-done:
		b.Fatalf("watching pods in %s: %v", ns, err)
	}
	began := time.Now()
	start()
	if err := <-done; err != nil {
		b.Fatalf("not all %d pods Running in %s: %v", n, ns, err)
	}
	return last.Sub(began)
}

// createPlainStatefulSets creates n plain StatefulSets of one, each with its headless Service, in
// ns, 8 at once: what a user would run without driverset.
func createPlainStatefulSets(b *testing.B, ctx context.Context, c kubernetes.Interface, ns string, n int) {
	b.Helper()
	parallel(b, n, 8, func(i int) error {
		name := fmt.Sprintf("plain-%d", i)
		labels := map[string]string{"app": "conversion-plain", "instance": name}
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: labels},
		}
		if _, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return err
		}
		_, err := c.AppsV1().StatefulSets(ns).Create(ctx, plainStatefulSet(ns, name, labels), metav1.CreateOptions{})
		return err
	})
}
