package testbed

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// cgroupMount is where this machine mounts its cgroup hierarchies: v1, one per controller, plus
// a named systemd hierarchy and an empty cgroup2 ("unified"). The VM's init owns everything in
// them but the cgroups the test bed makes: one root per real node, removed at Stop.
const cgroupMount = "/sys/fs/cgroup"

// cgroupHierarchies lists the mounted hierarchies (folders of cgroupMount holding cgroup.procs).
func cgroupHierarchies() ([]string, error) {
	entries, err := os.ReadDir(cgroupMount)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		dir := filepath.Join(cgroupMount, e.Name())
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err == nil {
			out = append(out, dir)
		}
	}
	return out, nil
}

// makeCgroupRoot creates name in every hierarchy; the kubelet refuses a cgroup root that is
// missing in any. A new cpuset cgroup starts with no CPUs and no memory nodes, so it gets its
// parent's.
func makeCgroupRoot(name string) error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		dir := filepath.Join(h, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if filepath.Base(h) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(h, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// removeCgroupRoot removes name and every cgroup below it, deepest first, in every hierarchy.
// A cgroup can only be removed once no process is left in it, so this runs after the node died.
func removeCgroupRoot(name string) error {
	if strings.Trim(name, "/") == "" {
		return errors.New("testbed: refusing to remove the root cgroup")
	}
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range hs {
		root := filepath.Join(h, name)
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// removeStaleCgroups removes the node cgroups that earlier test beds left when their process was
// killed before it could clean up: roots named namePrefix<pid>-… for a PID that no longer runs.
func removeStaleCgroups() error {
	entries, err := os.ReadDir(filepath.Join(cgroupMount, "memory"))
	if err != nil {
		return nil //nolint:nilerr // no such hierarchy: nothing of ours can be there
	}
	var errs []error
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), namePrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pid, _, _ := strings.Cut(rest, "-")
		if n, err := strconv.Atoi(pid); err != nil || processAlive(n) {
			continue
		}
		errs = append(errs, removeCgroupRoot("/"+e.Name()))
	}
	return errors.Join(errs...)
}
