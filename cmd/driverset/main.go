// Command driverset is driverset's one binary:
//
//	driverset serve        the admission webhook and the (leader-elected) controller
//	driverset wrap -- CMD  runs a driver's entrypoint at most once per pod (inside driver pods)
//	driverset copy-binary  copies this binary into a shared volume (the driver pod's init container)
//	driverset version      prints the version, VCS revision and Go version of this build
//	driverset check        the install check (`helm test`'s pod): an opted-in driver pod, dry run, comes back converted
//	driverset make-seal-key      the Secret that seals placeholders, made unless it exists (the install's Job)
//	driverset uninstall-cleanup  the finalizer driverset.dev/outcome off templates and pods (the chart's pre-delete hook)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/driverset/driverset/inspect"
	"github.com/driverset/driverset/version"
	"github.com/driverset/driverset/wrap"
)

const usage = `usage: driverset <command> [flags]

commands:
  serve        run the admission webhook and the controller
  wrap         run a Spark driver's entrypoint at most once per pod: driverset wrap [flags] -- CMD [ARGS...]
  copy-binary  copy this binary to DEST (used by the driver pod's init container): driverset copy-binary DEST
  version      print this build's version, VCS revision and Go version
  check        ask the apiserver to admit an opted-in driver pod (dry run) and fail unless driverset
               converted it: driverset check [--namespace NS] [--kubeconfig FILE] (helm test runs it)
  make-seal-key
               create the Secret whose key seals placeholders (driverset-seal), with a random key,
               unless it exists: driverset make-seal-key [--namespace NS] (the install's Job runs it)
  uninstall-cleanup
               remove the finalizer driverset.dev/outcome from every driver StatefulSet's pod template
               and every driver pod and placeholder, so that nothing waits for a driverset that is gone:
               driverset uninstall-cleanup [--dry-run] [--terminating-only] [--namespaces NS,...]
               (the chart's pre-delete hook runs it; --terminating-only for a drain while driverset is down)
`

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		if err := serve(ctx, args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "driverset serve:", err)
			return 1
		}
		return 0
	case "wrap":
		o, err := wrap.ParseArgs(args[1:])
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		code, err := wrap.Run(context.Background(), o)
		if err != nil {
			fmt.Fprintln(os.Stderr, "driverset wrap:", err)
		}
		return code
	case "copy-binary":
		if len(args) != 2 {
			fmt.Fprint(os.Stderr, usage)
			return 2
		}
		if err := copyBinary(args[1]); err != nil {
			fmt.Fprintln(os.Stderr, "driverset copy-binary:", err)
			return 1
		}
		return 0
	case "check":
		// The same check as `kubectl driverset check`, from driverset's own image.
		return inspect.CheckMain(context.Background(), args[1:], os.Stdout, os.Stderr)
	case "make-seal-key":
		return makeSealKey(context.Background(), args[1:], os.Stdout, os.Stderr)
	case "uninstall-cleanup":
		return uninstallCleanup(context.Background(), args[1:], os.Stdout, os.Stderr)
	case "version", "--version":
		fmt.Println(version.Get())
		return 0
	case "-h", "--help", "help":
		fmt.Print(usage)
		return 0
	default:
		fmt.Fprintf(os.Stderr, "driverset: unknown command %q\n%s", args[0], usage)
		return 2
	}
}
