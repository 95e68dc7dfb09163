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

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/harness"
	"github.com/driverset/driverset/e2e/sparksim"
	"github.com/driverset/driverset/webhook"
)

// One tenant's stuck apps cost that tenant only: 40 apps of one namespace wait for good (each
// one's StatefulSet name is taken by a StatefulSet driverset does not own), and another
// namespace's driver still comes back within the bound of TestDriverRecoversWhenItsNodeIsDeleted
// after its node is deleted. Stuck apps are looked at less often the longer they wait, and
// several workers reconcile at once.
func TestStuckTenantDoesNotDelayAnotherTenantsRecovery(t *testing.T) {
	ctx := context.Background()
	stuck := namespace(t, nil)
	const apps = 40
	for i := range apps {
		plan, err := app(stuck, fmt.Sprintf("stuck-%d", i)).Plan()
		if err != nil {
			t.Fatal(err)
		}
		takeName(t, stuck, contract.NamesFor(plan.DriverPodName).StatefulSet)
		if _, err := sparksim.SubmitPlan(ctx, kube(), plan, sparksim.SubmitOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, time.Minute, fmt.Sprintf("%d apps stuck on a taken name", apps), func(ctx context.Context) (bool, error) {
		evs, err := kube().EventsV1().Events(stuck).List(ctx, metav1.ListOptions{FieldSelector: "reason=NameTaken"})
		if err != nil {
			return false, err
		}
		seen := map[string]bool{}
		for _, e := range evs.Items {
			seen[e.Regarding.Name] = true
		}
		return len(seen) >= apps, nil
	})
	recoverFromNodeLoss(t, "node-deleted", 5*time.Second, func(ctx context.Context, node string) (time.Time, error) {
		at := time.Now()
		return at, bed.cluster.DeleteNode(ctx, node)
	})
}

// takeName makes a StatefulSet of no replicas named name in ns that driverset does not own.
func takeName(t *testing.T, ns, name string) {
	t.Helper()
	zero := int32(0)
	labels := map[string]string{"app": name}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &zero, ServiceName: name, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "other"}}},
			},
		},
	}
	if _, err := kube().AppsV1().StatefulSets(ns).Create(context.Background(), sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Another app's executors never reach driverset: the apiserver sends the executors entry only the
// executors whose controller is a pod named as driverset names its driver pods (<sts>-0), so the
// cluster's other Spark apps do not pay for driverset on every executor create, nor wait on it
// when it is slow. An opted-in app's executors are born labelled and skip the entry too
// (TestExecutorsAreMadeAsDriversetWantsThem); one whose controller is a pod someone else named *-0
// still goes through it, and driverset leaves it unchanged.
func TestForeignExecutorsNeverReachDriverset(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	before := executorAdmissions(t)

	pod := func(kind, name string, controller bool) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "v1", Kind: kind, Name: name, UID: "0b7f0d7e-5c1a-4a53-9a7e-1f2d3c4b5a69", Controller: &controller}}
	}
	reached := 0
	for i, tc := range []struct {
		name    string
		owners  []metav1.OwnerReference
		reaches bool
	}{
		{"controlled by Spark's driver pod, <name>-driver", foreignExecutor(ns, 1).OwnerReferences, false},
		{"owned by nothing", nil, false},
		{"owned by a pod named *-0 that is not its controller", pod("Pod", "other-0", false), false},
		{"controlled by something else named *-0", pod("ReplicaSet", "spark-pi-rs-0", true), false},
		{"controlled by a pod named *-0 that driverset does not run", pod("Pod", "my-driver-0", true), true},
	} {
		e := foreignSparkPod(ns, i+1)
		e.OwnerReferences = tc.owners
		made, err := kube().CoreV1().Pods(ns).Create(ctx, e, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if _, ok := made.Labels[contract.LabelDriver]; ok {
			t.Errorf("%s: driverset labelled it %v", tc.name, made.Labels)
		}
		if tc.reaches {
			reached++
		}
	}

	a := startApp(t, app(ns, "ours"), 2)
	for _, e := range a.executors {
		if got := getPod(t, ns, e.Name); got.Labels[contract.LabelDriver] != a.names.StatefulSet || !ownedBy(got, a.pod) {
			t.Errorf("executor %s of an opted-in app: labels %v, owners %v; want label %s=%s and owner %s",
				e.Name, got.Labels, got.OwnerReferences, contract.LabelDriver, a.names.StatefulSet, a.pod.Name)
		}
	}
	// driverset counts an admission once it has answered, so the count may trail the creates a
	// little: wait for the ones expected, then any other would show on top of them.
	want := float64(reached)
	var got float64
	waitFor(t, 10*time.Second, "driverset to count the executors sent to it", func(context.Context) (bool, error) {
		got = executorAdmissions(t) - before
		return got >= want, nil
	})
	if got != want {
		t.Errorf("driverset was sent %v executor admission(s) in all; want %v: the one controlled by my-driver-0, none of the opted-in app's %d",
			got, want, len(a.executors))
	}
}

// executorAdmissions is how many admissions driverset's executor handler has answered so far.
func executorAdmissions(t *testing.T) float64 {
	t.Helper()
	body, err := metricsOf(bed.driverset)
	if err != nil {
		t.Fatal(err)
	}
	_, n := harness.HistogramTotals(body, "controller_runtime_webhook_latency_seconds", `webhook="`+webhook.ExecutorPath+`"`)
	return n
}
