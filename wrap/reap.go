//go:build linux

package wrap

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// leftoverKillWait bounds the wait for leftovers after SIGKILL: only a process stuck in the kernel
// (uninterruptible sleep) outlives it, and wrap must still record the driver's exit.
const leftoverKillWait = 5 * time.Second

// leftoverPoll is how often the process table is read again while leftovers are ending; a
// SIGCHLD wakes wrap sooner for its own children.
const leftoverPoll = 20 * time.Millisecond

// reaper owns every wait(2) of the process. wrap is PID 1 of the driver container, so every
// orphan in it becomes wrap's child, and a child that nobody waits for stays a zombie. One owner
// for all waits is what keeps the driver's exit status safe: a wait4(-1) beside exec.Cmd.Wait
// could take the driver's status from it. exec.Cmd starts the driver; the reaper collects it.
type reaper struct {
	sigchld chan os.Signal
}

// startReaping makes this process the reaper of its descendants and subscribes to SIGCHLD. As
// PID 1 wrap is the reaper already; as any other process (tests, a container whose init is not
// wrap) PR_SET_CHILD_SUBREAPER gives it the same role, so the same code runs everywhere. Call it
// before the child starts, so that no SIGCHLD is missed. The error, if any, is only reported:
// wrap still reaps its own children.
func startReaping() (*reaper, error) {
	r := &reaper{sigchld: make(chan os.Signal, 1)}
	signal.Notify(r.sigchld, syscall.SIGCHLD)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return r, fmt.Errorf("cannot become the reaper of the driver's processes (prctl PR_SET_CHILD_SUBREAPER): %w", err)
	}
	return r, nil
}

// stop undoes startReaping, for a Run inside a longer-lived process (tests).
func (r *reaper) stop() {
	signal.Stop(r.sigchld)
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
}

// reap collects every child that has ended, without blocking. When main (a pid, 0 for none) is
// among them, it returns main's wait status.
func (r *reaper) reap(main int) (status syscall.WaitStatus, mainEnded bool) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 { // ECHILD: no children; 0: none has ended
			return status, mainEnded
		}
		if main > 0 && pid == main {
			status, mainEnded = ws, true
		}
	}
}

// endLeftovers ends every process still under wrap once the driver has exited: SIGTERM first,
// SIGKILL to those still there after grace, and reaps them all. It returns a sentence for the
// record ("" when nothing was left). Processes are found in /proc by parent, because a daemon in
// its own session or process group is reached by no group signal.
func (r *reaper) endLeftovers(grace time.Duration, logf func(string, ...any)) string {
	self := os.Getpid()
	killAt := time.Now().Add(grace)
	giveUpAt := killAt.Add(leftoverKillWait)
	seen := map[int]bool{}
	killed := map[int]bool{}
	tick := time.NewTicker(leftoverPoll)
	defer tick.Stop()
	for {
		r.reap(0)
		left := descendants(self)
		now := time.Now()
		// One that ended between the reap above and the scan is a zombie, which the scan does
		// not count: it is reaped on the next round, or it would stay after wrap says the driver
		// ended.
		if len(left) == 0 && zombieChildren(self) > 0 && !now.After(giveUpAt) {
			select {
			case <-r.sigchld:
			case <-tick.C:
			}
			continue
		}
		if len(left) == 0 || now.After(giveUpAt) {
			if len(left) > 0 {
				logf("%d leftover process(es) of the driver did not end after SIGKILL: %v", len(left), left)
			}
			return leftoverSummary(len(seen), len(killed), len(left))
		}
		for _, pid := range left {
			switch {
			case !now.Before(killAt):
				if !killed[pid] {
					logf("leftover process %d of the driver did not end %v after SIGTERM; sending SIGKILL", pid, grace)
				}
				killed[pid] = true
				_ = syscall.Kill(pid, syscall.SIGKILL)
			case !seen[pid]:
				_ = syscall.Kill(pid, syscall.SIGTERM)
			}
			seen[pid] = true
		}
		select {
		case <-r.sigchld:
		case <-tick.C:
		}
	}
}

func leftoverSummary(found, killed, survived int) string {
	if found == 0 {
		return ""
	}
	s := fmt.Sprintf("; %d process(es) the driver left behind were stopped", found)
	if killed > 0 {
		s += fmt.Sprintf(" (%d with SIGKILL after the grace period)", killed)
	}
	if survived > 0 {
		s += fmt.Sprintf("; %d could not be killed", survived)
	}
	return s
}

// descendants lists the live (not zombie) processes under root, read from /proc. A process that
// appears or ends while /proc is read is found on the next call.
func descendants(root int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	live := map[int]bool{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, state, ok := procStat(pid)
		if !ok {
			continue
		}
		children[ppid] = append(children[ppid], pid)
		live[pid] = state != "Z" && state != "X"
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			if live[c] {
				out = append(out, c)
			}
			queue = append(queue, c)
		}
	}
	return out
}

// zombieChildren counts the children of root that ended and are not reaped yet.
func zombieChildren(root int) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, state, ok := procStat(pid); ok && ppid == root && (state == "Z" || state == "X") {
			n++
		}
	}
	return n
}

// procStat reads the parent pid and state of pid from /proc/PID/stat. The command name, in
// parentheses, may hold spaces and parentheses: the fields that follow start after the last ')'.
func procStat(pid int) (ppid int, state string, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, "", false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0, "", false
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, f[0], err == nil
}
