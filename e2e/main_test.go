//go:build testbed

// Package e2e runs driverset's scenarios on the real test bed: a real apiserver, etcd,
// controller-manager and scheduler with KWOK nodes (e2e/testbed), driverset as a local process
// with its manifests applied (e2e/harness), and Spark played call by call (e2e/sparksim).
package e2e

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

// env is the test bed and driverset shared by every scenario; each scenario has its namespace.
type env struct {
	cluster   *testbed.Cluster
	driverset *harness.Driverset
	monitor   *harness.Monitor
	binary    string
	dir       string
	// metricsToken is a ServiceAccount token bound to driverset-metrics-reader: /metrics needs it.
	metricsToken string
	// runtimeEnv is the Go runtime settings install.yaml's Deployment gives driverset (GOGC):
	// every driverset the harness runs has them, and the memory benchmark measures them.
	runtimeEnv []string
}

var bed env //nolint:gochecknoglobals // TestMain's shared test bed: one control plane for all scenarios.

// driversetArgs are serve's flags in every scenario: restarts back off 1 s, not 10 s.
var driversetArgs = []string{"--restart-backoff=1s", "--max-restart-backoff=4s"} //nolint:gochecknoglobals

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// Quiet: the apiserver's admission warnings ("… is a placeholder") on every test client call,
	// and controller-runtime's complaint that the harness's client has no logger.
	rest.SetDefaultWarningHandler(rest.NoWarnings{})
	ctrllog.SetLogger(logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "driverset-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	start := time.Now()
	cluster, err := testbed.Start(ctx, testbed.Options{Nodes: 3, Dir: filepath.Join(dir, "testbed"), Log: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: the test bed did not start:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "e2e: test bed up in %s\n", time.Since(start).Round(time.Millisecond))
	bed = env{cluster: cluster, dir: dir}
	code := 1
	keep := os.Getenv("DRIVERSET_E2E_KEEP") != "" // keep every log, also of a passing run
	defer func() {
		_ = bed.driverset.Stop()
		if code != 0 || keep {
			cluster.KeepLogs()
		}
		_ = cluster.Stop()
		if code == 0 && !keep {
			_ = os.RemoveAll(dir)
		} else {
			fmt.Fprintf(os.Stderr, "e2e: logs kept in %s\n", dir)
		}
	}()
	// The at-most-one invariant is watched through every scenario (see namespace()).
	if bed.monitor, err = harness.StartMonitor(context.Background(), cluster.Client, cluster.CheckAlive); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer bed.monitor.Stop()
	if bed.binary, err = harness.Build(ctx, dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := harness.InstallLocalAccess(ctx, cluster.Config, filepath.Join(cluster.BinDir, "kubectl")); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: install:", err)
		return 1
	}
	if bed.metricsToken, err = harness.ServiceAccountToken(ctx, cluster.Client, "driverset-system", "metrics-scraper", "driverset-metrics-reader"); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: metrics token:", err)
		return 1
	}
	if bed.runtimeEnv, err = installedRuntimeEnv(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: install.yaml:", err)
		return 1
	}
	if bed.driverset, err = startDriverset(ctx, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := harness.InstallLocal(ctx, cluster.Config, cluster.CheckAlive, filepath.Join(cluster.BinDir, "kubectl"), bed.driverset.Port, bed.driverset.CA.CertPEM); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: install:", err)
		return 1
	}
	code = m.Run()
	if !afterRun(bed.monitor, dir) {
		code = 1
	}
	return code
}

// afterRun holds the whole run to what no single scenario can see: the at-most-one invariant
// everywhere (in every namespace, the benchmarks' bench-* among them, not only those made by
// namespace()), a monitor that was alive to see it, and no panic that controller-runtime
// recovered in any driverset process. It reports what fails and whether the run may pass.
func afterRun(mon *harness.Monitor, dir string) bool {
	ok := true
	fail := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "e2e: FAIL: "+format+"\n", a...)
		ok = false
	}
	for _, v := range mon.Violations("") {
		fail("at-most-one driver violated: %s", v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := mon.Check(ctx, ""); err != nil {
		fail("%v", err)
	}
	panics, err := harness.RecoveredPanics(dir)
	if err != nil {
		fail("reading driverset's logs for panics: %v", err)
	}
	for _, p := range panics {
		fail("driverset panicked (controller-runtime recovered it): %s", p)
	}
	restarts, err := harness.Restarts(dir)
	if err != nil {
		fail("reading driverset's logs for restarts: %v", err)
	}
	for _, r := range restarts {
		fmt.Fprintf(os.Stderr, "e2e: driverset was started again: %s\n", r)
	}
	fmt.Fprintf(os.Stderr, "e2e: invariant monitor saw %d driver pod events, %d violations; %d panics in driverset's logs; driverset started again %d times after exiting on its own\n",
		mon.Events(""), len(mon.Violations("")), len(panics), len(restarts))
	return ok
}

// installedRuntimeEnv is the plain environment install.yaml's Deployment gives driverset.
func installedRuntimeEnv() ([]string, error) {
	f, err := os.Open(filepath.Join("..", "install.yaml"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return harness.DeploymentEnv(f)
}

// startDriverset starts `driverset serve` against the test bed, on the port of prev when given
// (the webhook configuration names that port).
func startDriverset(ctx context.Context, prev *harness.Driverset) (*harness.Driverset, error) {
	return startDriversetWithEnv(ctx, prev, bed.runtimeEnv)
}

// startDriversetWithEnv is startDriverset with another Go runtime environment than the installed
// one (the memory benchmark's comparison).
func startDriversetWithEnv(ctx context.Context, prev *harness.Driverset, env []string) (*harness.Driverset, error) {
	// driverset runs as its own ServiceAccount, with the manifests' RBAC: a permission missing
	// there fails the scenarios that need it.
	o := harness.Options{Binary: bed.binary, Kubeconfig: bed.cluster.KubeconfigPath, Dir: bed.dir, Args: driversetArgs,
		ServiceAccount: "driverset-system/driverset", Metrics: true, Restart: true, Env: env,
		Pprof: os.Getenv(profilesEnv) != "", Alive: bed.cluster.CheckAlive}
	if prev != nil {
		o.Port, o.CA = prev.Port, prev.CA
	}
	return harness.Start(ctx, o)
}
