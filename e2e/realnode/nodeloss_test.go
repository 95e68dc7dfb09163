//go:build testbed

package realnode

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/e2e/testbed"
)

// recoveryBound is how soon after the proof (the taint, the Node's deletion) the new driver runs on
// real nodes: driverset's force-delete, the StatefulSet controller, scheduling and a container
// start, with room for a loaded machine. Kubernetes alone takes 20–60 s (PodGC).
const recoveryBound = 12 * time.Second

// executors is how many executors the node-loss apps run: enough to show that each incarnation's
// executors find it at the stable name across nodes.
const executors = 2

// TestNodeKilledHardThenOutOfService: the driver's node dies with everything on it (kubelet,
// runtime, containers). Nothing replaces the driver while nobody knows the node is down; once an
// admin applies the out-of-service taint, a new incarnation runs on another node with the same
// app id, its executors register with it at the stable name, and spark-submit, still watching,
// ends with the real outcome.
func TestNodeKilledHardThenOutOfService(t *testing.T) {
	ns := namespace(t, nil)
	s := submit(t, simApp(ns, "killed", executors), nil)
	first := runningDriver(t, s, "", 3*time.Minute)
	appID := s.plan.AppID
	registered := waitLog(t, ns, first.Name, "registered from", executors, 2*time.Minute)
	for _, l := range registered {
		if !strings.Contains(l, appID) {
			t.Errorf("executor registered for another app: %q (app %s)", l, appID)
		}
	}
	node := first.Spec.NodeName
	if len(driverProcesses(t, node)) != 1 {
		t.Fatalf("want the driver's process on %s, got %+v", node, processes(t, node))
	}
	killed := time.Now()
	if err := bed.cluster.KillNode(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reviveIfDead(t, node) })
	t.Logf("killed %s (kubelet, containerd, and every container on it)", node)
	waitFor(t, 15*time.Second, "every process of "+node+" gone", func(context.Context) (bool, error) {
		return len(processes(t, node)) == 0, nil
	})
	waitNodeUnknown(t, node)
	noSecondDriver(t, s, first, 15*time.Second)

	tainted := time.Now()
	if err := bed.cluster.TaintOutOfService(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	second := runningDriver(t, s, string(first.UID), 3*time.Minute)
	t.Logf("recovered on %s %s after the node died, %s after the taint", second.Spec.NodeName,
		time.Since(killed).Round(time.Millisecond), time.Since(tainted).Round(time.Millisecond))
	// driverset acts on the taint at once; Kubernetes alone waits for PodGC's 20 s tick.
	if took := time.Since(tainted); took > recoveryBound {
		t.Errorf("the new driver ran %s after the taint, more than %s", took.Round(time.Millisecond), recoveryBound)
	}
	if second.Spec.NodeName == node {
		t.Fatalf("the new driver runs on the dead node %s", node)
	}
	// Each incarnation runs with an app id of its own: the submitted one and its pod's UID.
	started := waitLog(t, ns, second.Name, "simspark: driver started", 1, time.Minute)
	if want := incarnationAppID(t, appID, second); !strings.Contains(started[0], "app "+want+",") {
		t.Errorf("the new driver runs as another app: %q, want app id %s", started[0], want)
	}
	waitLog(t, ns, second.Name, "registered from", executors, 2*time.Minute)
	if !s.Running() {
		t.Fatal("spark-submit stopped watching during the recovery")
	}
	s.end(t, "0")
	res := s.Wait(t, 2*time.Minute)
	if res.FinalPhase != corev1.PodSucceeded {
		t.Errorf("spark-submit saw %s (phases %v), want Succeeded", res.FinalPhase, res.Phases)
	}
}

