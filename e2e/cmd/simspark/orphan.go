package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Leaving a process behind, for tests of `driverset wrap` as PID 1: the driver runs
// `simspark orphan --detach`, which starts `simspark orphan` in a session of its own, prints its
// PID and exits at once. The grandchild, whose parent is gone, is reparented to the container's
// PID 1 (or the nearest subreaper) and sleeps until it is killed.

// spawnOrphan runs self (this binary) as the detaching child and returns the orphan's PID.
func spawnOrphan(self string) (int, error) {
	out, err := exec.Command(self, "orphan", "--detach").Output()
	if err != nil {
		return 0, fmt.Errorf("orphan --detach: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return 0, fmt.Errorf("orphan --detach printed %q", out)
	}
	return pid, nil
}

// detachOrphan starts self as the orphan in a new session, its stdio on /dev/null (so that
// nobody waiting for our output waits for it), prints its PID and returns without waiting.
func detachOrphan(self string) error {
	cmd := exec.Command(self, "orphan")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(os.Stdout, cmd.Process.Pid)
	return err
}

// sleepForever is the orphan.
func sleepForever() {
	for {
		time.Sleep(time.Hour)
	}
}
