package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestDriverStatesCollector(t *testing.T) {
	now := t0
	lost := placeholderIn(corev1.PodRunning, runningState, &lostRecord{Since: now.Add(-90 * time.Second), Cause: CauseNodeLost})
	lost.Name = "lost-driver"
	done := placeholderIn(corev1.PodSucceeded, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}, nil)
	done.Name = "done-driver"
	runs := placeholderIn(corev1.PodRunning, runningState, nil)
	c := fake.NewClientBuilder().WithObjects(&lost, &done, &runs).Build()

	elected := make(chan struct{})
	d := NewDriverStates(c, elected)
	d.Now = func() time.Time { return now }
	reg := prometheus.NewRegistry()
	reg.MustRegister(d)

	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Errorf("before the election: %d series (%v), want none: only the leader reports", n, err)
	}
	close(elected)
	want := `
# HELP driverset_drivers Drivers that driverset manages, by state (reported by the leader only).
# TYPE driverset_drivers gauge
driverset_drivers{state="blocked"} 0
driverset_drivers{state="failed"} 0
driverset_drivers{state="fencing"} 0
driverset_drivers{state="pending"} 0
driverset_drivers{state="recovering"} 0
driverset_drivers{state="restarting"} 0
driverset_drivers{state="running"} 1
driverset_drivers{state="succeeded"} 1
driverset_drivers{state="waiting-for-admin"} 1
# HELP driverset_drivers_waiting_for_admin_oldest_seconds How long the driver that has waited longest for an admin on a lost node has waited; 0 when none waits (reported by the leader only).
# TYPE driverset_drivers_waiting_for_admin_oldest_seconds gauge
driverset_drivers_waiting_for_admin_oldest_seconds 90
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// A placeholder of an app that ended and was deleted is no longer counted: the gauge is the
// cache as it is at the scrape, with no memory of its own.
func TestDriverStatesFollowTheCache(t *testing.T) {
	runs := placeholderIn(corev1.PodRunning, runningState, nil)
	c := fake.NewClientBuilder().WithObjects(&runs).Build()
	d := NewDriverStates(c, nil)
	if got := testutil.ToFloat64(stateGauge(d, StateRunning)); got != 1 {
		t.Fatalf("running = %v, want 1", got)
	}
	if err := c.Delete(t.Context(), &runs); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(stateGauge(d, StateRunning)); got != 0 {
		t.Errorf("running after the placeholder is gone = %v, want 0", got)
	}
}

// stateGauge is the one series of d for state, as a collector testutil.ToFloat64 can read.
func stateGauge(d *DriverStates, state DriverState) prometheus.Collector {
	return collectorFunc(func(ch chan<- prometheus.Metric) {
		all := make(chan prometheus.Metric, 16)
		d.Collect(all)
		close(all)
		for m := range all {
			if strings.Contains(m.Desc().String(), `"driverset_drivers"`) && labelValue(m, "state") == string(state) {
				ch <- m
			}
		}
	})
}

type collectorFunc func(chan<- prometheus.Metric)

func (f collectorFunc) Describe(chan<- *prometheus.Desc)    {}
func (f collectorFunc) Collect(ch chan<- prometheus.Metric) { f(ch) }

func labelValue(m prometheus.Metric, name string) string {
	pb := &dto.Metric{}
	_ = m.Write(pb)
	for _, l := range pb.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
