//go:build testbed

package realnode

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/testbed"
	"github.com/driverset/driverset/wrap"
)

// The kubelet stops a driver for its node's sake in two ways, both without deleting the pod:
// graceful node shutdown (spot and preemptible VMs, upgrades) and node-pressure eviction. Each
// leaves S-0 Failed with a DisruptionTarget condition. Each is a node loss, not the application's
// failure: an app with max-restarts 0 survives it, on another node, and is not counted.

// Graceful node shutdown, as a real node's kubelet does it. Regular pods get 15 s.
const (
	shutdownGracePeriod      = 20 * time.Second
	shutdownGraceCriticalPod = 5 * time.Second
)

// TestGracefulNodeShutdownIsANodeLossNotAFailure: the driver's node announces its shutdown
// (logind's PrepareForShutdown, from the node's fake logind); its real kubelet stops S-0 with the
// shutdown grace period, wrap forwards the SIGTERM and records the driver's 143, and the kubelet
// marks the pod Failed with a DisruptionTarget condition. driverset recovers the driver on
// another node without counting a restart, so an app allowed no restart runs on and ends
// Succeeded in spark-submit's watch.
func TestGracefulNodeShutdownIsANodeLossNotAFailure(t *testing.T) {
	ns := namespace(t, nil)
	// The node is set up for graceful shutdown before the driver comes, as a node is at boot: a
	// kubelet restarted under a running pod admits it again a moment later, and one that is
	// shutting down by then rejects it instead (reason NodeShutdown, no DisruptionTarget).
	node := quietestRealNode(t)
	logind, err := bed.cluster.StartLogind(node, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		restoreKubelet(t, node)
		if err := logind.Close(); err != nil {
			t.Errorf("stopping %s's bus: %v", node, err)
		}
	})
	if err := bed.cluster.RestartKubelet(context.Background(), node, testbed.KubeletSettings{
		ShutdownGracePeriod: shutdownGracePeriod, ShutdownGracePeriodCriticalPods: shutdownGraceCriticalPod,
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the kubelet of "+node+" holding a delay inhibitor lock", func(context.Context) (bool, error) {
		for _, i := range logind.Inhibitors() {
			if i.Who == "kubelet" && i.What == "shutdown" && i.Mode == "delay" {
				return true, nil
			}
		}
		return false, nil
	})

	s := submit(t, simApp(ns, "shutdown", 0), func(p *corev1.Pod) {
		noRestarts(p)
		prefer(p, node)
	})
	first := runningDriver(t, s, "", 3*time.Minute)
	if first.Spec.NodeName != node {
		t.Fatalf("S-0 runs on %s although it prefers %s", first.Spec.NodeName, node)
	}
	waitLog(t, ns, first.Name, "simspark: driver started", 1, time.Minute)

	seen := watchIncarnation(t, first)
	seen.followLog(t, first)
	if err := logind.PrepareForShutdown(true); err != nil {
		t.Fatal(err)
	}
	announced := time.Now()
	stopped := seen.terminal(t, shutdownGracePeriod+time.Minute)
	t.Logf("S-0 %s %s after the announcement: %s", first.UID, time.Since(announced).Round(time.Millisecond), describeStop(stopped))
	wantStoppedByKubelet(t, seen, stopped, "Terminated", "node shutdown")

	second := runningDriver(t, s, string(first.UID), 3*time.Minute)
	t.Logf("recovered on %s %s after the announcement", second.Spec.NodeName, time.Since(announced).Round(time.Millisecond))
	if second.Spec.NodeName == node {
		t.Errorf("the new driver runs on %s, the node that is shutting down", node)
	}
	// The kubelet reports its node NotReady (shutting down) before the pod's stop reaches the
	// apiserver: driverset first records the loss as an unreachable node, then, once the kubelet
	// reports the pod Failed for the shutdown, as what it is.
	notCountedThenSucceeded(t, s, second, "node-shutdown")
}

