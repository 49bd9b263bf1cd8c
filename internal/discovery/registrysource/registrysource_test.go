package registrysource_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/discovery/discoverytest"
	"github.com/fleetnet/fleetnet/internal/discovery/registrysource"
	"github.com/fleetnet/fleetnet/internal/discovery/store"
	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/fleetnet/fleetnet/internal/registry/client"
	"github.com/fleetnet/fleetnet/internal/registry/registrytest"
	"github.com/fleetnet/fleetnet/internal/registry/server"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestBuildPool(t *testing.T) {
	k := store.Key{Namespace: "demo", Name: "echo"}
	chunk := func(cluster string, eps ...*registryv1.Endpoint) *registryv1.EndpointChunk {
		return &registryv1.EndpointChunk{AddressType: "IPv4", Ports: []*registryv1.EndpointPort{{Name: "http", Protocol: "TCP", Port: 8080}}, Endpoints: eps}
	}
	http := []discoveryv1.Port{{Name: "http", Port: 8080, Protocol: "TCP"}}
	tests := []struct {
		name string
		imp  *registrysource.Import
		want discoveryv1.Pool
	}{
		{name: "no import yet", imp: &registrysource.Import{}, want: discoveryv1.Pool{Namespace: "demo", Name: "echo", Clusters: []discoveryv1.PoolCluster{}}},
		{
			name: "pod names, addresses, nil conditions, a cluster not participating",
			imp: &registrysource.Import{
				Import: &registryv1.Import{Labels: map[string]string{"tier": "web"}, Clusters: []*registryv1.ImportCluster{{ClusterId: "east", Region: "eu-west"}, {ClusterId: "west"}}},
				Chunks: map[string]map[string]*registryv1.EndpointChunk{
					"east": {
						"echo-b": chunk("east",
							&registryv1.Endpoint{Addresses: []string{"10.244.1.5"}, PodName: "echo-0", Conditions: &registryv1.EndpointConditions{Ready: false, Serving: true, Terminating: true}, Zone: "eu-west-1a"},
							&registryv1.Endpoint{Addresses: []string{"10.244.1.6"}, PodName: "echo-1"}),
						// echo-a sorts first: its copy of echo-0 is served.
						"echo-a": chunk("east", &registryv1.Endpoint{Addresses: []string{"10.244.1.5"}, PodName: "echo-0", Conditions: &registryv1.EndpointConditions{Ready: true, Serving: true}}),
					},
					"west":  {"echo-w": chunk("west", &registryv1.Endpoint{Addresses: []string{"fd00:0::5"}, Hostname: "h"})},
					"north": {"echo-n": chunk("north", &registryv1.Endpoint{Addresses: []string{"10.244.3.5"}})},
				},
			},
			want: discoveryv1.Pool{Namespace: "demo", Name: "echo", Labels: map[string]string{"tier": "web"}, Clusters: []discoveryv1.PoolCluster{
				{Cluster: "east", Region: "eu-west", Endpoints: []discoveryv1.Endpoint{
					{InstanceID: "echo-0", Addresses: []string{"10.244.1.5"}, Ports: http, Ready: true, Serving: true},
					{InstanceID: "echo-1", Addresses: []string{"10.244.1.6"}, Ports: http, Ready: true, Serving: true},
				}},
				{Cluster: "west", Endpoints: []discoveryv1.Endpoint{
					{InstanceID: "fd00::5", Addresses: []string{"fd00:0::5"}, Ports: http, Ready: true, Serving: true, Hostname: "h"},
				}},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, registrysource.BuildPool(k, tt.imp)); diff != "" {
				t.Errorf("BuildPool() (-want +got):\n%s", diff)
			}
		})
	}
}

func export(cluster string) *registryv1.Export {
	return &registryv1.Export{
		Key:           &registryv1.ExportKey{Namespace: "demo", Name: "echo", ClusterId: cluster},
		ExportedSince: timestamppb.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		Type:          "ClusterSetIP",
		Ports:         []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}},
		IpFamilies:    []string{"IPv4"},
		Labels:        map[string]string{"app": "echo"},
		Weight:        1,
	}
}

