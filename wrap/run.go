//go:build linux

package wrap

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
	"time"
)

// pipeDrainTimeout bounds how long Run waits, after the child exited, for the copies of its
// output when Stdout/Stderr are not files (a grandchild may hold the pipe open forever).
const pipeDrainTimeout = 2 * time.Second

// forwardedSignals are the signals wrap passes on to the child. Subscribing to them also keeps
// wrap alive when it receives one: it must outlive the child to record its exit.
func forwardedSignals() []os.Signal {
	return []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}
}

// Run runs o.Command at most once per pod (see the package comment) and returns the code the
// process must exit with. It blocks until the child ended and was recorded, or, on a restart,
// until SIGTERM/SIGINT or ctx ends the idling. err reports a problem of wrap itself (Run has not
// printed it); exitCode is meaningful even then. Cancelling ctx while the child runs sends it
// SIGTERM, and Run still waits for it: a child is never left running unrecorded.
func Run(ctx context.Context, o Options) (exitCode int, err error) {
	if len(o.Command) == 0 || o.Command[0] == "" {
		return ExitWrapFailed, errors.New("driverset wrap: no command to run")
	}
	if o.StateDir == "" {
		return ExitWrapFailed, errors.New("driverset wrap: no state directory")
	}
	if o.Stdin == nil {
		o.Stdin = os.Stdin
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	sigs := o.Signals
	if sigs == nil {
		// Subscribe before anything else, so that no signal between here and the child's start
		// kills wrap; such a signal waits in the buffer and is forwarded once the child runs.
		ch := make(chan os.Signal, 16)
		signal.Notify(ch, forwardedSignals()...)
		defer signal.Stop(ch)
		sigs = ch
	}

	st := state{dir: o.StateDir}
	prev, err := st.load()
	if err != nil {
		return o.failed(err)
	}
	switch {
	case prev.record != "":
		code, _ := ParseTerminationMessage(prev.record)
		o.logf("the driver already ran in this pod and exited with code %d; idling until the pod is stopped", code)
		// The kubelet gives every container start a fresh termination log: write it again, so
		// the message is there when this idling container is stopped.
		err := o.writeTerminationLog(prev.record)
		return idle(ctx, sigs, o.logf), err
	case prev.ran:
		when := prev.started
		if when == "" {
			when = "start time unknown"
		}
		detail := fmt.Sprintf("the driver was started in this pod (%s) but its outcome was lost: "+
			"driverset wrap was killed before it could record the exit (an OOM kill or a SIGKILL of the "+
			"container is the usual cause); recorded as exit code %d and not run again", when, ExitOutcomeLost)
		o.logf("%s", detail)
		return ExitOutcomeLost, o.record(st, TerminationMessage(ExitOutcomeLost, detail))
	}

	command, err := o.DriverCommand()
	if err != nil {
		return o.notStarted(err.Error())
	}
	if notice := executorFenceOf(o.Command, os.ReadFile).notice; notice != "" {
		o.logf("%s", notice)
	}
	o.Command = command

	// The heartbeat is held before the driver starts (and before it is marked started: a
	// container that never got one tries again when the kubelet restarts it).
	fence, stopHeartbeat, err := o.startHeartbeat(ctx)
	if err != nil {
		return o.failedHeartbeat(err)
	}
	defer stopHeartbeat()
	if err := st.markStarted(fmt.Sprintf("started %s by pid %d", time.Now().UTC().Format(time.RFC3339), os.Getpid())); err != nil {
		return o.failed(err)
	}
	code, detail, stopped := runChild(ctx, o, sigs, fence)
	o.logf("%s", detail)
	return code, o.record(st, Record(code, detail, stopped))
}

// runChild starts the command, forwards signals to it until it ends, ends whatever it left
// running, and returns its exit code, a sentence saying what happened, and whether a stop from
// outside (SIGTERM or SIGINT, or ctx's end) came before the end (see stopLinePrefix).
//
// Signals go to the child's PID only, not to a process group: that is what the kubelet's SIGTERM
// to a container does without wrap (only PID 1 receives it), and Spark's entrypoint runs the JVM
// under tini, which forwards to its own child. Signalling a group would make tini and the JVM
// each receive the signal twice. The child stays in wrap's process group, so a terminal (kubectl
// run -it) keeps working as without wrap.
//
// All waiting is the reaper's (see reaper): exec.Cmd only starts the child, and its Wait is
// called once the reaper has the child's status, to end its copies of the output.
func runChild(ctx context.Context, o Options, sigs <-chan os.Signal, fence <-chan string) (code int, detail string, stopped bool) {
	name := o.Command[0]
	cmd := exec.Command(name, o.Command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = o.Stdin, o.Stdout, o.Stderr
	cmd.WaitDelay = pipeDrainTimeout
	// If wrap is killed, the child must die with it: its outcome can no longer be recorded, and a
	// driver running unseen could run beside the next incarnation. The kernel sends Pdeathsig
	// when the *thread* that forked the child ends, so keep this goroutine on its thread until
	// the child is reaped (an unlocked thread is never ended by the Go runtime either, but a
	// locked one is certain to live).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	r, err := startReaping()
	defer r.stop()
	if err != nil {
		o.logf("%v", err)
	}
	if err := cmd.Start(); err != nil {
		code := ExitCannotExecute
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			code = ExitNotFound
		}
		return code, fmt.Sprintf("cannot run the driver command %s (exit code %d): %v", name, code, err), false
	}
	stop := ctx.Done()
	fenced := ""
	for {
		select {
		case fenced = <-fence:
			fence = nil
			o.logf("%s: killing the driver's process tree", fenced)
			killTree(cmd.Process.Pid)
		case s := <-sigs:
			stopped = stopped || s == syscall.SIGTERM || s == syscall.SIGINT
			// Fails only when the child has just exited, which the reaper is about to report.
			_ = cmd.Process.Signal(s)
		case <-stop:
			stop = nil
			stopped = true
			_ = cmd.Process.Signal(syscall.SIGTERM)
		case <-r.sigchld:
			status, ended := r.reap(cmd.Process.Pid)
			if !ended {
				continue // an orphan that ended under wrap, reaped
			}
			// The driver has exited: nothing it started may run on while wrap says so.
			left := r.endLeftovers(o.leftoverGrace(), o.logf)
			// The reaper took the status, so Wait reports ECHILD; it is called to end exec's
			// copies of the child's output, whose writers are all gone now.
			_ = cmd.Wait()
			code, detail := outcome(name, status)
			if fenced != "" {
				detail = selfFencedDetail(fenced, detail)
			}
			return code, detail + left, stopped
		}
	}
}

// outcome turns the child's wait status into an exit code the way a shell does.
func outcome(name string, ws syscall.WaitStatus) (int, string) {
	if ws.Signaled() {
		code := 128 + int(ws.Signal())
		return code, fmt.Sprintf("the driver command %s was killed by signal %d (%v); recorded as exit code %d", name, int(ws.Signal()), ws.Signal(), code)
	}
	return ws.ExitStatus(), fmt.Sprintf("the driver command %s exited with code %d", name, ws.ExitStatus())
}

// idle blocks, using no CPU, until SIGTERM or SIGINT arrives or ctx ends; other signals are
// ignored. The pod is being stopped then, so success is the right answer. Meanwhile it reaps
// whatever ends under it: as PID 1 it inherits the orphans of `kubectl exec` sessions.
func idle(ctx context.Context, sigs <-chan os.Signal, logf func(string, ...any)) int {
	r, err := startReaping()
	defer r.stop()
	if err != nil {
		logf("%v", err)
	}
	r.reap(0)
	for {
		select {
		case s := <-sigs:
			if s == syscall.SIGTERM || s == syscall.SIGINT {
				return 0
			}
		case <-r.sigchld:
			r.reap(0)
		case <-ctx.Done():
			return 0
		}
	}
}
