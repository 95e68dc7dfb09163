//go:build testbed

package realnode

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/spark"
)

// Lines of a stale executor's log: "Connecting to driver" is printed once the driver has answered
// its first RPC (the driver's settings, RetrieveSparkAppConfig); the SASL client's frames are in
// the stack trace of a handshake the driver refused.
var ( //nolint:gochecknoglobals // constant patterns
	reConnectingToDriver = regexp.MustCompile(`Connecting to driver: spark://`)
	reSASL               = regexp.MustCompile(`(?i)sasl`)
)

// staleSlices keeps the next incarnation's job running while the stale executor starts and meets
// it: 200 one-second slices over two executors.
const staleSlices = 200

// TestRealSparkStaleExecutorFencedFromTheNextDriver (issue 34, "never two drivers"): an executor
// of a lost incarnation that outlives its driver (on a node cut off with it) still names the
// driver's stable host and port, which name the next incarnation after a heal. wrap turns on
// Spark's RPC authentication, and each driver JVM on Kubernetes makes a secret of its own that
// only its executors get: such a stale executor must fail the handshake with the next driver.
//
// Real Spark (each version chosen): a batch job whose first driver throws (fail-once), so driverset starts the
// next incarnation. An executor pod of the first incarnation is recorded as Spark made it; once
// the next driver runs the job, the stale executor is started again from that record: the same
// image, arguments and environment (the old driver's URL at the stable name, the old app id and
// executor id, the old secret), in a pod with no label, which no gate holds. The next driver must
// refuse it: its log shows the refused SASL handshake, the driver never answers it (no
// "Connecting to driver") and never registers it. The same app with spark.authenticate=false
// (the opt-out) is the control: there the next driver answers the stale executor, which is what
// the fence prevents. make e2e-spark-alloc only.
func TestRealSparkStaleExecutorFencedFromTheNextDriver(t *testing.T) {
	eachSparkAllocVersion(t, staleExecutorFenced)
}

func staleExecutorFenced(t *testing.T, d spark.Dist) {
	t.Run("fenced", func(t *testing.T) {
		stale := staleExecutorMeetsTheNextDriver(t, d, nil)
		if stale.answered {
			t.Errorf("the next driver answered the stale executor (%q in its log)", reConnectingToDriver)
		}
		if stale.registered != "" {
			t.Errorf("the next driver registered the stale executor: %s", stale.registered)
		}
		if !stale.ended {
			t.Errorf("the stale executor still runs")
		}
		if !reSASL.MatchString(stale.log) {
			t.Errorf("the stale executor's log shows no refused SASL handshake")
		}
	})
	t.Run("opted-out", func(t *testing.T) {
		stale := staleExecutorMeetsTheNextDriver(t, d, map[string]string{"spark.authenticate": "false"})
		if !stale.answered {
			t.Errorf("without the fence the next driver did not answer the stale executor: the control shows nothing")
		}
	})
}

// staleOutcome is what became of a stale executor started beside the next incarnation.
type staleOutcome struct {
	answered   bool   // the next driver answered its first RPC
	registered string // the next driver's "Registered executor" line for its address
	ended      bool   // its JVM exited
	log        string
}

// staleExecutorMeetsTheNextDriver runs the fail-once job with conf, starts the first
// incarnation's executor again beside the second driver, and reports what became of it.
func staleExecutorMeetsTheNextDriver(t *testing.T, d spark.Dist, conf map[string]string) staleOutcome {
	ns := namespace(t, nil)
	rec := recordExecutors(t, ns)
	var out staleOutcome
	r := runSparkJob(t, d, sparkJob{resilient: true, failOnce: true, slices: staleSlices, namespace: ns, conf: conf}, func(t *testing.T, r *sparkRun) {
		first := waitDriverLog(t, r, reAttempt, 1)
		second := waitNewDriver(t, r, first, reAttempt)
		firstID := reAttempt.FindStringSubmatch(first.log)[1]
		old := rec.of(firstID)
		if old == nil {
			t.Fatalf("no executor pod of the first incarnation (app id %s) was seen", firstID)
		}
		t.Logf("the next driver runs the job on %s; starting %s of app id %s again", second.node, old.Name, firstID)
		out = runStale(t, r, second, old)
	})
	rec.stop()
	r.expectSucceeded(t)
	t.Logf("the stale executor: answered %v, registered %q, ended %v; its log, stack frames left out:\n%s", out.answered, out.registered, out.ended, tail(withoutFrames(out.log), 40))
	return out
}

