// Command kubectl-driverset is the kubectl plugin `kubectl driverset` (put it on PATH): list the
// drivers that driverset runs, and show the status, logs and Events of one, found from the
// driver pod spark-submit made. Its command line is package inspect/cli; its logic, package inspect.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/driverset/driverset/inspect/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
