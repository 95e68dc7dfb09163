package testbed

import (
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
)

// realNetLockPath serializes real test beds on one machine: their networks use fixed address
// ranges (realHostIP, the nodes' 10.78.i.0/24), so a second one would clash with the first.
const realNetLockPath = "/run/lock/driverset-testbed-realnet.lock"

// lockRealNet takes the machine-wide lock for the real nodes' network, waiting (and saying so
// once on log) while another test bed holds it. The kernel drops the lock when the holder dies,
// so a killed run never blocks the next one.
func lockRealNet(log io.Writer) (*os.File, error) {
	f, err := os.OpenFile(realNetLockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("testbed: the real network's lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		return f, nil
	}
	fmt.Fprintf(log, "testbed: another test bed with real nodes runs on this machine; waiting for it (%s)\n", realNetLockPath)
	start := time.Now()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("testbed: the real network's lock: %w", err)
	}
	fmt.Fprintf(log, "testbed: got the real network after %s\n", time.Since(start).Round(time.Second))
	return f, nil
}
