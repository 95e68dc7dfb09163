// Package cli is the command line of `kubectl driverset`, on cobra and k8s.io/cli-runtime: the
// flags, help and completion kubectl's users expect. It is a thin layer over package inspect,
// whose pure functions (Fetch, StatusOf, Timeline, Rows, LogRequest) make every report; driverset's
// own binary does not import it, so the product links neither cobra nor cli-runtime.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"

	"github.com/driverset/driverset/version"
)

// errUsage marks a command line that cannot be run: exit code 2 and the command's usage.
var errUsage = errors.New("usage")

func usageError(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, a...))
}

// env is what every command reads the cluster with: kubectl's standard flags, and (in tests) a
// client to use instead of the one those flags describe.
type env struct {
	flags   *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
	client  func() (kubernetes.Interface, string, error)
}

// clientAndNamespace is the client the flags describe (kubeconfig, context, --as, --token, ...)
// and the namespace to use: -n, else the context's.
func (e *env) clientAndNamespace() (kubernetes.Interface, string, error) {
	if e.client != nil {
		return e.client()
	}
	cfg, err := e.flags.ToRESTConfig()
	if err != nil {
		return nil, "", err
	}
	cfg.UserAgent = "kubectl-driverset/" + version.Get().Version
	ns, _, err := e.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, "", err
	}
	c, err := kubernetes.NewForConfig(cfg)
	return c, ns, err
}

// NewCommand is the whole command tree of `kubectl driverset`.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	return newCommand(&env{flags: genericclioptions.NewConfigFlags(true), streams: streams})
}

func newCommand(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "kubectl-driverset",
		Short: "Find a Spark driver that driverset runs, and why it is where it is",
		Long: `kubectl driverset: find a Spark driver that driverset runs, and why it is where it is.

<driver> is the driver pod spark-submit made (the placeholder it watches), in -n NAMESPACE.
What you may not read (Nodes, Events) is shown as "not visible".`,
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl driverset"},
		// Bare `kubectl driverset` and an unknown command are mistakes (exit 2), not help.
		Args: cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError("no command")
			}
			return usageError("unknown command %q", args[0])
		},
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetIn(e.streams.In)
	root.SetOut(e.streams.Out)
	root.SetErr(e.streams.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return fmt.Errorf("%w: %w", errUsage, err) })
	e.flags.AddFlags(root.PersistentFlags())
	root.AddCommand(statusCommand(e), listCommand(e), logsCommand(e), whyCommand(e), checkCommand(e), versionCommand(e))
	return root
}

// exactArgs is cobra.ExactArgs with the exit code of a usage error.
func exactArgs(n int) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError("%s takes %d argument(s), got %d", c.Name(), n, len(args))
		}
		return nil
	}
}

// Main runs `kubectl driverset` with args (without the program name) and returns its exit code:
// 0, 1 when the command failed, 2 for a bad command line (then where to find the command's help).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return run(ctx, &env{flags: genericclioptions.NewConfigFlags(true),
		streams: genericiooptions.IOStreams{Out: stdout, ErrOut: stderr}}, args)
}

func run(ctx context.Context, e *env, args []string) int {
	root := newCommand(e)
	root.SetArgs(args)
	c, err := root.ExecuteContextC(ctx)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(e.streams.ErrOut, "kubectl driverset: %v\nSee '%s --help' for usage.\n", err, c.CommandPath())
		return 2
	default:
		fmt.Fprintf(e.streams.ErrOut, "kubectl driverset: %v\n", err)
		return 1
	}
}
