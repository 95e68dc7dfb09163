//go:build testbed

package e2e

import (
	"context"
	"errors"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/chaos"
	"github.com/driverset/driverset/e2e/sparksim"
	"github.com/driverset/driverset/wrap"
)

// Fencing settings of the chaos apps: the least the admin's default bounds allow, so that a
// silent death is recovered within the node lane's hold.
const (
	chaosFenceAfter = "10s"
	chaosSelfFenceT = 15 * time.Second
	// incarnationWait bounds the wait for an app's next driver pod: longer than any fault lasts.
	incarnationWait = 10 * time.Minute
	// chaosRetry is the pause between attempts of a call the faults made fail.
	chaosRetry = 500 * time.Millisecond
)

// chaosApp is one app of the run as the user submits it.
func (r *chaosRun) chaosApp(a chaos.App) sparksim.App {
	sa := app(r.ns, a.Name)
	sa.DriverAnnotations = map[string]string{contract.AnnotationMaxRestarts: strconv.Itoa(a.MaxRestarts)}
	switch a.Fencing {
	case chaos.FenceAfter:
		sa.DriverAnnotations[contract.AnnotationFenceAfter] = chaosFenceAfter
	case chaos.SelfFence:
		sa.DriverAnnotations[contract.AnnotationSelfFence] = chaosSelfFenceT.String()
	}
	return sa
}

// chaosSubmission is one spark-submit of the run, in the background.
type chaosSubmission struct {
	plan *sparksim.Plan
	done chan struct{}
	res  *sparksim.Result
	err  error
}

func (s *chaosSubmission) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// runApp takes one app from submission to deletion, playing its driver in every incarnation
// driverset runs, and checks what spark-submit and the placeholder say at the end.
func (r *chaosRun) runApp(ctx context.Context, a chaos.App) {
	for ctx.Err() == nil {
		sub := r.submit(ctx, a)
		if sub == nil || r.follow(ctx, a, sub) {
			return
		}
	}
}

// follow plays the app's driver until its last exit and checks its end. It returns false when
// spark-submit died on the way (e.g. its ConfigMap's create refused by a quota conflict; it then
// deletes the driver pod): the user submits again.
func (r *chaosRun) follow(ctx context.Context, a chaos.App, sub *chaosSubmission) bool {
	names := contract.NamesFor(sub.plan.DriverPodName)
	seen := map[types.UID]bool{}
	processes := 0
	for i := 0; i < len(a.Exits); {
		pod := r.nextIncarnation(ctx, a, sub, names, seen)
		if pod == nil {
			if sub.ended() && sub.err != nil {
				r.abandon(ctx, a, sub)
				return false
			}
			if sub.ended() {
				r.t.Errorf("%s: spark-submit returned before the driver's last exit: phases %v, final %s, deleted %v, lost %v",
					a.Name, sub.res.Phases, sub.res.FinalPhase, sub.res.Deleted, sub.res.Lost)
			}
			return true
		}
		started, exited := r.incarnation(ctx, a, i, pod)
		if started {
			processes++
		}
		if exited {
			seen[pod.UID] = true
			i++
			continue
		}
		// Its node died (or is not back yet): a pod that outlives the node and runs again when
		// it returns is the kubelet restarting the driver's container, a new process.
		time.Sleep(300 * time.Millisecond)
	}
	select {
	case <-sub.done:
	case <-ctx.Done():
		r.t.Errorf("%s: spark-submit did not return after the last exit (%v)", a.Name, ctx.Err())
		return true
	}
	r.checkEnd(ctx, a, sub, processes)
	// The user removes the app; the garbage collector takes the rest (checked at the end).
	if err := retryFaults(ctx, func() error {
		return ignoreNotFound(kube().CoreV1().Pods(r.ns).Delete(ctx, sub.plan.DriverPodName, metav1.DeleteOptions{}))
	}); err != nil {
		r.t.Errorf("%s: delete the placeholder: %v", a.Name, err)
	}
	r.count("apps")
	return true
}

