package harness

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// CPUTimes is the machine's CPU time so far, from the "cpu" line of /proc/stat, in clock ticks:
// Total over every state, and Steal, the time this VM's CPUs were runnable but the hypervisor ran
// something else. The share of steal over a run says how much of a timing came from the host's
// other tenants rather than from the test bed.
type CPUTimes struct{ Total, Steal uint64 }

// StealShare is the share of the CPU time between t and later that was stolen, 0 to 1.
func (t CPUTimes) StealShare(later CPUTimes) float64 {
	if later.Total <= t.Total {
		return 0
	}
	return float64(later.Steal-t.Steal) / float64(later.Total-t.Total)
}

// ReadCPUTimes reads /proc/stat.
func ReadCPUTimes() (CPUTimes, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return CPUTimes{}, err
	}
	defer func() { _ = f.Close() }()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil {
		return CPUTimes{}, fmt.Errorf("/proc/stat: %w", err)
	}
	return parseCPUTimes(line)
}

// parseCPUTimes reads the aggregate line "cpu user nice system idle iowait irq softirq steal
// guest guest_nice"; guest time is already counted in user and nice, so it is not added again.
func parseCPUTimes(line string) (CPUTimes, error) {
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return CPUTimes{}, fmt.Errorf("/proc/stat: %q is not the aggregate cpu line with a steal column", line)
	}
	var t CPUTimes
	for i, f := range fields[1:min(len(fields), 9)] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return CPUTimes{}, fmt.Errorf("/proc/stat: column %d of %q: %w", i+1, line, err)
		}
		t.Total += v
		if i == 7 {
			t.Steal = v
		}
	}
	return t, nil
}
