package testbed

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestRemoveStaleCgroups: a node cgroup root left by a test bed whose process is gone is removed
// in every hierarchy, subfolders first; one whose process still runs is kept. Needs root.
func TestRemoveStaleCgroups(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make cgroups")
	}
	dead := deadPID(t)
	stale := "/" + namePrefix + strconv.Itoa(dead) + "-node-1"
	alive := "/" + namePrefix + strconv.Itoa(os.Getpid()) + "-node-1"
	for _, name := range []string{stale, alive} {
		if err := makeCgroupRoot(name); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(cgroupMount, "memory", name, "kubepods", "burstable"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = removeCgroupRoot(alive); _ = removeCgroupRoot(stale) })
	if err := removeStaleCgroups(); err != nil {
		t.Fatal(err)
	}
	hs, err := cgroupHierarchies()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		if _, err := os.Stat(filepath.Join(h, stale)); !os.IsNotExist(err) {
			t.Errorf("%s%s still exists (%v)", h, stale, err)
		}
		if _, err := os.Stat(filepath.Join(h, alive)); err != nil {
			t.Errorf("%s%s of a running test bed was removed: %v", h, alive, err)
		}
	}
}

// deadPID is a PID that no process has: one of a child that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	p, err := os.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	return p.Pid
}
