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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/harness"
)

// floodPods and floodPayload size the memory flood: that many pods of about that many bytes each,
// 96 MiB in all, enough that caching them would show in driverset's memory beyond any doubt, and
// each under etcd's limit of 1.5 MiB a request.
const (
	floodPods    = 96
	floodPayload = 1 << 20
	// floodAllowed is how much driverset's resident memory may grow while a tenant floods it: what
	// a collection more or less makes, far under the flood's size.
	floodAllowed = 24 << 20
)

// Attack: a tenant with only `edit` in a namespace fills it with pods of about 1 MiB each, to grow
// driverset's caches until both replicas pass their memory limit together (every opted-in driver
// in the cluster is then refused). Three shapes: Spark executors of an app that did not opt in
// (driverset once cached every spark-role pod whole), and pods that carry driverset's own labels,
// which a tenant can set as freely as any other: an executor tied to a driver driverset runs, and
// a placeholder. None of them may grow driverset's memory by more than floodAllowed: the first
// never reach it, and of the others it keeps only what it reads, bounded whatever the pod carries.
func TestTenantCannotFloodDriversetsMemory(t *testing.T) {
	cases := []struct {
		name   string
		labels map[string]string
	}{
		{"executors of an app that did not opt in", map[string]string{
			contract.LabelSparkRole: contract.RoleExecutor, contract.LabelSparkAppSelector: "spark-flood",
		}},
		{"pods labelled as the executors of a driver driverset runs", map[string]string{
			contract.LabelSparkRole: contract.RoleExecutor, contract.LabelSparkAppSelector: "spark-flood",
			contract.LabelDriver: "flood-driver",
		}},
		{"pods labelled as placeholders", map[string]string{
			contract.LabelSparkRole: contract.RoleDriver, contract.LabelSparkAppSelector: "spark-flood",
			contract.LabelPlaceholder: "true",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := namespace(t, nil)
			attacker := tenant(t, ns)
			before := settledRSS(t)
			start := time.Now()
			flood(t, attacker, ns, tc.labels)
			// Long enough for every watch event to reach driverset and every reconcile the flood
			// set off to run (a placeholder without a seal gets a status and an Event).
			time.Sleep(10 * time.Second)
			after := settledRSS(t)
			t.Logf("%d pods of %d KiB created by the tenant in %s; driverset's RSS %.1f MiB before, %.1f MiB after",
				floodPods, floodPayload>>10, time.Since(start).Round(time.Second), mib(before), mib(after))
			if grew := after - before; grew > floodAllowed {
				t.Errorf("driverset's RSS grew by %.1f MiB with the tenant's %d MiB of pods, over the %.0f MiB allowed",
					mib(grew), floodPods*floodPayload>>20, mib(floodAllowed))
			}
		})
	}
}

// flood creates floodPods pods in ns as the tenant c, each with labels and about floodPayload
// bytes of what a pod can carry at will: annotations (at most 256 KiB in all, the apiserver's
// limit), a long container command, and many labels. They are gated: no node ever runs them.
func flood(t *testing.T, c kubernetes.Interface, ns string, labels map[string]string) {
	t.Helper()
	ctx := context.Background()
	pad := func(n int) string { return strings.Repeat("x", n) }
	pod := func(i int) *corev1.Pod {
		l := map[string]string{}
		for k, v := range labels {
			l[k] = v
		}
		for j := range 1000 { // about 80 KiB of labels
			l[fmt.Sprintf("flood.example/%04d-%s", j, pad(40))] = pad(30)
		}
		ann := map[string]string{"flood.example/a": pad(200 << 10)}
		args := make([]string, 0, 64)
		for range 64 {
			args = append(args, pad((floodPayload-(280<<10))/64))
		}
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("flood-%03d", i), Labels: l, Annotations: ann},
			Spec: corev1.PodSpec{
				SchedulingGates: []corev1.PodSchedulingGate{{Name: "flood.example/never"}},
				Containers: []corev1.Container{{
					Name: contract.DriverContainerName, Image: "flood", Command: []string{"/bin/flood"}, Args: args,
				}},
			},
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, floodPods)
	work := make(chan int)
	for range 4 {
		wg.Go(func() {
			for i := range work {
				if _, err := c.CoreV1().Pods(ns).Create(ctx, pod(i), metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("pod %d: %w", i, err)
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
		t.Fatalf("the tenant could not create its pods (the attack needs them): %v", err)
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
	close(stop)
	<-sampled
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
