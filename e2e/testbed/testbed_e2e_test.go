//go:build testbed

package testbed

import (
	"testing"
)

// TestOnTestbed runs every scenario on one shared test bed (a start costs ~15 s and ~630 MiB).
// The scenarios run in parallel, each in its own namespace and, where it breaks nodes, on its
// own fresh nodes. Missing binaries fail it (StartT never skips).
func TestOnTestbed(t *testing.T) {
	c := StartT(t, Options{})
	t.Logf("KUBECONFIG=%s", c.KubeconfigPath)

	t.Run("StatefulSet", func(t *testing.T) { testStatefulSet(t, c) })
	t.Run("TerminateContainer", func(t *testing.T) { testTerminateContainer(t, c) })
	t.Run("AddNodeLeavesNothingWhenItFails", func(t *testing.T) { testAddNodeLeavesNothingWhenItFails(t, c) })
}