// TestNodePressureEvictionIsANodeLossNotAFailure: the driver's node runs short of memory, as its
// kubelet measures it (a soft memory.available threshold at the node's whole capacity, so that
// it holds at once; soft, so that the node is tainted memory-pressure before the first eviction,
// and the node's allocatable stays as it was). The real eviction manager evicts S-0 (Failed,
// reason Evicted, DisruptionTarget). driverset recovers the driver on another node without
// counting a restart; the app allowed no restart ends Succeeded.
func TestNodePressureEvictionIsANodeLossNotAFailure(t *testing.T) {
	ns := namespace(t, nil)
	// Not beside driverset's leader: the kubelet evicts more than the driver, and a leader evicted
	// with it hands the recovery to the next one, which tells it as DriverRunning, not Recovered.
	away := nodeWithoutDriverset(t)
	s := submit(t, simApp(ns, "pressure", 0), func(p *corev1.Pod) {
		noRestarts(p)
		prefer(p, away)
		// Under memory pressure the kubelet evicts first the pods using more memory than they
		// request: a driver requesting little goes before any other pod on the node.
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("8Mi")
	})
	first := runningDriver(t, s, "", 3*time.Minute)
	node := first.Spec.NodeName
	waitLog(t, ns, first.Name, "simspark: driver started", 1, time.Minute)
	// The kubelet restarts under the running driver and admits it again at once: under memory
	// pressure it refuses only BestEffort pods, and it evicts only after the soft grace period.
	seen := watchIncarnation(t, first)
	restore := underMemoryPressure(t, node)
	pressured := time.Now()
	waitFor(t, time.Minute, "node "+node+" tainted memory-pressure", func(ctx context.Context) (bool, error) {
		n, err := kube().CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, taint := range n.Spec.Taints {
			if taint.Key == corev1.TaintNodeMemoryPressure {
				return true, nil
			}
		}
		return false, nil
	})
	// Followed from the restarted kubelet, which serves the log until the driver's end.
	seen.followLog(t, first)
	stopped := seen.terminal(t, 2*time.Minute)
	t.Logf("S-0 %s %s after the threshold: %s", first.UID, time.Since(pressured).Round(time.Millisecond), describeStop(stopped))
	wantStoppedByKubelet(t, seen, stopped, "Evicted", "memory")

	second := runningDriver(t, s, string(first.UID), 3*time.Minute)
	t.Logf("recovered on %s %s after the threshold", second.Spec.NodeName, time.Since(pressured).Round(time.Millisecond))
	if second.Spec.NodeName == node {
		t.Errorf("the new driver runs on %s, the node under memory pressure", node)
	}
	// The node need not evict anything else.
	restore()
	notCountedThenSucceeded(t, s, second, "evicted")
}

// underMemoryPressure restarts node's kubelet with a soft memory.available threshold at the
// node's whole capacity, so that it holds at once (soft: the node is tainted memory-pressure
// before the first eviction, 15 s later, and its allocatable stays as it was), and returns the
// function that gives the kubelet the test bed's configuration again; the test's end calls it
// too, if nothing did before.
func underMemoryPressure(t *testing.T, node string) (restore func()) {
	t.Helper()
	n, err := kube().CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	capacity := n.Status.Capacity[corev1.ResourceMemory]
	restored := false
	restore = func() {
		if !restored {
			restored = true
			restoreKubelet(t, node)
		}
	}
	t.Cleanup(restore)
	if err := bed.cluster.RestartKubelet(context.Background(), node, testbed.KubeletSettings{
		EvictionSoft:            map[string]string{"memory.available": capacity.String()},
		EvictionSoftGracePeriod: 15 * time.Second, EvictionMaxPodGracePeriodSeconds: 10,
	}); err != nil {
		t.Fatal(err)
	}
	return restore
}

// prefer makes the driver prefer node (what a pod template's node affinity would do); it may
// still run elsewhere when node cannot take it.
func prefer(p *corev1.Pod, node string) {
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
			Weight: 100,
			Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node},
			}}},
		}},
	}}
}

// nodeWithoutDriverset is a real node that runs no replica of driverset (there are two, on three
// real nodes), or the quietest one when each runs one.
func nodeWithoutDriverset(t *testing.T) string {
	t.Helper()
	pods, err := kube().CoreV1().Pods(driversetNamespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range bed.cluster.RealNodes() {
		if !slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return p.Spec.NodeName == n }) {
			return n
		}
	}
	return quietestRealNode(t)
}

// quietestRealNode is the real node running the fewest pods (of driverset's replicas, of
// other scenarios), so that stopping it disturbs as little as possible.
func quietestRealNode(t *testing.T) string {
	t.Helper()
	pods, err := kube().CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			count[p.Spec.NodeName]++
		}
	}
	nodes := bed.cluster.RealNodes()
	best := nodes[0]
	for _, n := range nodes {
		if count[n] < count[best] {
			best = n
		}
	}
	return best
}

// noRestarts allows the app no restart: a stop counted as a failure ends it Failed.
func noRestarts(p *corev1.Pod) {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[contract.AnnotationMaxRestarts] = "0"
}

// restoreKubelet gives node's kubelet the test bed's configuration again and waits until the
// node takes pods.
func restoreKubelet(t *testing.T, node string) {
	t.Helper()
	ctx := context.Background()
	if err := bed.cluster.RestartKubelet(ctx, node, testbed.KubeletSettings{}); err != nil {
		t.Errorf("restoring %s's kubelet: %v", node, err)
		return
	}
	waitFor(t, 2*time.Minute, "node "+node+" schedulable again", func(ctx context.Context) (bool, error) {
		n, err := kube().CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, taint := range n.Spec.Taints {
			if taint.Key == corev1.TaintNodeMemoryPressure {
				return false, nil
			}
		}
		return testbed.NodeSchedulable(n), nil
	})
}

