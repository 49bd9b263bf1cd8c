package export

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Export states, as the fleetnet_agent_exports gauge labels them.
const (
	StateInvalid  = "invalid"
	StatePending  = "pending"
	StateExported = "exported"
	StateConflict = "conflict"
)

// StateCollector reports the ServiceExports of the cluster by state, read
// from the informer cache when scraped.
type StateCollector struct {
	Reader client.Reader
	desc   *prometheus.Desc
}

// NewStateCollector returns a collector over reader (a cached client).
func NewStateCollector(reader client.Reader) *StateCollector {
	return &StateCollector{Reader: reader, desc: prometheus.NewDesc("fleetnet_agent_exports", "ServiceExports by state: invalid, pending, exported, conflict (exported with a conflict).", []string{"state"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *StateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *StateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list := &mcsv1beta1.ServiceExportList{}
	if err := c.Reader.List(ctx, list); errors.As(err, new(*cache.ErrCacheNotStarted)) {
		// Starting up: the gauge appears once there is something to count.
		// An error here would fail the whole scrape.
		return
	} else if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	counts := map[string]float64{StateInvalid: 0, StatePending: 0, StateExported: 0, StateConflict: 0}
	for _, se := range list.Items {
		counts[State(&se)]++
	}
	for state, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, n, state)
	}
}

// State classifies a ServiceExport by its conditions.
func State(se *mcsv1beta1.ServiceExport) string {
	conds := se.Status.Conditions
	switch {
	case meta.IsStatusConditionFalse(conds, string(mcsv1beta1.ServiceExportConditionValid)):
		return StateInvalid
	case !meta.IsStatusConditionTrue(conds, string(mcsv1beta1.ServiceExportConditionReady)):
		return StatePending
	case meta.IsStatusConditionTrue(conds, string(mcsv1beta1.ServiceExportConditionConflict)):
		return StateConflict
	}
	return StateExported
}
