package export

import (
	"testing"

	"github.com/fleetnet/fleetnet/internal/scheme"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// A scrape while the agent starts, before its cache runs, must succeed:
// the exports gauge is left out instead of failing every metric.
func TestStateCollectorBeforeTheCacheStarts(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(mcsv1beta1.SchemeGroupVersion.WithKind("ServiceExport"), meta.RESTScopeNamespace)
	mapper.Add(mcsv1beta1.SchemeGroupVersion.WithKind("ServiceExportList"), meta.RESTScopeNamespace)
	c, err := cache.New(&rest.Config{Host: "https://127.0.0.1:1"}, cache.Options{Scheme: scheme.Scheme, Mapper: mapper})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewStateCollector(c))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("scrape before the cache started: %v", err)
	}
	if len(mfs) != 0 {
		t.Errorf("scrape before the cache started gave %d metric families, want none yet", len(mfs))
	}
}