// incarnation records every version of one incarnation of S-0 the apiserver shows (the kubelet
// marks it Failed, and the StatefulSet controller deletes it soon after) and, once followed, its
// driver container's log.
type incarnation struct {
	uid      string
	mu       sync.Mutex
	versions []*corev1.Pod
	log      strings.Builder
	logEnded chan struct{} // closed when the followed log stream ends; nil when not followed
}

func watchIncarnation(t *testing.T, pod *corev1.Pod) *incarnation {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := kube().CoreV1().Pods(pod.Namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", pod.Name).String(), ResourceVersion: pod.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	in := &incarnation{uid: string(pod.UID)}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Error || string(p.UID) != in.uid {
				continue
			}
			in.mu.Lock()
			in.versions = append(in.versions, p.DeepCopy())
			in.mu.Unlock()
		}
	}()
	return in
}

// followLog follows the driver container's log of pod through the apiserver and the kubelet,
// from its start until the stream ends (the container's end, or its kubelet going away).
func (in *incarnation) followLog(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// A kubelet just restarted answers "not found" until it has the container again. Each new
	// answer is logged, so a wait that times out says what the kubelet kept answering.
	var r io.ReadCloser
	var said string
	waitFor(t, 30*time.Second, "the log of "+pod.Name+" to follow", func(context.Context) (bool, error) {
		var err error
		r, err = kube().CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{
			Container: contract.DriverContainerName, Follow: true,
		}).Stream(ctx)
		if err != nil && err.Error() != said {
			said = err.Error()
			t.Logf("following the log of %s: %v; trying again", pod.Name, err)
		}
		return err == nil, nil
	})
	in.logEnded = make(chan struct{})
	go func() {
		defer close(in.logEnded)
		defer r.Close()
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			in.mu.Lock()
			in.log.Write(buf[:n])
			in.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
}

// loggedExit returns the exit code that wrap logged in the followed log (wrap.LoggedExit), once
// the stream has ended.
func (in *incarnation) loggedExit() (code int, ok bool) {
	if in.logEnded == nil {
		return 0, false
	}
	select {
	case <-in.logEnded:
	default:
		return 0, false
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return wrap.LoggedExit(in.log.String())
}

// seen returns the versions recorded so far.
func (in *incarnation) seen() []*corev1.Pod {
	in.mu.Lock()
	defer in.mu.Unlock()
	return slices.Clone(in.versions)
}

// terminal waits for the incarnation's first version in a terminal phase.
func (in *incarnation) terminal(t *testing.T, timeout time.Duration) *corev1.Pod {
	t.Helper()
	var p *corev1.Pod
	waitFor(t, timeout, "incarnation "+in.uid+" of S-0 terminal", func(context.Context) (bool, error) {
		for _, v := range in.seen() {
			if v.Status.Phase == corev1.PodFailed || v.Status.Phase == corev1.PodSucceeded {
				p = v
				return true, nil
			}
		}
		return false, nil
	})
	return p
}

// driverExited waits until a version of the incarnation shows the driver's exit as wrap recorded
// it (its termination message), or the followed log has ended with wrap's line on it, and returns
// its code. The first terminal version need not show it: the kubelet may write the phase before
// the container's end, with the container still running or unknown to it. Nor need any later
// one: when the StatefulSet controller deletes the Failed pod first, the kubelet may find the
// container gone and write only "could not be located when the pod was deleted" (137,
// ContainerStatusUnknown), and the pod is gone before anything else; the log then still says
// how the driver ended.
func (in *incarnation) driverExited(t *testing.T, timeout time.Duration) int {
	t.Helper()
	var code int
	waitFor(t, timeout, "the driver's exit in incarnation "+in.uid, func(context.Context) (bool, error) {
		for _, v := range in.seen() {
			for _, cs := range v.Status.ContainerStatuses {
				if st := cs.State.Terminated; cs.Name == contract.DriverContainerName && st != nil {
					if c, ok := wrap.ParseTerminationMessage(st.Message); ok {
						code = c
						return true, nil
					}
				}
			}
		}
		c, ok := in.loggedExit()
		if ok {
			t.Logf("no version of incarnation %s shows the driver's exit; its log does", in.uid)
			code = c
		}
		return ok, nil
	})
	return code
}

// wantStoppedByKubelet checks what the kubelet wrote on the pod it stopped: phase Failed with
// reason, a DisruptionTarget condition by the kubelet whose message mentions about, and the
// driver's exit as wrap recorded it after the SIGTERM (143: the driver stopped within its grace
// period, not killed).
func wantStoppedByKubelet(t *testing.T, in *incarnation, p *corev1.Pod, reason, about string) {
	t.Helper()
	if p.Status.Phase != corev1.PodFailed || p.Status.Reason != reason {
		t.Errorf("S-0 phase %s reason %q, want Failed, %q", p.Status.Phase, p.Status.Reason, reason)
	}
	var disruption *corev1.PodCondition
	for i := range p.Status.Conditions {
		if c := p.Status.Conditions[i]; c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			disruption = &p.Status.Conditions[i]
		}
	}
	if disruption == nil || disruption.Reason != corev1.PodReasonTerminationByKubelet || !strings.Contains(disruption.Message, about) {
		t.Errorf("S-0 DisruptionTarget condition %+v, want True by %s about %q", disruption, corev1.PodReasonTerminationByKubelet, about)
	}
	if code := in.driverExited(t, 30*time.Second); code != 143 {
		t.Errorf("driver container exit %d, want 143: SIGTERM forwarded by wrap", code)
	}
}

