//go:build testbed

package e2e

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/driverset/driverset/contract"
)

// selfFenceT is the self-fence T of these scenarios (the default floor, --self-fence-min, is 10s);
// the controller waits T plus its margin (5s + T/10) of seeing no renewal.
const (
	selfFenceT    = 10 * time.Second
	selfFenceWait = selfFenceT + 5*time.Second + selfFenceT/10
)

// heartbeat plays `driverset wrap` for a KWOK driver pod, which runs no container: it renews the
// pod's heartbeat Lease as wrap does (holder: the pod's UID, owned by the pod) every T/4, until
// stopped. stop returns when the last renewal that succeeded was sent.
type heartbeat struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	last   time.Time
	count  int
	// longest is the longest time between two renewals that succeeded (when each was sent).
	longest time.Duration
}

func keepHeartbeat(t testing.TB, pod *corev1.Pod) *heartbeat {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &heartbeat{cancel: cancel, done: make(chan struct{})}
	name := contract.NamesOfStatefulSet(pod.Labels[contract.LabelDriver]).HeartbeatLease()
	leases := asPod(t, pod).CoordinationV1().Leases(pod.Namespace)
	holder := string(pod.UID)
	renew := func() error {
		now := metav1.NewMicroTime(time.Now())
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{contract.LabelHeartbeat: "true"},
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &now},
			}, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		l.Spec.HolderIdentity, l.Spec.RenewTime = &holder, &now
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		return err
	}
	if err := renew(); err != nil {
		t.Fatalf("first heartbeat of %s: %v", pod.Name, err)
	}
	h.last, h.count = time.Now(), 1
	go func() {
		defer close(h.done)
		tick := time.NewTicker(selfFenceT / 4)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				sent := time.Now()
				if renew() == nil {
					h.mu.Lock()
					h.longest = max(h.longest, sent.Sub(h.last))
					h.last, h.count = sent, h.count+1
					h.mu.Unlock()
				}
			}
		}
	}()
	t.Cleanup(func() { h.stop() })
	return h
}

// stop ends the renewals, as a partition does, and returns when the last one that succeeded was sent.
func (h *heartbeat) stop() time.Time {
	h.cancel()
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

func (h *heartbeat) renewals() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count
}

// gap is the longest time between two renewals that succeeded, so far.
func (h *heartbeat) gap() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.longest
}

