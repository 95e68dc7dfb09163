//go:build testbed

package realnode

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/harness"
	"github.com/driverset/driverset/e2e/spark"
)

// The job's size: slices of sparkSliceMillis each over sparkExecutors single-core executors, long
// enough to lose the driver's node in the middle, short enough for 2 cores.
const (
	sparkExecutors   = 2
	sparkSlices      = 24
	sparkSliceMillis = 1000
	// sparkRunBound is how long one app may take from spark-submit to its end on a loaded
	// machine: three JVMs start, register and run the job.
	sparkRunBound = 6 * time.Minute
)

// Lines the job and Spark print, read to follow an app.
var ( //nolint:gochecknoglobals // constant patterns
	reResult     = regexp.MustCompile(`driverset-pi: pi is roughly [0-9.]+ \(\d+ slices\)`)
	reAttempt    = regexp.MustCompile(`driverset-pi: app (\S+) attempt started`)
	rePhase      = regexp.MustCompile(`phase: (\w+)`)
	reExitCode   = regexp.MustCompile(`exit code: (-?\d+)`)
	reRegistered = regexp.MustCompile(`Registered executor .* with ID (\d+)`)
	rePyVersions = regexp.MustCompile(`driverset-pi: PySpark \S+ on Spark \S+`)
)

// TestRealSpark runs the real spark-submit, driver and executors of each Spark version, three
// times: without driverset, with driverset, and with driverset while the driver's node is killed
// in the middle of the job. The first two must be indistinguishable to the user (spark-submit's
// exit code and final phase, the job's result); the third, with the event log on, must end the
// same way, its driver started again on another node with an app id of its own and its executors
// found at the stable name, each incarnation's event log kept and listed by Spark's History Server.
// The run without driverset is also the reference for sparksim: the same submission simulated
// must make the same API calls (expectSimSameCalls).
func TestRealSpark(t *testing.T) {
	if len(bed.images.spark) == 0 {
		t.Skipf("no real Spark version chosen (%s=none)", sparkVersionsEnv)
	}
	for _, d := range bed.images.spark {
		t.Run(d.Version, func(t *testing.T) {
			plain := runSpark(t, d, false, nil)
			plain.expectSucceeded(t)
			t.Logf("without driverset: spark-submit exit %d, phases %v, driver exit codes %v, %q", plain.code, plain.phases(), plain.exitCodes(), plain.result(t))
			if len(plain.exitCodes()) == 0 {
				t.Errorf("spark-submit reported no exit code of the driver container:\n%s", plain.out.String())
			}
			expectSimSameCalls(t, plain)

			with := runSpark(t, d, true, nil)
			with.expectSucceeded(t)
			with.expectSameAs(t, plain)
			with.expectStableName(t)

			// With the event log on, as anyone who runs a History Server has it: Spark's default
			// log of each version (4.x rolling, 3.5 a single file).
			logs := newEventLogs(t, !strings.HasPrefix(d.Version, "3."))
			killed := runSparkJob(t, d, sparkJob{resilient: true, conf: logs.conf}, killDriverNodeMidJob)
			killed.expectSucceeded(t)
			killed.expectSameAs(t, plain)
			killed.expectStableName(t)
			if n := len(killed.attempts()); n != 2 {
				t.Errorf("want the driver started twice (before and after the node died), saw %d: %v", n, killed.attempts())
				killed.logDrivers(t)
			} else {
				expectOwnAppIDs(t, killed.attempts())
				logs.expect(t, d, killed.attempts(), killed.attempts()[0])
			}
		})
	}
}

// sparkRun is one app: the real spark-submit run from the host in the background, with what
// was seen of its pods while they lived (Spark and driverset delete them when the app ends).
type sparkRun struct {
	app   spark.App
	names contract.Names // driverset's names for its driver pod
	done  chan struct{}
	code  int
	err   error
	out   spark.SyncBuffer

	mu        sync.Mutex
	drivers   map[string]*seenDriver  // by pod UID: every pod that ran the driver
	executors map[string]seenExecutor // by executor pod name
	// followers stream the driver container's log of each pod, from its first start to its
	// end (see follow).
	followers sync.WaitGroup
}

// seenExecutor is what an executor pod was given: its SPARK_DRIVER_URL, and the label
// driverset.dev/driver, which the driver in S-0 gives its executors (S-0's --conf).
type seenExecutor struct{ url, driver string }

