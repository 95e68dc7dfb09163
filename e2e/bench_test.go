//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/sparksim"
)

// BenchmarkRecovery measures, on each recovery path, the time from losing the node under a
// running pod to its replacement Running on another node: for a driverset driver and, in the
// same run, for a plain StatefulSet of one. It reports seconds per recovery and, for driverset,
// the ratio to the plain StatefulSet on the same path (fencing has no plain counterpart: a plain
// StatefulSet never recovers from a silent node; its ratio is to the out-of-service path).
//
//	make bench   (go test -tags testbed -run '^$' -bench Recovery -benchtime 1x ./e2e/)
func BenchmarkRecovery(b *testing.B) {
	paths := []struct {
		name       string
		fenceAfter string
		lose       func(ctx context.Context, node string) error
	}{
		{"node-deleted", "", func(ctx context.Context, node string) error { return bed.cluster.DeleteNode(ctx, node) }},
		{"out-of-service", "", func(ctx context.Context, node string) error {
			if err := bed.cluster.KillNode(ctx, node); err != nil {
				return err
			}
			if err := waitNodeCondition(ctx, node, corev1.ConditionTrue, false); err != nil {
				return err
			}
			return bed.cluster.TaintOutOfService(ctx, node)
		}},
		{"fenced-30s", "30s", func(ctx context.Context, node string) error { return bed.cluster.KillNode(ctx, node) }},
	}
	plain := map[string]float64{}
	for _, p := range paths {
		if p.fenceAfter == "" {
			b.Run(p.name+"/plain-statefulset", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					plain[p.name] = measure(b, func(ctx context.Context, ns string) (string, func() (*corev1.Pod, error)) {
						return plainStatefulSet(b, ctx, ns)
					}, p.lose)
				}
				b.ReportMetric(plain[p.name], "s/recovery")
			})
		}
		b.Run(p.name+"/driverset", func(b *testing.B) {
			var took float64
			for i := 0; i < b.N; i++ {
				took = measure(b, func(ctx context.Context, ns string) (string, func() (*corev1.Pod, error)) {
					return driversetApp(b, ctx, ns, p.fenceAfter)
				}, p.lose)
			}
			b.ReportMetric(took, "s/recovery")
			ref := plain[p.name]
			if ref == 0 {
				ref = plain["out-of-service"]
			}
			if ref > 0 {
				b.ReportMetric(took/ref, "x-plain")
			}
		})
	}
}

// measure starts a workload in a fresh namespace, loses the node of its pod and returns the
// seconds until the replacement runs elsewhere.
func measure(b *testing.B, start func(ctx context.Context, ns string) (string, func() (*corev1.Pod, error)), lose func(context.Context, string) error) float64 {
	b.Helper()
	b.StopTimer()
	ctx := context.Background()
	ns := fmt.Sprintf("bench-%d", time.Now().UnixNano()%1_000_000)
	if _, err := kube().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if err := bed.cluster.WaitForDefaultServiceAccount(ctx, ns); err != nil {
		b.Fatal(err)
	}
	podName, get := start(ctx, ns)
	var first *corev1.Pod
	if err := poll(ctx, 2*time.Minute, func() bool {
		p, err := get()
		first = p
		return err == nil && p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning
	}); err != nil {
		b.Fatalf("%s never ran: %v", podName, err)
	}
	spare := fmt.Sprintf("kwok-bench-%d", time.Now().UnixNano()%1_000_000)
	if err := bed.cluster.AddNode(ctx, spare); err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	t0 := time.Now()
	if err := lose(ctx, first.Spec.NodeName); err != nil {
		b.Fatal(err)
	}
	if err := poll(ctx, 4*time.Minute, func() bool {
		p, err := get()
		return err == nil && p.UID != first.UID && p.DeletionTimestamp == nil && p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning
	}); err != nil {
		b.Fatalf("%s was not replaced: %v", podName, err)
	}
	took := time.Since(t0).Seconds()
	b.StopTimer()
	b.Logf("%s replaced %.1fs after losing node %s", podName, took, first.Spec.NodeName)
	_ = kube().CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	return took
}

func plainStatefulSet(b *testing.B, ctx context.Context, ns string) (string, func() (*corev1.Pod, error)) {
	one := int32(1)
	labels := map[string]string{"app": "plain"}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &one, ServiceName: "plain", Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "plain"}}},
			},
		},
	}
	if _, err := kube().AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	return "plain-0", func() (*corev1.Pod, error) { return kube().CoreV1().Pods(ns).Get(ctx, "plain-0", metav1.GetOptions{}) }
}

func driversetApp(b *testing.B, ctx context.Context, ns, fenceAfter string) (string, func() (*corev1.Pod, error)) {
	a := app(ns, "bench")
	if fenceAfter != "" {
		a.DriverAnnotations = map[string]string{contract.AnnotationFenceAfter: fenceAfter}
	}
	plan, err := a.Plan()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := sparksim.SubmitPlan(ctx, kube(), plan, sparksim.SubmitOptions{}); err != nil {
		b.Fatal(err)
	}
	name := contract.NamesFor(plan.DriverPodName).DriverPodName()
	return name, func() (*corev1.Pod, error) { return kube().CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}) }
}

func poll(ctx context.Context, timeout time.Duration, cond func() bool) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond(), nil })
}

// waitNodeCondition waits until node's Ready condition is (or, with is false, is not) status.
func waitNodeCondition(ctx context.Context, node string, status corev1.ConditionStatus, is bool) error {
	return poll(ctx, 2*time.Minute, func() bool {
		n, err := kube().CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return (c.Status == status) == is
			}
		}
		return false
	})
}
