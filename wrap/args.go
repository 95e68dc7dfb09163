package wrap

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"slices"

	"github.com/driverset/driverset/contract"
)

// Defaults of wrap's flags: where the driver pod's template mounts its emptyDir (convert.StateDir
// is this very constant), and the kubelet's default terminationMessagePath.
const (
	DefaultStateDir       = "/opt/driverset/state"
	DefaultTerminationLog = "/dev/termination-log"
)

const usage = `usage: driverset wrap [flags] -- COMMAND [ARG...]

Runs COMMAND at most once per pod, records its exit code and idles when restarted.

flags:
  --state-dir DIR         where the started marker and the exit record live; must survive
                          container restarts (an emptyDir) (default ` + DefaultStateDir + `)
  --termination-log FILE  where the termination message is written; empty: not written
                          (default ` + DefaultTerminationLog + `)
  --heartbeat-lease NAME  self-fencing: renew the coordination.k8s.io Lease NAME (in $` + contract.EnvPodNamespace + `,
                          with the pod's ServiceAccount) while the driver runs
  --self-fence T          with --heartbeat-lease: kill the driver's whole process tree when the
                          Lease could not be renewed for T (a duration such as 2m)
  --spark-app-id ID       the app id the app was submitted with: the command's
                          "--conf spark.app.id=ID" becomes ID-<first 8 hex digits of
                          --incarnation>, an app id of this incarnation's own
  --incarnation UID       this pod's UID`

// helpError is returned for -h/--help: its text is the usage, and errors.Is(err, flag.ErrHelp).
type helpError struct{}

func (helpError) Error() string { return usage }
func (helpError) Unwrap() error { return flag.ErrHelp }

// ParseArgs parses wrap's own arguments (what follows "driverset wrap"): flags, then "--", then
// the command and its arguments, which are kept verbatim (a later "--" belongs to the command).
// The "--" is required, so that a command whose arguments look like flags is never misread.
// The returned Options pass the process's stdin, stdout and stderr through to the command.
func ParseArgs(args []string) (Options, error) {
	flagArgs, command := args, []string(nil)
	sep := slices.Index(args, "--")
	if sep >= 0 {
		flagArgs, command = args[:sep], slices.Clone(args[sep+1:])
	}

	o := Options{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	fs := flag.NewFlagSet("driverset wrap", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned, not printed
	fs.StringVar(&o.StateDir, "state-dir", DefaultStateDir, "")
	fs.StringVar(&o.TerminationLog, "termination-log", DefaultTerminationLog, "")
	fs.StringVar(&o.HeartbeatLease, FlagHeartbeatLease, "", "")
	fs.DurationVar(&o.SelfFence, FlagSelfFence, 0, "")
	fs.StringVar(&o.SparkAppID, FlagSparkAppID, "", "")
	fs.StringVar(&o.Incarnation, FlagIncarnation, "", "")
	if err := fs.Parse(flagArgs); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return Options{}, helpError{}
		}
		return Options{}, fmt.Errorf("driverset wrap: %v\n%s", err, usage)
	}
	switch {
	case fs.NArg() > 0 && sep < 0:
		return Options{}, fmt.Errorf("driverset wrap: missing -- before the command %q\n%s", fs.Arg(0), usage)
	case fs.NArg() > 0:
		return Options{}, fmt.Errorf("driverset wrap: unexpected argument %q before --\n%s", fs.Arg(0), usage)
	case sep < 0:
		return Options{}, fmt.Errorf("driverset wrap: no command (expected -- COMMAND [ARG...])\n%s", usage)
	case len(command) == 0:
		return Options{}, fmt.Errorf("driverset wrap: no command after --\n%s", usage)
	case command[0] == "":
		return Options{}, fmt.Errorf("driverset wrap: empty command name after --\n%s", usage)
	case o.StateDir == "":
		return Options{}, fmt.Errorf("driverset wrap: --state-dir must not be empty\n%s", usage)
	case (o.HeartbeatLease == "") != (o.SelfFence == 0):
		return Options{}, fmt.Errorf("driverset wrap: --heartbeat-lease and --self-fence go together\n%s", usage)
	case o.SelfFence < 0:
		return Options{}, fmt.Errorf("driverset wrap: --self-fence must be positive\n%s", usage)
	}
	o.Command = command
	return o, nil
}

// CommandOptions is what `driverset wrap` makes of command, a container's command line (the
// command alone, as the template has it, or with its arguments, as the kubelet runs it): isWrap
// false when command is not driverset wrap; err when its flags do not parse (wrap would exit 2).
// The one place where the controller, the plugin and the tests' imitation of Spark read what wrap
// runs.
func CommandOptions(command []string) (o Options, isWrap bool, err error) {
	if len(command) < 2 || path.Base(command[0]) != "driverset" || command[1] != "wrap" {
		return Options{}, false, nil
	}
	o, err = ParseArgs(command[2:])
	return o, true, err
}
