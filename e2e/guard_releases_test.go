//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/driverset/driverset/contract"
)

// Issue 35: driverset's token may take its finalizer driverset.dev/outcome off a driver pod
// (driverset-guard-pods), and no policy can read whether the driver's exit was counted or whether
// its node still runs it. With a stolen token, a deleted driver pod let go early loses an exit not
// yet read, and is no longer held against the next `--force`. The webhook entry
// releases.driverset.dev admits that removal from driverset's ServiceAccount only when the
// controller would let the pod go itself (controller.MayRelease); an admin's removal is the
// admin's to make. Each removal here is a server-side dry run. driverset's own releases through
// the entry are shown by the node-loss tests (recoverFromNodeLoss counts them).
func TestStolenTokenReleasesNoDriverThatMayStillRun(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	s := submit(t, app(ns, "held")) // no fence-after: only an admin's proof ends a lost node's wait
	names := contract.NamesFor(s.plan.DriverPodName)
	d0 := runningDriver(t, ns, names, "")
	ds := asDriverset(t)
	const refusals = `driverset_admission_decisions_total{outcome="denied",reason="not-proven",webhook="releases"}`
	before := metric(t, refusals)

	refused := func(name, when string, want ...string) {
		t.Helper()
		if err := releaseDryRun(ctx, ds, ns, name); err == nil {
			t.Errorf("%s: driverset's token took %s off %s", when, contract.FinalizerOutcome, name)
		} else {
			t.Logf("%s: refused: %v", when, err)
			for _, w := range append([]string{"releases.driverset.dev", contract.FinalizerOutcome}, want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: the refusal %q does not say %q", when, err, w)
				}
			}
		}
	}

	// Running, on its Ready node: the finalizer is what will hold its deletion.
	refused(d0.Name, "a running driver pod", "not deleted")
	// The placeholder of an app that runs: it holds a deleted app until its driver stopped.
	refused(s.plan.DriverPodName, "a running app's placeholder", "not deleted")
	// The entry judges driverset's ServiceAccount alone.
	if err := releaseDryRun(ctx, kube(), ns, d0.Name); err != nil {
		t.Errorf("the admin's removal of the finalizer from %s was refused: %v", d0.Name, err)
	}

	// Its node cut off: not Ready, tainted unreachable, the pod evicted and Terminating, and its
	// driver still running there as far as anyone can tell. No fence-after, no admin's proof.
	cutOff(t, d0.Spec.NodeName)
	waitEvicted(t, d0)
	refused(d0.Name, "a deleted driver pod on a cut-off node", "may still run", d0.Spec.NodeName)
	if p := getPod(t, ns, d0.Name); p.UID != d0.UID || !slices.Contains(p.Finalizers, contract.FinalizerOutcome) {
		t.Fatalf("driver pod %s (%s) is no longer held: %v", p.Name, p.UID, p.Finalizers)
	}
	if got := metric(t, refusals); got < before+3 {
		t.Errorf("%s = %v, want at least %v", refusals, got, before+3)
	}
}

// releaseDryRun takes driverset's finalizer off pod ns/name as c, in a server-side dry run: a JSON
// patch that tests the finalizer's index first, as driverset uninstall-cleanup writes it.
func releaseDryRun(ctx context.Context, c kubernetes.Interface, ns, name string) error {
	p, err := kube().CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	at := slices.Index(p.Finalizers, contract.FinalizerOutcome)
	if at < 0 {
		return fmt.Errorf("pod %s/%s does not carry %s: %v", ns, name, contract.FinalizerOutcome, p.Finalizers)
	}
	patch := fmt.Sprintf(`[{"op":"test","path":"/metadata/finalizers/%d","value":%q},{"op":"remove","path":"/metadata/finalizers/%d"}]`,
		at, contract.FinalizerOutcome, at)
	_, err = c.CoreV1().Pods(ns).Patch(ctx, name, types.JSONPatchType, []byte(patch), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}
