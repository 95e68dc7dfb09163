package controller

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// mayRelease is what releases.driverset.dev admits of driverset's token taking its finalizer off a
// driver pod: what the reconcilers release on, and nothing less. (That each release they make
// passes it is checked by the harness and the model: cluster.checkRelease asks MayRelease.)
func TestMayRelease(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "team-a"}}
	deletedApp := p.DeepCopy()
	deletedApp.DeletionTimestamp = &metav1.Time{Time: t0}
	endedApp := p.DeepCopy()
	endedApp.Status.Phase = corev1.PodFailed
	running := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pi-ds-0", Namespace: "team-a", UID: "uid-s0"},
		Spec:       corev1.PodSpec{NodeName: "node-a"},
		Status:     runningStatus(t0.Add(-time.Hour)),
	}
	runningDeleted := running.DeepCopy()
	runningDeleted.DeletionTimestamp = &metav1.Time{Time: t0.Add(-time.Minute)}
	exitedDeleted := runningDeleted.DeepCopy()
	exitedDeleted.Status = exitedStatus(1, t0.Add(-2*time.Minute))
	counted := p.DeepCopy()
	setRestart(counted, recordRestartStep{Used: 1, Total: 1, Incarnation: exitedDeleted.UID})
	stoppedOutside := runningDeleted.DeepCopy()
	stoppedOutside.Status.Phase = corev1.PodFailed

	for _, tc := range []struct {
		name        string
		pod, holder *corev1.Pod
		down        bool
		want        bool
		why         string
	}{
		{name: "running, its node Ready", pod: running, holder: p, why: "not deleted"},
		{name: "running, its app gone, its node Ready", pod: running, why: "not deleted"},
		{name: "running, its node fenced (the fence releases, then force-deletes)", pod: running, holder: p, down: true, want: true, why: "stopped from outside"},
		{name: "deleted, its driver may still run on a node not proven down", pod: runningDeleted, holder: p, why: "may still run"},
		{name: "deleted, its driver may still run, its node proven down", pod: runningDeleted, holder: p, down: true, want: true, why: "stopped from outside"},
		{name: "deleted, its exit not read yet", pod: exitedDeleted, holder: p, why: "exit 1 is not read yet"},
		{name: "deleted, its exit not read yet, its node down", pod: exitedDeleted, holder: p, down: true, why: "exit 1 is not read yet"},
		{name: "deleted, its exit counted", pod: exitedDeleted, holder: counted, want: true, why: "exit is counted"},
		{name: "deleted, ended with no exit of its own", pod: stoppedOutside, holder: p, want: true, why: "stopped from outside"},
		{name: "deleted, its app gone", pod: runningDeleted, want: true, why: "app is gone"},
		{name: "deleted, its app ended", pod: exitedDeleted, holder: endedApp, want: true, why: "app has ended"},
		{name: "deleted, its app being deleted, its driver may still run", pod: runningDeleted, holder: deletedApp, why: "not proven down"},
		{name: "deleted, its app being deleted, its node proven down", pod: runningDeleted, holder: deletedApp, down: true, want: true, why: "being deleted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := mayRelease(tc.pod, tc.holder, tc.down, t0)
			if got != tc.want {
				t.Errorf("mayRelease = %v (%s), want %v", got, why, tc.want)
			}
			if !strings.Contains(why, tc.why) {
				t.Errorf("why = %q, does not name %q", why, tc.why)
			}
		})
	}
}

// MayRelease reads what it decides on from the apiserver: the placeholder (through S-0's
// StatefulSet) and the Node; and lets a placeholder go only once it is deleted and its S-0 gone.
func TestMayReleaseReadsLive(t *testing.T) {
	h := runningCluster(t, nil, nil)
	ask := func(pod *corev1.Pod) (bool, string) {
		t.Helper()
		ok, why, err := h.r.MayRelease(h.ctx, pod)
		if err != nil {
			t.Fatal(err)
		}
		return ok, why
	}
	if ok, why := ask(h.driver()); ok {
		t.Errorf("a running S-0 on its Ready node may be let go: %s", why)
	}
	if err := h.c.Delete(h.ctx, h.driver()); err != nil {
		t.Fatal(err)
	}
	if ok, why := ask(h.driver()); ok || !strings.Contains(why, "may still run") {
		t.Errorf("a deleted S-0 whose driver may still run on its Ready node: %v, %s", ok, why)
	}
	if ok, why := ask(h.placeholder()); ok || !strings.Contains(why, "not deleted") {
		t.Errorf("the placeholder of a running app: %v, %s", ok, why)
	}
	var node corev1.Node
	if err := h.c.Get(h.ctx, client.ObjectKey{Name: "node-a"}, &node); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Delete(h.ctx, &node); err != nil {
		t.Fatal(err)
	}
	if ok, why := ask(h.driver()); !ok {
		t.Errorf("a deleted S-0 whose Node is gone is held: %s", why)
	}

	if err := h.c.Delete(h.ctx, h.placeholder()); err != nil {
		t.Fatal(err)
	}
	if ok, why := ask(h.placeholder()); ok || !strings.Contains(why, "still there") {
		t.Errorf("a deleted placeholder whose S-0 is there: %v, %s", ok, why)
	}
	h.stopped(h.names.DriverPodName())
	h.releaseOutcome()
	if d := h.driver(); d != nil {
		t.Fatalf("S-0 still there: %v", d.Finalizers)
	}
	if ok, why := ask(h.placeholder()); !ok {
		t.Errorf("a deleted placeholder whose S-0 is gone is held: %s", why)
	}
}

// An ended S-0 not deleted yet (its kubelet evicted it, say) on a Node that is then deleted: the
// fence releases it before its force-delete, so MayRelease must read its node too (`make model`,
// "everything" 4 deep, found the fence refused when it did not).
func TestMayReleaseAnEndedDriverOnAGoneNode(t *testing.T) {
	h := runningCluster(t, nil, nil)
	st := runningStatus(t0)
	st.Phase = corev1.PodFailed
	st.Reason = "Evicted"
	d := h.setDriverStatus(st)
	if ok, why, err := h.r.MayRelease(h.ctx, d); err != nil || ok {
		t.Errorf("an ended S-0 on its Ready node, not deleted: %v, %s (%v)", ok, why, err)
	}
	var node corev1.Node
	if err := h.c.Get(h.ctx, client.ObjectKey{Name: d.Spec.NodeName}, &node); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Delete(h.ctx, &node); err != nil {
		t.Fatal(err)
	}
	if ok, why, err := h.r.MayRelease(h.ctx, d); err != nil || !ok {
		t.Errorf("an ended S-0 whose Node is gone is held: %v, %s (%v)", ok, why, err)
	}
}
