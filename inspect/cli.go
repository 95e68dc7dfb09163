package inspect

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/driverset/driverset/version"
)

// Usage is `kubectl driverset --help`.
const Usage = `kubectl driverset: find a Spark driver that driverset runs, and why it is where it is.

<driver> is the driver pod spark-submit made (the placeholder it watches), in -n NAMESPACE.

usage:
  kubectl driverset status <driver>              the placeholder, the StatefulSet, the real driver pod (<sts>-0),
                                                 its node, phase, restarts, recoveries, the lost-node note, the outcome
  kubectl driverset logs <driver> [-f] [--previous] [--tail N]
                                                 the log of the current incarnation's driver container
  kubectl driverset why <driver>                 the Events of the placeholder, the StatefulSet and every incarnation
                                                 of its pod, in time order; driverset's decisions marked
  kubectl driverset check                        ask the apiserver to admit an opted-in driver pod (dry run) in -n
                                                 NAMESPACE and check that driverset converted it (the install check)
  kubectl driverset version                      this build's version

flags (every command):
  -n, --namespace string    the driver's namespace (default: the kubeconfig context's)
      --kubeconfig string   the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster)
      --context string      the kubeconfig context
`

// errUsage marks a command line that cannot be run; Main prints the usage after it.
var errUsage = errors.New("usage")

// Main runs `kubectl driverset` with args (without the program name) and returns its exit code:
// 0, 1 when the command failed, 2 for a bad command line. prog names the program in its errors
// ("kubectl driverset", or "driverset" for `driverset check`).
func Main(ctx context.Context, prog string, args []string, stdout, stderr io.Writer) int {
	err := run(ctx, args, stdout)
	switch {
	case err == nil || errors.Is(err, pflag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "%s: %v\n\n%s", prog, err, Usage)
		return 2
	default:
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return 1
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := pflag.NewFlagSet("kubectl driverset", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() { fmt.Fprint(stdout, Usage) }
	var kubeconfig, kubecontext, namespace string
	var logs LogOptions
	fs.StringVar(&kubeconfig, "kubeconfig", "", "")
	fs.StringVar(&kubecontext, "context", "", "")
	fs.StringVarP(&namespace, "namespace", "n", "", "")
	fs.BoolVarP(&logs.Follow, "follow", "f", false, "")
	fs.BoolVarP(&logs.Previous, "previous", "p", false, "")
	fs.Int64Var(&logs.Tail, "tail", -1, "")
	help := fs.BoolP("help", "h", false, "")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if *help || fs.NArg() > 0 && fs.Arg(0) == "help" {
		fmt.Fprint(stdout, Usage)
		return nil
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("%w: no command", errUsage)
	}
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	if cmd == "version" {
		_, err := fmt.Fprintf(stdout, "kubectl-driverset %s\n", version.Get().String()[len("driverset "):])
		return err
	}
	wantArgs := map[string]int{"status": 1, "logs": 1, "why": 1, "check": 0}
	n, known := wantArgs[cmd]
	switch {
	case !known:
		return fmt.Errorf("%w: unknown command %q", errUsage, cmd)
	case len(rest) != n:
		return fmt.Errorf("%w: %s takes %d argument(s), got %d", errUsage, cmd, n, len(rest))
	case cmd != "logs" && (logs.Follow || logs.Previous || logs.Tail >= 0):
		return fmt.Errorf("%w: -f, --previous and --tail are flags of logs", errUsage)
	}

	client, ns, err := clientFor(kubeconfig, kubecontext, namespace)
	if err != nil {
		return err
	}
	if cmd == "check" {
		got, err := RunCheck(ctx, client, ns)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "driverset converted the opted-in driver pod %s/%s (dry run): scheduling gates %v\n", ns, got.Name, got.Spec.SchedulingGates)
		return err
	}
	s, err := Fetch(ctx, client, ns, rest[0])
	if err != nil {
		return err
	}
	switch cmd {
	case "status":
		return WriteStatus(stdout, StatusOf(s))
	case "why":
		return WriteTimeline(stdout, Timeline(s))
	default:
		return StreamLogs(ctx, client, s, logs, stdout)
	}
}

// clientFor builds a client the way kubectl does from its flags, and the namespace to use.
func clientFor(kubeconfig, kubecontext, namespace string) (kubernetes.Interface, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubecontext})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", err
	}
	cfg.UserAgent = "kubectl-driverset/" + version.Get().Version
	if namespace == "" {
		if namespace, _, err = cc.Namespace(); err != nil {
			return nil, "", err
		}
	}
	c, err := kubernetes.NewForConfig(cfg)
	return c, namespace, err
}
