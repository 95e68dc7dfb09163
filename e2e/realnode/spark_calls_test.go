//go:build testbed

package realnode

import (
	"context"
	"maps"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/driverset/driverset/e2e/spark"
	"github.com/driverset/driverset/e2e/sparksim"
)

// recordedCalls are the calls made on namespace ns's objects, by actor, as the apiserver's audit
// log has them once they stop changing (a watch is logged when it ends).
func recordedCalls(t *testing.T, ns string) map[string][]spark.Call {
	t.Helper()
	var calls map[string][]spark.Call
	stable := 0
	waitFor(t, time.Minute, "the audit log of "+ns+" to settle", func(context.Context) (bool, error) {
		f, err := os.Open(bed.cluster.AuditLogPath())
		if err != nil {
			return false, err
		}
		defer f.Close()
		now, err := spark.ReadCalls(f, spark.InNamespace(ns))
		if err != nil {
			return false, err
		}
		if reflect.DeepEqual(now, calls) {
			stable++
		} else {
			calls, stable = now, 0
		}
		return stable >= 6, nil // 3 s without a new call
	})
	return calls
}

// simVersion is the simulated release line of a Spark version.
func simVersion(t *testing.T, version string) sparksim.Version {
	t.Helper()
	for _, v := range []sparksim.Version{sparksim.Spark35, sparksim.Spark41} {
		if strings.HasPrefix(version, string(v)+".") {
			return v
		}
	}
	t.Fatalf("no simulated Spark line for %s", version)
	return ""
}

// simulate submits real's app again, in a namespace of its own, with sparksim: its spark-submit
// from the host with the same user's token, its driver and executors in the simulated Spark
// image (e2e/cmd/simspark). It returns once spark-submit has.
func simulate(t *testing.T, real *sparkRun) (ns string) {
	t.Helper()
	ns = namespace(t, nil)
	conf := maps.Clone(real.app.Conf)
	conf["spark.kubernetes.container.image.pullPolicy"] = "Never"
	conf[confRunFor] = "5"
	app := sparksim.App{
		Version:   simVersion(t, real.app.Dist.Version),
		Name:      real.app.Name,
		Namespace: ns,
		Image:     bed.images.simspark,
		MainClass: spark.JobClass,
		Resource:  "local://" + spark.JobJarPath,
		AppArgs:   real.app.Args,
		Conf:      conf,
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", userKubeconfig(t, ns))
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var log strings.Builder
	res, err := sparksim.Submit(ctx, c, app, sparksim.SubmitOptions{WaitAppCompletion: true, Log: &log})
	if err != nil {
		t.Fatalf("sparksim's spark-submit: %v\n%s", err, log.String())
	}
	t.Logf("sparksim's spark-submit: exit %d, phases %v", res.ExitCode, res.Phases)
	return ns
}

// simDifferences is every accepted difference between real Spark's calls (A) and sparksim's (B)
// for the submission TestRealSpark makes, each with its reason. Anything else sparksim does
// differently is a defect of sparksim, to be fixed there.
func simDifferences() []spark.Difference {
	const driver = "pi-driver"
	return []spark.Difference{
		{Actor: driver, B: "get pods pi-driver", Why: "sparksim reads its argv and env from its pod's spec: it also plays the JVM on KWOK, where no process exists"},
		{Actor: driver, B: "get configmaps spark-drv-{id}-conf-map", Why: "sparksim reads the properties file from its ConfigMap: on KWOK no file is mounted"},
		{Actor: driver, A: "create pods driverset-pi-{id}-exec-{n}", B: "create pods pi-{id}-exec-{n}",
			Why: "the job names itself driverset-pi (SparkConf.setAppName), the executors' prefix; simspark runs no job"},
		{Actor: driver, A: "create pods driverset-pi-{id}-exec-{n}", B: "create pods pi-{id}-exec-{n}", Why: "the second executor, as above"},
		{Actor: driver, A: "watch pods pi-driver [metadata.name]", B: "watch pods pi-driver [metadata.name]", Any: true,
			Why: "the 1 s wait for Ready watches the pod only if it was not Ready yet: timing"},
		{Actor: driver, A: "list persistentvolumeclaims [spark-app-selector]", B: "list persistentvolumeclaims [spark-app-selector]", Unordered: true,
			Why: "the allocator's first round runs on a thread of its own: its claim lookup races the executor watch (seen both ways on 4.1.1)"},
		{Actor: driver, A: "list pods [spark-app-selector,spark-exec-inactive,spark-role]", B: "list pods [spark-app-selector,spark-exec-inactive,spark-role]",
			Any: true, Why: "the executor poll, every 30 s: how often depends on how long the driver ran"},
	}
}

// expectSimSameCalls: sparksim, given the submission plain made (without driverset), makes the
// same calls in the same order as real Spark did, actor by actor, but for simDifferences.
func expectSimSameCalls(t *testing.T, plain *sparkRun) {
	t.Helper()
	start := time.Now()
	real := recordedCalls(t, plain.app.Namespace)
	sim := recordedCalls(t, simulate(t, plain))
	t.Logf("API calls of real Spark %s and of sparksim compared in %s (the simulated run included)",
		plain.app.Dist.Version, time.Since(start).Round(time.Second))
	if diff := spark.CompareCalls(real, sim, simDifferences()); diff != "" {
		t.Errorf("sparksim's calls differ from real Spark %s's (real Spark's first, then sparksim's):\n%s\nreal Spark:\n%s\nsparksim:\n%s",
			plain.app.Dist.Version, diff, spark.FormatCalls(real), spark.FormatCalls(sim))
	}
}
