// Command simspark plays a Spark image's entrypoint in the test bed's real pods (it is
// /opt/entrypoint.sh of images.SimSpark), using the simulator in e2e/sparksim against the API with
// the pod's in-cluster credentials:
//
//	simspark driver [spark-submit args…]   the driver JVM
//	simspark executor                      an executor JVM
//	simspark orphan [--detach]             a process left behind (see orphan.go)
//
// The driver reads its own pod (DRIVERSET_POD_NAME, set by driverset's template, else the
// hostname, which is a pod's name) and namespace (the ServiceAccount's namespace file), starts as
// sparksim.StartDriver (its args are read from the pod spec, so the ones given here are not
// parsed again), prints "simspark: driver started, app <id>, host <spark.driver.host>, pod <pod>",
// listens on spark.driver.port (7078), creates spark.executor.instances (2) executor pods and
// logs each executor that registers. It ends:
//   - after spark.driverset.sim.runSeconds (30; 0 = never) with spark.driverset.sim.exitCode (0);
//   - as soon as the ConfigMap named by spark.driverset.sim.controlConfigMap, polled every second,
//     has an "exit" key: with that code;
//   - on SIGTERM: 143, as the JVM.
//
// On exit 0 it first does Spark's clean stop (sparksim's Driver.Stop: executors, their ConfigMap
// and the app's Services deleted). With spark.driverset.sim.spawnOrphan=true it leaves a detached
// process behind at start.
//
// The executor resolves the host of SPARK_DRIVER_URL through the pod's DNS, retries for up to 60 s,
// registers ("register <id> <pod> <app-id>") and holds the connection: it exits 1 when the driver
// drops it, 143 on SIGTERM.
//
// Only these parts are modelled. Not simulated: any real Spark work (tasks, block manager, UI),
// Spark's RPC protocol and authentication, executor loss handling and re-requests, dynamic
// allocation, the shutdown hook's stop on SIGTERM (this driver exits 143 without deleting its
// executors), tini, and everything sparksim itself leaves out.
package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/driverset/driverset/contract"
)

const (
	namespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
	// executorRetry is how long an executor tries to reach its driver.
	executorRetry = 60 * time.Second
)

func main() {
	os.Exit(run())
}

// run plays the role named by the first argument and returns the exit code.
func run() int {
	// Spark's images are run as `/opt/entrypoint.sh driver …`: the role is the first argument.
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: simspark driver|executor|orphan [args…]")
		return 2
	}
	term, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stdout, format+"\n", args...) }
	var code int
	switch os.Args[1] {
	case "driver", "driver-py", "driver-r": // 2.4 starts PySpark and R drivers with its own entries
		code = runDriver(term, logf)
	case "executor":
		code = executor{
			driverURL: os.Getenv(contract.EnvDriverURL),
			reg: registration{ID: os.Getenv("SPARK_EXECUTOR_ID"), Pod: envOrHostname("SPARK_EXECUTOR_POD_NAME"),
				App: os.Getenv("SPARK_APPLICATION_ID")},
			resolver: &net.Resolver{PreferGo: true},
			retryFor: executorRetry,
			logf:     logf,
		}.run(term)
	case "orphan":
		if len(os.Args) > 2 && os.Args[2] == "--detach" {
			if err := detachOrphan(self()); err != nil {
				logf("simspark: orphan: %v", err)
				code = 1
			}
			break
		}
		stop() // the orphan ignores nothing: SIGTERM kills it.
		sleepForever()
	default:
		fmt.Fprintf(os.Stderr, "simspark: unknown role %q: want driver, executor or orphan\n", os.Args[1])
		code = 2
	}
	return code
}

func runDriver(term context.Context, logf func(string, ...any)) int {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		logf("simspark: driver: %v", err)
		return exitFailed
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		logf("simspark: driver: %v", err)
		return exitFailed
	}
	ns, err := os.ReadFile(namespaceFile)
	if err != nil {
		logf("simspark: driver: own namespace: %v", err)
		return exitFailed
	}
	return driver{
		client: client,
		ns:     strings.TrimSpace(string(ns)),
		pod:    envOrHostname(contract.EnvPodName),
		logf:   logf,
		listen: net.Listen,
		poll:   time.Second,
		spawnOrphan: func() error {
			pid, err := spawnOrphan(self())
			if err == nil {
				logf("simspark: left orphan process %d behind", pid)
			}
			return err
		},
		spill: func(mib int) error { return spill(filepath.Join(os.TempDir(), "simspark-spill"), mib) },
	}.run(term)
}

// spill writes mib MiB of data to path, synced, so that the container's writable layer really
// holds it when the kubelet measures its ephemeral storage.
func spill(path string, mib int) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	chunk := bytes.Repeat([]byte{'s'}, 1<<20)
	for range mib {
		if _, err := f.Write(chunk); err != nil {
			_ = f.Close()
			return err
		}
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// envOrHostname is the variable's value, else the hostname: a pod's hostname is its name unless
// the pod sets spec.hostname.
func envOrHostname(name string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	h, _ := os.Hostname()
	return h
}

// self is this binary, to re-run it; /proc/self/exe if the executable cannot be named.
func self() string {
	if p, err := os.Executable(); err == nil {
		return p
	}
	return "/proc/self/exe"
}
