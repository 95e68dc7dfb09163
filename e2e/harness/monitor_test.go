package harness

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/driverset/driverset/contract"
)

// driverPod is a spark-role=driver pod named name of app (no app id when ""), with uid
// name-<incarnation>, bound to node ("" for unbound) in phase.
func driverPod(name, app, node string, phase corev1.PodPhase) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid-0000"),
			Labels: map[string]string{contract.LabelSparkRole: contract.RoleDriver}},
		Spec:   corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: phase},
	}
	if app != "" {
		p.Labels[contract.LabelSparkAppSelector] = app
	}
	return p
}

// incarnation is p as a new pod object of the same name (a StatefulSet's next S-0).
func incarnation(p *corev1.Pod, n string) *corev1.Pod {
	p = p.DeepCopy()
	p.UID = types.UID(p.Name + "-uid-" + n)
	return p
}

// terminating is p with a deletionTimestamp: deleted, but not gone (its node has not confirmed).
func terminating(p *corev1.Pod) *corev1.Pod {
	p = p.DeepCopy()
	now := metav1.Now()
	p.DeletionTimestamp = &now
	return p
}

func withPhase(p *corev1.Pod, phase corev1.PodPhase) *corev1.Pod {
	p = p.DeepCopy()
	p.Status.Phase = phase
	return p
}

type event struct {
	pod     *corev1.Pod
	deleted bool
	old     *corev1.Pod // an update's previous object, as the informer gives it (nil: not given)
}

func upd(p *corev1.Pod) event { return event{pod: p} }
func del(p *corev1.Pod) event { return event{pod: p, deleted: true} }

// replaced is the update an informer gives when its relist finds p's name held by next: it keys
// pods by name, so the old object's deletion never comes as an event of its own.
func replaced(p, next *corev1.Pod) event { return event{pod: next, old: p} }

func (e event) apply(l *ledger) {
	if e.old != nil {
		l.update(e.old, e.pod, time.Now())
		return
	}
	l.observe(e.pod, e.deleted, time.Now())
}

// Each way the at-most-one invariant can be broken, as the monitor sees it in its watch events,
// and the look-alikes that are not violations.
func TestLedgerSpec(t *testing.T) {
	s0 := driverPod("app-driver-sts-0", "spark-1", "node-1", corev1.PodRunning)
	s0next := incarnation(s0, "0001")
	s0next.Spec.NodeName = "node-2"
	placeholder := driverPod("app-driver", "spark-1", "", corev1.PodPending)
	cases := []struct {
		name   string
		events []event
		want   []string // the pods of each violation, by name
	}{
		// Node loss: the old driver's pod is Terminating on a dead node, where its process may
		// still run. Its successor bound elsewhere is the double driver the product prevents.
		{"terminating on a dead node, successor bound", []event{
			upd(s0), upd(terminating(s0)), upd(s0next),
		}, []string{"app-driver-sts-0,app-driver-sts-0"}},
		{"terminating, then gone, then successor bound", []event{
			upd(s0), upd(terminating(s0)), del(terminating(s0)), upd(s0next),
		}, nil},
		{"two pods of one app bound at once", []event{
			upd(s0), upd(driverPod("other-driver", "spark-1", "node-3", corev1.PodPending)),
		}, []string{"app-driver-sts-0,other-driver"}},
		{"a pod re-created after deletion", []event{
			upd(s0), del(s0), upd(s0next),
		}, nil},
		{"a pod re-created before its predecessor's deletion was seen", []event{
			upd(s0), upd(s0next), del(s0),
		}, []string{"app-driver-sts-0,app-driver-sts-0"}},
		// After the watch broke (an apiserver or etcd restart), the relist finds S-0's name held
		// by the next incarnation: the one before is gone from the apiserver, since a name is
		// held by one object at a time (CI, TestChaos: 18 violations of this shape).
		{"replaced under its name, seen in a relist", []event{
			upd(s0), replaced(s0, s0next),
		}, nil},
		{"replaced under its name while Terminating, seen in a relist", []event{
			upd(s0), upd(terminating(s0)), replaced(terminating(s0), s0next),
		}, nil},
		{"unbound placeholder beside its driver", []event{
			upd(placeholder), upd(s0),
		}, nil},
		{"two apps", []event{
			upd(s0), upd(driverPod("b-0", "spark-2", "node-2", corev1.PodRunning)),
		}, nil},
		// Finished pods are excluded: a Succeeded or Failed driver runs nothing, though it is
		// bound and its object remains.
		{"failed driver and its successor", []event{
			upd(withPhase(s0, corev1.PodFailed)), upd(s0next),
		}, nil},
		{"driver finishes, then a successor", []event{
			upd(s0), upd(withPhase(s0, corev1.PodSucceeded)), upd(s0next),
		}, nil},
		{"a driver finishing after its successor was bound", []event{
			upd(s0), upd(s0next), upd(withPhase(s0, corev1.PodFailed)),
		}, []string{"app-driver-sts-0,app-driver-sts-0"}},
		// Driver pods without an app id (a notebook's, a client-mode driver) are each their
		// own: two of them are not two drivers of one app.
		{"two driver pods without an app id", []event{
			upd(driverPod("notebook-a", "", "node-1", corev1.PodRunning)), upd(driverPod("notebook-b", "", "node-2", corev1.PodRunning)),
		}, nil},
		{"a pod without an app id and its own next incarnation", []event{
			upd(driverPod("x-0", "", "node-1", corev1.PodRunning)), upd(incarnation(driverPod("x-0", "", "node-2", corev1.PodRunning), "0001")),
		}, []string{"x-0,x-0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger()
			for _, e := range tc.events {
				e.apply(&l)
			}
			var got []string
			for _, v := range l.violations {
				var names []string
				for _, p := range v.Pods {
					names = append(names, p[:strings.IndexByte(p, '(')])
				}
				got = append(got, strings.Join(names, ","))
			}
			if strings.Join(got, ";") != strings.Join(tc.want, ";") {
				t.Errorf("violations = %v, want %v", l.violations, tc.want)
			}
		})
	}
}

