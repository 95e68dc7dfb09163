//go:build testbed

package e2e

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
)

// Issue 35: driverset's token may delete Spark's pods (driverset-guard-pods), and a grace-0
// delete removes a pod without its kubelet. Of a driver that still runs on a node that is only
// cut off, that has the StatefulSet start a second driver beside it: the one thing driverset
// exists to prevent, done with its own token. The webhook entry deletes.driverset.dev admits such
// a delete from driverset's ServiceAccount only on the proof driverset fences on (its node
// deleted or out of service, fence-after over, the heartbeat silent, or the exit recorded on a
// node that is down); a graceful delete, which its kubelet must confirm, goes through as it is.
// Each delete here is a server-side dry run as driverset's ServiceAccount. driverset's own fences
// through the entry are shown by the node-loss and self-fencing tests, which it also judges.
func TestStolenTokenForceDeletesNoDriverThatMayStillRun(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	s := submit(t, app(ns, "kept")) // no fence-after: only an admin's proof ends a lost node's wait
	names := contract.NamesFor(s.plan.DriverPodName)
	d0 := runningDriver(t, ns, names, "")
	ds := asDriverset(t)
	force := metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}, GracePeriodSeconds: new(int64(0))}
	graceful := metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}
	const refusals = `driverset_admission_decisions_total{outcome="denied",reason="not-proven",webhook="deletes"}`
	before := metric(t, refusals)

	refused := func(when string, want ...string) {
		t.Helper()
		err := ds.CoreV1().Pods(ns).Delete(ctx, d0.Name, force)
		if err == nil {
			t.Errorf("%s: driverset's token force-deleted the running driver pod %s", when, d0.Name)
			return
		}
		for _, w := range append([]string{"deletes.driverset.dev", "without its kubelet"}, want...) {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: the refusal %q does not say %q", when, err, w)
			}
		}
	}

	// On its Ready node: its kubelet would confirm a graceful delete; a forced one is refused.
	refused("on a Ready node", "is Ready")
	if err := ds.CoreV1().Pods(ns).Delete(ctx, d0.Name, graceful); err != nil {
		t.Errorf("driverset's graceful delete of %s was refused: %v", d0.Name, err)
	}
	// The entry judges driverset's ServiceAccount alone: an admin's `kubectl delete --force` is
	// the admin's to make.
	if err := kube().CoreV1().Pods(ns).Delete(ctx, d0.Name, force); err != nil {
		t.Errorf("the admin's force-delete of %s was refused: %v", d0.Name, err)
	}

	// Its node cut off: not Ready, tainted unreachable, the pod evicted and Terminating, and still
	// running there as far as anyone can tell. No fence-after, no heartbeat, no admin's proof.
	cutOff(t, d0.Spec.NodeName)
	waitEvicted(t, d0)
	refused("on a cut-off node", "not been Ready", "kubectl delete node")
	// A delete of the evicted pod that keeps its pending grace still waits for the kubelet.
	if err := ds.CoreV1().Pods(ns).Delete(ctx, d0.Name, graceful); err != nil {
		t.Errorf("driverset's graceful delete of the evicted %s was refused: %v", d0.Name, err)
	}
	if p := getPod(t, ns, d0.Name); p.UID != d0.UID {
		t.Fatalf("a second driver %s was started while the first one's node was only cut off", p.UID)
	}
	if got := metric(t, refusals); got < before+2 {
		t.Errorf("%s = %v, want at least %v", refusals, got, before+2)
	}
}