// Issue 12, item 2, on the controller's side: two self-fencing drivers whose nodes die silently
// (unreachable, tainted). The one whose heartbeat stops is fenced once the controller has seen no
// renewal for T plus the margin, and starts elsewhere. The one whose heartbeat goes on (a dead
// kubelet on a node whose network works) is kept, also across a crash of the driverset leader
// (the new leader has seen no renewal yet, and waits the whole T plus margin from its first
// sighting); once its heartbeat stops, it is fenced too.
func TestSelfFencingFencesOnlyADriverWhoseHeartbeatStopped(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	annotations := map[string]string{contract.AnnotationSelfFence: selfFenceT.String()}
	renewing, silent := app(ns, "renewing"), app(ns, "silent")
	renewing.DriverAnnotations, silent.DriverAnnotations = annotations, annotations
	r, s := submit(t, renewing), submit(t, silent)
	rNames, sNames := contract.NamesFor(r.plan.DriverPodName), contract.NamesFor(s.plan.DriverPodName)
	r0 := runningDriver(t, ns, rNames, "")
	s0 := runningDriver(t, ns, sNames, "")
	for _, p := range []*corev1.Pod{r0, s0} {
		cmd := strings.Join(p.Spec.Containers[0].Command, " ")
		if !strings.Contains(cmd, "--heartbeat-lease "+contract.NamesOfStatefulSet(p.Labels[contract.LabelDriver]).HeartbeatLease()+" --self-fence 10s --") {
			t.Fatalf("%s does not run wrap with its heartbeat: %s", p.Name, cmd)
		}
	}
	rBeat, sBeat := keepHeartbeat(t, r0), keepHeartbeat(t, s0)

	killed := time.Now()
	for _, node := range unique(r0.Spec.NodeName, s0.Spec.NodeName) {
		replaceNode(t, node)
		if err := bed.cluster.KillNode(ctx, node); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = bed.cluster.ReviveNode(context.Background(), node) })
	}
	lastSilent := sBeat.stop() // the silent driver's node is cut off: no renewal after this

	s1 := runningDriverWithin(t, 2*time.Minute, ns, sNames, string(s0.UID))
	gone := s1.CreationTimestamp.Time
	t.Logf("silent driver: new incarnation on %s created %.1fs after its last renewal, %.1fs after its node died (T %s, wait %s)",
		s1.Spec.NodeName, gone.Sub(lastSilent).Seconds(), gone.Sub(killed).Seconds(), selfFenceT, selfFenceWait)
	// Created on whole seconds: allow the second's truncation.
	if gone.Sub(lastSilent) < selfFenceWait-time.Second {
		t.Errorf("the silent driver was fenced %.1fs after its last renewal, before T plus the margin (%s)", gone.Sub(lastSilent).Seconds(), selfFenceWait)
	}
	expectEvents(t, getPod(t, ns, s.plan.DriverPodName), "NodeLost", "Fenced", "Recovered")

	// The renewing driver's node is as dead, as long: it must still be the one pod.
	waitFor(t, time.Minute, "the renewing driver's node unreachable", func(ctx context.Context) (bool, error) {
		n, err := kube().CoreV1().Nodes().Get(ctx, r0.Spec.NodeName, metav1.GetOptions{})
		return err == nil && slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeUnreachable }), nil
	})
	unreachable := time.Now()
	keptFor := func(d time.Duration) { t.Helper(); keptRenewing(t, ns, rNames, r0.UID, d) }
	keptFor(selfFenceWait + 5*time.Second)
	t.Logf("renewing driver kept %.0fs on an unreachable node (%d renewals so far)", time.Since(unreachable).Seconds(), rBeat.renewals())

	// The leader crashes while it watches that driver; a new one leads. Neither fences it.
	bed.driverset.Kill()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			restoreSharedDriverset(t, true, nil)
		}
	})
	restoreSharedDriverset(t, true, nil)
	restarted = true
	led := time.Now()
	keptFor(selfFenceWait + 5*time.Second)
	t.Logf("renewing driver kept %.0fs under the new leader", time.Since(led).Seconds())

	// Its heartbeat stops: fenced in turn.
	lastRenewing := rBeat.stop()
	r1 := runningDriverWithin(t, 2*time.Minute, ns, rNames, string(r0.UID))
	took := r1.CreationTimestamp.Sub(lastRenewing)
	t.Logf("renewing driver, once its heartbeat stopped: new incarnation created %.1fs after the last renewal", took.Seconds())
	if took < selfFenceWait-time.Second {
		t.Errorf("fenced %.1fs after the last renewal, before T plus the margin (%s)", took.Seconds(), selfFenceWait)
	}
	expectEvents(t, getPod(t, ns, r.plan.DriverPodName), "NodeLost", "Fenced", "Recovered")
}

// keptRenewing fails the test if, within d, the driver pod of names is another incarnation than
// uid, or is being force-deleted: a driver whose heartbeat is renewed is never fenced.
func keptRenewing(t *testing.T, ns string, names contract.Names, uid types.UID, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Second) {
		if p := getPod(t, ns, names.DriverPodName()); p.UID != uid || p.DeletionGracePeriodSeconds != nil && *p.DeletionGracePeriodSeconds == 0 {
			t.Fatalf("the renewing driver %s was fenced (now %s) while its heartbeat was renewed", uid, p.UID)
		}
	}
}

