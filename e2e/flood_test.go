//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/harness"
)

// floodPods and floodPayload size the memory flood: that many objects (pods, StatefulSets,
// Services, Leases, Events) of about that many bytes each, 96 MiB in all, enough that caching or
// reading them would show in driverset's memory beyond any doubt, and each under etcd's limit of
// 1.5 MiB a request.
const (
	floodPods    = 96
	floodPayload = 1 << 20
	// floodAllowed is how much driverset's resident memory may grow while a tenant floods it: what
	// a collection more or less makes, far under the flood's size.
	floodAllowed = 24 << 20
)

// Attack: a tenant with only `edit` in a namespace fills it with objects of about 1 MiB each, to
// grow driverset's caches until both replicas pass their memory limit together (every opted-in
// driver in the cluster is then refused). The pods: Spark executors of an app that did not opt in
// (driverset once cached every spark-role pod whole), and pods that carry driverset's own labels,
// which a tenant can set as freely as any other: an executor tied to a driver driverset runs, and
// a placeholder. The other kinds driverset caches by its labels: StatefulSets, Services and
// claims labelled as driverset's (issue 35). Leases labelled as a driver's heartbeat are written by their
// driver pod alone, one each (TestOnlyItsDriverWritesAHeartbeatLease refuses the tenant's), and
// are cached within the same bounds (controller/cachekinds_test.go). None of them
// may grow driverset's memory by more than floodAllowed: the first never reach it, and of the
// others it keeps only what it reads, bounded whatever the object carries. Last, the tenant's
// Events about an app whose driver pod cannot be made, which driverset reads live (floodEvents).
// The shapes share one driverset: a flood right after one that grew its heap reuses that heap
// and may grow the RSS by nothing, so a shape's own cost is measured by running it alone
// (RUN='TestTenantCannotFloodDriversetsMemory/Services'); any one shape over the bound still fails.
func TestTenantCannotFloodDriversetsMemory(t *testing.T) {
	pods := func(labels map[string]string) func(ctx context.Context, c kubernetes.Interface, ns string, i int) error {
		return func(ctx context.Context, c kubernetes.Interface, ns string, i int) error {
			_, err := c.CoreV1().Pods(ns).Create(ctx, floodPod(i, labels), metav1.CreateOptions{})
			return err
		}
	}
	cases := []struct {
		name   string
		create func(ctx context.Context, c kubernetes.Interface, ns string, i int) error
	}{
		{"executors of an app that did not opt in", pods(map[string]string{
			contract.LabelSparkRole: contract.RoleExecutor, contract.LabelSparkAppSelector: "spark-flood",
		})},
		{"pods labelled as the executors of a driver driverset runs", pods(map[string]string{
			contract.LabelSparkRole: contract.RoleExecutor, contract.LabelSparkAppSelector: "spark-flood",
			contract.LabelDriver: "flood-driver",
		})},
		{"pods labelled as placeholders", pods(map[string]string{
			contract.LabelSparkRole: contract.RoleDriver, contract.LabelSparkAppSelector: "spark-flood",
			contract.LabelPlaceholder: "true",
		})},
		{"StatefulSets labelled as driverset's", func(ctx context.Context, c kubernetes.Interface, ns string, i int) error {
			_, err := c.AppsV1().StatefulSets(ns).Create(ctx, floodStatefulSet(i), metav1.CreateOptions{})
			return err
		}},
		{"Services labelled as driverset's", func(ctx context.Context, c kubernetes.Interface, ns string, i int) error {
			_, err := c.CoreV1().Services(ns).Create(ctx, floodService(i), metav1.CreateOptions{})
			return err
		}},
		{"claims labelled as driverset's", func(ctx context.Context, c kubernetes.Interface, ns string, i int) error {
			_, err := c.CoreV1().PersistentVolumeClaims(ns).Create(ctx, floodClaim(i), metav1.CreateOptions{})
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := namespace(t, nil)
			attacker := tenant(t, ns)
			removedAtEnd(t, ns)
			before := settledRSS(t)
			start := time.Now()
			flood(t, attacker, ns, tc.create)
			// Long enough for every watch event to reach driverset and every reconcile the flood
			// set off to run (a placeholder without a seal gets a status and an Event).
			time.Sleep(10 * time.Second)
			after := settledRSS(t)
			t.Logf("%d objects of %d KiB created by the tenant in %s; driverset's RSS %.1f MiB before, %.1f MiB after",
				floodPods, floodPayload>>10, time.Since(start).Round(time.Second), mib(before), mib(after))
			if grew := after - before; grew > floodAllowed {
				t.Errorf("driverset's RSS grew by %.1f MiB with the tenant's %d MiB of objects, over the %.0f MiB allowed",
					mib(grew), floodPods*floodPayload>>20, mib(floodAllowed))
			}
		})
	}
	t.Run("Events about an app whose driver pod cannot be made", floodEvents)
}

