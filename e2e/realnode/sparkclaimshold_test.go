//go:build testbed

package realnode

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/driverset/driverset/contract"
)

// holdFinalizer keeps a lost incarnation's claims Terminating, as a slow garbage collector or an
// executor still mounting them would.
const holdFinalizer = "e2e.driverset.dev/hold"

// claimsHeldFor is how long the lost incarnation's claims are held once the next S-0 exists:
// long enough for a driver that is not held to start and ask for its executors (some 20 s here).
const claimsHeldFor = 60 * time.Second

// TestRealSparkKeptAppIDWaitsForTheLostExecutorClaims (issue 34, "PVC reuse" for an app whose
// incarnations share one app id, as a DStream app's do: StreamingContext.getOrCreate restores the
// id its checkpoint holds). Real Spark 4.1.1, its executors each with an OnDemand claim (the
// driver owns them and reuses, by app id, any claim none of its executors mounts that is older
// than spark.kubernetes.allocation.executor.timeout, here 10 s, as every claim of a long-running
// stream is: ExecutorPodsAllocator.getReusablePVCs has no owner or deletion filter). The job keeps
// its first incarnation's app id (DriversetPi's keep-app-id), its executors are kept off the
// drivers' nodes, its driver's node is killed mid-job and declared out of service, and the lost
// incarnation's claims are held Terminating by a finalizer of the test's own until the next S-0
// has existed for claimsHeldFor (or one of its executors appears).
//
// Spark 4 labels the executor claims it makes with driverset.dev/driver (wrap's volume settings),
// and the incarnation gate holds the next S-0 while a lost incarnation's claim exists: the next
// driver never reuses one, and the job finishes once. Without the wait, the next driver started
// while the claims were Terminating, reused them, and its executors stayed Pending (the scheduler
// refuses a claim being deleted). make e2e-spark-alloc only.
func TestRealSparkKeptAppIDWaitsForTheLostExecutorClaims(t *testing.T) {
	c := newClaimsCase(t, "4.1.1", 8, corev1.ReadWriteOncePod)
	d, ns, pods, claims := c.d, c.ns, c.pods, c.claims
	c.conf["spark.kubernetes.allocation.executor.timeout"] = "10s"
	const placeholder = "pi-driver" // runSparkJob's
	names := contract.NamesFor(placeholder)
	var hold *claimHold
	r := runSparkJob(t, d, sparkJob{resilient: true, namespace: ns, keepAppID: true, conf: c.conf}, func(t *testing.T, r *sparkRun) {
		waitDriverLog(t, r, reRegistered, sparkExecutors)
		waitDriverLog(t, r, reAttempt, 1)
		hold = holdClaimsOf(t, ns, placeholder, pods)
		_, _, second := killDriverNodeAfter(t, r, reAttempt, 1, reAttempt)
		hold.wait(t)
		expectFreshClaims(t, pods, hold, second.pod)
	})
	pods.stop()
	claims.stop()
	r.expectSucceeded(t)
	ids := r.attempts()
	t.Logf("app ids of the driver JVMs: %v", ids)
	if len(ids) != 2 || ids[0] != ids[1] {
		r.logDrivers(t)
		t.Fatalf("want the driver started twice with one app id (keep-app-id), saw %v", ids)
	}
	for _, c := range claims.seen() {
		t.Logf("claim %s (app %s, %s=%q), owned by %s: created %s, delete seen %s, gone %s", c.name, c.app, contract.LabelDriver,
			c.driverLabel, c.owner, c.first.Format("15:04:05.0"), stamp(c.deleting), stamp(c.gone))
		if strings.HasPrefix(c.owner, "Pod "+names.DriverPodName()+" ") && c.driverLabel != names.StatefulSet {
			t.Errorf("executor claim %s carries %s=%q, want %q: Spark 4.1.1 did not take wrap's label setting", c.name, contract.LabelDriver, c.driverLabel, names.StatefulSet)
		}
	}
	if !hold.scheduledBeforeRelease.IsZero() {
		t.Errorf("the next incarnation was scheduled at %s, while the lost incarnation's claims %v still existed (released %s)",
			hold.scheduledBeforeRelease.Format("15:04:05.0"), hold.names, hold.released.Format("15:04:05.0"))
	}
	if !strings.Contains(hold.messageAtRelease, "executor claim(s)") {
		t.Errorf("while the claims were held the placeholder said %q, want what the driver waits for", hold.messageAtRelease)
	}
}

// claimHold is the lost incarnation's claims, held Terminating until release.
type claimHold struct {
	ns, placeholder string
	owner           string   // the lost S-0's UID
	names           []string // its executor claims
	done, stop      chan struct{}
	// What was seen when the hold was released: when, whether the next S-0 had been scheduled
	// (zero: not), and the placeholder's message.
	released               time.Time
	scheduledBeforeRelease time.Time
	messageAtRelease       string
	once                   sync.Once
}

