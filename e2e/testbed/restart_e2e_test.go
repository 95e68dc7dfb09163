//go:build testbed

package testbed

import (
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RestartComponent crashes each control-plane component and brings it back with its data: a new
// process each time, what was written before the crash still there, and the controller-manager
// working again (a StatefulSet made after its restart gets its pod). On its own test bed: the
// restarts would disturb TestOnTestbed's parallel scenarios.
func TestRestartComponent(t *testing.T) {
	c := StartT(t, Options{Nodes: 1})
	ctx := t.Context()
	ns := newNamespace(t, c, "restart")
	cms := c.Client.CoreV1().ConfigMaps(ns)
	for i, name := range []string{ComponentEtcd, ComponentAPIServer, ComponentControllerManager} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before-" + name}}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		before := c.PIDs()[name]
		down, err := c.RestartComponent(ctx, name)
		if err != nil {
			t.Fatalf("restart %s: %v", name, err)
		}
		after := c.PIDs()[name]
		t.Logf("%s restarted: pid %d -> %d, down %s", name, before, after, down.Round(time.Millisecond))
		if before == 0 || after == 0 || before == after {
			t.Errorf("%s: pid %d before, %d after the restart; want two different processes", name, before, after)
		}
		waitFor := func(what string, ok func() bool) {
			t.Helper()
			deadline := time.Now().Add(time.Minute)
			for !ok() {
				if time.Now().After(deadline) {
					t.Fatalf("after restarting %s: %s", name, what)
				}
				time.Sleep(pollInterval)
			}
		}
		waitFor("the ConfigMap written before the crash is read back", func() bool {
			_, err := cms.Get(ctx, cm.Name, metav1.GetOptions{})
			return err == nil
		})
		app := "after-" + name
		sts := newStatefulSet(app, c.Nodes())
		waitFor("a StatefulSet is created", func() bool {
			_, err := c.Client.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{})
			return err == nil
		})
		waitForPod(t, c, ns, app, time.Minute, "the pod of a StatefulSet made after the restart", podRunning)
		if err := c.CheckAlive(); err != nil {
			t.Fatalf("after restart %d: %v", i, err)
		}
	}
}

// A scheduler that exits by itself (it calls klog.FlushAndExit when its cache disagrees with
// an informer, as after an apiserver restart in CI) is restarted as its kubelet would restart
// it, and pods are scheduled again; one that keeps exiting is reported, not restarted forever.
func TestExitedSchedulerIsRestarted(t *testing.T) {
	c := StartT(t, Options{Nodes: 1})
	ctx := t.Context()
	ns := newNamespace(t, c, "supervise")
	exit := func() int {
		t.Helper()
		pid := c.PIDs()[ComponentScheduler]
		if pid == 0 {
			t.Fatalf("no kube-scheduler running: %v", c.PIDs())
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		return pid
	}
	before := exit()
	// Down until the supervisor has started it again, not down for good: the tests' waits call
	// CheckAlive on every poll, and must not fail in that second.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if err := c.CheckAlive(); err != nil {
			t.Fatalf("CheckAlive while the supervisor restarts the scheduler: %v", err)
		}
		if pid := c.PIDs()[ComponentScheduler]; pid != 0 && pid != before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("kube-scheduler was not restarted within 30s")
		}
	}
	app := "after-exit"
	if _, err := c.Client.AppsV1().StatefulSets(ns).Create(ctx, newStatefulSet(app, c.Nodes()), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForPod(t, c, ns, app, time.Minute, "the pod of a StatefulSet made after the scheduler exited", podRunning)
	if after := c.PIDs()[ComponentScheduler]; after == 0 || after == before {
		t.Errorf("kube-scheduler: pid %d before its exit, %d after; want a new process", before, after)
	}
	if got := c.Restarts()[ComponentScheduler]; got != 1 {
		t.Errorf("Restarts()[kube-scheduler] = %d, want 1", got)
	}
	if err := c.CheckAlive(); err != nil {
		t.Fatalf("after one exit: %v", err)
	}

	// Two more exits within crashLoopWindow: a crash loop, which the next wait reports. Each kill
	// waits for the process that replaced the last one killed.
	last := before
	for range crashLoopExits - 1 {
		deadline := time.Now().Add(30 * time.Second)
		for pid := c.PIDs()[ComponentScheduler]; pid == 0 || pid == last; pid = c.PIDs()[ComponentScheduler] {
			if time.Now().After(deadline) {
				t.Fatal("kube-scheduler was not restarted within 30s")
			}
			time.Sleep(pollInterval)
		}
		last = exit()
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := c.CheckAlive()
		if err != nil {
			if !strings.Contains(err.Error(), ComponentScheduler+" exited") {
				t.Errorf("CheckAlive = %v; want the crash-looping kube-scheduler named", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a kube-scheduler that exited %d times is not reported: %v", crashLoopExits, c.PIDs())
		}
		time.Sleep(pollInterval)
	}
	if got := c.Restarts()[ComponentScheduler]; got != crashLoopExits-1 {
		t.Errorf("Restarts()[kube-scheduler] = %d, want %d", got, crashLoopExits-1)
	}
}
