// Command kubectl-driverset is the kubectl plugin `kubectl driverset` (put it on PATH): status,
// logs and Events of a Spark driver that driverset runs, found from the driver pod spark-submit
// made. Its logic is in package inspect.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/driverset/driverset/inspect"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := inspect.Main(ctx, "kubectl driverset", os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