// holdClaimsOf puts holdFinalizer on every executor claim the current S-0 of placeholder's app
// controls, and releases them (in the background) once another S-0 has existed for
// claimsHeldFor, or once one of its executors exists, or at the test's end.
func holdClaimsOf(t *testing.T, ns, placeholder string, pods *podWatch) *claimHold {
	t.Helper()
	ctx := context.Background()
	names := contract.NamesFor(placeholder)
	s0, err := kube().CoreV1().Pods(ns).Get(ctx, names.DriverPodName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := &claimHold{ns: ns, placeholder: placeholder, owner: string(s0.UID), done: make(chan struct{}), stop: make(chan struct{})}
	list, err := kube().CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		c := &list.Items[i]
		if ref := metav1.GetControllerOf(c); ref == nil || ref.UID != s0.UID {
			continue
		}
		h.edit(t, c.Name, func(f []string) []string { return append(f, holdFinalizer) })
		h.names = append(h.names, c.Name)
	}
	if len(h.names) == 0 {
		t.Fatalf("S-0 %s controls no claim: nothing to hold", s0.UID)
	}
	t.Logf("holding the claims %v of S-0 %s", h.names, s0.UID)
	t.Cleanup(func() {
		close(h.stop)
		h.release(t)
	})
	go func() {
		defer close(h.done)
		var since time.Time
		for {
			select {
			case <-h.stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
			next := pods.named(names.DriverPodName())
			if i := slices.IndexFunc(next, func(p podRecord) bool { return p.uid != h.owner }); i >= 0 {
				if since.IsZero() {
					since = time.Now()
				}
				own := slices.ContainsFunc(pods.executors(), func(e *podRecord) bool { return e.ownerUID == next[i].uid })
				if own || time.Since(since) >= claimsHeldFor {
					h.release(t)
					return
				}
			}
		}
	}()
	return h
}

// release lets the held claims go, once: it records what it saw first.
func (h *claimHold) release(t *testing.T) {
	h.once.Do(func() {
		ctx := context.Background()
		names := contract.NamesFor(h.placeholder)
		if p, err := kube().CoreV1().Pods(h.ns).Get(ctx, names.DriverPodName(), metav1.GetOptions{}); err == nil && string(p.UID) != h.owner && p.Spec.NodeName != "" {
			h.scheduledBeforeRelease = time.Now()
		}
		if p, err := kube().CoreV1().Pods(h.ns).Get(ctx, h.placeholder, metav1.GetOptions{}); err == nil {
			h.messageAtRelease = p.Status.Message
		}
		h.released = time.Now()
		for _, name := range h.names {
			h.edit(t, name, func(f []string) []string {
				return slices.DeleteFunc(f, func(s string) bool { return s == holdFinalizer })
			})
		}
		t.Logf("released the claims %v (the next S-0 scheduled before: %v; the placeholder said %q)", h.names,
			!h.scheduledBeforeRelease.IsZero(), h.messageAtRelease)
	})
}

// edit changes claim name's finalizers with change, retrying on conflicts; a claim gone is left.
func (h *claimHold) edit(t *testing.T, name string, change func([]string) []string) {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c, err := kube().CoreV1().PersistentVolumeClaims(h.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c.Finalizers = change(c.Finalizers)
		_, err = kube().CoreV1().PersistentVolumeClaims(h.ns).Update(context.Background(), c, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("claim %s's finalizers: %v", name, err)
	}
}

// wait waits until the hold has been released.
func (h *claimHold) wait(t *testing.T) {
	t.Helper()
	select {
	case <-h.done:
	case <-time.After(4 * time.Minute):
		t.Fatal("the lost incarnation's claims were never released")
	}
}

// expectFreshClaims waits until the next incarnation (the driver pod named pod) has
// sparkExecutors executors running, and fails at once when one of them mounts a held claim: the
// scheduler never places a pod whose claim is being deleted, so the job would never finish.
func expectFreshClaims(t *testing.T, pods *podWatch, h *claimHold, pod string) {
	t.Helper()
	waitFor(t, 3*time.Minute, "the next incarnation's executors running", func(context.Context) (bool, error) {
		s0 := pods.named(pod)
		if len(s0) == 0 {
			return false, nil
		}
		uid := types.UID(s0[len(s0)-1].uid)
		running := 0
		for _, e := range pods.executors() {
			if types.UID(e.ownerUID) != uid {
				continue
			}
			for _, c := range e.claims {
				if slices.Contains(h.names, c) {
					return false, fmt.Errorf("executor %s of the next incarnation mounts %s, a claim of the lost incarnation (held Terminating): it cannot be scheduled", e.name, c)
				}
			}
			if e.runningNow {
				running++
			}
		}
		return running >= sparkExecutors, nil
	})
}
