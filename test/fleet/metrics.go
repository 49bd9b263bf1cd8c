package fleet

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// APIWrites returns how many create, update, patch and delete requests the
// cluster's API server has served for the given resources (all when none
// are named), from its own apiserver_request_total metric.
func (c *Cluster) APIWrites(t testing.TB, resources ...string) float64 {
	t.Helper()
	return APIWrites(t, c.Name, c.Config, resources...)
}

// APIWrites returns the count of (*Cluster).APIWrites for the API server
// that cfg reaches; name is for messages.
func APIWrites(t testing.TB, name string, cfg *rest.Config, resources ...string) float64 {
	t.Helper()
	total := 0.0
	for k, n := range APIRequests(t, name, cfg) {
		verb, resource, _ := strings.Cut(k, " ")
		if slices.Contains([]string{"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"}, verb) &&
			(len(resources) == 0 || slices.Contains(resources, resource)) {
			total += n
		}
	}
	return total
}

// APIRequests returns how many requests the API server that cfg reaches
// has served, by "VERB resource" (e.g. "APPLY serviceimports"), from its
// apiserver_request_total metric; name is for messages.
func APIRequests(t testing.TB, name string, cfg *rest.Config) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, m := range APIServerMetrics(t, name, cfg)["apiserver_request_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		out[labels["verb"]+" "+labels["resource"]] += m.GetCounter().GetValue()
	}
	return out
}

// APIServerMetrics reads the /metrics of the API server that cfg reaches;
// name is for messages.
func APIServerMetrics(t testing.TB, name string, cfg *rest.Config) map[string]*dto.MetricFamily {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").Do(context.Background()).Raw()
	if err != nil {
		t.Fatalf("reading /metrics of cluster %s: %v", name, err)
	}
	families, err := parseMetrics(string(body))
	if err != nil {
		t.Fatalf("parsing /metrics of cluster %s: %v", name, err)
	}
	return families
}

// MetricSum sums the counters or gauges of family whose labels include
// every one of labels.
func MetricSum(family *dto.MetricFamily, labels map[string]string) float64 {
	var sum float64
	for _, m := range family.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range labels {
			match = match && have[k] == v
		}
		if match {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

// ScrapeMetrics reads a Prometheus text endpoint such as
// http://127.0.0.1:8080/metrics.
func ScrapeMetrics(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading %s: %s", url, resp.Status)
	}
	families, err := parseMetrics(string(body))
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", url, err)
	}
	return families, nil
}

func parseMetrics(text string) (map[string]*dto.MetricFamily, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(strings.NewReader(text))
}

// Sum adds up the counters, gauges or untyped values of a metric family
// whose labels include all of the given ones.
func Sum(families map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	total := 0.0
	for _, m := range families[name].GetMetric() {
		if hasLabels(m, labels) {
			total += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
		}
	}
	return total
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	matched := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			matched++
		}
	}
	return matched == len(want)
}
