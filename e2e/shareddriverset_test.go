//go:build testbed

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/driverset/driverset/e2e/harness"
)

// stopSharedDriverset stops the bed's shared driverset for a test that needs driverset down for a
// while; restart brings it back (once: also at the test's end, when the test did not).
func stopSharedDriverset(t *testing.T) (restart func()) {
	t.Helper()
	if err := bed.driverset.Stop(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	restart = func() {
		if restarted {
			return
		}
		restarted = true
		d, err := startDriverset(context.Background(), bed.driverset)
		if err != nil {
			t.Fatalf("restart driverset: %v", err)
		}
		bed.driverset = d
	}
	t.Cleanup(restart)
	return restart
}

// replaceSharedDriverset runs, for the rest of the test, a replica of driverset started with the
// usual flags and args in place of the bed's shared one: on its port and with its CA, which the
// webhook configuration names. The shared one is back, and leading, when the test ends.
func replaceSharedDriverset(t *testing.T, dir string, args ...string) *harness.Driverset {
	t.Helper()
	return replaceSharedDriversetOn(t, dir, bed.cluster.KubeconfigPath, args...)
}

// replaceSharedDriversetOn is replaceSharedDriverset with the replica reaching the apiserver
// through kubeconfig (its server and credentials) rather than the bed's admin kubeconfig.
func replaceSharedDriversetOn(t *testing.T, dir, kubeconfig string, args ...string) *harness.Driverset {
	t.Helper()
	port, ca := bed.driverset.Port, bed.driverset.CA
	if err := bed.driverset.Stop(); err != nil {
		t.Fatal(err)
	}
	var replica *harness.Driverset
	t.Cleanup(func() {
		if replica != nil {
			if err := replica.Stop(); err != nil {
				t.Error(err)
			}
		}
		restoreSharedDriverset(t, true, nil)
	})
	dir = filepath.Join(bed.dir, dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var err error
	replica, err = harness.Start(context.Background(), harness.Options{
		Binary: bed.binary, Kubeconfig: kubeconfig, Dir: dir, Port: port, CA: ca,
		ServiceAccount: "driverset-system/driverset", Alive: bed.cluster.CheckAlive, Metrics: true,
		Args: append(slices.Clone(driversetArgs), args...),
	})
	if err != nil {
		t.Fatal(err)
	}
	return replica
}
