package agent_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/registry/registrytest"
	"github.com/fleetnet/fleetnet/internal/registry/server"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/test/fleet"
	"google.golang.org/protobuf/types/known/timestamppb"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// BenchmarkImport drives the registry directly with 1,000 imports from 3
// source clusters of 100 endpoints each, lets one agent materialise them,
// then measures a single-endpoint change: time until the imported slice
// shows it, and API writes in the importing cluster per change. It reports
// the heap the test process holds once everything is imported.
func BenchmarkImport(b *testing.B) {
	imports, sources, endpoints := 1000, 3, 100
	if v := os.Getenv("FLEETNET_BENCH_IMPORTS"); v != "" {
		imports, _ = strconv.Atoi(v)
	}
	f := fleet.Start(b, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "west"}}})
	west := f.Cluster(b, "west")
	r := registrytest.Start(b, server.Config{})
	wc := west.Client(b)
	ctx := context.Background()
	createNamespace(b, wc, ns)

	clients, chunk := seedRegistry(b, r, imports, sources, endpoints)

	start := time.Now()
	startAgent(b, west, r, "west")
	testkit.Eventually(b, 10*time.Minute, "every imported slice", func(ctx context.Context) error {
		list := &discoveryv1.EndpointSliceList{}
		if err := wc.List(ctx, list, client.InNamespace(ns), client.HasLabels{mcsv1beta1.LabelSourceCluster}); err != nil {
			return err
		}
		if len(list.Items) != imports*sources {
			return errorf("%d of %d slices imported", len(list.Items), imports*sources)
		}
		return nil
	})
	testkit.Eventually(b, 10*time.Minute, "every ServiceImport to be ready", func(ctx context.Context) error {
		list := &mcsv1beta1.ServiceImportList{}
		if err := wc.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		ready := 0
		for _, si := range list.Items {
			if si.Status.EndpointSliceObjects == mcsv1beta1.EndpointSliceObjectsPresent && len(si.Spec.IPs) > 0 && len(si.Status.Clusters) == sources {
				ready++
			}
		}
		if ready != imports {
			return errorf("%d of %d ServiceImports complete", ready, imports)
		}
		return nil
	})
	b.Logf("materialised %d imports x %d clusters x %d endpoints in %s", imports, sources, endpoints, time.Since(start).Round(time.Second))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap := float64(ms.HeapInuse) / (1 << 20)

	resources := []string{"serviceimports", "services", "endpointslices"}
	before := map[string]float64{}
	for _, res := range resources {
		before[res] = west.APIWrites(b, res)
	}
	latencies := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		i, s := n%imports, n%sources
		extra := 1 + (n/(imports))%2 // alternate 101 and 102 endpoints per round
		t0 := time.Now()
		if _, err := clients[s].PutEndpoints(ctx, &registryv1.PutEndpointsRequest{Chunk: chunk(s, i, extra)}); err != nil {
			b.Fatal(err)
		}
		name := fmt.Sprintf("svc-%04d", i)
		testkit.Eventually(b, time.Minute, fmt.Sprintf("%d endpoints of %s from src-%d", endpoints+extra, name, s), func(ctx context.Context) error {
			ss, err := importedSlicesOf(ctx, wc, name, fmt.Sprintf("src-%d", s))
			if err != nil {
				return err
			}
			total := 0
			for _, sl := range ss {
				total += len(sl.Endpoints)
			}
			if total != endpoints+extra {
				return errorf("%d endpoints", total)
			}
			return nil
		})
		latencies = append(latencies, time.Since(t0))
	}
	b.StopTimer()
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	pct := func(p float64) float64 {
		return float64(latencies[min(len(latencies)-1, int(p*float64(len(latencies))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	for _, res := range resources {
		b.ReportMetric((west.APIWrites(b, res)-before[res])/float64(b.N), res+"-writes/change")
	}
	b.ReportMetric(heap, "heap-MiB")
}

func importedSlicesOf(ctx context.Context, c client.Client, name, cluster string) ([]discoveryv1.EndpointSlice, error) {
	list := &discoveryv1.EndpointSliceList{}
	err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{mcsv1beta1.LabelServiceName: name, mcsv1beta1.LabelSourceCluster: cluster})
	return list.Items, err
}

// seedRegistry registers sources clusters with the registry, holds their
// leases like agents would until the benchmark ends, and exports from each
// imports Services of endpoints endpoints in namespace ns. It returns the
// clusters' clients and the chunk maker, for changes.
func seedRegistry(b *testing.B, r *registrytest.Registry, imports, sources, endpoints int) ([]registryv1.RegistryClient, func(s, i, extra int) *registryv1.EndpointChunk) {
	ctx := context.Background()
	clients := make([]registryv1.RegistryClient, sources)
	for s := range sources {
		id := fmt.Sprintf("src-%d", s)
		clients[s] = r.Client(id, false)
		if _, err := clients[s].RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Cluster: &registryv1.Cluster{Id: id, ClustersetId: "fleet", Region: "r" + id}}); err != nil {
			b.Fatal(err)
		}
	}
	renewCtx, stopRenewing := context.WithCancel(ctx)
	b.Cleanup(stopRenewing)
	go func() {
		for renewCtx.Err() == nil {
			for s := range sources {
				_, _ = clients[s].RenewLease(renewCtx, &registryv1.RenewLeaseRequest{ClusterId: fmt.Sprintf("src-%d", s)})
			}
			select {
			case <-renewCtx.Done():
			case <-time.After(5 * time.Second):
			}
		}
	}()
	chunk := func(s, i, extra int) *registryv1.EndpointChunk { return serviceChunk(ns, s, i, endpoints+extra) }
	publishServices(b, clients, ns, imports, endpoints)
	return clients, chunk
}

// serviceChunk is the endpoint chunk of Service svc-<i> in namespace from
// source cluster s, with endpoints endpoints.
func serviceChunk(namespace string, s, i, endpoints int) *registryv1.EndpointChunk {
	c := &registryv1.EndpointChunk{
		Key:         &registryv1.ChunkKey{Namespace: namespace, Name: fmt.Sprintf("svc-%04d", i), ClusterId: fmt.Sprintf("src-%d", s), Chunk: "c0"},
		AddressType: "IPv4",
		Ports:       []*registryv1.EndpointPort{{Name: "http", Protocol: "TCP", Port: 8080}},
	}
	for e := range endpoints {
		c.Endpoints = append(c.Endpoints, &registryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", 100+s, e/250, 1+e%250)},
			Conditions: &registryv1.EndpointConditions{Ready: true, Serving: true}})
	}
	return c
}

// publishServices exports imports Services of namespace from every source
// cluster (clients[s] is src-<s>), each with endpoints endpoints.
func publishServices(b *testing.B, clients []registryv1.RegistryClient, namespace string, imports, endpoints int) {
	ctx := context.Background()
	var wg sync.WaitGroup
	for s := range clients {
		wg.Go(func() {
			for i := range imports {
				e := &registryv1.Export{Key: &registryv1.ExportKey{Namespace: namespace, Name: fmt.Sprintf("svc-%04d", i), ClusterId: fmt.Sprintf("src-%d", s)},
					ExportedSince: timestamppb.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), Type: "ClusterSetIP",
					Ports: []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}}, IpFamilies: []string{"IPv4"}, Weight: 1}
				if _, err := clients[s].PutExport(ctx, &registryv1.PutExportRequest{Export: e}); err != nil {
					b.Error(err)
					return
				}
				if _, err := clients[s].PutEndpoints(ctx, &registryv1.PutEndpointsRequest{Chunk: serviceChunk(namespace, s, i, endpoints)}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}