type seenDriver struct {
	pod, node string
	created   time.Time
	log       string // the longest log read by the 1 s poll
	// streamed is the driver container's log as followed from its first start: it holds the
	// last lines even when the container ends, and the kubelet starts it again (restartPolicy
	// Always) or the pod is deleted, between two polls.
	streamed  string
	following bool
	// startedSeen is when waitNewDriver saw this driver start the job (within the 1 s poll).
	startedSeen time.Time
}

// runSpark submits the job of d in a namespace of its own, opted in when resilient; during,
// when set, runs while the app does (from the moment the driver runs); it returns once
// spark-submit has returned.
func runSpark(t *testing.T, d spark.Dist, resilient bool, during func(*testing.T, *sparkRun)) *sparkRun {
	t.Helper()
	return runSparkJob(t, d, sparkJob{resilient: resilient}, during)
}

// sparkJob says how to submit: opted in or not, the JVM job or the PySpark one, and its number
// of slices (0: sparkSlices).
type sparkJob struct {
	resilient, python bool
	slices            int
	failOnce          bool              // the job's first attempt throws (DriversetPi's "fail-once")
	keepAppID         bool              // every attempt runs with the first one's app id (DriversetPi's "keep-app-id")
	conf              map[string]string // more --conf
	// class and args, when args is set, submit another job of the image (spark.StreamClass …)
	// with its own arguments instead of DriversetPi's; pyFile likewise for PySpark.
	class, pyFile string
	args          []string
	// prepare, when set, runs in the app's namespace before spark-submit (an admin's RoleBinding).
	prepare func(t *testing.T, ns string)
	// namespace, when set, is the app's namespace (an app submitted again); else a new one.
	namespace string
	// name, when set, is the app's name (its placeholder is <name>-driver); else "pi".
	name string
}

func runSparkJob(t *testing.T, d spark.Dist, job sparkJob, during func(*testing.T, *sparkRun)) *sparkRun {
	t.Helper()
	ns := job.namespace
	if ns == "" {
		ns = namespace(t, nil)
	}
	if job.prepare != nil {
		job.prepare(t, ns)
	}
	name := cmp.Or(job.name, "pi")
	conf := map[string]string{
		"spark.kubernetes.driver.pod.name":                        name + "-driver",
		"spark.kubernetes.authenticate.driver.serviceAccountName": "default",
		"spark.executor.instances":                                fmt.Sprint(sparkExecutors),
		"spark.driver.memory":                                     "512m",
		"spark.executor.memory":                                   "512m",
		"spark.kubernetes.driver.request.cores":                   "100m",
		"spark.kubernetes.executor.request.cores":                 "100m",
		"spark.driver.extraJavaOptions":                           "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
		"spark.executor.extraJavaOptions":                         "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
		"spark.ui.enabled":                                        "false",
		// fabric8's 10 s default is too short for a JVM on a loaded 2-core test bed.
		"spark.kubernetes.submission.requestTimeout":    "60000",
		"spark.kubernetes.submission.connectionTimeout": "60000",
		"spark.kubernetes.driver.requestTimeout":        "60000",
		"spark.kubernetes.driver.connectionTimeout":     "60000",
	}
	if job.resilient {
		conf["spark.kubernetes.driver.label."+contract.LabelResilient] = "true"
	}
	maps.Copy(conf, job.conf)
	args := []string{fmt.Sprint(cmp.Or(job.slices, sparkSlices)), fmt.Sprint(sparkSliceMillis)}
	if job.failOnce {
		args = append(args, "fail-once")
	}
	if job.keepAppID {
		args = append(args, "keep-app-id")
	}
	if job.args != nil {
		args = job.args
	}
	r := &sparkRun{
		app: spark.App{Dist: d, Master: bed.cluster.Config.Host, Namespace: ns, Name: name, Conf: conf,
			Args: args, Python: job.python, Class: job.class, PyFile: job.pyFile},
		names:     contract.NamesFor(name + "-driver"),
		done:      make(chan struct{}),
		drivers:   map[string]*seenDriver{},
		executors: map[string]seenExecutor{},
	}
	kubeconfig := userKubeconfig(t, ns)
	ctx, cancel := context.WithTimeout(context.Background(), sparkRunBound)
	defer cancel()
	start := time.Now()
	go func() {
		defer close(r.done)
		r.code, r.err = spark.SparkSubmit(ctx, d, kubeconfig, &r.out, r.app.SubmitArgs()...)
	}()
	watched := make(chan struct{})
	go func() { defer close(watched); r.watch(ctx) }()
	if during != nil {
		during(t, r)
	}
	select {
	case <-r.done:
	case <-ctx.Done():
	}
	// The driver container has ended by now; its log stream ends with it. One on a node that
	// was killed never ends: it is cut off after a moment.
	r.waitFollowers(5 * time.Second)
	cancel()
	<-watched
	r.followers.Wait()
	if r.err != nil {
		t.Fatalf("spark-submit: %v\n%s", r.err, r.out.String())
	}
	if ctx.Err() != nil && r.Running() {
		t.Fatalf("spark-submit did not return within %s\n%s", sparkRunBound, r.out.String())
	}
	t.Logf("spark-submit (Spark %s, %+v) returned %d after %s", d.Version, job, r.code, time.Since(start).Round(time.Second))
	if t.Failed() {
		t.Logf("spark-submit's output:\n%s", r.out.String())
		r.logDrivers(t)
	}
	return r
}