// runStale starts old's container again in a pod of its own (no label: no gate, no Spark
// selector holds it) and waits until its JVM exits or the next driver answered it; it reads the
// next driver's log for a registration from the pod's address.
func runStale(t *testing.T, r *sparkRun, next *seenDriver, old *corev1.Pod) staleOutcome {
	t.Helper()
	ctx := context.Background()
	c := old.Spec.Containers[0]
	keep := map[string]bool{}
	var volumes []corev1.Volume
	for _, v := range old.Spec.Volumes {
		// Only the scratch space: what Spark's ConfigMaps held went with the old driver pod.
		if v.EmptyDir != nil {
			keep[v.Name] = true
			volumes = append(volumes, v)
		}
	}
	var mounts []corev1.VolumeMount
	for _, m := range c.VolumeMounts {
		if keep[m.Name] {
			mounts = append(mounts, m)
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "stale-executor", Namespace: old.Namespace},
		Spec: corev1.PodSpec{
			RestartPolicy:      corev1.RestartPolicyNever,
			ServiceAccountName: old.Spec.ServiceAccountName,
			SecurityContext:    old.Spec.SecurityContext,
			Volumes:            volumes,
			Containers: []corev1.Container{{
				Name: "executor", Image: c.Image, ImagePullPolicy: c.ImagePullPolicy,
				Command: c.Command, Args: c.Args, Env: c.Env, WorkingDir: c.WorkingDir,
				SecurityContext: c.SecurityContext, Resources: c.Resources, VolumeMounts: mounts,
			}},
		},
	}
	if _, err := kube().CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = kube().CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{})
	}()
	var out staleOutcome
	var ip string
	waitFor(t, 3*time.Minute, "the stale executor to exit or be answered", func(ctx context.Context) (bool, error) {
		p, err := kube().CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ip = p.Status.PodIP
		if raw, err := kube().CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx); err == nil {
			out.log = string(raw)
		}
		out.ended = p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
		out.answered = reConnectingToDriver.MatchString(out.log)
		return out.ended || out.answered, nil
	})
	if out.answered {
		// Give the driver the moment to register it, or refuse the executor id it already has.
		time.Sleep(5 * time.Second)
	}
	for _, dl := range r.driverLogs() {
		if dl.pod != next.pod || !dl.created.Equal(next.created) {
			continue
		}
		for _, m := range reRegisteredFrom.FindAllStringSubmatch(dl.log, -1) {
			if ip != "" && m[1] == ip {
				out.registered = m[0]
			}
		}
		for _, line := range strings.Split(withoutFrames(dl.log), "\n") {
			if reSASL.MatchString(line) || (ip != "" && strings.Contains(line, ip)) {
				t.Logf("the next driver's log: %s", line)
			}
		}
	}
	return out
}

// executorRecord keeps the first version seen of every executor pod of a namespace, as Spark
// made it (its spec holds what the executor was given), by app id.
type executorRecord struct {
	mu   sync.Mutex
	pods map[string]*corev1.Pod // by app id: the first executor pod seen
	done chan struct{}
	wg   sync.WaitGroup
}

func recordExecutors(t *testing.T, ns string) *executorRecord {
	t.Helper()
	rec := &executorRecord{pods: map[string]*corev1.Pod{}, done: make(chan struct{})}
	rec.wg.Go(func() {
		for {
			pods, err := kube().CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{
				LabelSelector: contract.LabelSparkRole + "=" + contract.RoleExecutor})
			if err == nil {
				rec.mu.Lock()
				for i := range pods.Items {
					p := &pods.Items[i]
					if id := p.Labels[contract.LabelSparkAppSelector]; id != "" && rec.pods[id] == nil {
						rec.pods[id] = p
					}
				}
				rec.mu.Unlock()
			}
			select {
			case <-rec.done:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	})
	t.Cleanup(rec.stop)
	return rec
}

func (rec *executorRecord) of(appID string) *corev1.Pod {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.pods[appID]
}

func (rec *executorRecord) stop() {
	select {
	case <-rec.done:
	default:
		close(rec.done)
	}
	rec.wg.Wait()
}

// withoutFrames is log without the lines of Java stack frames.
func withoutFrames(log string) string {
	var kept []string
	for _, line := range strings.Split(log, "\n") {
		if t := strings.TrimSpace(line); !strings.HasPrefix(t, "at ") && !strings.HasPrefix(t, "... ") {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "\n")
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
