package controller

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driverset/driverset/contract"
)

// DriverStates is a prometheus.Collector of the managed drivers by state, computed at scrape
// time from the placeholder cache (stateOf says how), so nothing is kept between scrapes and the
// numbers cannot drift from the cluster.
//
// Only the leader reports them: every replica's cache holds every placeholder, so summing the
// replicas would count each driver twice. A replica that is not the leader reports no series;
// dashboards and alerts aggregate with sum() or max() and see one set.
type DriverStates struct {
	// Placeholders is the placeholder cache (PlaceholderCacheOptions).
	Placeholders client.Reader
	// Elected is closed once this replica leads (the manager's Elected()); nil: it leads.
	Elected <-chan struct{}
	Now     func() time.Time

	states *prometheus.Desc
	oldest *prometheus.Desc
}

// scrapeTimeout bounds the cache list of one scrape (a list from an informer cache never
// waits on the apiserver; this is for a cache that is not synced yet).
const scrapeTimeout = 5 * time.Second

// NewDriverStates makes the collector; serve registers it on controller-runtime's registry.
func NewDriverStates(placeholders client.Reader, elected <-chan struct{}) *DriverStates {
	return &DriverStates{
		Placeholders: placeholders,
		Elected:      elected,
		Now:          time.Now,
		states: prometheus.NewDesc("driverset_drivers",
			"Drivers that driverset manages, by state (reported by the leader only).",
			[]string{"state"}, nil),
		oldest: prometheus.NewDesc("driverset_drivers_waiting_for_admin_oldest_seconds",
			"How long the driver that has waited longest for an admin on a lost node has waited; 0 when none waits (reported by the leader only).",
			nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (d *DriverStates) Describe(ch chan<- *prometheus.Desc) {
	ch <- d.states
	ch <- d.oldest
}

// Collect implements prometheus.Collector.
func (d *DriverStates) Collect(ch chan<- prometheus.Metric) {
	if !d.leads() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	var pods corev1.PodList
	// Read only: the cache's objects are counted, never kept or changed.
	if err := d.Placeholders.List(ctx, &pods, client.MatchingLabels{contract.LabelPlaceholder: "true"}, client.UnsafeDisableDeepCopy); err != nil {
		// No series rather than an invalid one: controller-runtime's handler fails the whole
		// scrape on an invalid metric, and every other metric would be lost with it.
		return
	}
	counts, oldest := tally(pods.Items, d.Now())
	for _, s := range allDriverStates() {
		ch <- prometheus.MustNewConstMetric(d.states, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
	ch <- prometheus.MustNewConstMetric(d.oldest, prometheus.GaugeValue, oldest.Seconds())
}

func (d *DriverStates) leads() bool {
	if d.Elected == nil {
		return true
	}
	select {
	case <-d.Elected:
		return true
	default:
		return false
	}
}
