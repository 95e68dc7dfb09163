//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
	"github.com/driverset/driverset/e2e/sparksim"
)

// The driver in S-0 makes its executors as driverset wants them: labelled with its StatefulSet,
// owned by S-0, pointed at the stable name. So they need no webhook: driverset is not called for
// them (no cost on an executor create, nothing to wait on when driverset is slow), on every Spark
// version, and on 4.1 with useDriverPodIP too, which driverset turns off.
func TestExecutorsAreMadeAsDriversetWantsThem(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version sparksim.Version
		conf    map[string]string
	}{
		{"spark-2.4", sparksim.Spark24, nil},
		{"spark-3.5", sparksim.Spark35, nil},
		{"spark-4.1 with useDriverPodIP", sparksim.Spark41, map[string]string{"spark.kubernetes.executor.useDriverPodIP": "true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := namespace(t, nil)
			dumpOnFailure(t, ns)
			before := executorAdmissions(t)
			a := app(ns, "born")
			a.Version, a.Conf = tc.version, tc.conf
			r := startApp(t, a, 2)
			want := fmt.Sprintf("spark://CoarseGrainedScheduler@%s:%d", r.names.DriverHost(ns), sparksim.DriverPort)
			for _, e := range r.executors {
				got := getPod(t, ns, e.Name)
				if got.Labels[contract.LabelDriver] != r.names.StatefulSet || !ownedBy(got, r.pod) || envOf(got, contract.EnvDriverURL) != want {
					t.Errorf("executor %s: label %s=%q, owners %v, %s=%q; want %q, owned by %s, %q",
						e.Name, contract.LabelDriver, got.Labels[contract.LabelDriver], got.OwnerReferences,
						contract.EnvDriverURL, envOf(got, contract.EnvDriverURL), r.names.StatefulSet, r.pod.Name, want)
				}
			}
			// A call would be counted once answered: give a late one the time to show.
			time.Sleep(2 * time.Second)
			if n := executorAdmissions(t) - before; n != 0 {
				t.Errorf("driverset's executor webhook was called %v time(s) for %d executors made by S-0; want none", n, len(r.executors))
			}
		})
	}
}

// An executor made while driverset is down is still driverset's: it is in its cache, so when the
// driver is replaced the new incarnation is held until that executor is gone, as for any other
// (a finalizer keeps it, as a slow kubelet would). Before executors were labelled at birth only
// the executor webhook labelled them, and one made while it was down was invisible to driverset:
// the next driver started beside it.
func TestExecutorMadeWhileDriversetIsDownHoldsTheNextIncarnation(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	dumpOnFailure(t, ns)
	r := startApp(t, app(ns, "down"), 1)

	restart := stopSharedDriverset(t)
	made, err := r.driver.RequestExecutors(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	late := made[0]
	release := holdPod(t, ns, late.Name)
	if got := getPod(t, ns, late.Name); got.Labels[contract.LabelDriver] != r.names.StatefulSet {
		t.Errorf("executor %s, made while driverset was down: labels %v; want %s=%s from Spark itself",
			late.Name, got.Labels, contract.LabelDriver, r.names.StatefulSet)
	}
	restart()

	// The JVM is killed (no clean stop): its executors stay until the garbage collector acts.
	exitDriver(t, r.pod, 137)
	waitFor(t, 30*time.Second, "a new incarnation held by the stale-executor gate", func(ctx context.Context) (bool, error) {
		p, err := kube().CoreV1().Pods(ns).Get(ctx, r.names.DriverPodName(), metav1.GetOptions{})
		return err == nil && p.UID != r.pod.UID && convert.HasGate(&p.Spec, contract.GateStaleExecutors), nil
	})
	time.Sleep(2 * time.Second)
	if p := getPod(t, ns, r.names.DriverPodName()); p.Spec.NodeName != "" || p.Status.Phase != corev1.PodPending {
		t.Fatalf("the new incarnation is %s on %q while the executor made when driverset was down exists", p.Status.Phase, p.Spec.NodeName)
	}
	release()
	runningDriver(t, ns, r.names, string(r.pod.UID))
}
