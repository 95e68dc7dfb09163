//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/harness"
	"github.com/driverset/driverset/e2e/sparksim"
)

// BenchmarkMemory measures driverset's resident memory (VmRSS of the process the harness runs)
// with N opted-in apps running, first alone and then beside M Spark pods of apps that did not
// opt in (issue 11: driverset's memory must not depend on them). Each measurement is of a freshly
// started driverset, which lists everything it watches at start, so both see the whole cluster.
// driverset runs with the environment install.yaml gives it (GOGC); the N apps alone are also
// measured under Go's default GOGC=100 first, for what that setting buys. It reports MiB at 0 and
// at M foreign pods and their ratio, and fails when the ratio leaves 1 ± 10% or either exceeds
// 100 MiB.
//
// N and M default small enough for a 2-core machine; the size is
//
//	DRIVERSET_BENCH_APPS=1000 DRIVERSET_BENCH_FOREIGN_PODS=20000 make bench
func BenchmarkMemory(b *testing.B) {
	apps := envInt(b, "DRIVERSET_BENCH_APPS", 20)
	foreign := envInt(b, "DRIVERSET_BENCH_FOREIGN_PODS", 2000)
	ctx := context.Background()
	c := benchClient(b)
	suffix := time.Now().UnixNano() % 1_000_000
	appsNS, foreignNS := fmt.Sprintf("bench-mem-apps-%d", suffix), fmt.Sprintf("bench-mem-foreign-%d", suffix)
	for _, ns := range []string{appsNS, foreignNS} {
		tempNamespace(b, ctx, c, ns)
	}
	// 110 pods per KWOK node; three are there already.
	for i := 3; i < (apps+109)/110+1; i++ {
		if err := bed.cluster.AddNode(ctx, fmt.Sprintf("kwok-mem-%d-%d", suffix, i)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	start := time.Now()
	startApps(b, ctx, c, appsNS, apps)
	b.Logf("%d opted-in apps Running after %s", apps, time.Since(start).Round(time.Second))

	var none, many, goDefault float64
	// The same apps under Go's default collector setting, for what install.yaml's GOGC buys.
	b.Run(fmt.Sprintf("apps=%d/foreign=0/GOGC=100", apps), func(b *testing.B) {
		goDefault = freshRSS(b, append(slices.Clone(bed.runtimeEnv), "GOGC=100"))
		b.ReportMetric(goDefault, "MiB")
	})
	b.Run(fmt.Sprintf("apps=%d/foreign=0", apps), func(b *testing.B) {
		none = freshRSS(b, bed.runtimeEnv)
		b.ReportMetric(none, "MiB")
		b.ReportMetric(none/goDefault, "x-GOGC=100")
	})
	start = time.Now()
	createForeignPods(b, ctx, c, foreignNS, foreign)
	b.Logf("%d foreign Spark pods created in %s", foreign, time.Since(start).Round(time.Second))
	b.Run(fmt.Sprintf("apps=%d/foreign=%d", apps, foreign), func(b *testing.B) {
		many = freshRSS(b, bed.runtimeEnv)
		b.ReportMetric(many, "MiB")
		b.ReportMetric(many/none, "x-no-foreign")
	})
	b.Logf("driverset RSS: %.1f MiB with %d apps (%.1f MiB with GOGC=100, %.3fx); %.1f MiB with %d foreign Spark pods more (%.3fx)",
		none, apps, goDefault, none/goDefault, many, foreign, many/none)
	if many > 100 || none > 100 {
		b.Errorf("driverset RSS over 100 MiB: %.1f (no foreign pods), %.1f (%d foreign pods)", none, many, foreign)
	}
	if r := many / none; r > 1.10 || r < 0.90 {
		b.Errorf("driverset RSS is not flat in the foreign pods: %.3fx at %d of them", r, foreign)
	}
}

// freshRSS restarts driverset with the Go runtime environment env, lets it settle (caches
// listed, controller through its backlog) and returns the largest VmRSS, in MiB, seen over the
// next 10 s.
func freshRSS(b *testing.B, env []string) float64 {
	b.Helper()
	ctx := context.Background()
	if err := bed.driverset.Stop(); err != nil {
		b.Fatal(err)
	}
	d, err := startDriversetWithEnv(ctx, bed.driverset, env)
	if err != nil {
		b.Fatalf("restart driverset: %v", err)
	}
	bed.driverset = d
	time.Sleep(20 * time.Second)
	var most int64
	for range 10 {
		rss, err := d.RSS()
		if err != nil {
			b.Fatal(err)
		}
		most = max(most, rss)
		time.Sleep(time.Second)
	}
	code, body, err := harness.Scrape(ctx, d.MetricsURL, bed.metricsToken)
	if err == nil && code == 200 {
		// What the Go runtime says of the same process: the heap the last GC found live sets the
		// next GC's goal (GOGC), and the RSS follows the goal, not the live heap.
		anon, file, _ := d.RSSParts()
		// The CPU it used since start shows what a lower GOGC costs in collections.
		b.Logf("driverset's Go heap: in use %.1f MiB, next GC at %.1f MiB, %0.f GCs and %.1f CPU-s since start; RSS %.1f MiB at most, now %.1f MiB anonymous + %.1f MiB of files (the binary); env %v",
			harness.Gauge(body, "go_memstats_heap_inuse_bytes")/(1<<20), harness.Gauge(body, "go_memstats_next_gc_bytes")/(1<<20),
			harness.Gauge(body, "go_gc_duration_seconds_count"), harness.Gauge(body, "process_cpu_seconds_total"),
			float64(most)/(1<<20), float64(anon)/(1<<20), float64(file)/(1<<20), env)
	}
	return float64(most) / (1 << 20)
}

// benchClient is the admin client with a higher client-side rate limit: thousands of creates.
func benchClient(b *testing.B) kubernetes.Interface {
	cfg := rest.CopyConfig(bed.cluster.Config)
	cfg.QPS, cfg.Burst = 1000, 2000
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// tempNamespace creates namespace ns, waits for its default ServiceAccount (pods need it) and
// deletes it when b ends.
func tempNamespace(b *testing.B, ctx context.Context, c kubernetes.Interface, ns string) {
	b.Helper()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	if err := bed.cluster.WaitForDefaultServiceAccount(ctx, ns); err != nil {
		b.Fatal(err)
	}
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		b.Fatalf("%s=%q: want a count", name, v)
	}
	return n
}

// parallel runs do(i) for i in [0, n) on workers goroutines and fails on the first error.
func parallel(b *testing.B, n, workers int, do func(i int) error) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := do(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// startApps submits n opted-in apps in ns and waits until each driver runs in its StatefulSet's pod.
func startApps(b *testing.B, ctx context.Context, c kubernetes.Interface, ns string, n int) {
	b.Helper()
	submitApps(b, ctx, c, ns, "mem", n)
	if err := poll(ctx, time.Duration(n)*time.Second+2*time.Minute, func() bool {
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: contract.LabelDriver})
		if err != nil {
			return false
		}
		running := 0
		for _, p := range pods.Items {
			if p.Labels[contract.LabelSparkRole] == contract.RoleDriver && p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == n
	}); err != nil {
		b.Fatalf("not all %d drivers ran: %v", n, err)
	}
}

// submitApps submits n opted-in apps named <prefix>-<i> in ns, as spark-submit does, 8 at once.
func submitApps(b *testing.B, ctx context.Context, c kubernetes.Interface, ns, prefix string, n int) {
	b.Helper()
	// Few at once: each submission is several calls and a conversion, and a flooded apiserver on
	// 2 cores makes driverset miss its lease renewals.
	parallel(b, n, 8, func(i int) error {
		a := app(ns, fmt.Sprintf("%s-%d", prefix, i))
		// A small cpu request, so that 110 drivers fit on a KWOK node (32 cpu).
		a.Conf = map[string]string{"spark.kubernetes.driver.request.cores": "10m"}
		plan, err := a.Plan()
		if err != nil {
			return err
		}
		_, err = sparksim.SubmitPlan(ctx, c, plan, sparksim.SubmitOptions{})
		return err
	})
}

// createForeignPods creates n pods as another Spark app's would look (one driver for 19
// executors, the labels, env and resources Spark sets), held by a scheduling gate of their own:
// they need no node, and they still reach every watch that selects them.
func createForeignPods(b *testing.B, ctx context.Context, c kubernetes.Interface, ns string, n int) {
	b.Helper()
	parallel(b, n, 32, func(i int) error {
		_, err := c.CoreV1().Pods(ns).Create(ctx, foreignSparkPod(ns, i), metav1.CreateOptions{})
		return err
	})
}

func foreignSparkPod(ns string, i int) *corev1.Pod {
	app := fmt.Sprintf("spark-%032d", i/20)
	role := contract.RoleExecutor
	if i%20 == 0 {
		role = contract.RoleDriver
	}
	env := []corev1.EnvVar{
		{Name: contract.EnvDriverURL, Value: fmt.Sprintf("spark://CoarseGrainedScheduler@%s-driver-svc.%s.svc:7078", app, ns)},
		{Name: "SPARK_EXECUTOR_CORES", Value: "1"},
		{Name: "SPARK_EXECUTOR_MEMORY", Value: "1g"},
		{Name: "SPARK_APPLICATION_ID", Value: app},
		{Name: "SPARK_CONF_DIR", Value: "/opt/spark/conf"},
		{Name: "SPARK_EXECUTOR_ID", Value: strconv.Itoa(i % 20)},
		{Name: "SPARK_RESOURCE_PROFILE_ID", Value: "0"},
		{Name: "SPARK_JAVA_OPT_0", Value: "-Dspark.driver.port=7078"},
		{Name: "SPARK_JAVA_OPT_1", Value: "-Dspark.driver.blockManager.port=7079"},
		{Name: "SPARK_LOCAL_DIRS", Value: "/var/data/spark-" + app},
		{Name: "SPARK_EXECUTOR_POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "SPARK_EXECUTOR_POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
	}
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1408Mi")}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-exec-%d", app, i%20),
			Labels: map[string]string{
				contract.LabelSparkRole: role, contract.LabelSparkAppSelector: app,
				"spark-exec-id": strconv.Itoa(i % 20), "spark-exec-resourceprofile-id": "0", "spark-app-name": "foreign",
			},
		},
		Spec: corev1.PodSpec{
			SchedulingGates: []corev1.PodSchedulingGate{{Name: "bench.driverset.dev/foreign"}},
			RestartPolicy:   corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "spark-kubernetes-executor", Image: "apache/spark:3.5.3",
				Args:         []string{"executor"},
				Env:          env,
				Ports:        []corev1.ContainerPort{{Name: "blockmanager", ContainerPort: 7079}},
				Resources:    corev1.ResourceRequirements{Requests: res, Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1408Mi")}},
				VolumeMounts: []corev1.VolumeMount{{Name: "spark-local-dir-1", MountPath: "/var/data/spark-" + app}},
			}},
			Volumes: []corev1.Volume{{Name: "spark-local-dir-1", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
}
