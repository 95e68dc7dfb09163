// Command demo runs driverset's main job end to end on a local test bed and says what happened:
// a spark-submit-shaped app is taken over, its driver's node dies, and the driver comes back on
// another node, never twice at once. `make demo` runs it.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/harness"
	"github.com/driverset/driverset/e2e/sparksim"
	"github.com/driverset/driverset/e2e/testbed"
	"github.com/driverset/driverset/wrap"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	err := run(ctx, os.Stdout)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "\ndemo failed:", err)
		os.Exit(1)
	}
}

// story tells what happens to out, each line stamped with the time since the start. spark-submit's
// lines come from its own goroutine, so every line is written whole, under mu.
type story struct {
	start time.Time
	mu    *sync.Mutex
	out   io.Writer
}

func (s story) say(format string, args ...any) {
	s.line(fmt.Sprintf("[%6.1fs] %s", time.Since(s.start).Seconds(), fmt.Sprintf(format, args...)))
}

func (s story) line(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintln(s.out, text)
}

// run tells the demo's story to out. Each thing it says happened was checked first: a claim
// that does not hold ends the demo with an error rather than being printed.
func run(ctx context.Context, out io.Writer) (err error) {
	s := story{start: time.Now(), mu: new(sync.Mutex), out: out}
	dir, err := os.MkdirTemp("", "driverset-demo-")
	if err != nil {
		return err
	}
	defer func() {
		// A failed run keeps every log (the control plane's, driverset's) for whoever looks next.
		if err != nil {
			err = fmt.Errorf("%w\nthe logs are kept in %s", err, dir)
			return
		}
		_ = os.RemoveAll(dir)
	}()

	s.say("Starting a local Kubernetes control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, 3 KWOK nodes")
	cluster, err := testbed.Start(ctx, testbed.Options{Nodes: 3, Dir: filepath.Join(dir, "testbed")})
	if err != nil {
		return err
	}
	defer func() { _ = cluster.Stop() }()
	// spark-submit's client, which shows the warnings the apiserver passes on from driverset's
	// webhook, as spark-submit logs them.
	cfg := rest.CopyConfig(cluster.Config)
	cfg.WarningHandler = warnings{s}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	s.say("  ready; nodes %s", strings.Join(cluster.Nodes(), ", "))

	s.say("Installing driverset: `driverset serve` on 127.0.0.1 and manifests/overlays/local (webhook, RBAC)")
	bin, err := harness.Build(ctx, dir)
	if err != nil {
		return err
	}
	kubectl := filepath.Join(cluster.BinDir, "kubectl")
	// Its namespace and RBAC first, as install.yaml applies them before driverset's pods run: it
	// keeps its placeholder sealing key in a Secret there and is not ready without it.
	if err := harness.InstallLocalAccess(ctx, cluster.Config, kubectl); err != nil {
		return err
	}
	ds, err := harness.Start(ctx, harness.Options{Binary: bin, Kubeconfig: cluster.KubeconfigPath, Dir: dir, Alive: cluster.CheckAlive})
	if err != nil {
		return err
	}
	defer func() { _ = ds.Stop() }()
	if err := harness.InstallLocal(ctx, cluster.Config, cluster.CheckAlive, kubectl, ds.Port, ds.CA.CertPEM); err != nil {
		return err
	}
	s.say("  the webhook answers")

	app := sparksim.App{
		Version: sparksim.Spark35, Name: "spark-pi", Namespace: "default",
		DriverLabels: map[string]string{contract.LabelResilient: "true"},
	}
	plan, err := app.Plan()
	if err != nil {
		return err
	}
	s.say("spark-submit --deploy-mode cluster --conf spark.kubernetes.driver.label.%s=true (Spark %s, simulated call by call)", contract.LabelResilient, app.Version)
	type outcome struct {
		res *sparksim.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := sparksim.SubmitPlan(ctx, c, plan, sparksim.SubmitOptions{WaitAppCompletion: true, Log: prefixed{s: s, prefix: "  spark-submit: ", last: new(string)}})
		done <- outcome{res, err}
	}()
	names := contract.NamesFor(plan.DriverPodName)
	d0, err := waitPod(ctx, cluster, c, names.DriverPodName(), "", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if err != nil {
		return err
	}
	p, err := c.CoreV1().Pods("default").Get(ctx, plan.DriverPodName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	s.say("  %s was admitted as a placeholder: scheduling gate %v, node %q — it will never run", p.Name, gateNames(p), p.Spec.NodeName)
	s.say("  driverset made StatefulSet %s and headless Service %s; the driver runs in %s on %s", names.StatefulSet, names.Service, d0.Name, d0.Spec.NodeName)
	drv, err := sparksim.StartDriver(ctx, c, "default", d0.Name)
	if err != nil {
		return err
	}
	execs, err := drv.RequestExecutors(ctx, 2)
	if err != nil {
		return err
	}
	s.say("  the driver (app %s) found its pod and started %d executors; they reach it at %s", drv.AppID(), len(execs), drv.Conf()["spark.driver.host"])

	dead := d0.Spec.NodeName
	lost := time.Now()
	s.say("Node %s dies: its kubelet stops answering", dead)
	if err := cluster.KillNode(ctx, dead); err != nil {
		return err
	}
	if _, err := waitPod(ctx, cluster, c, names.DriverPodName(), "", func(p *corev1.Pod) bool { return p.DeletionTimestamp != nil }); err != nil {
		return err
	}
	s.say("  %s is evicted but stays Terminating: the old driver may still be running on %s, so no second one starts", d0.Name, dead)
	time.Sleep(5 * time.Second)
	still, err := c.CoreV1().Pods("default").Get(ctx, names.DriverPodName(), metav1.GetOptions{})
	if err != nil || still.UID != d0.UID {
		// Nobody has said the node is gone: replacing the driver now could run two at once.
		return fmt.Errorf("5 s after %s was evicted from a node nobody declared gone, %s is no longer that pod (err %v)", d0.Name, names.DriverPodName(), err)
	}
	s.say("  5 s later: still one driver pod, %s (uid %s), Terminating", still.Name, short(still.UID))

	s.say("The admin confirms the node is gone: kubectl taint node %s node.kubernetes.io/out-of-service=nodeshutdown:NoExecute", dead)
	tainted := time.Now()
	if err := cluster.TaintOutOfService(ctx, dead); err != nil {
		return err
	}
	d1, err := waitPod(ctx, cluster, c, names.DriverPodName(), d0.UID, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if err != nil {
		return err
	}
	if d1.Spec.NodeName == dead {
		return fmt.Errorf("the new %s runs on %s, the node that died", d1.Name, dead)
	}
	s.say("  a new %s (uid %s) runs on %s, %.1f s after the taint, %.1f s after the node died", d1.Name, short(d1.UID), d1.Spec.NodeName,
		time.Since(tainted).Seconds(), time.Since(lost).Seconds())
	drv2, err := sparksim.StartDriver(ctx, c, "default", d1.Name)
	if err != nil {
		return err
	}
	host := "spark.driver.host"
	// Each incarnation runs as an app id of its own: the submitted one and its pod's UID.
	own, err := wrap.IncarnationAppID(plan.AppID, string(d1.UID))
	if err != nil {
		return err
	}
	if drv2.AppID() != own || drv2.AppID() == drv.AppID() || drv2.Conf()[host] != drv.Conf()[host] {
		return fmt.Errorf("the new driver has app id %s at %s, want %s; the first had %s at %s", drv2.AppID(), drv2.Conf()[host], own, drv.AppID(), drv.Conf()[host])
	}
	s.say("  the driver starts again there as app %s (the submitted %s, this incarnation's own), at the same address %s", drv2.AppID(), plan.AppID, drv2.Conf()[host])

	s.say("The driver finishes with exit code 0")
	if err := cluster.TerminateContainer(ctx, "default", d1.Name, contract.DriverContainerName, 0, wrap.TerminationMessage(0, "")); err != nil {
		return err
	}
	var o outcome
	select {
	case o = <-done:
	case <-time.After(time.Minute):
		return fmt.Errorf("spark-submit did not return")
	}
	if o.err != nil {
		return o.err
	}
	s.say("spark-submit returned: driver pod phases %v, exit code %d", o.res.Phases, o.res.ExitCode)
	if o.res.FinalPhase != corev1.PodSucceeded {
		return fmt.Errorf("the app ended %s, want Succeeded", o.res.FinalPhase)
	}
	return nil
}

// waitPod waits until the pod called name, with a UID other than not, satisfies ok, and fails at
// once, naming it, when a component of the cluster is down for good.
func waitPod(ctx context.Context, cluster *testbed.Cluster, c kubernetes.Interface, name string, not types.UID, ok func(*corev1.Pod) bool) (*corev1.Pod, error) {
	var got *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, cluster.Alive(func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil || p.UID == not {
			return false, nil
		}
		got = p
		return ok(p), nil
	}))
	if err != nil {
		return nil, fmt.Errorf("waiting for pod %s: %w", name, err)
	}
	return got, nil
}

func gateNames(p *corev1.Pod) []string {
	var out []string
	for _, g := range p.Spec.SchedulingGates {
		out = append(out, g.Name)
	}
	return out
}

func short[T ~string](uid T) string { return string(uid)[:8] }

// prefixed is spark-submit's log, as the demo tells it.
type prefixed struct {
	s      story
	prefix string
	last   *string
}

// Write keeps, of spark-submit's log, the lines a user watches for: each new phase and the end
// (not the status line it repeats every second while it waits).
func (w prefixed) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		line = strings.TrimSpace(line)
		end := strings.HasPrefix(line, "Application ") && !strings.HasPrefix(line, "Application status for ")
		if (strings.HasPrefix(line, "phase:") && line != *w.last) || end {
			w.s.line("         " + w.prefix + line)
			*w.last = line
		}
	}
	return len(b), nil
}

// warnings tells each warning the apiserver gives spark-submit's client (driverset's webhook
// names the pod the driver runs in).
type warnings struct{ s story }

func (w warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.s.line("           spark-submit is warned: " + text)
}
