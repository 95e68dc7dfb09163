package harness

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
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

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on every Linux this runs on.
const clockTicks = 100

// ProcessCPU is the CPU time, user and system, that process pid and all its threads have used so
// far, from /proc/<pid>/stat. Read around a stretch of a run, it charges the process's CPU to what
// ran in that stretch, with no call into the process.
func ProcessCPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseProcessCPU(string(raw))
}

// CPU is the driverset process's CPU time so far (ProcessCPU).
func (d *Driverset) CPU() (time.Duration, error) {
	p := d.process()
	if p == nil {
		return 0, errors.New("driverset is not running")
	}
	return ProcessCPU(p.Pid)
}

// parseProcessCPU reads utime and stime, the 14th and 15th fields of a /proc/<pid>/stat line. The
// 2nd, the command name in parentheses, may hold spaces and parentheses itself, so the fields
// are counted from the last ')'.
func parseProcessCPU(stat string) (time.Duration, error) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("/proc/<pid>/stat: no command name in %q", stat)
	}
	// After ")": state (3rd field), ..., utime (14th), stime (15th).
	fields := strings.Fields(stat[end+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/<pid>/stat: %d fields after the command name, want at least 13", len(fields))
	}
	var ticks uint64
	for _, f := range fields[11:13] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/<pid>/stat: %w", err)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}
