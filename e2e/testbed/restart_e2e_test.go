//go:build testbed

package testbed

import (
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
		if err := c.checkAlive(); err != nil {
			t.Fatalf("after restart %d: %v", i, err)
		}
	}
}