func chunk(cluster, name string, pods ...string) *registryv1.EndpointChunk {
	c := &registryv1.EndpointChunk{
		Key:         &registryv1.ChunkKey{Namespace: "demo", Name: "echo", ClusterId: cluster, Chunk: name},
		AddressType: "IPv4",
		Ports:       []*registryv1.EndpointPort{{Name: "http", Protocol: "TCP", Port: 8080}},
	}
	for i, pod := range pods {
		c.Endpoints = append(c.Endpoints, &registryv1.Endpoint{
			Addresses: []string{fmt.Sprintf("10.244.%d.%d", len(cluster), i+5)}, PodName: pod,
			Conditions: &registryv1.EndpointConditions{Ready: true, Serving: true},
		})
	}
	return c
}

// summary is a pool as "cluster(region): id, ..." per cluster.
func summary(p *discoveryv1.Pool) string {
	if p == nil {
		return "<none>"
	}
	var parts []string
	for _, c := range p.Clusters {
		var ids []string
		for _, e := range c.Endpoints {
			ids = append(ids, e.InstanceID)
		}
		parts = append(parts, fmt.Sprintf("%s(%s): %s", c.Cluster, c.Region, strings.Join(ids, ", ")))
	}
	return strings.Join(parts, "; ")
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// TestWatch runs the source against a real registry (gRPC over mTLS on
// loopback), as an admin: the snapshot at sync, Pod names as instance ids,
// a watch delta, a chunk removed, the registry going away (pools kept,
// still synced) and coming back with what changed meanwhile, an export
// withdrawn.
func TestWatch(t *testing.T) {
	r := registrytest.Start(t, server.Config{})
	ctx := t.Context()
	east, west := r.Client("east", false), r.Client("west", false)
	for id, c := range map[string]registryv1.RegistryClient{"east": east, "west": west} {
		if _, err := c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Cluster: &registryv1.Cluster{Id: id, ClustersetId: "fleet", Region: "region-" + id}}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.PutExport(ctx, &registryv1.PutExportRequest{Export: export(id)}); err != nil {
			t.Fatal(err)
		}
	}
	put := func(c registryv1.RegistryClient, ch *registryv1.EndpointChunk) {
		t.Helper()
		// Waits for the connection: after the registry's restart below the
		// client may still be backing off from the refused dials.
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := c.PutEndpoints(pctx, &registryv1.PutEndpointsRequest{Chunk: ch}, grpc.WaitForReady(true)); err != nil {
			t.Fatal(err)
		}
	}
	put(east, chunk("east", "echo-a", "echo-7c9d-aaaaa", "echo-7c9d-bbbbb"))
	put(west, chunk("west", "echo-a", "echo-5f4e-ccccc"))

	st := store.New(store.Options{Base: 100})
	src := registrysource.New(registrysource.Config{
		Client: r.Client("discovery", true), Store: st, Log: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
	})
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-src.Synced():
	case <-time.After(10 * time.Second):
		t.Fatalf("not synced: %s", src.Status())
	}
	k := store.Key{Namespace: "demo", Name: "echo"}
	p, ok := st.Get(k)
	if want := "east(region-east): echo-7c9d-aaaaa, echo-7c9d-bbbbb; west(region-west): echo-5f4e-ccccc"; !ok || summary(p) != want {
		t.Fatalf("pool at sync: %q, want %q", summary(p), want)
	}
	if p.Labels["app"] != "echo" {
		t.Errorf("pool labels %v, want the exported app=echo", p.Labels)
	}

	w, initial := st.Watch(st.Revision())
	t.Cleanup(w.Stop)
	if len(initial) != 0 {
		t.Fatalf("%d events from the current revision", len(initial))
	}
	next := func(what string) discoveryv1.Event {
		t.Helper()
		select {
		case ev := <-w.C():
			return ev.Event
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no event", what)
			return discoveryv1.Event{}
		}
	}
	waitPool := func(want string) {
		t.Helper()
		testkit.Eventually(t, 10*time.Second, "the pool "+want, func(context.Context) error {
			if p, _ := st.Get(k); summary(p) != want {
				return fmt.Errorf("pool %q, want %q", summary(p), want)
			}
			return nil
		})
	}

	// A delta: a Pod added in west.
	put(west, chunk("west", "echo-a", "echo-5f4e-ccccc", "echo-5f4e-ddddd"))
	if ev := next("pod added"); ev.Type != discoveryv1.EventUpsert || summary(ev.Pool) != "east(region-east): echo-7c9d-aaaaa, echo-7c9d-bbbbb; west(region-west): echo-5f4e-ccccc, echo-5f4e-ddddd" {
		t.Errorf("after a Pod was added: %s %q", ev.Type, summary(ev.Pool))
	}
	// A chunk removed: east has none left and leaves the pool.
	if _, err := east.DeleteEndpoints(ctx, &registryv1.DeleteEndpointsRequest{Key: &registryv1.ChunkKey{Namespace: "demo", Name: "echo", ClusterId: "east", Chunk: "echo-a"}}); err != nil {
		t.Fatal(err)
	}
	waitPool("west(region-west): echo-5f4e-ccccc, echo-5f4e-ddddd")

	// The registry goes away: nothing is removed, the source stays synced.
	rev := st.Revision()
	r.Stop()
	testkit.Eventually(t, 10*time.Second, "the source to notice the registry is gone", func(context.Context) error {
		if st := src.Status(); !strings.Contains(st, "watch broken since") {
			return fmt.Errorf("status %q", st)
		}
		return nil
	})
	if p, _ := st.Get(k); summary(p) != "west(region-west): echo-5f4e-ccccc, echo-5f4e-ddddd" || st.Revision() != rev {
		t.Errorf("while the registry is away: %q at revision %d (was %d)", summary(p), st.Revision(), rev)
	}
	// It comes back from the same store; what changed meanwhile arrives.
	r.Restart()
	put(east, chunk("east", "echo-b", "echo-7c9d-eeeee"))
	waitPool("east(region-east): echo-7c9d-eeeee; west(region-west): echo-5f4e-ccccc, echo-5f4e-ddddd")

	// Both exports withdrawn: the pool goes. West's client has not
	// called since the registry came back: its connection may still be
	// backing off from the refusals, so the call waits for it.
	dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
	defer dcancel()
	for id, c := range map[string]registryv1.RegistryClient{"east": east, "west": west} {
		if _, err := c.DeleteExport(dctx, &registryv1.DeleteExportRequest{Key: &registryv1.ExportKey{Namespace: "demo", Name: "echo", ClusterId: id}}, grpc.WaitForReady(true)); err != nil {
			t.Fatal(err)
		}
	}
	waitPool("<none>")
}