// Each pod object of a name is an incarnation, counted once however often it changes, deleted
// ones included.
func TestLedgerIncarnations(t *testing.T) {
	s0 := driverPod("app-driver-sts-0", "spark-1", "node-1", corev1.PodRunning)
	s1, s2 := incarnation(s0, "0001"), incarnation(s0, "0002")
	l := newLedger()
	for _, e := range []event{upd(s0), upd(terminating(s0)), del(s0), upd(s1), upd(withPhase(s1, corev1.PodFailed)), del(s1), upd(s2), del(s2),
		upd(driverPod("other", "spark-2", "node-1", corev1.PodRunning))} {
		l.observe(e.pod, e.deleted, time.Now())
	}
	got := l.uids["ns/app-driver-sts-0"]
	want := []types.UID{s0.UID, s1.UID, s2.UID}
	if !slices.Equal(got, want) {
		t.Errorf("incarnations = %v, want %v", got, want)
	}
}

// Through a watch: the monitor flags two bound, unfinished driver pods of one app, and nothing else.
func TestMonitorFlagsTwoBoundDriversOfOneApp(t *testing.T) {
	cases := []struct {
		name string
		pods []*corev1.Pod
		want int
	}{
		{"one driver", []*corev1.Pod{driverPod("a-0", "app-a", "n1", corev1.PodRunning)}, 0},
		{"placeholder and driver", []*corev1.Pod{driverPod("a", "app-a", "", corev1.PodRunning), driverPod("a-0", "app-a", "n1", corev1.PodRunning)}, 0},
		{"two apps", []*corev1.Pod{driverPod("a-0", "app-a", "n1", corev1.PodRunning), driverPod("b-0", "app-b", "n2", corev1.PodRunning)}, 0},
		{"finished and new", []*corev1.Pod{driverPod("old", "app-a", "n1", corev1.PodFailed), driverPod("new", "app-a", "n2", corev1.PodRunning)}, 0},
		{"two bound drivers of one app", []*corev1.Pod{driverPod("old", "app-a", "n1", corev1.PodRunning), driverPod("new", "app-a", "n2", corev1.PodPending)}, 1},
		{"terminating and new", []*corev1.Pod{terminating(driverPod("old", "app-a", "n1", corev1.PodRunning)), driverPod("new", "app-a", "n2", corev1.PodPending)}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset()
			m, err := StartMonitor(context.Background(), c, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Stop()
			for _, p := range tc.pods {
				if _, err := c.CoreV1().Pods("ns").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if err := m.Check(context.Background(), ""); err != nil {
				t.Fatal(err)
			}
			if got := len(m.Violations("ns")); got != tc.want {
				t.Errorf("violations = %v, want %d", m.Violations("ns"), tc.want)
			}
			if got := m.Events("ns"); got != len(tc.pods) {
				t.Errorf("events = %d, want %d", got, len(tc.pods))
			}
		})
	}
}

// A monitor whose watch delivers nothing, or that was stopped, fails Check: a scenario cannot
// pass on a dead monitor. A live one passes it.
func TestMonitorCheckFailsOnADeadWatch(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name    string
		breakIt func(c *fake.Clientset) func(m *Monitor) // before start; returns what to do after
		wantErr string
	}{
		{"live", func(*fake.Clientset) func(*Monitor) { return func(*Monitor) {} }, ""},
		{"the watch delivers nothing", func(c *fake.Clientset) func(*Monitor) {
			// The list works, the watch is a silent stream that never ends: a hung connection.
			c.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
				return true, watch.NewFake(), nil
			})
			return func(*Monitor) {}
		}, "has not seen driver pods [ns/new"},
		// A watch that breaks is re-listed by the informer: it has missed nothing, and passes.
		{"the watch fails and is re-listed", func(c *fake.Clientset) func(*Monitor) {
			c.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
				return true, nil, errors.New("connection refused")
			})
			return func(*Monitor) {}
		}, ""},
		{"stopped", func(*fake.Clientset) func(*Monitor) { return func(m *Monitor) { m.Stop() } }, "has stopped"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset()
			after := tc.breakIt(c)
			m, err := StartMonitor(ctx, c, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Stop()
			after(m)
			if tc.name == "stopped" {
				// Stopped, though it has seen everything so far: what comes next it will not.
				if err := m.check(ctx, "", time.Second); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("Check of a stopped monitor that saw everything = %v, want an error with %q", err, tc.wantErr)
				}
			}
			if _, err := c.CoreV1().Pods("ns").Create(ctx, driverPod("new", "app-a", "n1", corev1.PodRunning), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			within := time.Second // enough for a live watch; a failing Check waits all of it
			if tc.wantErr == "" {
				within = checkWithin // the informer re-lists after a backoff of about a second
			}
			err = m.check(ctx, "", within)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Check = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Check = %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
}