// removedAtEnd deletes the flood's namespace when the test ends and waits until its last object
// is gone, so that the next flood is measured without this one's deletions reaching driverset
// (each a watch event carrying the whole object).
func removedAtEnd(t *testing.T, ns string) {
	t.Helper()
	t.Cleanup(func() {
		if err := kube().CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
			return
		}
		waitFor(t, 3*time.Minute, "the flood's namespace deleted", func(ctx context.Context) (bool, error) {
			_, err := kube().CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	})
}

// flood creates floodPods objects in ns as the tenant c, 4 at a time, each by create.
func flood(t *testing.T, c kubernetes.Interface, ns string, create func(ctx context.Context, c kubernetes.Interface, ns string, i int) error) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, floodPods)
	work := make(chan int)
	for range 4 {
		wg.Go(func() {
			for i := range work {
				if err := create(ctx, c, ns, i); err != nil {
					errs <- fmt.Errorf("object %d: %w", i, err)
				}
			}
		})
	}
	for i := range floodPods {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("the tenant could not create its objects (the attack needs them): %v", err)
	}
}

func pad(n int) string { return strings.Repeat("x", n) }

// floodMeta is the i-th flood object's metadata: labels with about labelBytes more of labels of
// its own (90 bytes each), and an annotation of 200 KiB (the apiserver allows 256 KiB in all).
func floodMeta(name string, i int, labels map[string]string, labelBytes int) metav1.ObjectMeta {
	l := map[string]string{}
	for k, v := range labels {
		l[k] = v
	}
	for j := range labelBytes / 90 {
		l[fmt.Sprintf("flood.example/%05d-%s", j, pad(40))] = pad(30)
	}
	return metav1.ObjectMeta{Name: fmt.Sprintf("%s-%03d", name, i), Labels: l,
		Annotations: map[string]string{"flood.example/a": pad(200 << 10)}}
}

// floodPod is a pod of about floodPayload bytes with labels: about 80 KiB of labels, the
// annotation, and a long container command. It is gated: no node ever runs it.
func floodPod(i int, labels map[string]string) *corev1.Pod {
	args := make([]string, 0, 64)
	for range 64 {
		args = append(args, pad((floodPayload-(280<<10))/64))
	}
	return &corev1.Pod{
		ObjectMeta: floodMeta("flood", i, labels, 80<<10),
		Spec: corev1.PodSpec{
			SchedulingGates: []corev1.PodSchedulingGate{{Name: "flood.example/never"}},
			Containers: []corev1.Container{{
				Name: contract.DriverContainerName, Image: "flood", Command: []string{"/bin/flood"}, Args: args,
			}},
		},
	}
}

