//go:build testbed

package realnode

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/testbed"
	"github.com/driverset/driverset/inspect/cli"
	"github.com/driverset/driverset/wrap"
)

// customTerminationPath is a driver container's own terminationMessagePath.
const customTerminationPath = "/tmp/driver-termination-log"

// TestDriverLifecycleInARestrictedNamespace: in a Pod Security "restricted" namespace an opted-in
// driver runs in S-0 on a real node, with driverset's init container and `driverset wrap` as the
// container's PID 1; its exit 1 is recorded through a custom terminationMessagePath, the
// leftover process it forked is killed and reaped, driverset starts a new incarnation, and its
// exit 0 ends the app as Succeeded for spark-submit.
func TestDriverLifecycleInARestrictedNamespace(t *testing.T) {
	ns := namespace(t, map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	a := simApp(ns, "lifecycle", 0)
	a.Conf[confOrphan] = "true"
	s := submit(t, a, func(p *corev1.Pod) {
		restricted(p)
		p.Spec.Containers[0].TerminationMessagePath = customTerminationPath
	})

	first := runningDriver(t, s, "", 3*time.Minute)
	if !bed.cluster.IsRealNode(first.Spec.NodeName) {
		t.Fatalf("S-0 runs on %s, not a real node", first.Spec.NodeName)
	}
	if got := first.Spec.InitContainers; len(got) == 0 || got[0].Name != "driverset-install" {
		t.Fatalf("S-0's init containers = %v, want driverset's first", got)
	}
	for _, ic := range first.Status.InitContainerStatuses {
		if ic.State.Terminated == nil || ic.State.Terminated.ExitCode != 0 {
			t.Errorf("init container %s did not complete: %+v", ic.Name, ic.State)
		}
	}
	started := waitLog(t, ns, first.Name, "simspark: driver started", 1, time.Minute)
	if want := "pod " + first.Name; !strings.Contains(started[0], want) {
		t.Errorf("the driver did not find its own pod: %q lacks %q", started[0], want)
	}
	if want := s.names.DriverHost(ns); !strings.Contains(started[0], want) {
		t.Errorf("the driver was not given its stable host: %q lacks %q", started[0], want)
	}

	// wrap is the container's PID 1, and the driver and its orphan run under it.
	wraps := processes(t, first.Spec.NodeName, argvWrap...)
	if len(wraps) != 1 || wraps[0].InnerPID != 1 {
		t.Fatalf("want one `driverset wrap` as PID 1 of its container on %s, got %+v; all: %+v", first.Spec.NodeName, wraps, processes(t, first.Spec.NodeName))
	}
	waitFor(t, 30*time.Second, "the driver's forked orphan running", func(context.Context) (bool, error) {
		return len(processes(t, first.Spec.NodeName, argvOrphan...)) == 1, nil
	})

	// Exit 1: recorded where the container says, the orphan is gone, no zombie is left.
	s.end(t, "1")
	var exited *corev1.ContainerStateTerminated
	waitFor(t, time.Minute, "the first incarnation's exit 1 recorded", func(ctx context.Context) (bool, error) {
		p, err := kube().CoreV1().Pods(ns).Get(ctx, first.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil || p.UID != first.UID {
			return false, err
		}
		for _, cs := range p.Status.ContainerStatuses {
			for _, st := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
				if st != nil {
					exited = st
					return true, nil
				}
			}
		}
		return false, nil
	})
	if code, ok := wrap.ParseTerminationMessage(exited.Message); !ok || code != 1 || exited.ExitCode != 1 {
		t.Errorf("the first incarnation ended with exit code %d and message %q, want 1 and wrap's record of 1 (read from %s)",
			exited.ExitCode, exited.Message, customTerminationPath)
	}
	if left := processes(t, first.Spec.NodeName, argvOrphan...); len(left) != 0 {
		t.Errorf("the driver's orphan outlived it: %+v", left)
	}
	// Any process of the node (another pod's, the node's own) is a zombie for an instant between
	// its exit and its parent's wait: only one still there a moment later is one nobody reaps.
	// (CI once saw such an instant, PID 916 of some container, and failed here.)
	zombies := func() map[int]testbed.Proc {
		out := map[int]testbed.Proc{}
		for _, p := range processes(t, first.Spec.NodeName) {
			if p.State == "Z" {
				out[p.PID] = p
			}
		}
		return out
	}
	seen := zombies()
	time.Sleep(2 * time.Second)
	for pid, p := range zombies() {
		if _, before := seen[pid]; before {
			t.Errorf("zombie on %s, unreaped for 2 s: %+v", first.Spec.NodeName, p)
		}
	}
	s.end(t, "") // the next incarnation must run until told

	second := runningDriver(t, s, string(first.UID), 2*time.Minute)
	waitLog(t, ns, second.Name, "simspark: driver started", 1, time.Minute)
	// `kubectl driverset logs <driver>`: the current incarnation's log, found from the placeholder
	// (whose own log is empty); with -f it follows the driver until the app ends.
	if out := pluginLogs(t, context.Background(), ns, s.plan.DriverPodName); strings.Count(out, "simspark: driver started") != 1 {
		t.Errorf("kubectl driverset logs printed %q; want the second incarnation's log, started once", out)
	}
	// The log flags reach the kubelet: the last line alone, stamped; --since 1h keeps the start.
	last := strings.Split(strings.TrimSpace(pluginLogs(t, context.Background(), ns, s.plan.DriverPodName, "--tail", "1", "--timestamps")), "\n")
	if len(last) != 1 || !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z `).MatchString(last[0]) {
		t.Errorf("kubectl driverset logs --tail 1 --timestamps printed %q; want one line that begins with its RFC3339 time", last)
	}
	if out := pluginLogs(t, context.Background(), ns, s.plan.DriverPodName, "--since", "1h", "-c", contract.DriverContainerName); !strings.Contains(out, "simspark: driver started") {
		t.Errorf("kubectl driverset logs --since 1h -c %s printed %q; want the driver's start", contract.DriverContainerName, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	followed := make(chan string, 1)
	go func() { followed <- pluginLogs(t, ctx, ns, s.plan.DriverPodName, "-f") }()
	p, err := kube().CoreV1().Pods(ns).Get(context.Background(), s.plan.DriverPodName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Annotations[contract.AnnotationRestarts]; got != "1" {
		t.Errorf("restarts recorded on the placeholder = %q, want 1", got)
	}

	s.end(t, "0")
	res := s.Wait(t, 2*time.Minute)
	if res.FinalPhase != corev1.PodSucceeded || res.ExitCode != 0 {
		t.Errorf("spark-submit saw %s (phases %v), exit code %d; want Succeeded, 0", res.FinalPhase, res.Phases, res.ExitCode)
	}
	if out := <-followed; !strings.Contains(out, "simspark: driver ends with exit code 0") {
		t.Errorf("kubectl driverset logs -f printed %q; want it to follow the driver to its end", out)
	}
	waitFor(t, time.Minute, "the StatefulSet scaled to 0 and S-0 gone", func(ctx context.Context) (bool, error) {
		sts, err := kube().AppsV1().StatefulSets(ns).Get(ctx, s.names.StatefulSet, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, err = kube().CoreV1().Pods(ns).Get(ctx, s.names.DriverPodName(), metav1.GetOptions{})
		return *sts.Spec.Replicas == 0 && apierrors.IsNotFound(err), nil
	})
}

// TestSIGTERMReachesTheDriver: deleting the app (kubectl delete pod <driver>) stops S-0
// gracefully: the kubelet's SIGTERM reaches the driver through wrap, which records the driver's
// own exit (143, as the JVM's) well within the grace period rather than a SIGKILL's 137.
func TestSIGTERMReachesTheDriver(t *testing.T) {
	ns := namespace(t, nil)
	s := submit(t, simApp(ns, "sigterm", 0), nil)
	pod := runningDriver(t, s, "", 3*time.Minute)
	waitLog(t, ns, pod.Name, "simspark: driver started", 1, time.Minute)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w, err := kube().CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + pod.Name, ResourceVersion: pod.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	began := time.Now()
	if err := kube().CoreV1().Pods(ns).Delete(ctx, s.plan.DriverPodName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var last *corev1.ContainerStateTerminated
	for ev := range w.ResultChan() {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok || p.UID != pod.UID {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == contract.DriverContainerName && cs.State.Terminated != nil {
				last = cs.State.Terminated
			}
		}
		if last != nil {
			break
		}
	}
	if last == nil {
		t.Fatalf("S-0 went away without a terminated status for its driver container")
	}
	took := time.Since(began)
	t.Logf("driver container terminated %s after the delete: exit %d, %q", took.Round(time.Millisecond), last.ExitCode, last.Message)
	if code, ok := wrap.ParseTerminationMessage(last.Message); !ok || code != 143 {
		t.Errorf("wrap recorded %q, want the driver's own exit 143 after SIGTERM", last.Message)
	}
	if took > 25*time.Second {
		t.Errorf("the driver took %s to stop; SIGTERM should end it well within the 30 s grace", took)
	}
}

// pluginLogs runs `kubectl driverset logs <driver> args...` in-process against the test bed and
// returns what it printed; a non-zero exit fails the test.
func pluginLogs(t *testing.T, ctx context.Context, ns, driver string, args ...string) string {
	var out, errOut bytes.Buffer
	args = append([]string{"logs", driver, "-n", ns, "--kubeconfig", bed.cluster.KubeconfigPath}, args...)
	if code := cli.Main(ctx, args, &out, &errOut); code != 0 {
		t.Errorf("kubectl driverset %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
	}
	t.Logf("kubectl driverset %s:\n%s", strings.Join(args, " "), out.String())
	return out.String()
}
