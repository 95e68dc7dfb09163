//go:build testbed

// Package realnode runs driverset's scenarios on real nodes: kubelets, containerd and runc
// running real containers (e2e/testbed's real nodes), driverset installed from install.yaml as
// an admin would (its image built from this repository, two replicas, self-managed TLS, leader
// election, the webhook called through its Service), and a driver image whose entrypoint plays
// Spark's driver and executors over real pod networking and cluster DNS (e2e/cmd/simspark).
//
// What the KWOK scenarios in e2e/ cannot show lives here: `driverset wrap` as the container's
// PID 1 with real signals and grace periods, the init container, Pod Security, volumes, DNS,
// and nodes that really die or are cut off while their containers keep running.
package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/driverset/driverset/e2e/harness"
	"github.com/driverset/driverset/e2e/testbed"
)

// env is the test bed shared by every scenario; each scenario has its namespace.
type env struct {
	cluster *testbed.Cluster
	monitor *harness.Monitor
	images  builtImages
	dir     string
}

var bed env //nolint:gochecknoglobals // TestMain's shared test bed

// realNodes: two for drivers to move between, a third so that one loss still leaves a
// driverset replica and room for the moved driver.
const realNodes = 3

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	rest.SetDefaultWarningHandler(rest.NoWarnings{})
	ctrllog.SetLogger(logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "driverset-realnode-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	start := time.Now()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "realnode: "+format+"\n", args...) }
	if bed.images, err = buildImages(ctx, filepath.Join(dir, "images"), logf); err != nil {
		fmt.Fprintln(os.Stderr, "realnode: images:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "realnode: images built in %s\n", time.Since(start).Round(time.Millisecond))
	cluster, err := testbed.Start(ctx, testbed.Options{
		Nodes:      -1,
		RealNodes:  realNodes,
		Images:     bed.images.archives,
		PauseImage: bed.images.pause,
		Dir:        filepath.Join(dir, "testbed"),
		Log:        os.Stderr,
		// The Spark scenarios compare real Spark's API calls with sparksim's (spark_calls_test.go).
		AuditLog: true,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "realnode: the test bed did not start:", err)
		return 1
	}
	bed.cluster, bed.dir = cluster, dir
	stopOnSignal := cluster.StopOnSignal()
	defer stopOnSignal()
	code := 1
	keep := os.Getenv("DRIVERSET_E2E_KEEP") != ""
	defer func() {
		if code != 0 || keep {
			cluster.KeepLogs()
		}
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "realnode: stopping the test bed:", err)
			code = 1
		}
		if code == 0 && !keep {
			_ = os.RemoveAll(dir)
		} else {
			fmt.Fprintf(os.Stderr, "realnode: logs kept in %s\n", dir)
		}
	}()
	fmt.Fprintf(os.Stderr, "realnode: test bed with %d real nodes up in %s\n", realNodes, time.Since(start).Round(time.Millisecond))
	if bed.monitor, err = harness.StartMonitor(context.Background(), cluster.Client, cluster.CheckAlive); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer bed.monitor.Stop()
	step := time.Now()
	if err := installDriverset(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "realnode: install:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "realnode: driverset installed from install.yaml and serving in %s\n", time.Since(step).Round(time.Millisecond))
	code = m.Run()
	reportNodeUsage(os.Stderr)
	// The invariant, cluster-wide: no scenario's namespace may hide a violation.
	if v := bed.monitor.Violations(""); len(v) > 0 {
		fmt.Fprintf(os.Stderr, "realnode: at-most-one driver violated: %v\n", v)
		code = 1
	}
	logCtx, cancelLogs := context.WithTimeout(context.Background(), time.Minute)
	defer cancelLogs()
	panics, err := driversetPanics(logCtx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "realnode: reading driverset's logs for panics:", err)
		code = 1
	}
	for _, p := range panics {
		fmt.Fprintln(os.Stderr, "realnode: FAIL: driverset panicked (controller-runtime recovered it):", p)
		code = 1
	}
	fmt.Fprintf(os.Stderr, "realnode: %d panics in the logs of driverset's pods\n", len(panics))
	return code
}
