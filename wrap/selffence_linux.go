//go:build linux

package wrap

import (
	"os"
	"syscall"
)

// killTree kills the driver (pid) and every process under wrap with SIGKILL, at once: past T the
// controller may start another driver, so nothing of this one may be left to finish gracefully.
// The reaper collects them; endLeftovers catches any that appear meanwhile.
func killTree(pid int) {
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for _, p := range descendants(os.Getpid()) {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}