// abandon is the user's cleanup after spark-submit died mid-app: its driver pod goes (spark-submit
// deleted it, or the user does), and with it S-0, whose container the kubelet stops.
func (r *chaosRun) abandon(ctx context.Context, a chaos.App, sub *chaosSubmission) {
	r.count("spark-submit died, submitted again")
	r.t.Logf("%s: spark-submit died after its driver pod was created (%v); submitted again", a.Name, sub.err)
	_ = retryFaults(ctx, func() error {
		return ignoreNotFound(kube().CoreV1().Pods(r.ns).Delete(ctx, sub.plan.DriverPodName, metav1.DeleteOptions{}))
	})
	names := contract.NamesFor(sub.plan.DriverPodName)
	for ctx.Err() == nil {
		_, err := kube().CoreV1().Pods(r.ns).Get(ctx, names.DriverPodName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	r.mu.Lock()
	r.ledger.EndApp(a.Name)
	r.mu.Unlock()
}

// submit runs spark-submit until one is admitted: with both replicas down (the webhook fails
// closed) or the apiserver restarting, spark-submit dies with exit 1, as it would for a user, who
// submits again. A refused submission must leave nothing behind.
func (r *chaosRun) submit(ctx context.Context, a chaos.App) *chaosSubmission {
	for attempt := 1; ctx.Err() == nil; attempt++ {
		plan, err := r.chaosApp(a).Plan()
		if err != nil {
			r.t.Errorf("%s: %v", a.Name, err)
			return nil
		}
		s := &chaosSubmission{plan: plan, done: make(chan struct{})}
		go func() {
			defer close(s.done)
			s.res, s.err = sparksim.SubmitPlan(ctx, kube(), plan, sparksim.SubmitOptions{WaitAppCompletion: true})
		}()
		for !s.ended() {
			if _, err := kube().CoreV1().Pods(r.ns).Get(ctx, plan.DriverPodName, metav1.GetOptions{}); err == nil {
				return s
			}
			time.Sleep(100 * time.Millisecond)
		}
		// Ended before its pod was seen: refused, or the pod went with spark-submit's failure.
		r.count("submissions refused")
		r.t.Logf("%s: spark-submit attempt %d ended early: exit %d, %v", a.Name, attempt, s.res.ExitCode, s.err)
		if s.err == nil {
			return s // it saw the whole app in a blink; checked like any other
		}
		// A create whose answer was lost may have made the pod: the user deletes what is left.
		_ = retryFaults(ctx, func() error {
			return ignoreNotFound(kube().CoreV1().Pods(r.ns).Delete(ctx, plan.DriverPodName, metav1.DeleteOptions{}))
		})
		time.Sleep(time.Second)
	}
	return nil
}

// nextIncarnation waits for S-0 to run a pod not seen before, bound to a node.
func (r *chaosRun) nextIncarnation(ctx context.Context, a chaos.App, sub *chaosSubmission, names contract.Names, seen map[types.UID]bool) *corev1.Pod {
	start := time.Now()
	for ctx.Err() == nil && time.Since(start) < incarnationWait {
		p, err := kube().CoreV1().Pods(r.ns).Get(ctx, names.DriverPodName(), metav1.GetOptions{})
		if err == nil && !seen[p.UID] && p.DeletionTimestamp == nil && p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning {
			return p
		}
		if sub.ended() {
			return nil
		}
		time.Sleep(300 * time.Millisecond)
	}
	r.t.Errorf("%s: no new incarnation of %s within %s", a.Name, names.DriverPodName(), time.Since(start).Round(time.Second))
	return nil
}

// incarnation plays the driver process in pod: it starts (unless the pod's node is dead), makes
// its executors, keeps its heartbeat when it self-fences, and after its life exits with the
// planned code. It reports whether it started, and whether it exited (not when it ended with its
// node).
func (r *chaosRun) incarnation(ctx context.Context, a chaos.App, i int, pod *corev1.Pod) (started, exited bool) {
	uid, node := string(pod.UID), pod.Spec.NodeName
	r.mu.Lock()
	started = r.ledger.Start(a.Name, uid, node, time.Now())
	r.mu.Unlock()
	if !started {
		return false, false
	}
	r.count("driver processes")
	running := func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.ledger.Running(a.Name, uid)
	}
	if a.Fencing == chaos.SelfFence {
		go r.heartbeat(ctx, pod, running)
	}
	// The JVM starts: before spark-submit made the ConfigMap it cannot, and tries again.
	var drv *sparksim.Driver
	for deadline := time.Now().Add(time.Minute); drv == nil && running() && time.Now().Before(deadline); {
		var err error
		if drv, err = sparksim.StartDriver(ctx, kube(), r.ns, pod.Name); err != nil {
			time.Sleep(chaosRetry)
		}
	}
	for made := 0; drv != nil && made < a.Executors[i]; made++ {
		if retryWhile(ctx, running, func() error { _, err := drv.RequestExecutors(ctx, 1); return err }) != nil {
			break
		}
		r.count("executors")
	}
	for end := time.Now().Add(a.Life[i]); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if !running() {
			return true, false
		}
	}
	// The exit: its node is held alive until driverset has acted on it, so that it is never
	// taken for a node loss.
	r.mu.Lock()
	if !r.ledger.Running(a.Name, uid) {
		r.mu.Unlock()
		return true, false
	}
	r.ledger.Pin(node)
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.ledger.Unpin(node)
		r.mu.Unlock()
	}()
	code := a.Exits[i]
	err := retryFaults(ctx, func() error {
		return bed.cluster.TerminateContainer(ctx, r.ns, pod.Name, contract.DriverContainerName, code, wrap.TerminationMessage(int(code), ""))
	})
	r.mu.Lock()
	r.ledger.End(a.Name, uid)
	r.mu.Unlock()
	if apierrors.IsNotFound(err) {
		// The pod went before its exit could be played: spark-submit died (a quota conflict) and
		// deleted the app, or its node was removed. follow finds the next incarnation, or
		// abandons the app when spark-submit has died; the exit is played on the next one.
		return true, false
	}
	if err != nil {
		r.t.Errorf("%s: exit %d in %s: %v", a.Name, code, pod.Name, err)
		return true, true
	}
	r.count("exits")
	// driverset acts on the exit: a new incarnation, or the StatefulSet scaled to 0.
	for ctx.Err() == nil {
		p, err := kube().CoreV1().Pods(r.ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && p.UID != pod.UID) {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	return true, true
}

// heartbeat renews the pod's heartbeat Lease every T/4 while its driver process runs, as
// `driverset wrap` does; the process's end (its node's death) stops it.
func (r *chaosRun) heartbeat(ctx context.Context, pod *corev1.Pod, running func() bool) {
	name := contract.NamesOfStatefulSet(pod.Labels[contract.LabelDriver]).HeartbeatLease()
	c, err := podClient(ctx, pod)
	if err != nil {
		if ctx.Err() == nil {
			r.t.Errorf("%s cannot renew its heartbeat: %v", pod.Name, err)
		}
		return
	}
	leases := c.CoordinationV1().Leases(pod.Namespace)
	holder := string(pod.UID)
	for ctx.Err() == nil && running() {
		now := metav1.NewMicroTime(time.Now())
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, _ = leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{contract.LabelHeartbeat: "true"},
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &now},
			}, metav1.CreateOptions{})
		case err == nil:
			l.Spec.HolderIdentity, l.Spec.RenewTime = &holder, &now
			_, _ = leases.Update(ctx, l, metav1.UpdateOptions{})
		}
		time.Sleep(chaosSelfFenceT / 4)
	}
}

