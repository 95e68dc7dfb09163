//go:build testbed

package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
)

// quota creates a ResourceQuota in ns and waits until the quota controller has computed its used.
func quota(t *testing.T, ns, name string, hard corev1.ResourceList) {
	t.Helper()
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
	if _, err := kube().CoreV1().ResourceQuotas(ns).Create(context.Background(), q, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "quota "+name+" computed", func(ctx context.Context) (bool, error) {
		q, err := kube().CoreV1().ResourceQuotas(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && len(q.Status.Hard) == len(hard) && len(q.Status.Used) == len(hard), nil
	})
}

// Issue 10, "Create on every reconcile": in a namespace whose quotas are exactly what the app needs
// (Spark's Service and driverset's headless Service; one StatefulSet), the app runs to completion,
// and the quota's used never counts more Services than exist. ResourceQuota admission charges a
// Create before the apiserver finds the name taken, so creating what exists is refused at the
// limit and inflates used below it.
func TestAppFitsAQuotaSizedForIt(t *testing.T) {
	ns := namespace(t, nil)
	quota(t, ns, "statefulsets", corev1.ResourceList{"count/statefulsets.apps": resource.MustParse("1")})
	quota(t, ns, "services", corev1.ResourceList{corev1.ResourceServices: resource.MustParse("3")}) // one to spare

	// Sample the Services quota's used while the app runs.
	ctx, stop := context.WithCancel(context.Background())
	var mu sync.Mutex
	maxUsed := int64(0)
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for ctx.Err() == nil {
			if q, err := kube().CoreV1().ResourceQuotas(ns).Get(ctx, "services", metav1.GetOptions{}); err == nil {
				used := q.Status.Used[corev1.ResourceServices]
				mu.Lock()
				maxUsed = max(maxUsed, used.Value())
				mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()

	a := startApp(t, app(ns, "quota-fit"), 1)
	exitDriver(t, a.pod, 0)
	res := a.sub.Wait(t, 60*time.Second)
	stop()
	sampler.Wait()
	if res.FinalPhase != corev1.PodSucceeded {
		t.Errorf("spark-submit's final phase %s, want Succeeded", res.FinalPhase)
	}
	svcs, err := kube().CoreV1().Services(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if maxUsed > int64(len(svcs.Items)) {
		t.Errorf("the services quota's used reached %d with %d Services in the namespace", maxUsed, len(svcs.Items))
	}
}

// setQuota changes one hard limit of a quota.
func setQuota(t *testing.T, ns, name string, r corev1.ResourceName, v string) {
	t.Helper()
	q, err := kube().CoreV1().ResourceQuotas(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q.Spec.Hard[r] = resource.MustParse(v)
	if _, err := kube().CoreV1().ResourceQuotas(ns).Update(context.Background(), q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Issue 10, "Failures to create … are never shown": a StatefulSet refused by quota, and S-0 refused
// by quota, are told on the placeholder (status message and a Warning Event); once the quota allows
// it, the app runs.
func TestRefusedCreatesAreShownOnThePlaceholder(t *testing.T) {
	ns := namespace(t, nil)
	quota(t, ns, "statefulsets", corev1.ResourceList{"count/statefulsets.apps": resource.MustParse("0")})
	// The placeholder is one pod; S-0 would be the second.
	quota(t, ns, "pods", corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")})
	s := submit(t, app(ns, "refused"))
	names := contract.NamesFor(s.plan.DriverPodName)

	placeholderSays := func(what string, words ...string) {
		t.Helper()
		waitFor(t, 60*time.Second, "the placeholder's message telling "+what, func(ctx context.Context) (bool, error) {
			p, err := kube().CoreV1().Pods(ns).Get(ctx, s.plan.DriverPodName, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, w := range words {
				if !strings.Contains(p.Status.Message, w) {
					return false, nil
				}
			}
			return true, nil
		})
	}
	placeholderSays("the StatefulSet is refused", names.StatefulSet, "exceeded quota")
	expectEvents(t, getPod(t, ns, s.plan.DriverPodName), "FailedCreate")

	setQuota(t, ns, "statefulsets", "count/statefulsets.apps", "1")
	placeholderSays("S-0 is refused", names.StatefulSet, "cannot create the driver pod", "exceeded quota")

	setQuota(t, ns, "pods", corev1.ResourcePods, "2")
	d0 := runningDriverWithin(t, 90*time.Second, ns, names, "")
	exitDriver(t, d0, 0)
	if res := s.Wait(t, 60*time.Second); res.FinalPhase != corev1.PodSucceeded {
		t.Errorf("spark-submit's final phase %s, want Succeeded", res.FinalPhase)
	}
}

// oneAppQuota sets namespace ns's quota to exactly one app: a driver pod of cpu and mem, two
// executors that each ask what executor asks (the simulator's executors, sized as Spark's defaults
// size them), four pods (with the placeholder); it returns once the quota's status is computed.
func oneAppQuota(t *testing.T, ns string, cpu, mem resource.Quantity, executor corev1.ResourceList) {
	t.Helper()
	for range 2 {
		cpu.Add(*executor.Cpu())
		mem.Add(*executor.Memory())
	}
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "one-app"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			corev1.ResourceRequestsCPU:    cpu,
			corev1.ResourceRequestsMemory: mem,
			corev1.ResourceLimitsMemory:   mem,
			corev1.ResourcePods:           resource.MustParse("4"),
		}},
	}
	if _, err := kube().CoreV1().ResourceQuotas(ns).Create(context.Background(), quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the quota's status computed", func(ctx context.Context) (bool, error) {
		q, err := kube().CoreV1().ResourceQuotas(ns).Get(ctx, "one-app", metav1.GetOptions{})
		return err == nil && len(q.Status.Hard) > 0, nil
	})
}
