package wrap

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// This file and args.go, appid.go, message.go, heartbeat.go, lease.go and state.go build on every
// platform: the plugin (kubectl driverset) and the controller read wrap's flags, messages and app
// ids. Running the driver (run.go, reap.go, selffence_linux.go) is Linux's.

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
	ExitOutcomeLost = 128 + 9 // SIGKILL
)

// DefaultLeftoverGrace is how long the driver's leftover processes have to end after SIGTERM
// before they are killed with SIGKILL (Options.LeftoverGrace).
const DefaultLeftoverGrace = 2 * time.Second

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
