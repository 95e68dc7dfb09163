//go:build testbed

package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/convert"
)

// kubectl runs the test bed's kubectl as the admin and returns its combined output.
func kubectl(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(bed.cluster.BinDir, "kubectl"), append([]string{"--kubeconfig", bed.cluster.KubeconfigPath}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The install's ValidatingAdmissionPolicy: removing the placeholder's gate (which would schedule it
// as a second driver) or its label is refused by the apiserver itself; other updates pass.
func TestPlaceholderGateCannotBeRemoved(t *testing.T) {
	ns := namespace(t, nil)
	s := submit(t, app(ns, "held"))
	p := s.plan.DriverPodName
	runningDriver(t, ns, contract.NamesFor(p), "")
	removeGate := `[{"op":"remove","path":"/spec/schedulingGates/0"}]`

	// The policy is applied with the manifests when the test bed starts; the apiserver loads it
	// asynchronously, so wait for it on a dry run (which a second driver cannot come of).
	var out string
	waitFor(t, 30*time.Second, "the apiserver refusing a dry-run removal of the placeholder's gate", func(ctx context.Context) (bool, error) {
		var err error
		out, err = kubectl("-n", ns, "patch", "pod", p, "--dry-run=server", "--type=json", "-p", removeGate)
		return err != nil, nil
	})
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"remove the gate", []string{"patch", "pod", p, "--type=json", "-p", removeGate}},
		{"drop every gate", []string{"patch", "pod", p, "--type=merge", "-p", `{"spec":{"schedulingGates":null}}`}},
		{"remove the label", []string{"label", "pod", p, contract.LabelPlaceholder + "-"}},
		{"change the label", []string{"label", "--overwrite", "pod", p, contract.LabelPlaceholder + "=false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := kubectl(append([]string{"-n", ns}, tc.args...)...)
			if err == nil {
				t.Fatalf("kubectl %s was accepted: %s", strings.Join(tc.args, " "), out)
			}
			if !strings.Contains(out, "driverset-placeholder") || !strings.Contains(out, "driverset placeholder") {
				t.Errorf("the refusal does not name driverset's policy and say why: %s", out)
			}
		})
	}
	t.Logf("refused: %s", out)
	if out, err := kubectl("-n", ns, "annotate", "pod", p, "team=growth"); err != nil {
		t.Errorf("an unrelated update of the placeholder was refused: %v: %s", err, out)
	}
	got := getPod(t, ns, p)
	if !convert.HasGate(&got.Spec, contract.GatePlaceholder) || got.Spec.NodeName != "" || got.Labels[contract.LabelPlaceholder] != "true" {
		t.Errorf("the placeholder changed: gates %v node %q labels %v", got.Spec.SchedulingGates, got.Spec.NodeName, got.Labels)
	}
	if out, err := kubectl("-n", ns, "delete", "pod", p, "--wait=false"); err != nil {
		t.Errorf("deleting the placeholder (how an app is stopped) was refused: %v: %s", err, out)
	}
}