// Issue 12, "restart the apiserver during a heartbeat gap": a self-fencing driver on a node that
// is unreachable (its kubelet is dead, its network works) renews its heartbeat. The apiserver
// restarts: while it is away nobody renews, and driverset sees no change of the Lease and loses
// its watches. The gap is shorter than T (the driver is right to go on), and once the apiserver
// is back the driver renews again: driverset must not fence it, neither then nor in the T plus
// margin that follow. Once its heartbeat stops for good, it is fenced: driverset was watching.
func TestSelfFencingKeepsARenewingDriverAcrossAnApiserverRestart(t *testing.T) {
	ctx := context.Background()
	// T is long enough to cover the restart here (stop, start, /readyz: about 10 s on 2 busy cores).
	const T = 30 * time.Second
	wait := T + 5*time.Second + T/10
	ns := namespace(t, nil)
	a := app(ns, "renewing")
	a.DriverAnnotations = map[string]string{contract.AnnotationSelfFence: T.String()}
	s := submit(t, a)
	names := contract.NamesFor(s.plan.DriverPodName)
	d0 := runningDriver(t, ns, names, "")
	beat := keepHeartbeat(t, d0)
	node := d0.Spec.NodeName
	replaceNode(t, node)
	if err := bed.cluster.KillNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bed.cluster.ReviveNode(context.Background(), node) })
	waitFor(t, time.Minute, "the driver's node unreachable", func(ctx context.Context) (bool, error) {
		n, err := kube().CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		return err == nil && slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeUnreachable }), nil
	})

	before := beat.renewals()
	stopped := time.Now()
	if err := bed.cluster.RestartAPIServer(ctx, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	t.Logf("the apiserver was away %.1fs", back.Sub(stopped).Seconds())
	waitFor(t, T, "a renewal after the restart", func(context.Context) (bool, error) { return beat.renewals() > before, nil })
	gap := beat.gap()
	t.Logf("longest heartbeat gap: %.1fs (T %s, driverset's wait %s)", gap.Seconds(), T, wait)
	if gap < selfFenceT/4+2*time.Second {
		t.Fatalf("no heartbeat gap (longest %.1fs): the restart did not stop the renewals, the scenario proves nothing", gap.Seconds())
	}
	// driverset's leader lease (renew deadline 10 s) may run out while the apiserver is away, also
	// a few seconds after it is back (its RBAC not loaded yet): controller-runtime then exits, and
	// the harness starts it again as the kubelet would (Options.Restart). The new one leads.
	keptRenewing(t, ns, names, d0.UID, wait+5*time.Second-time.Since(back))
	t.Logf("the renewing driver was kept %.0fs after the apiserver came back (%d renewals)", time.Since(back).Seconds(), beat.renewals())

	last := beat.stop()
	d1 := runningDriverWithin(t, 2*time.Minute, ns, names, string(d0.UID))
	took := d1.CreationTimestamp.Sub(last)
	t.Logf("heartbeat stopped: new incarnation created %.1fs after the last renewal", took.Seconds())
	if took < wait-time.Second {
		t.Errorf("fenced %.1fs after the last renewal, before T plus the margin (%s)", took.Seconds(), wait)
	}
}

// Issue 11, "fence-after: 1ns beyond the admin's floor": a tenant asks to be fenced 1ns after its
// node stops being Ready. driverset raises it to the admin's floor (serve's --fence-after-min,
// 10s by default), says so in a Warning Event, and fences no sooner.
func TestFenceAfterBelowTheAdminsFloorIsRaisedToIt(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, nil)
	a := app(ns, "impatient")
	a.DriverAnnotations = map[string]string{contract.AnnotationFenceAfter: "1ns"}
	sub := submit(t, a)
	names := contract.NamesFor(sub.plan.DriverPodName)
	d0 := runningDriver(t, ns, names, "")
	waitFor(t, 30*time.Second, "a Warning InvalidSetting naming the floor", func(ctx context.Context) (bool, error) {
		evs, err := kube().EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=" + sub.plan.DriverPodName})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == "InvalidSetting" && strings.Contains(e.Note, "fence-after 1ns is below the admin's floor: 10s is used") {
				return true, nil
			}
		}
		return false, nil
	})
	cutOff(t, d0.Spec.NodeName)
	d1 := runningDriverWithin(t, 2*time.Minute, ns, names, string(d0.UID))
	node, err := kube().CoreV1().Nodes().Get(ctx, d0.Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var notReady time.Time
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			notReady = c.LastTransitionTime.Time
		}
	}
	after := d1.CreationTimestamp.Sub(notReady)
	t.Logf("fenced: new incarnation created %.1fs after the node stopped being Ready (asked 1ns, floor 10s)", after.Seconds())
	if after < 10*time.Second-time.Second {
		t.Errorf("the driver was fenced %.1fs after its node stopped being Ready, before the admin's floor of 10s", after.Seconds())
	}
}
