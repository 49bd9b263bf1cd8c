package e2e

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/fleetnet/fleetnet/test/fleet"
	"github.com/fleetnet/fleetnet/test/metricsdoc"
)

// TestMetricsAsDocumented scrapes every component of the fleet: each
// fleetnet family it exports is on docs/metrics.md, with that type and
// only labels listed there, and each component exports one at least.
func TestMetricsAsDocumented(t *testing.T) {
	doc, err := metricsdoc.Read(filepath.Join("..", "..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	addrs := state.MetricsAddresses()
	for _, component := range slices.Sorted(maps.Keys(addrs)) {
		t.Run(component, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			families, err := fleet.ScrapeMetrics(ctx, "http://"+addrs[component]+"/metrics")
			if err != nil {
				t.Fatal(err)
			}
			ours := 0
			for _, name := range slices.Sorted(maps.Keys(families)) {
				if !strings.HasPrefix(name, "fleetnet_") && !strings.HasPrefix(name, "coredns_fleetnet_") {
					continue
				}
				ours++
				f := families[name]
				d, ok := doc[name]
				if !ok {
					t.Errorf("%s exports %s, which docs/metrics.md does not list", component, name)
					continue
				}
				if got := strings.ToLower(f.GetType().String()); got != d.Type {
					t.Errorf("%s: type %s, docs/metrics.md says %s", name, got, d.Type)
				}
				for _, m := range f.GetMetric() {
					for _, l := range labels(m) {
						if !slices.Contains(d.Labels, l) {
							t.Errorf("%s: label %q, which docs/metrics.md does not list (%v)", name, l, d.Labels)
						}
					}
				}
			}
			if ours == 0 {
				t.Errorf("%s exports no fleetnet metric", component)
			}
		})
	}
}

func labels(m *dto.Metric) []string {
	var out []string
	for _, l := range m.GetLabel() {
		out = append(out, l.GetName())
	}
	return out
}
