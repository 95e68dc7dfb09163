package controller

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func newMetrics(t *testing.T) (*prometheus.Registry, *Metrics) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	return reg, m
}

func family(t *testing.T, reg *prometheus.Registry, name string) *dto.MetricFamily {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f
		}
	}
	return nil
}

// counterValue is the value of the unlabelled counter name (0 when it was never gathered).
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	f := family(t, reg, name)
	if f == nil || len(f.Metric) == 0 {
		return 0
	}
	return f.Metric[0].GetCounter().GetValue()
}

// histogram is the sample count and sum of the histogram name for cause.
func histogram(t *testing.T, reg *prometheus.Registry, name, cause string) (uint64, float64) {
	t.Helper()
	f := family(t, reg, name)
	if f == nil {
		return 0, 0
	}
	for _, m := range f.Metric {
		for _, l := range m.Label {
			if l.GetName() == "cause" && l.GetValue() == cause {
				return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
			}
		}
	}
	return 0, 0
}

func TestNewMetricsRegisters(t *testing.T) {
	reg, m := newMetrics(t)
	m.recovered(CauseOutOfService, 95*time.Second)
	m.fenced()
	m.restarted()
	m.restarted()
	want := map[string]dto.MetricType{
		"driverset_driver_recoveries_total": dto.MetricType_COUNTER,
		"driverset_driver_recovery_seconds": dto.MetricType_HISTOGRAM,
		"driverset_driver_restarts_total":   dto.MetricType_COUNTER,
		"driverset_drivers_fenced_total":    dto.MetricType_COUNTER,
	}
	for name, typ := range want {
		f := family(t, reg, name)
		if f == nil {
			t.Errorf("%s not registered", name)
			continue
		}
		if f.GetType() != typ || f.GetHelp() == "" {
			t.Errorf("%s: type %s help %q, want %s with help", name, f.GetType(), f.GetHelp(), typ)
		}
	}
	if count, sum := histogram(t, reg, "driverset_driver_recovery_seconds", CauseOutOfService); count != 1 || sum != 95 {
		t.Errorf("recovery histogram: count %d sum %v, want one observation of 95s", count, sum)
	}
	if f := family(t, reg, "driverset_driver_recoveries_total"); f == nil || f.Metric[0].GetCounter().GetValue() != 1 {
		t.Errorf("recoveries counter = %v, want 1", f)
	}
	if got := counterValue(t, reg, "driverset_driver_restarts_total"); got != 2 {
		t.Errorf("restarts = %v, want 2", got)
	}
	if got := counterValue(t, reg, "driverset_drivers_fenced_total"); got != 1 {
		t.Errorf("fenced = %v, want 1", got)
	}

	// A second set on the same registry is refused: the collectors really are in it.
	var already prometheus.AlreadyRegisteredError
	if _, err := NewMetrics(reg); !errors.As(err, &already) {
		t.Errorf("NewMetrics on a registry that has them: %v, want AlreadyRegisteredError", err)
	}
}

func TestNilMetricsAreNoOps(t *testing.T) {
	var m *Metrics
	m.recovered(CauseFenced, time.Second)
	m.fenced()
	m.restarted()
}
