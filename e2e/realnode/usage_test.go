//go:build testbed

package realnode

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// clockTicks is the kernel's USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
const clockTicks = 100

// reportNodeUsage prints what each real node's own components (kubelet, containerd, its shims,
// kube-proxy) use: resident memory now, and CPU time since they started. Containers are left out:
// they are the workload, not the node.
func reportNodeUsage(w io.Writer) {
	for _, node := range bed.cluster.RealNodes() {
		procs, err := bed.cluster.NodeProcesses(node)
		if err != nil {
			fmt.Fprintf(w, "realnode: %s: %v\n", node, err)
			continue
		}
		rss := map[string]int64{}
		cpu := map[string]float64{}
		for _, p := range procs {
			if len(p.Cmdline) == 0 {
				continue
			}
			name := filepath.Base(p.Cmdline[0])
			switch name {
			case "kubelet", "containerd", "containerd-shim-runc-v2", "kube-proxy":
			default:
				continue
			}
			rss[name] += statusKiB(p.PID, "VmRSS") * 1024
			cpu[name] += cpuSeconds(p.PID)
		}
		names := make([]string, 0, len(rss))
		for n := range rss {
			names = append(names, n)
		}
		sort.Strings(names)
		var parts []string
		for _, n := range names {
			parts = append(parts, fmt.Sprintf("%s %d MiB %.1f CPU-s", n, rss[n]>>20, cpu[n]))
		}
		fmt.Fprintf(w, "realnode: %s uses %s\n", node, strings.Join(parts, ", "))
	}
}

func statusKiB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}

func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (u + st) / clockTicks
}
