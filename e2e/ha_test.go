//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/harness"
)

// Issue 5, item 3: two replicas behind one address, as a Deployment of two behind its Service.
// The leader crashes; the other keeps admitting every driver at once, and takes over the
// controller when the lease runs out: a driver that finished meanwhile is reported Succeeded to
// its spark-submit, and the drivers admitted meanwhile get their StatefulSets.
func TestLeaderFailover(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)

	// The shared replica leads first (just after TestMain its lease may still be pending), so
	// that the crash and the shared setup's restore take one known path.
	waitFor(t, 60*time.Second, "the shared driverset leading", func(context.Context) (bool, error) {
		return isLeader(bed.driverset), nil
	})
	dir := filepath.Join(bed.dir, "leader-failover")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	second, err := harness.Start(ctx, harness.Options{
		Binary: bed.binary, Kubeconfig: bed.cluster.KubeconfigPath, Dir: dir, Args: driversetArgs,
		ServiceAccount: "driverset-system/driverset", Metrics: true, CA: bed.driverset.CA,
		Alive: bed.cluster.CheckAlive,
	})
	if err != nil {
		t.Fatal(err)
	}
	replicas := []*harness.Driverset{bed.driverset, second}
	var proxy *harness.Proxy
	sharedKilled := false
	t.Cleanup(func() {
		// The proxy and the second replica go once the webhooks point at the shared one again,
		// and before it waits to lead (the second would keep the lease).
		restoreSharedDriverset(t, sharedKilled, func() {
			if proxy != nil {
				if err := proxy.Close(); err != nil {
					t.Error(err)
				}
			}
			if err := second.Stop(); err != nil {
				t.Error(err)
			}
		})
	})
	t.Logf("replicas on ports %d (shared) and %d (log %s)", bed.driverset.Port, second.Port, second.LogPath)

	var leader, survivor *harness.Driverset
	waitFor(t, 60*time.Second, "one leader among the replicas", func(context.Context) (bool, error) {
		var leaders []*harness.Driverset
		for _, d := range replicas {
			if isLeader(d) {
				leaders = append(leaders, d)
			}
		}
		if len(leaders) > 1 {
			return false, fmt.Errorf("replicas %d and %d both lead", leaders[0].Port, leaders[1].Port)
		}
		if len(leaders) == 0 {
			return false, nil
		}
		leader, survivor = leaders[0], replicas[0]
		if survivor == leader {
			survivor = replicas[1]
		}
		return true, nil
	})
	before := lease(t)
	t.Logf("leader: the replica on port %d (lease holder %s, %d transitions)", leader.Port, before.holder, before.transitions)

	// The leader is the proxy's first choice, so the apiserver's connection goes to it and the
	// crash makes the apiserver connect again: the survivor must then serve every admission.
	if proxy, err = harness.StartProxy(addr(leader.Port), addr(survivor.Port)); err != nil {
		t.Fatal(err)
	}
	pointWebhooksAt(t, proxy.Port)
	waitFor(t, 30*time.Second, fmt.Sprintf("the apiserver calling the webhook through the proxy (port %d)", proxy.Port), func(ctx context.Context) (bool, error) {
		if err := harness.WaitWebhookActive(ctx, bed.cluster.Config, bed.cluster.CheckAlive); err != nil {
			return false, err
		}
		return proxy.Served()[addr(leader.Port)] > 0, nil
	})

	s := submit(t, app(ns, "failover"))
	names := contract.NamesFor(s.plan.DriverPodName)
	d0 := runningDriver(t, ns, names, "")
	waitFor(t, 30*time.Second, "placeholder Running", func(ctx context.Context) (bool, error) {
		p, err := kube().CoreV1().Pods(ns).Get(ctx, s.plan.DriverPodName, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	})

	servedBefore := proxy.Served()
	leader.Kill()
	killed := time.Now()
	sharedKilled = leader == bed.driverset
	t.Logf("killed the leader (port %d); connections so far: %v", leader.Port, servedBefore)
	stream := startStream(t, ns, "during", 200*time.Millisecond)
	// The driver finishes while nobody leads: only the next leader can tell spark-submit.
	exitDriver(t, d0, 0)

	var tookOver time.Duration
	waitFor(t, 60*time.Second, "the survivor leading", func(ctx context.Context) (bool, error) {
		if !s.Running() {
			res, err := s.Result()
			return false, fmt.Errorf("spark-submit returned before any replica led: %+v, %v", res, err)
		}
		if !isLeader(survivor) {
			return false, nil
		}
		tookOver = time.Since(killed)
		return true, nil
	})
	after := lease(t)
	t.Logf("the survivor (port %d) took over %s after the crash (lease holder %s, %d transitions)",
		survivor.Port, tookOver.Round(time.Millisecond), after.holder, after.transitions)
	if after.holder == before.holder || after.transitions <= before.transitions {
		t.Errorf("the Lease did not change hands: before %s (%d transitions), after %s (%d)",
			before.holder, before.transitions, after.holder, after.transitions)
	}
	// A few seconds under the new leader too.
	time.Sleep(3 * time.Second)
	results := stream.stop()
	checkStream(t, results, 30)
	servedAfter := proxy.Served()
	t.Logf("connections through the proxy: %v", servedAfter)
	if servedAfter[addr(survivor.Port)] <= servedBefore[addr(survivor.Port)] {
		t.Errorf("no connection went to the survivor after the crash: %v before, %v after", servedBefore, servedAfter)
	}

	res := s.Wait(t, 60*time.Second)
	if res.FinalPhase != corev1.PodSucceeded || res.ExitCode != 0 {
		t.Errorf("spark-submit saw phases %v, final %s, exit code %d; want Succeeded, 0", res.Phases, res.FinalPhase, res.ExitCode)
	}
	t.Logf("spark-submit saw Succeeded %s after the crash", time.Since(killed).Round(time.Millisecond))

	// Every driver admitted meanwhile gets its StatefulSet: the new leader carries on where the
	// old one stopped.
	progress := time.Now()
	waitFor(t, 90*time.Second, fmt.Sprintf("a StatefulSet for each of the %d drivers admitted during the failover", len(results)), func(ctx context.Context) (bool, error) {
		missing := 0
		for _, r := range results {
			if r.err != nil {
				continue
			}
			_, err := kube().AppsV1().StatefulSets(ns).Get(ctx, contract.NamesFor(r.pod).StatefulSet, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				missing++
			} else if err != nil {
				return false, err
			}
		}
		if missing > 0 && time.Since(progress) > 10*time.Second {
			t.Logf("%d StatefulSets still missing", missing)
			progress = time.Now()
		}
		return missing == 0, nil
	})
	t.Logf("the backlog was converted %s after the crash", time.Since(killed).Round(time.Millisecond))
}

func addr(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }

// leaseView is who holds the controller's Lease, and how often it changed hands.
type leaseView struct {
	holder      string
	transitions int32
}

func lease(t *testing.T) leaseView {
	t.Helper()
	l, err := kube().CoordinationV1().Leases(systemNamespace).Get(context.Background(), leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Lease %s/%s: %v", systemNamespace, leaseName, err)
	}
	var v leaseView
	if l.Spec.HolderIdentity != nil {
		v.holder = *l.Spec.HolderIdentity
	}
	if l.Spec.LeaseTransitions != nil {
		v.transitions = *l.Spec.LeaseTransitions
	}
	return v
}