// TestRefused: a watch the registry refuses (a certificate of the fleet CA
// that is neither a cluster's nor an admin's) ends Run with the cause
// instead of retrying forever.
func TestRefused(t *testing.T) {
	r := registrytest.Start(t, server.Config{})
	var ca pki.KeyPair
	var err error
	if ca.CertPEM, err = os.ReadFile(filepath.Join(r.CertDir, "ca.crt")); err != nil {
		t.Fatal(err)
	}
	if ca.KeyPEM, err = os.ReadFile(filepath.Join(r.CertDir, "ca.key")); err != nil {
		t.Fatal(err)
	}
	if err := discoverytest.ClientCert(t, &ca, "discovery", "fleetnet:nobody").Write(r.CertDir, "nobody"); err != nil {
		t.Fatal(err)
	}
	o := r.ClientOptions("", false)
	o.CertFile, o.KeyFile = filepath.Join(r.CertDir, "nobody.crt"), filepath.Join(r.CertDir, "nobody.key")
	rc, conn, err := client.Dial(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	src := registrysource.New(registrysource.Config{
		Client: rc, Store: store.New(store.Options{}), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = src.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "registry watch refused") {
		t.Errorf("Run() = %v, want the refusal", err)
	}
}

// BenchmarkSyncAndChange measures the source against a real registry on
// loopback (gRPC over mTLS, memory store) holding 100 imports exported by 10
// clusters each, 10 endpoints per chunk (10,000 endpoints): the time from
// the start to Synced (the snapshot received and in the store), and per
// iteration the time from a PutEndpoints (one endpoint's readiness flipped)
// to the store's event for its pool.
//
//	go test ./internal/discovery/registrysource -run '^$' -bench SyncAndChange -benchtime 1000x
func BenchmarkSyncAndChange(b *testing.B) {
	const imports, clusters, perChunk = 100, 10, 10
	r := registrytest.Start(b, server.Config{})
	ctx := context.Background()
	mkChunk := func(svc, cluster int, flip bool) *registryv1.EndpointChunk {
		c := &registryv1.EndpointChunk{
			Key:         &registryv1.ChunkKey{Namespace: "demo", Name: fmt.Sprintf("svc-%d", svc), ClusterId: fmt.Sprintf("c%d", cluster), Chunk: "s"},
			AddressType: "IPv4",
			Ports:       []*registryv1.EndpointPort{{Name: "http", Protocol: "TCP", Port: 8080}},
		}
		for i := range perChunk {
			ready := !(flip && i == 0)
			c.Endpoints = append(c.Endpoints, &registryv1.Endpoint{
				Addresses: []string{fmt.Sprintf("10.%d.%d.%d", 100+cluster, svc, i+1)}, PodName: fmt.Sprintf("svc-%d-%d", svc, i),
				Conditions: &registryv1.EndpointConditions{Ready: ready, Serving: ready},
			})
		}
		return c
	}
	cls := make([]registryv1.RegistryClient, clusters)
	for c := range clusters {
		id := fmt.Sprintf("c%d", c)
		cls[c] = r.Client(id, false)
		if _, err := cls[c].RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Cluster: &registryv1.Cluster{Id: id, ClustersetId: "fleet", Region: fmt.Sprintf("region-%d", c%3)}}); err != nil {
			b.Fatal(err)
		}
		for s := range imports {
			ex := export(id)
			ex.Key.Name = fmt.Sprintf("svc-%d", s)
			if _, err := cls[c].PutExport(ctx, &registryv1.PutExportRequest{Export: ex}); err != nil {
				b.Fatal(err)
			}
			if _, err := cls[c].PutEndpoints(ctx, &registryv1.PutEndpointsRequest{Chunk: mkChunk(s, c, false)}); err != nil {
				b.Fatal(err)
			}
		}
	}
	st := store.New(store.Options{Base: 100})
	src := registrysource.New(registrysource.Config{Client: r.Client("discovery", true), Store: st, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	started := time.Now()
	go func() { done <- src.Run(runCtx) }()
	defer func() {
		cancel()
		<-done
	}()
	select {
	case <-src.Synced():
	case <-time.After(30 * time.Second):
		b.Fatalf("not synced: %s", src.Status())
	}
	syncTime := time.Since(started)
	if s := st.Stats(); s.Pools != imports || s.Endpoints != imports*clusters*perChunk {
		b.Fatalf("after sync: %d pools, %d endpoints", s.Pools, s.Endpoints)
	}
	w, _ := st.Watch(st.Revision())
	defer w.Stop()
	var lat []time.Duration
	b.ResetTimer()
	for i := range b.N {
		svc, c := i%imports, (i/imports)%clusters
		t0 := time.Now()
		if _, err := cls[c].PutEndpoints(ctx, &registryv1.PutEndpointsRequest{Chunk: mkChunk(svc, c, (i/(imports*clusters))%2 == 0)}); err != nil {
			b.Fatal(err)
		}
		want := fmt.Sprintf("svc-%d", svc)
		for {
			select {
			case ev := <-w.C():
				if ev.Pool.Name != want {
					continue
				}
			case <-time.After(10 * time.Second):
				b.Fatalf("no event for %s", want)
			}
			break
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(syncTime.Milliseconds()), "sync-ms")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "change-p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "change-p99-ms")
}