// checkEnd holds the app to its plan: spark-submit saw the phase the driver really had, the
// placeholder shows the last exit code, and the restarts were counted once each.
func (r *chaosRun) checkEnd(ctx context.Context, a chaos.App, sub *chaosSubmission, processes int) {
	want := a.Want()
	wantPhase := corev1.PodFailed
	if want.Succeeded {
		wantPhase = corev1.PodSucceeded
	}
	if sub.err != nil || sub.res.ExitCode != 0 || sub.res.FinalPhase != wantPhase || sub.res.Deleted || sub.res.Lost {
		r.t.Errorf("%s: spark-submit ended with %v (exit %d, phases %v, final %s, deleted %v, lost %v); want final %s after exits %v",
			a.Name, sub.err, sub.res.ExitCode, sub.res.Phases, sub.res.FinalPhase, sub.res.Deleted, sub.res.Lost, wantPhase, a.Exits)
	}
	var p *corev1.Pod
	if err := retryFaults(ctx, func() (err error) {
		p, err = kube().CoreV1().Pods(r.ns).Get(ctx, sub.plan.DriverPodName, metav1.GetOptions{})
		return err
	}); err != nil {
		r.t.Errorf("%s: the placeholder: %v", a.Name, err)
		return
	}
	if got := p.Annotations[contract.AnnotationRestarts]; got != strconv.Itoa(want.Restarts) && (got != "" || want.Restarts != 0) {
		r.t.Errorf("%s: restart count %q after exits %v (max-restarts %d), want %d", a.Name, got, a.Exits, a.MaxRestarts, want.Restarts)
	}
	cs := p.Status.ContainerStatuses
	if len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != want.LastExit {
		r.t.Errorf("%s: placeholder container status %+v, want terminated with exit code %d", a.Name, cs, want.LastExit)
	}
	if processes > len(a.Exits) {
		r.count("apps that lost a driver with its node")
	}
	r.count("spark-submit " + string(wantPhase))
}

// retryFaults calls f until it succeeds, the error is one the faults cannot cause, or ctx ends:
// the apiserver restarting, etcd down, a conflict with a writer that raced.
func retryFaults(ctx context.Context, f func() error) error {
	return retryWhile(ctx, func() bool { return true }, f)
}

// retryWhile is retryFaults while cond holds (e.g. the driver process still runs).
func retryWhile(ctx context.Context, cond func() bool, f func() error) error {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		err := f()
		if err == nil || !transient(err) || ctx.Err() != nil || !cond() || time.Now().After(deadline) {
			return err
		}
		time.Sleep(chaosRetry)
	}
}

// transient: an error a restarting control plane gives, not one of the call itself.
func transient(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true // connection refused, reset, EOF: the apiserver is down
	}
	return apierrors.IsConflict(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err)
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