// TestNodeCutOffKeepsOneDriverUntilTheAdminActs: the driver's node loses the network while its
// containers keep running. driverset starts no second driver: the old one may still be working.
// What happens after an admin declares the node down (the out-of-service taint) while it is in
// fact alive is shown, not hidden: a new driver starts elsewhere while the old container still
// runs on the cut-off node, until the node is back and its kubelet stops the container of a
// pod that no longer exists. "At most one" rests on the admin's word being true.
func TestNodeCutOffKeepsOneDriverUntilTheAdminActs(t *testing.T) {
	ns := namespace(t, nil)
	s := submit(t, simApp(ns, "cutoff", executors), nil)
	first := runningDriver(t, s, "", 3*time.Minute)
	waitLog(t, ns, first.Name, "registered from", executors, 2*time.Minute)
	node := first.Spec.NodeName
	if err := bed.cluster.PartitionNode(node); err != nil {
		t.Fatal(err)
	}
	healed := false
	t.Cleanup(func() {
		if !healed {
			_ = bed.cluster.HealNode(node)
		}
		untaint(t, node)
	})
	waitNodeUnknown(t, node)
	noSecondDriver(t, s, first, 20*time.Second)
	if len(driverProcesses(t, node)) == 0 {
		t.Fatalf("the cut-off node's driver process is gone; the partition should leave it running")
	}

	if err := bed.cluster.TaintOutOfService(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	second := runningDriver(t, s, string(first.UID), 3*time.Minute)
	if second.Spec.NodeName == node {
		t.Fatalf("the new driver runs on the cut-off node %s", node)
	}
	old := driverProcesses(t, node)
	t.Logf("after the taint: new driver on %s; old driver processes still running on cut-off %s: %d",
		second.Spec.NodeName, node, len(old))
	if len(old) == 0 {
		t.Errorf("expected the cut-off node's container to keep running until its kubelet hears of the deletion")
	}

	if err := bed.cluster.HealNode(node); err != nil {
		t.Fatal(err)
	}
	healed = true
	untaint(t, node)
	waitFor(t, 2*time.Minute, "the healed node's kubelet to stop the old driver", func(context.Context) (bool, error) {
		return len(driverProcesses(t, node)) == 0, nil
	})
	s.end(t, "0")
	if res := s.Wait(t, 2*time.Minute); res.FinalPhase != corev1.PodSucceeded {
		t.Errorf("spark-submit saw %s (phases %v), want Succeeded", res.FinalPhase, res.Phases)
	}
}

// driverProcesses are the simulated driver JVMs running on node.
func driverProcesses(t *testing.T, node string) []testbed.Proc {
	t.Helper()
	return processes(t, node, argvDriver...)
}

func waitNodeUnknown(t *testing.T, node string) {
	t.Helper()
	waitFor(t, 2*time.Minute, "node "+node+" Unknown", func(ctx context.Context) (bool, error) {
		n, err := kube().CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return testbed.NodeReady(n) == corev1.ConditionUnknown, nil
	})
}

// noSecondDriver watches for d that no other incarnation of S-0 exists than first.
func noSecondDriver(t *testing.T, s *submission, first *corev1.Pod, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		p, err := kube().CoreV1().Pods(s.app.Namespace).Get(context.Background(), s.names.DriverPodName(), metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		if err == nil && p.UID != first.UID {
			t.Fatalf("a second driver %s (on %q) exists while the first may still run", p.UID, p.Spec.NodeName)
		}
		time.Sleep(time.Second)
	}
	t.Logf("no second driver during %s after the node was lost", d)
}

// reviveIfDead brings a killed node back for the next scenarios, without its out-of-service taint.
func reviveIfDead(t *testing.T, node string) {
	t.Helper()
	untaint(t, node)
	if err := bed.cluster.ReviveNode(context.Background(), node); err != nil && !errors.Is(err, testbed.ErrNodeAlive) {
		t.Errorf("reviving %s: %v", node, err)
	}
}

func untaint(t *testing.T, node string) {
	t.Helper()
	ctx := context.Background()
	n, err := kube().CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return // deleted: its kubelet registers it again, untainted, when it is revived
	}
	if err != nil {
		t.Errorf("node %s: %v", node, err)
		return
	}
	var keep []corev1.Taint
	for _, tt := range n.Spec.Taints {
		if tt.Key != testbed.TaintOutOfServiceKey {
			keep = append(keep, tt)
		}
	}
	if len(keep) == len(n.Spec.Taints) {
		return
	}
	n.Spec.Taints = keep
	if _, err := kube().CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Errorf("untaint %s: %v", node, err)
	}
}

// TestDeadNodeRecoveries: the two other ways a dead node's driver comes back without anyone
// confirming the node is down by taint: its Node object is deleted (autoscaler, node repair), or
// the app opted into fencing and the node stayed unreachable that long.
func TestDeadNodeRecoveries(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fence string
		act   func(node string) error
	}{
		{name: "node deleted", act: func(node string) error { return bed.cluster.DeleteNode(context.Background(), node) }},
		{name: "fenced", fence: "15s", act: func(string) error { return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := namespace(t, nil)
			a := simApp(ns, "dead", 1)
			if tc.fence != "" {
				a.DriverAnnotations = map[string]string{"driverset.dev/fence-after": tc.fence}
			}
			s := submit(t, a, nil)
			first := runningDriver(t, s, "", 3*time.Minute)
			waitLog(t, ns, first.Name, "registered from", 1, 2*time.Minute)
			node := first.Spec.NodeName
			killed := time.Now()
			if err := bed.cluster.KillNode(context.Background(), node); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { reviveIfDead(t, node) })
			if tc.fence == "" {
				waitNodeUnknown(t, node)
				noSecondDriver(t, s, first, 5*time.Second)
			}
			acted := time.Now()
			if err := tc.act(node); err != nil {
				t.Fatal(err)
			}
			second := runningDriver(t, s, string(first.UID), 3*time.Minute)
			// A deleted Node is proof driverset acts on at once; Kubernetes' PodGC waits 40 s more.
			if took := time.Since(acted); tc.fence == "" && took > recoveryBound {
				t.Errorf("the new driver ran %s after the Node was deleted, more than %s", took.Round(time.Millisecond), recoveryBound)
			}
			t.Logf("%s: recovered on %s %s after the node died", tc.name, second.Spec.NodeName, time.Since(killed).Round(time.Millisecond))
			if second.Spec.NodeName == node {
				t.Fatalf("the new driver runs on the dead node %s", node)
			}
			waitLog(t, ns, second.Name, "registered from", 1, 2*time.Minute)
			s.end(t, "0")
			if res := s.Wait(t, 2*time.Minute); res.FinalPhase != corev1.PodSucceeded {
				t.Errorf("spark-submit saw %s (phases %v), want Succeeded", res.FinalPhase, res.Phases)
			}
		})
	}
}
