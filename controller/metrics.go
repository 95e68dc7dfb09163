package controller

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the controller's Prometheus metrics.
type Metrics struct {
	Recoveries    *prometheus.CounterVec
	RecoveryTime  *prometheus.HistogramVec
	Restarts      prometheus.Counter
	FencedDrivers prometheus.Counter
}

// NewMetrics makes the metrics and registers them with reg (controller-runtime's
// metrics.Registry in production, a fresh registry in tests).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Recoveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "driverset_driver_recoveries_total",
			Help: "Drivers that run again after their node or pod was lost, by recovery path.",
		}, []string{"cause"}),
		RecoveryTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "driverset_driver_recovery_seconds",
			Help:    "Time from losing a driver (node not Ready, deleted, or pod removed) to its new incarnation Running.",
			Buckets: []float64{1, 2, 5, 10, 20, 30, 45, 60, 90, 120, 300, 600, 1800},
		}, []string{"cause"}),
		Restarts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "driverset_driver_restarts_total",
			Help: "New driver incarnations made after the driver process failed.",
		}),
		FencedDrivers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "driverset_drivers_fenced_total",
			Help: "Driver pods force-deleted because their node was unreachable longer than fence-after.",
		}),
	}
	for _, c := range []prometheus.Collector{m.Recoveries, m.RecoveryTime, m.Restarts, m.FencedDrivers} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// recovered and fenced tolerate nil Metrics (unit tests of the reconciler).
func (m *Metrics) recovered(cause string, took time.Duration) {
	if m == nil {
		return
	}
	m.Recoveries.WithLabelValues(cause).Inc()
	m.RecoveryTime.WithLabelValues(cause).Observe(took.Seconds())
}

func (m *Metrics) fenced() {
	if m != nil {
		m.FencedDrivers.Inc()
	}
}

func (m *Metrics) restarted() {
	if m != nil {
		m.Restarts.Inc()
	}
}
