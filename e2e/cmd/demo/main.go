// Command demo runs driverset's main job end to end on a local test bed and says what happened:
// a spark-submit-shaped app is taken over, its driver's node dies, and the driver comes back on
// another node, never twice at once. `make demo` runs it.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/harness"
	"github.com/driverset/driverset/e2e/sparksim"
	"github.com/driverset/driverset/e2e/testbed"
	"github.com/driverset/driverset/wrap"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	err := run(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "\ndemo failed:", err)
		os.Exit(1)
	}
}

type story struct{ start time.Time }

func (s story) say(format string, args ...any) {
	fmt.Printf("[%6.1fs] %s\n", time.Since(s.start).Seconds(), fmt.Sprintf(format, args...))
}

func run(ctx context.Context) error {
	s := story{start: time.Now()}
	dir, err := os.MkdirTemp("", "driverset-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	s.say("Starting a local Kubernetes control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, 3 KWOK nodes")
	cluster, err := testbed.Start(ctx, testbed.Options{Nodes: 3, Dir: filepath.Join(dir, "testbed")})
	if err != nil {
		return err
	}
	defer func() { _ = cluster.Stop() }()
	c := cluster.Client
	s.say("  ready; nodes %s", strings.Join(cluster.Nodes(), ", "))

	s.say("Installing driverset: `driverset serve` on 127.0.0.1 and manifests/overlays/local (webhook, RBAC)")
	bin, err := harness.Build(ctx, dir)
	if err != nil {
		return err
	}
	ds, err := harness.Start(ctx, harness.Options{Binary: bin, Kubeconfig: cluster.KubeconfigPath, Dir: dir})
	if err != nil {
		return err
	}
	defer func() { _ = ds.Stop() }()
	if err := harness.InstallLocal(ctx, cluster.Config, filepath.Join(cluster.BinDir, "kubectl"), ds.Port, ds.CA.CertPEM); err != nil {
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
		res, err := sparksim.SubmitPlan(ctx, c, plan, sparksim.SubmitOptions{WaitAppCompletion: true, Log: prefixed{prefix: "  spark-submit: ", last: new(string)}})
		done <- outcome{res, err}
	}()
	names := contract.NamesFor(plan.DriverPodName)
	d0, err := waitPod(ctx, c, names.DriverPodName(), "", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
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
	if _, err := waitPod(ctx, c, names.DriverPodName(), "", func(p *corev1.Pod) bool { return p.DeletionTimestamp != nil }); err != nil {
		return err
	}
	s.say("  %s is evicted but stays Terminating: the old driver may still be running on %s, so no second one starts", d0.Name, dead)
	time.Sleep(5 * time.Second)
	if p, err := c.CoreV1().Pods("default").Get(ctx, names.DriverPodName(), metav1.GetOptions{}); err == nil && p.UID == d0.UID {
		s.say("  5 s later: still one driver pod, %s (uid %s), Terminating", p.Name, short(p.UID))
	}

	s.say("The admin confirms the node is gone: kubectl taint node %s node.kubernetes.io/out-of-service=nodeshutdown:NoExecute", dead)
	tainted := time.Now()
	if err := cluster.TaintOutOfService(ctx, dead); err != nil {
		return err
	}
	d1, err := waitPod(ctx, c, names.DriverPodName(), d0.UID, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if err != nil {
		return err
	}
	s.say("  a new %s (uid %s) runs on %s, %.1f s after the taint, %.1f s after the node died", d1.Name, short(d1.UID), d1.Spec.NodeName,
		time.Since(tainted).Seconds(), time.Since(lost).Seconds())
	drv2, err := sparksim.StartDriver(ctx, c, "default", d1.Name)
	if err != nil {
		return err
	}
	s.say("  the driver starts again there with the same app id %s, at the same address %s", drv2.AppID(), drv2.Conf()["spark.driver.host"])

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

// waitPod waits until the pod called name, with a UID other than not, satisfies ok.
func waitPod(ctx context.Context, c kubernetes.Interface, name string, not types.UID, ok func(*corev1.Pod) bool) (*corev1.Pod, error) {
	var got *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil || p.UID == not {
			return false, nil
		}
		got = p
		return ok(p), nil
	})
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

type prefixed struct {
	prefix string
	last   *string
}

// Write keeps, of spark-submit's log, the lines a user watches for: the phase and the end.
func (w prefixed) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		line = strings.TrimSpace(line)
		if (strings.HasPrefix(line, "phase:") && line != *w.last) || strings.HasPrefix(line, "Application ") {
			fmt.Println("         " + w.prefix + line)
			*w.last = line
		}
	}
	return len(b), nil
}