// userKubeconfig is a kubeconfig for a Spark user of namespace ns: the token of its default
// ServiceAccount (the edit role, see namespace), as a tenant without cluster rights would have.
func userKubeconfig(t *testing.T, ns string) string {
	t.Helper()
	expiry := int64(3600)
	tok, err := kube().CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), "default",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["testbed"] = &clientcmdapi.Cluster{Server: bed.cluster.Config.Host, CertificateAuthorityData: bed.cluster.CACertPEM()}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts["user"] = &clientcmdapi.Context{Cluster: "testbed", AuthInfo: "user", Namespace: ns}
	cfg.CurrentContext = "user"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// Running reports whether spark-submit still waits for the app.
func (r *sparkRun) Running() bool {
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

// watch keeps, every second until spark-submit returns, the log of every pod that runs the
// driver and the driver address every executor pod was given.
func (r *sparkRun) watch(ctx context.Context) {
	for {
		r.look(context.Background(), ctx)
		select {
		case <-r.done:
			r.look(context.Background(), ctx)
			return
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// look reads, once, every executor's driver address and every driver pod's log, and starts
// following the log of a driver container that runs (streams live in run).
func (r *sparkRun) look(ctx, run context.Context) {
	pods, err := kube().CoreV1().Pods(r.app.Namespace).List(ctx, metav1.ListOptions{LabelSelector: contract.LabelSparkRole})
	if err != nil {
		return
	}
	for _, p := range pods.Items {
		switch {
		case p.Labels[contract.LabelSparkRole] == contract.RoleExecutor:
			for _, e := range p.Spec.Containers[0].Env {
				if e.Name == "SPARK_DRIVER_URL" {
					r.mu.Lock()
					r.executors[p.Name] = seenExecutor{url: e.Value, driver: p.Labels[contract.LabelDriver]}
					r.mu.Unlock()
				}
			}
		case p.Spec.NodeName != "" && len(p.Status.ContainerStatuses) > 0:
			// Bounded: the kubelet of a node cut off from the control plane never answers, and
			// this poll must go on to see the next incarnation.
			lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			l, err := logs(lctx, p.Namespace, p.Name)
			cancel()
			r.mu.Lock()
			seen := r.drivers[string(p.UID)]
			if seen == nil {
				seen = &seenDriver{pod: p.Name, node: p.Spec.NodeName, created: p.CreationTimestamp.Time}
				r.drivers[string(p.UID)] = seen
			}
			if err == nil && len(l) >= len(seen.log) {
				seen.log = l
			}
			start := !seen.following && driverRunning(&p)
			seen.following = seen.following || start
			r.mu.Unlock()
			if start {
				r.followers.Go(func() { r.follow(run, p.Namespace, p.Name, seen) })
			}
		}
	}
}

// driverRunning reports whether pod's driver container runs.
func driverRunning(pod *corev1.Pod) bool {
	for _, c := range pod.Status.ContainerStatuses {
		if c.Name == contract.DriverContainerName {
			return c.State.Running != nil
		}
	}
	return false
}

// follow streams the driver container's log of pod (the one seen) into seen.streamed until the
// container ends or ctx does.
func (r *sparkRun) follow(ctx context.Context, ns, pod string, seen *seenDriver) {
	stream, err := kube().CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: contract.DriverContainerName, Follow: true}).Stream(ctx)
	if err != nil {
		return
	}
	defer stream.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := stream.Read(buf)
		if n > 0 {
			r.mu.Lock()
			seen.streamed += string(buf[:n])
			r.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// waitFollowers waits at most d for every log stream to end.
func (r *sparkRun) waitFollowers(d time.Duration) {
	ended := make(chan struct{})
	go func() { r.followers.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(d):
	}
}

// driverLogs are the logs of the pods that ran the driver, oldest first.
func (r *sparkRun) driverLogs() []*seenDriver {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*seenDriver
	for _, d := range r.drivers {
		c := *d
		if len(c.streamed) > len(c.log) {
			c.log = c.streamed
		}
		out = append(out, &c)
	}
	slices.SortStableFunc(out, func(a, b *seenDriver) int { return a.created.Compare(b.created) })
	return out
}

func (r *sparkRun) logDrivers(t *testing.T) {
	for _, d := range r.driverLogs() {
		t.Logf("driver log of %s on %s:\n%s", d.pod, d.node, d.log)
	}
}

// phases are the driver pod phases spark-submit reported, in order, repeats dropped.
func (r *sparkRun) phases() []string {
	var out []string
	for _, m := range rePhase.FindAllStringSubmatch(r.out.String(), -1) {
		if len(out) == 0 || out[len(out)-1] != m[1] {
			out = append(out, m[1])
		}
	}
	return out
}

// exitCodes are the driver container exit codes spark-submit reported.
func (r *sparkRun) exitCodes() []string {
	var out []string
	for _, m := range reExitCode.FindAllStringSubmatch(r.out.String(), -1) {
		out = append(out, m[1])
	}
	return out
}

// result is the job's result line, from the driver that finished.
func (r *sparkRun) result(t *testing.T) string {
	t.Helper()
	var found []string
	for _, d := range r.driverLogs() {
		found = append(found, reResult.FindAllString(d.log, -1)...)
	}
	if len(found) != 1 {
		t.Errorf("want the job's result printed once, found %q", found)
		return ""
	}
	return found[0]
}

// expectOwnAppIDs checks that each incarnation's JVM ran with an app id of its own (ids, in order): the submitted
// id (the same for all) and a suffix of its own (wrap.IncarnationAppID). Spark names its event log
// by it, and a second log of one id is refused.
func expectOwnAppIDs(t *testing.T, ids []string) {
	t.Helper()
	submitted := map[string]bool{}
	for _, id := range ids {
		submitted[id[:max(0, strings.LastIndex(id, "-"))]] = true
	}
	if len(submitted) != 1 || len(ids) < 2 || slices.Contains(ids[1:], ids[0]) {
		t.Errorf("the driver JVMs ran with app ids %v: want the submitted id with a suffix of each incarnation's own", ids)
	}
}

// attempts are the app ids each driver JVM started with, in order.
func (r *sparkRun) attempts() []string {
	var out []string
	for _, d := range r.driverLogs() {
		for _, m := range reAttempt.FindAllStringSubmatch(d.log, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

func (r *sparkRun) expectSucceeded(t *testing.T) {
	t.Helper()
	if r.code != 0 {
		t.Errorf("spark-submit exited %d, want 0", r.code)
	}
	if p := r.phases(); len(p) == 0 || p[len(p)-1] != string(corev1.PodSucceeded) {
		t.Errorf("spark-submit's last phase: %v, want Succeeded", p)
	}
	if a := r.attempts(); len(a) == 0 {
		t.Errorf("no driver JVM started the job")
	}
	r.result(t)
}

// expectSameAs: what the user sees is the same as in the run without driverset.
func (r *sparkRun) expectSameAs(t *testing.T, plain *sparkRun) {
	t.Helper()
	if r.code != plain.code {
		t.Errorf("spark-submit exited %d; without driverset %d", r.code, plain.code)
	}
	if got, want := last(r.phases()), last(plain.phases()); got != want {
		t.Errorf("spark-submit's final phase %q; without driverset %q", got, want)
	}
	if got, want := last(r.exitCodes()), last(plain.exitCodes()); got != want {
		t.Errorf("spark-submit's final exit code %q; without driverset %q", got, want)
	}
	if got, want := r.result(t), plain.result(t); got != want {
		t.Errorf("the job printed %q; without driverset %q", got, want)
	}
}

// expectStableName: every executor was pointed at the driver's stable name and labelled with its
// StatefulSet by real Spark itself, from S-0's --conf, so that none needed driverset's executors
// webhook (the apiserver's audit log names every mutating webhook it called for a create), and
// executors registered with every driver that ran the job.
func (r *sparkRun) expectStableName(t *testing.T) {
	t.Helper()
	executors := r.expectExecutorsLabelled(t)
	f, err := os.Open(bed.cluster.AuditLogPath())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	creates, err := spark.PodCreates(f, spark.InNamespace(r.app.Namespace))
	if err != nil {
		t.Fatal(err)
	}
	for pod := range executors {
		called, ok := creates[pod]
		switch {
		case !ok:
			t.Errorf("executor %s: no create in the apiserver's audit log", pod)
		case slices.Contains(called, "executors.driverset.dev"):
			t.Errorf("executor %s: its create called driverset's executors webhook (webhooks called: %v); want none, as it is born labelled", pod, called)
		}
	}
	for _, d := range r.driverLogs() {
		if !reAttempt.MatchString(d.log) {
			continue // never started the job (killed while starting)
		}
		if n := len(reRegistered.FindAllString(d.log, -1)); n < 1 {
			t.Errorf("no executor registered with the driver in %s on %s", d.pod, d.node)
		}
	}
}

// expectExecutorsLabelled: every executor was pointed at the driver's stable name and labelled
// with its StatefulSet (S-0's --conf); it returns the executors seen.
func (r *sparkRun) expectExecutorsLabelled(t *testing.T) map[string]seenExecutor {
	t.Helper()
	host := r.names.DriverHost(r.app.Namespace)
	r.mu.Lock()
	executors := maps.Clone(r.executors)
	r.mu.Unlock()
	if len(executors) < sparkExecutors {
		t.Errorf("saw %d executor pods, want at least %d", len(executors), sparkExecutors)
	}
	for pod, e := range executors {
		if !strings.Contains(e.url, "@"+host+":") {
			t.Errorf("executor %s was given driver URL %q, want the stable name %s", pod, e.url, host)
		}
		if e.driver != r.names.StatefulSet {
			t.Errorf("executor %s has %s=%q, want %q: the driver did not label it as S-0's --conf says",
				pod, contract.LabelDriver, e.driver, r.names.StatefulSet)
		}
	}
	return executors
}

// killDriverNodeMidJob kills the driver's node once executors have registered and the job
// runs, then declares it out of service, as an admin would.
func killDriverNodeMidJob(t *testing.T, r *sparkRun) {
	t.Helper()
	waitDriverLog(t, r, reRegistered, sparkExecutors)
	// The job prints its attempt line only once its SparkContext is up, and on Kubernetes that
	// waits for most executors to register (spark.scheduler.minRegisteredResourcesRatio, 0.8):
	// the line comes after the registrations. Kill only once it has been read, or the count of
	// attempts in TestRealSpark loses the first one with its node.
	_, _, _ = killDriverNodeAfter(t, r, reAttempt, 1, reAttempt)
}

// killDriverNodeAfter kills the node of the driver once its log matches re n times, confirms the
// node dead with the out-of-service taint, and waits until a new driver has printed started. It
// returns when the node was killed and tainted, and the new driver.
func killDriverNodeAfter(t *testing.T, r *sparkRun, re *regexp.Regexp, n int, started *regexp.Regexp) (killed, tainted time.Time, second *seenDriver) {
	t.Helper()
	first := waitDriverLog(t, r, re, n)
	node := first.node
	if err := bed.cluster.KillNode(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	killed = time.Now()
	t.Cleanup(func() { reviveIfDead(t, node) })
	t.Logf("killed %s, the driver's node, with the job running", node)
	waitNodeUnknown(t, node)
	// The proof's moment is when the taint was asked for: whatever it sets off comes after.
	tainted = time.Now()
	if err := bed.cluster.TaintOutOfService(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	second = waitNewDriver(t, r, first, started)
	t.Logf("the driver runs again on %s, %s after the taint, %s after the kill", second.node,
		time.Since(tainted).Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	if second.node == node {
		t.Errorf("the new driver runs on the dead node %s", node)
	}
	if !r.Running() {
		t.Errorf("spark-submit returned while the driver was being recovered:\n%s", r.out.String())
	}
	return killed, tainted, second
}

// waitDriverLog waits until the running driver's log matches re n times, and returns it.
func waitDriverLog(t *testing.T, r *sparkRun, re *regexp.Regexp, n int) *seenDriver {
	t.Helper()
	var found *seenDriver
	waitFor(t, 4*time.Minute, fmt.Sprintf("%d matches of %q in the driver's log", n, re), func(context.Context) (bool, error) {
		if !r.Running() {
			return false, fmt.Errorf("spark-submit returned: %d\n%s", r.code, r.out.String())
		}
		for _, d := range r.driverLogs() {
			if len(re.FindAllString(d.log, -1)) >= n {
				found = d
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// waitNewDriver waits until a pod other than first runs the driver and has started the job (its
// log matches started).
func waitNewDriver(t *testing.T, r *sparkRun, first *seenDriver, started *regexp.Regexp) *seenDriver {
	t.Helper()
	var found *seenDriver
	waitFor(t, 4*time.Minute, "a new driver that started the job", func(context.Context) (bool, error) {
		for _, d := range r.driverLogs() {
			if d.created.After(first.created) && started.MatchString(d.log) {
				found = d
				found.startedSeen = time.Now()
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

func last(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}

// TestRealSparkDriverFailsThenCompletes: the driver JVM throws (an application error, not a node
// loss). Spark alone would end the app there (read in its source, not run here); with driverset
// the driver runs again in a new incarnation, with an app id of its own, and the job completes:
// spark-submit, still watching, ends Succeeded with the job's result. The driver has a claim that spark-submit made
// (claimName=OnDemand), which the first JVM's clean stop would delete by its app id label: the
// second incarnation must get it. The event log is on (rolling): before each incarnation had its
// own app id, the second one's SparkContext refused to start ("Target log directory already
// exists"), and so did every later one, until the app ended Failed.
func TestRealSparkDriverFailsThenCompletes(t *testing.T) {
	if len(bed.images.spark) == 0 {
		t.Skipf("no real Spark version chosen (%s=none)", sparkVersionsEnv)
	}
	d := bed.images.spark[len(bed.images.spark)-1]
	class := localVolume(t)
	const claim = "spark.kubernetes.driver.volumes.persistentVolumeClaim.data."
	events := newEventLogs(t, true)
	r := runSparkJob(t, d, sparkJob{resilient: true, failOnce: true, conf: events.with(map[string]string{
		claim + "options.claimName":    "OnDemand",
		claim + "options.storageClass": class,
		claim + "options.sizeLimit":    "1Gi",
		claim + "mount.path":           "/data",
	})}, nil)
	r.expectSucceeded(t)
	r.expectStableName(t)
	if a := r.attempts(); len(a) != 2 {
		t.Errorf("want 2 driver attempts (the failed one, then the one that completed), saw %v", a)
	}
	logs := r.driverLogs()
	if len(logs) != 2 || !strings.Contains(logs[0].log, "failing the first attempt") || reResult.MatchString(logs[0].log) {
		t.Errorf("want the first incarnation to have thrown and the second to have completed; saw %d incarnations", len(logs))
	}
	p, err := kube().CoreV1().Pods(r.app.Namespace).Get(context.Background(), r.app.Conf["spark.kubernetes.driver.pod.name"], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Annotations[contract.AnnotationRestarts]; got != "1" {
		t.Errorf("the placeholder counts %q restarts, want 1", got)
	}
	if a := r.attempts(); len(a) == 2 {
		expectOwnAppIDs(t, a)
		events.expect(t, d, a)
	}
	// Spark's driver Service, which clients and UI ingresses use: the clean stop of an incarnation
	// deletes the Services labelled with its app id, and no incarnation runs with the submitted one.
	svcs, err := kube().CoreV1().Services(r.app.Namespace).List(context.Background(), metav1.ListOptions{
		LabelSelector: contract.LabelSparkAppSelector + "=" + p.Labels[contract.LabelSparkAppSelector]})
	if err != nil {
		t.Fatal(err)
	}
	if len(svcs.Items) != 1 {
		t.Errorf("Spark's driver Service: %d Service(s) labelled with the submitted app id after both incarnations stopped, want it kept", len(svcs.Items))
	}
}

// localVolume makes a StorageClass with no provisioner and local PersistentVolumes of it on the
// real nodes (a folder of the host, which the nodes share), for one claim; it returns the class.
func localVolume(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("driverset-e2e-local-%d", time.Now().UnixNano()%100000)
	dir := filepath.Join(os.TempDir(), name)
	// The claim's access mode depends on the Spark version (4.1.1 asks ReadWriteOncePod, which
	// a volume cannot offer with another mode): one volume of each, the claim binds to its own.
	modes := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadWriteOncePod}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(dir, 0o777) // the spark user writes there
	// Registered first, so that a failure below leaves nothing behind.
	t.Cleanup(func() {
		for i := range modes {
			_ = kube().CoreV1().PersistentVolumes().Delete(context.Background(), fmt.Sprintf("%s-%d", name, i), metav1.DeleteOptions{})
		}
		_ = kube().StorageV1().StorageClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = os.RemoveAll(dir)
	})
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name},
		Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &wait}
	if _, err := kube().StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i, mode := range modes {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, i)},
			Spec: corev1.PersistentVolumeSpec{
				StorageClassName:       name,
				Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:            []corev1.PersistentVolumeAccessMode{mode},
				PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}},
				NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn,
						Values: bed.cluster.RealNodes()}},
				}}}},
			},
		}
		if _, err := kube().CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return name
}

// TestRealSparkKillAndStatus: `spark-submit --status` and `--kill`, by name and in their glob
// form, against a running app, with and without driverset. By name they act on the pod the user
// knows (the placeholder, whose status driverset keeps): the same answer, and the same end for
// the spark-submit that waits for the app. The glob form matches every spark-role=driver pod
// whose name starts with the prefix, so with driverset it also lists the pod that really runs
// the driver, `<name>-0` (docs/limits.md#known-limits); killing by glob ends the app all the same.
func TestRealSparkKillAndStatus(t *testing.T) {
	if len(bed.images.spark) == 0 {
		t.Skipf("no real Spark version chosen (%s=none)", sparkVersionsEnv)
	}
	d := bed.images.spark[0]
	type seen struct {
		status, glob string
		run          *sparkRun
	}
	try := func(resilient, byGlob bool) seen {
		var s seen
		// Long enough that the job is still running after three spark-submit JVMs have started
		// one after another (the two --status, then --kill): the kill must land mid-job.
		job := sparkJob{resilient: resilient, slices: 20 * sparkSlices}
		s.run = runSparkJob(t, d, job, func(t *testing.T, r *sparkRun) {
			waitDriverLog(t, r, reAttempt, 1)
			ns, pod := r.app.Namespace, r.app.Conf["spark.kubernetes.driver.pod.name"]
			s.status = r.operation(t, "--status", ns+":"+pod)
			s.glob = r.operation(t, "--status", ns+":"+strings.TrimSuffix(pod, "driver")+"*")
			target := ns + ":" + pod
			if byGlob {
				target = ns + ":" + strings.TrimSuffix(pod, "driver") + "*"
			}
			r.operation(t, "--kill", target)
		})
		waitFor(t, 2*time.Minute, "no pod of the app left", func(ctx context.Context) (bool, error) {
			pods, err := kube().CoreV1().Pods(s.run.app.Namespace).List(ctx, metav1.ListOptions{})
			return err == nil && len(pods.Items) == 0, err
		})
		return s
	}
	plain := try(false, false)
	with := try(true, false)
	withGlob := try(true, true)

	for _, c := range []struct {
		name string
		s    seen
	}{{"without driverset", plain}, {"with driverset", with}, {"with driverset, killed by glob", withGlob}} {
		t.Logf("%s: --status by name: %d application(s), phases %v; by glob: %d; the waiting spark-submit: exit %d, phases %v",
			c.name, statuses(c.s.status), rePhase.FindAllString(c.s.status, -1), statuses(c.s.glob), c.s.run.code, c.s.run.phases())
		if statuses(c.s.status) != 1 || !strings.Contains(c.s.status, "phase: Running") {
			t.Errorf("%s: --status by name answered %q, want one driver, Running", c.name, c.s.status)
		}
		if c.s.run.code != plain.run.code {
			t.Errorf("%s: the waiting spark-submit exited %d; without driverset %d", c.name, c.s.run.code, plain.run.code)
		}
		if reResult.MatchString(strings.Join(c.s.run.logsText(), "\n")) {
			t.Errorf("%s: the killed job still printed its result", c.name)
		}
		if last(c.s.run.phases()) == string(corev1.PodSucceeded) {
			t.Errorf("%s: spark-submit saw the killed app Succeeded", c.name)
		}
	}
	if n := statuses(plain.glob); n != 1 {
		t.Errorf("without driverset the glob --status listed %d applications, want 1", n)
	}
	if n := statuses(with.glob); n != 2 {
		t.Errorf("with driverset the glob --status listed %d pods, want 2 (the placeholder and <name>-0), as docs/limits.md says", n)
	}
	for _, ns := range []string{with.run.app.Namespace, withGlob.run.app.Namespace} {
		sts, err := kube().AppsV1().StatefulSets(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil || len(sts.Items) != 0 {
			t.Errorf("after --kill, %s still has StatefulSets %v (%v)", ns, sts, err)
		}
	}
}

// operation runs spark-submit --kill or --status for r's cluster and returns its output.
func (r *sparkRun) operation(t *testing.T, op, submissionID string) string {
	t.Helper()
	var out spark.SyncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code, err := spark.SparkSubmit(ctx, r.app.Dist, userKubeconfig(t, r.app.Namespace), &out,
		"--master", "k8s://"+r.app.Master, op, submissionID)
	if err != nil || code != 0 {
		t.Fatalf("spark-submit %s %s: exit %d, %v\n%s", op, submissionID, code, err, out.String())
	}
	t.Logf("spark-submit %s %s:\n%s", op, submissionID, out.String())
	return out.String()
}

// statuses is how many applications a --status answer lists (Spark's K8sSubmitOps prints
// one "Application status (driver):" block per driver pod).
func statuses(out string) int { return strings.Count(out, "Application status (driver):") }

// logsText are the driver logs seen, oldest first.
func (r *sparkRun) logsText() []string {
	var out []string
	for _, d := range r.driverLogs() {
		out = append(out, d.log)
	}
	return out
}

// TestRealPySpark: a PySpark driver (spark-submit of a .py file: the driver container runs
// `driver` with Spark's PythonRunner) is taken over like any other, and its job runs on Python
// workers in executors that found the driver at the stable name. The result is checked against
// the same slices computed by the host's python3 without Spark, and the driver says which
// PySpark and which Spark JVM it ran: both the version under test.
func TestRealPySpark(t *testing.T) {
	var dists []spark.Dist
	for _, d := range bed.images.spark {
		if d.Python != "" {
			dists = append(dists, d)
		}
	}
	if len(dists) == 0 {
		t.Skipf("no chosen Spark version has PySpark (%s, PYSPARK_VERSIONS)", sparkVersionsEnv)
	}
	want := pythonPi(t)
	for _, d := range dists {
		t.Run(d.Version, func(t *testing.T) {
			r := runSparkJob(t, d, sparkJob{resilient: true, python: true}, nil)
			r.expectSucceeded(t)
			r.expectStableName(t)
			if got := r.result(t); got != want {
				t.Errorf("the PySpark job printed %q; python3 alone computes %q", got, want)
			}
			if got, want := r.pythonVersions(), fmt.Sprintf("driverset-pi: PySpark %s on Spark %s", d.Version, d.Version); got != want {
				t.Errorf("the driver ran %q, want %q", got, want)
			}
			converted := false
			for _, dr := range r.driverLogs() {
				converted = converted || dr.pod == r.names.DriverPodName()
			}
			if !converted {
				t.Errorf("the driver did not run in %s: not converted", r.names.DriverPodName())
			}
		})
	}
}

// pythonVersions is the PySpark job's line naming its Python side's and its JVM's versions, from
// the first driver that printed it.
func (r *sparkRun) pythonVersions() string {
	for _, d := range r.driverLogs() {
		if m := rePyVersions.FindString(d.log); m != "" {
			return m
		}
	}
	return ""
}

// pythonPi is the PySpark job's result line, computed by the host's python3 from the job's own
// slice function.
func pythonPi(t *testing.T) string {
	t.Helper()
	root, err := harness.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`import sys; sys.path.insert(0, %q); import driverset_pi as j
n = %d
print("driverset-pi: pi is roughly %%.6f (%%d slices)" %% (4.0 * sum(j.slice_hits(i, 0) for i in range(n)) / (n * j.DARTS), n))`,
		filepath.Join(root, "e2e", "spark", "job"), sparkSlices)
	out, err := exec.Command("python3", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}
