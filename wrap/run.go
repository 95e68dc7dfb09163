package wrap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
	"time"
)

// Exit codes wrap chooses itself (see the package comment for all of them).
const (
	// ExitWrapFailed: wrap could not run the child safely (no usable state directory, no command).
	// The child did not start. 125 as in env(1), chroot(1) and docker run.
	ExitWrapFailed = 125
	// ExitCannotExecute: the command exists but cannot be executed (permission, format), as in sh.
	ExitCannotExecute = 126
	// ExitNotFound: the command does not exist, as in sh.
	ExitNotFound = 127
	// ExitOutcomeLost: the child was started in this pod but its exit was never recorded, because
	// wrap was killed while it ran. The usual causes are the OOM killer or a SIGKILL of the
	// container (a failed liveness probe past its grace period), which the runtime itself reports
	// as 137 = 128+SIGKILL; so the controller sees the failure users would expect, and counts it as
	// a process failure.
	ExitOutcomeLost = 128 + int(syscall.SIGKILL)
)

// pipeDrainTimeout bounds how long Run waits, after the child exited, for the copies of its
// output when Stdout/Stderr are not files (a grandchild may hold the pipe open forever).
const pipeDrainTimeout = 2 * time.Second

// Options configure Run. ParseArgs fills every field but LeftoverGrace and Signals.
type Options struct {
	// StateDir holds the started marker and the exit record; it must survive container restarts
	// and be empty in a new pod (an emptyDir).
	StateDir string
	// TerminationLog is the file the termination message is written to; "" writes none.
	TerminationLog string
	// Command is the real entrypoint and its arguments. Command[0] is looked up in $PATH when it
	// has no slash.
	Command []string
	// Stdin, Stdout and Stderr are passed to the command (nil: the process's own). wrap's own few
	// lines go to Stderr.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// LeftoverGrace is how long the processes the child leaves running have, after SIGTERM,
	// before SIGKILL (0: DefaultLeftoverGrace).
	LeftoverGrace time.Duration
	// HeartbeatLease and SelfFence turn self-fencing on: the driver runs only while the Lease is
	// renewed, and its whole process tree is killed once it could not be for SelfFence.
	HeartbeatLease string
	SelfFence      time.Duration
	// SparkAppID, when set, is the app id the app was submitted with, and Incarnation the UID
	// of this pod: the driver runs with an app id of its own (DriverCommand).
	SparkAppID, Incarnation string
	// Renewer renews the heartbeat; nil: the Lease HeartbeatLease, with the pod's ServiceAccount.
	Renewer Renewer
	// Signals, when not nil, replaces Run's subscription to the process's signals: each value
	// received is handled as if the process had received it. Production leaves it nil; tests use
	// it to drive Run in-process without signalling the test binary itself.
	Signals <-chan os.Signal
}

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
	code, detail := runChild(ctx, o, sigs, fence)
	o.logf("%s", detail)
	return code, o.record(st, TerminationMessage(code, detail))
}

// runChild starts the command, forwards signals to it until it ends, ends whatever it left
// running, and returns its exit code and a sentence saying what happened.
//
// Signals go to the child's PID only, not to a process group: that is what the kubelet's SIGTERM
// to a container does without wrap (only PID 1 receives it), and Spark's entrypoint runs the JVM
// under tini, which forwards to its own child. Signalling a group would make tini and the JVM
// each receive the signal twice. The child stays in wrap's process group, so a terminal (kubectl
// run -it) keeps working as without wrap.
//
// All waiting is the reaper's (see reaper): exec.Cmd only starts the child, and its Wait is
// called once the reaper has the child's status, to end its copies of the output.
func runChild(ctx context.Context, o Options, sigs <-chan os.Signal, fence <-chan string) (int, string) {
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
		return code, fmt.Sprintf("cannot run the driver command %s (exit code %d): %v", name, code, err)
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
			// Fails only when the child has just exited, which the reaper is about to report.
			_ = cmd.Process.Signal(s)
		case <-stop:
			stop = nil
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
			return code, detail + left
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

// record writes the exit record, then the termination message; the record comes first because
// it is what keeps the child from running again.
func (o Options) record(st state, msg string) error {
	return errors.Join(st.record(msg), o.writeTerminationLog(msg))
}

// failed reports that wrap cannot run the child safely: the child is not started, and the next
// start of the container tries again (nothing was recorded).
func (o Options) failed(cause error) (int, error) {
	return o.notStarted(fmt.Sprintf("state directory %s: %v", o.StateDir, cause))
}

// notStarted reports that the driver was not started, for the reason why, in the termination
// message that says so (notStartedMessage) and in the error Run returns.
func (o Options) notStarted(why string) (int, error) {
	return ExitWrapFailed, errors.Join(fmt.Errorf("driverset wrap: %s%s", notStartedPrefix, why), o.writeTerminationLog(notStartedMessage(why)))
}

// writeTerminationLog writes msg in place: the kubelet bind-mounts the file, so it cannot be
// replaced by a rename.
func (o Options) writeTerminationLog(msg string) error {
	if o.TerminationLog == "" {
		return nil
	}
	if err := os.WriteFile(o.TerminationLog, []byte(msg), 0o644); err != nil {
		return fmt.Errorf("driverset wrap: writing the termination message: %w", err)
	}
	return nil
}

func (o Options) leftoverGrace() time.Duration {
	if o.LeftoverGrace > 0 {
		return o.LeftoverGrace
	}
	return DefaultLeftoverGrace
}

func (o Options) logf(format string, args ...any) {
	fmt.Fprintf(o.Stderr, logPrefix+format+"\n", args...)
}
