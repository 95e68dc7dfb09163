package controller

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/driverset/driverset/contract"
)

// TestReconcileTakesTheLostIncarnationsExecutorsAlong: when driverset force-deletes a driver pod
// on a node proven down, it deletes that incarnation's executors in the same pass, before the
// driver pod: the next incarnation then finds none, so it is not held by the stale-executor gate
// for a pass of its own (on a node that held many drivers, that pass is what the last one waits
// for). Those on the dead node are force-deleted, one on a healthy node gracefully; another
// app's executor is left alone.
func TestReconcileTakesTheLostIncarnationsExecutorsAlong(t *testing.T) {
	h := runningCluster(t, nil, nil)
	h.setNode("node-b", corev1.ConditionTrue, t0)
	old := h.driver()
	app := h.placeholder().Labels[contract.LabelSparkAppSelector]
	executor := func(name, node, appID string) { h.makeExecutor(name, node, appID, old.Name, old.UID) }
	executor("pi-exec-1", "node-a", app)
	executor("pi-exec-2", "node-b", app)
	// The incarnation before old ran with an app id of its own.
	h.makeExecutor("pi-exec-0", "node-a", app+"-5d1f0c8e", old.Name, "5d1f0c8e-older-incarnation")
	h.makeExecutorOf("another-app-driver", "other-exec-1", "node-a", "spark-another-app", "another-app-driver-0", "another-app")

	lost := t0.Add(10 * time.Minute)
	h.setNode("node-a", corev1.ConditionUnknown, lost,
		corev1.Taint{Key: TaintOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})
	h.now = lost.Add(time.Second)
	h.deletes = nil
	h.reconcile()

	var order []string
	for _, d := range h.deletes {
		order = append(order, d.kind+"/"+d.name)
	}
	want := []string{"Pod/pi-exec-0", "Pod/pi-exec-1", "Pod/pi-exec-2", "Pod/" + old.Name}
	if !slices.Equal(slices.Sorted(slices.Values(order[:min(3, len(order))])), want[:3]) || len(order) != 4 || order[3] != want[3] {
		t.Fatalf("deletions %v, want the executors of the lost incarnation and of the one before %v, then its driver pod %s", order, want[:3], want[3])
	}
	if got, want := h.forcedDeletions(), []string{"Pod/pi-exec-0", "Pod/pi-exec-1", "Pod/" + old.Name}; !slices.Equal(slices.Sorted(slices.Values(got)), want) {
		t.Errorf("force-deletions %v, want %v (the executor on the healthy node goes gracefully)", got, want)
	}
}

// TestReconcileLeavesTheExecutorsToTheGateWhenANodeCannotBeRead: taking the lost incarnation's
// executors along is best effort. When the live read of one executor's node fails, that pass
// deletes none of them, not even those it could decide about: the driver pod is still
// force-deleted (its own node was read), and the stale-executor gate holds the next incarnation
// until every executor is gone, each decided on a node read live.
func TestReconcileLeavesTheExecutorsToTheGateWhenANodeCannotBeRead(t *testing.T) {
	h := runningCluster(t, nil, nil)
	h.setNode("node-b", corev1.ConditionTrue, t0)
	old := h.driver()
	app := h.placeholder().Labels[contract.LabelSparkAppSelector]
	for name, node := range map[string]string{"pi-exec-1": "node-a", "pi-exec-2": "node-b", "pi-exec-3": "node-c"} {
		h.makeExecutor(name, node, app, old.Name, old.UID)
	}
	lost := t0.Add(10 * time.Minute)
	shutdown := corev1.Taint{Key: TaintOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}
	h.setNode("node-a", corev1.ConditionUnknown, lost, shutdown)
	h.setNode("node-c", corev1.ConditionUnknown, lost, shutdown)
	readFails := errors.New("the live read of node-c failed")
	h.r.APIReader = interceptor.NewClient(h.c.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Node); ok && key.Name == "node-c" {
				return readFails
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	h.now = lost.Add(time.Second)
	h.deletes = nil
	if _, err := h.r.Reconcile(h.ctx, ctrl.Request{NamespacedName: h.p}); err != nil && !errors.Is(err, readFails) {
		t.Fatalf("Reconcile: %v", err)
	}
	var order []string
	for _, d := range h.deletes {
		order = append(order, d.kind+"/"+d.name)
	}
	if want := []string{"Pod/" + old.Name}; !slices.Equal(order, want) {
		t.Errorf("deletions %v, want only the driver pod %v: an executor deleted in a pass that could not read every executor's node", order, want)
	}
}
