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

// CheckUsage is `driverset check --help`.
const CheckUsage = `usage: driverset check [--namespace NS] [--kubeconfig FILE] [--context NAME]

Ask the apiserver to admit an opted-in driver pod (dry run) in NS and check that driverset
converted it: the install check that helm test runs, the same as kubectl driverset check.

  -n, --namespace string    the namespace (default: the kubeconfig context's, or the pod's in-cluster)
      --kubeconfig string   the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster)
      --context string      the kubeconfig context
`

// errUsage marks a command line that cannot be run; CheckMain prints the usage after it.
var errUsage = errors.New("usage")

// CheckMain runs `driverset check` (driverset's own binary: helm test's pod) with args (after
// "check") and returns its exit code: 0, 1 when the check failed, 2 for a bad command line. It
// keeps driverset's binary free of the plugin's command line (cobra, cli-runtime: package
// inspect/cli), with the few flags an in-cluster pod needs.
func CheckMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := runCheck(ctx, args, stdout)
	switch {
	case err == nil || errors.Is(err, pflag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "driverset check: %v\n\n%s", err, CheckUsage)
		return 2
	default:
		fmt.Fprintf(stderr, "driverset check: %v\n", err)
		return 1
	}
}

func runCheck(ctx context.Context, args []string, stdout io.Writer) error {
	fs := pflag.NewFlagSet("driverset check", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var kubeconfig, kubecontext, namespace string
	fs.StringVar(&kubeconfig, "kubeconfig", "", "")
	fs.StringVar(&kubecontext, "context", "", "")
	fs.StringVarP(&namespace, "namespace", "n", "", "")
	help := fs.BoolP("help", "h", false, "")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if *help {
		_, err := fmt.Fprint(stdout, CheckUsage)
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: check takes no argument, got %q", errUsage, fs.Args())
	}
	client, ns, err := clientFor(kubeconfig, kubecontext, namespace)
	if err != nil {
		return err
	}
	got, err := RunCheck(ctx, client, ns)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "driverset converted the opted-in driver pod %s/%s (dry run): scheduling gates %v\n", ns, got.Name, got.Spec.SchedulingGates)
	return err
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
	cfg.UserAgent = "driverset-check/" + version.Get().Version
	if namespace == "" {
		if namespace, _, err = cc.Namespace(); err != nil {
			return nil, "", err
		}
	}
	c, err := kubernetes.NewForConfig(cfg)
	return c, namespace, err
}
