package fleet

import (
	"context"
	"slices"
	"strings"
	"testing"

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
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").Do(context.Background()).Raw()
	if err != nil {
		t.Fatalf("reading /metrics of cluster %s: %v", name, err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parsing /metrics of cluster %s: %v", name, err)
	}
	total := 0.0
	for _, m := range families["apiserver_request_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if !slices.Contains([]string{"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"}, labels["verb"]) {
			continue
		}
		if len(resources) > 0 && !slices.Contains(resources, labels["resource"]) {
			continue
		}
		total += m.GetCounter().GetValue()
	}
	return total
}