// samplePeakRSS samples driverset's resident memory every 50 ms until the returned function is
// called, which returns the highest reading.
func samplePeakRSS() func() int64 {
	var peak int64
	sampled := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if rss, err := bed.driverset.RSS(); err == nil {
				peak = max(peak, rss)
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return func() int64 {
		close(stop)
		<-sampled
		return peak
	}
}

// dryRunFloods and dryRunBurst size the dry-run flood: that many rounds of that many creates at
// once, each of an opted-in driver pod of dryRunPayload bytes.
const (
	dryRunFloods  = 6
	dryRunBurst   = 64
	dryRunPayload = 2 << 20
)

// Attack: a tenant with only `edit` sends server-side dry-run creates of opted-in driver pods of
// 2 MiB each, 64 at a time: nothing is stored, but the apiserver calls driverset's webhook for
// each (sideEffects None), and each request costs driverset its pod decoded, copied and answered.
// Unbounded, a few hundred at once would pass a replica's memory limit. driverset's replica stays
// under its limit through the whole flood (sampled every 50 ms), is not restarted, and another
// tenant's driver submitted during it is admitted.
func TestTenantDryRunFloodCannotExhaustDriverset(t *testing.T) {
	ctx := context.Background()
	ns, other := namespace(t, nil), namespace(t, nil)
	attacker := tenant(t, ns)
	plan, err := app(ns, "dry-flood").Plan()
	if err != nil {
		t.Fatal(err)
	}
	big := plan.DriverPod.DeepCopy()
	for i := range big.Spec.Containers {
		if big.Spec.Containers[i].Name == contract.DriverContainerName {
			big.Spec.Containers[i].Env = append(big.Spec.Containers[i].Env,
				corev1.EnvVar{Name: "FLOOD", Value: strings.Repeat("x", dryRunPayload)})
		}
	}
	// The memory limit install.yaml gives each replica: over it, the kubelet kills the replica.
	install, err := os.Open(filepath.Join("..", "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	limit, err := harness.DeploymentMemoryLimit(install)
	install.Close()
	if err != nil {
		t.Fatal(err)
	}
	restarts := bed.driverset.Restarts()
	before := settledRSS(t)
	sample := samplePeakRSS()
	var admitted, refused int
	var firstRefusal error
	var mu sync.Mutex
	start := time.Now()
	for round := range dryRunFloods {
		var wg sync.WaitGroup
		for i := range dryRunBurst {
			wg.Go(func() {
				p := big.DeepCopy()
				p.Name = fmt.Sprintf("%s-%d-%d", big.Name, round, i)
				got, err := attacker.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil && got.Labels[contract.LabelPlaceholder] == "true":
					admitted++
				case err != nil && firstRefusal == nil:
					firstRefusal = err
					fallthrough
				default:
					refused++
				}
			})
		}
		if round == dryRunFloods/2 {
			// Another tenant's spark-submit, in the middle of the flood.
			s := submit(t, app(other, "bystander"))
			waitFor(t, time.Minute, "the bystander's driver running in S-0", func(ctx context.Context) (bool, error) {
				p, err := kube().CoreV1().Pods(other).Get(ctx, contract.NamesFor(s.plan.DriverPodName).DriverPodName(), metav1.GetOptions{})
				return err == nil && p.Status.Phase == corev1.PodRunning, nil
			})
		}
		wg.Wait()
	}
	took := time.Since(start)
	peak := sample()
	t.Logf("%d dry-run creates of %d MiB driver pods (%d at once) in %s: %d admitted as placeholders, %d refused or failed; driverset's RSS %.1f MiB before, %.1f MiB at its highest",
		dryRunFloods*dryRunBurst, dryRunPayload>>20, dryRunBurst, took.Round(time.Second), admitted, refused, mib(before), mib(peak))
	if firstRefusal != nil {
		t.Logf("the first refusal (the flood's creates wait for driverset's admission budget, up to the webhook's timeout): %v", firstRefusal)
	}
	if peak >= limit {
		t.Errorf("driverset's RSS reached %.1f MiB during the flood, at or over its %.0f MiB limit: a replica would have been killed", mib(peak), mib(limit))
	}
	if n := bed.driverset.Restarts(); n != restarts {
		t.Errorf("driverset restarted %d times during the flood", n-restarts)
	}
	if admitted == 0 {
		t.Errorf("no create of the flood reached driverset's webhook: the attack did not happen")
	}
}

// settledRSS is driverset's resident memory, in bytes: the smallest of five readings a second
// apart, so that garbage a collection is about to free counts as little as it can.
func settledRSS(t *testing.T) int64 {
	t.Helper()
	least := int64(-1)
	for i := range 5 {
		if i > 0 {
			time.Sleep(time.Second)
		}
		rss, err := bed.driverset.RSS()
		if err != nil {
			t.Fatal(err)
		}
		if least < 0 || rss < least {
			least = rss
		}
	}
	return least
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
