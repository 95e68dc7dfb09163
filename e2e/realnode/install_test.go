//go:build testbed

package realnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/driverset/driverset/e2e/harness"
	"github.com/driverset/driverset/e2e/testbed"
)

// applyInstall applies the install.yaml installDriverset rendered, as `kubectl apply
// --server-side -f` would: at the install, and again for a rotation of the seal key.
func applyInstall(ctx context.Context) error {
	f, err := os.Open(filepath.Join(bed.dir, "install.yaml"))
	if err != nil {
		return err
	}
	defer f.Close()
	objs, err := harness.Decode(f)
	if err != nil {
		return err
	}
	return harness.Apply(ctx, bed.cluster.Config, objs)
}

// driversetNamespace is where install.yaml puts driverset.
const driversetNamespace = "driverset-system"

// installDriverset installs driverset the way the README tells an admin to: install.yaml rendered
// for an image (hack/render-install.sh with DRIVERSET_IMAGE), applied server-side; then waits
// until both replicas are Ready and the webhook converts a driver through its Service.
func installDriverset(ctx context.Context) error {
	root, err := harness.ModuleRoot()
	if err != nil {
		return err
	}
	out := filepath.Join(bed.dir, "install.yaml")
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "render-install.sh"), out)
	cmd.Env = append(os.Environ(), "DRIVERSET_IMAGE="+bed.images.driverset, "KUBECTL="+filepath.Join(bed.cluster.BinDir, "kubectl"))
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("render-install.sh: %w: %s", err, b)
	}
	if err := applyInstall(ctx); err != nil {
		return err
	}
	c := bed.cluster.Client
	var last string
	err = wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := c.AppsV1().Deployments(driversetNamespace).Get(ctx, "driverset", metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not there yet
		}
		last = fmt.Sprintf("%d/%d ready", d.Status.ReadyReplicas, *d.Spec.Replicas)
		return d.Status.ReadyReplicas == *d.Spec.Replicas, nil
	})
	if err != nil {
		return fmt.Errorf("driverset's Deployment never became ready (%s): %w\n%s", last, err, testbed.PodsReport(ctx, bed.cluster.Client, driversetNamespace))
	}
	// The README's install check: a server-side dry-run of an opted-in driver comes back gated.
	return testbed.WaitConverts(ctx, c, bed.images.simspark, 2*time.Minute)
}