func describeStop(p *corev1.Pod) string {
	var b strings.Builder
	b.WriteString("phase " + string(p.Status.Phase) + ", reason " + p.Status.Reason + ", message " + p.Status.Message)
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget {
			// Its time is logged: driverset takes an exit finished before it for the driver's own.
			b.WriteString("; DisruptionTarget " + string(c.Status) + " " + c.Reason + " at " + c.LastTransitionTime.UTC().Format(time.RFC3339) + ": " + c.Message)
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		fmt.Fprintf(&b, "; container %s state %s, last state %s", cs.Name, containerState(cs.State), containerState(cs.LastTerminationState))
	}
	return b.String()
}

func containerState(s corev1.ContainerState) string {
	switch {
	case s.Terminated != nil:
		return fmt.Sprintf("terminated %d %s at %s %q", s.Terminated.ExitCode, s.Terminated.Reason,
			s.Terminated.FinishedAt.UTC().Format(time.RFC3339), strings.TrimSpace(s.Terminated.Message))
	case s.Running != nil:
		return "running"
	case s.Waiting != nil:
		return "waiting " + s.Waiting.Reason
	}
	return "none"
}

// notCountedThenSucceeded: after the recovery the placeholder shows no restart and a recovery
// for one of causes; the app, ended by its driver with 0, is Succeeded in spark-submit's watch, which
// never saw it Failed on the way.
func notCountedThenSucceeded(t *testing.T, s *submission, second *corev1.Pod, causes ...string) {
	t.Helper()
	ctx := context.Background()
	p, err := kube().CoreV1().Pods(s.app.Namespace).Get(ctx, s.plan.DriverPodName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := p.Annotations[contract.AnnotationRestarts]; n != "" && n != "0" {
		t.Errorf("restarts recorded on the placeholder = %q, want none: the kubelet's stop is no failure", n)
	}
	// driverset's Events are written after its decision, asynchronously: the new driver can be
	// seen running before its Recovered Event is stored. Wait for it, then read it once more so
	// that a second one written meanwhile is seen too.
	var msgs []string
	recovered := func(ctx context.Context) (bool, error) {
		evs, err := kube().CoreV1().Events(s.app.Namespace).List(ctx, metav1.ListOptions{
			FieldSelector: fields.Set{"involvedObject.name": s.plan.DriverPodName, "reason": "Recovered"}.String(),
		})
		if err != nil {
			return false, err
		}
		msgs = nil
		for _, e := range evs.Items {
			msgs = append(msgs, e.Message)
		}
		return len(msgs) > 0, nil
	}
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, recovered)
	if _, err := recovered(ctx); err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || !slices.ContainsFunc(causes, func(c string) bool { return strings.Contains(msgs[0], "("+c+")") }) {
		t.Errorf("Recovered events on the placeholder %q, want one, for %v", msgs, causes)
	} else {
		t.Logf("recovery recorded: %s", msgs[0])
	}
	waitLog(t, s.app.Namespace, second.Name, "simspark: driver started", 1, time.Minute)
	s.end(t, "0")
	res := s.Wait(t, 2*time.Minute)
	if res.FinalPhase != corev1.PodSucceeded {
		t.Errorf("spark-submit saw %s (phases %v), want Succeeded", res.FinalPhase, res.Phases)
	}
	for _, ph := range res.Phases[:max(len(res.Phases)-1, 0)] {
		if ph == corev1.PodFailed {
			t.Errorf("spark-submit saw the app Failed on its way: phases %v", res.Phases)
		}
	}
}
