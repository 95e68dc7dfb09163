// Package sparksim plays Apache Spark's two Kubernetes clients inside a test: spark-submit in
// cluster mode (Plan, Submit) and the driver JVM that then runs in a pod (StartDriver). Both talk
// to an apiserver through client-go and build the objects that Spark 2.4, 3.5 and 4.1 build, call
// by call, so that driverset's webhook and controller can be tested against what Spark really
// sends. The behaviour followed is the one written down in docs/spark-facts.md and in
// Spark's resource-managers/kubernetes sources; each file says which part it plays. The 3.5 and
// 4.1 calls, in their order, are checked against real Spark 3.5.6's and 4.1.1's, recorded by the
// apiserver's audit log (TestRealSpark in e2e/realnode).
//
// Not confirmed against a release tag (read from Spark's main line, or inferred): whether 2.4's
// driver Service has no labels, whether 3.5's ConfigMap also carries spark.kubernetes.namespace,
// the IP-family fields of the 3.5/4.1 Service, 2.4's executor container name, and the exact
// spark-version label values (2.4.8, 3.5.7, 4.1.2 are used). Not simulated: spark-defaults.conf
// and envFrom.
package sparksim

import "fmt"

// Version is the Spark release line being simulated.
type Version string

// The simulated release lines. 2.4 stands for 2.4/3.0 (the old ConfigMap naming and the fixed
// executor prefix), 3.5 for 3.4–3.5 and 4.1 for 4.0–4.1.
const (
	Spark24 Version = "2.4"
	Spark35 Version = "3.5"
	Spark41 Version = "4.1"
)

// traits are the per-version differences that change an object's shape. Keeping them in one
// table makes each difference a named, testable fact instead of a scattered version check.
type traits struct {
	// release is SPARK_VERSION, the value of the spark-version label (3.4+).
	release string
	// versionLabels: spark-version and spark-app-name on driver and executor pods (3.4+).
	versionLabels bool
	// conf volume and ConfigMap naming: 2.4/3.0 "<prefix>-driver-conf-map" in "spark-conf-volume",
	// later "spark-drv-<id>-conf-map" in "spark-conf-volume-driver" with explicit items.
	oldConfMap bool
	// fixedExecutorPrefix: spark-submit writes spark.kubernetes.executor.podNamePrefix (2.4/3.0).
	fixedExecutorPrefix bool
	// serverSideApply: the Service and ConfigMap are server-side applied, field manager fabric8,
	// forced (3.5 and 4.1, as the apiserver's audit log shows for 3.5.6 and 4.1.1), instead of
	// create-or-replace (2.4).
	serverSideApply bool
	// watchBeforeCreate: 2.4 opens the watch on the driver pod before it POSTs the pod.
	watchBeforeCreate bool
	// restartWatchOnGone: 3.x+ re-opens the watch when it expires (HTTP 410); 2.4's watcher
	// treats the closing as the end of the application.
	restartWatchOnGone bool
	// minOverheadConf: the 384 MiB floor is configurable (spark.{driver,executor}.minMemoryOverhead, 4.0+).
	minOverheadConf bool
	// execConfigMap: the driver creates spark-exec-<id>-conf-map and mounts it in executors (3.1+).
	execConfigMap bool
	// resourceProfiles: spark-exec-resourceprofile-id label and SPARK_RESOURCE_PROFILE_ID (3.1+).
	resourceProfiles bool
	// driverPodIPOption: spark.kubernetes.executor.useDriverPodIP exists (4.1).
	driverPodIPOption bool
	// ownClaims: the clean stop deletes the PersistentVolumeClaims labelled with the app id while
	// spark.kubernetes.driver.ownPersistentVolumeClaim holds, true by default (3.4+).
	ownClaims bool
	// connectPort: the driver container and the driver Service also have the Spark Connect port,
	// "spark-connect" (spark.connect.grpc.binding.port, default 15002; the Service's with
	// appProtocol grpc): BasicDriverFeatureStep and DriverServiceFeatureStep, SPARK-52193, 4.1.
	connectPort bool
	// readyWait: the executor allocator's start waits up to 1 s for the driver's own pod to be
	// Ready (fabric8's waitUntilReady: a list by name, then a watch while not Ready), 3.x+.
	readyWait bool
	// activeExecutorWatch: the driver's executor watch leaves out executors labelled
	// spark-exec-inactive=true (4.x, seen in 4.1.1's audit log).
	activeExecutorWatch bool
	// sslStartupConf: spark.ssl.* settings but passwords are executor startup settings
	// (SparkConf.isExecutorStartupConf in 4.1.1's spark-core; not in 3.5.6's).
	sslStartupConf bool
}

func (v Version) traits() (traits, error) {
	switch v {
	case Spark24:
		return traits{release: "2.4.8", oldConfMap: true, fixedExecutorPrefix: true, watchBeforeCreate: true}, nil
	case Spark35:
		return traits{release: "3.5.7", versionLabels: true, serverSideApply: true, restartWatchOnGone: true,
			execConfigMap: true, resourceProfiles: true, ownClaims: true, readyWait: true}, nil
	case Spark41:
		return traits{release: "4.1.2", versionLabels: true, serverSideApply: true, restartWatchOnGone: true,
			minOverheadConf: true, execConfigMap: true, resourceProfiles: true, driverPodIPOption: true, ownClaims: true,
			connectPort: true, readyWait: true, activeExecutorWatch: true, sslStartupConf: true}, nil
	}
	return traits{}, fmt.Errorf("sparksim: unsupported Spark version %q (want %s, %s or %s)", v, Spark24, Spark35, Spark41)
}

// versionFromRelease maps a spark-version label value back to the simulated line.
func versionFromRelease(release string) (Version, bool) {
	switch {
	case len(release) >= 2 && release[:2] == "2.":
		return Spark24, true
	case len(release) >= 2 && release[:2] == "3.":
		return Spark35, true
	case len(release) >= 2 && release[:2] == "4.":
		return Spark41, true
	}
	return "", false
}
