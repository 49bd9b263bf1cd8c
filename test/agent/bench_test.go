package agent_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/registry/keyspace"
	"github.com/fleetnet/fleetnet/internal/registry/registrytest"
	"github.com/fleetnet/fleetnet/internal/registry/server"
	"github.com/fleetnet/fleetnet/internal/registry/store"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/test/fleet"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// BenchmarkEndpointChangeToRegistry measures, on a cluster with 1,000
// exported Services, the time from an EndpointSlice update to the
// registry's write of the chunk, and the registry writes per change.
func BenchmarkEndpointChangeToRegistry(b *testing.B) {
	const services = 1000
	f := fleet.Start(b, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "east"}}})
	east := f.Cluster(b, "east")
	r := registrytest.Start(b, server.Config{})
	c := east.Client(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := c.Create(ctx, namespaceObj(ns)); err != nil {
		b.Fatal(err)
	}
	name := func(i int) string { return fmt.Sprintf("svc-%04d", i) }
	var wg sync.WaitGroup
	errs := make(chan error, services)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < services; i += 8 {
				for _, obj := range []client.Object{
					service(ns, name(i)),
					endpointSlice(ns, name(i), name(i)+"-1", "10.244.0.1"),
					&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name(i)}},
				} {
					if err := c.Create(ctx, obj); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	a := startAgent(b, east, r, "east")
	reg := r.Client("observer", false)
	testkit.Eventually(b, 5*time.Minute, "every endpoint chunk in the registry", func(ctx context.Context) error {
		resp, err := registryExports(ctx, reg, "east")
		if err != nil {
			return err
		}
		if len(resp.GetEndpoints()) != services {
			return errorf("%d of %d endpoint chunks published", len(resp.GetEndpoints()), services)
		}
		return nil
	})

	// Chunk writes as the store sees them, by key.
	seen := make(chan string, 1024)
	from, _ := r.Store.Revision(ctx)
	go func() {
		for resp := range r.Store.Watch(ctx, keyspace.EndpointsPrefix, from) {
			for _, e := range resp.Events {
				if e.Type == store.EventPut {
					seen <- e.KV.Key
				}
			}
		}
	}()
	writesBefore := a.counter(b, "fleetnet_agent_registry_writes_total", nil)
	latencies := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		svc := name(i % services)
		slice := endpointSlice(ns, svc, svc+"-1", "10.244.0.1", fmt.Sprintf("10.244.%d.%d", 1+i/250%200, 1+i%250))
		slice = withVersion(b, c, slice)
		start := time.Now()
		if err := c.Update(ctx, slice); err != nil {
			b.Fatal(err)
		}
		want := fmt.Sprintf("%s%s/%s/east/%s-1", keyspace.EndpointsPrefix, ns, svc, svc)
		for key := range seen {
			if key == want {
				break
			}
		}
		latencies = append(latencies, time.Since(start))
	}
	b.StopTimer()
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	pct := func(p float64) float64 {
		return float64(latencies[min(len(latencies)-1, int(p*float64(len(latencies))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric((a.counter(b, "fleetnet_agent_registry_writes_total", nil)-writesBefore)/float64(b.N), "writes/change")
}
