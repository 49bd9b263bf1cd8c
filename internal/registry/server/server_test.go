package server_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/registry/registrytest"
	"github.com/fleetnet/fleetnet/internal/registry/server"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	clocktesting "k8s.io/utils/clock/testing"
)

// env is a registry on a memory store with a fake clock, served over mTLS.
type env struct {
	*registrytest.Registry
	clock *clocktesting.FakeClock
}

func start(t *testing.T, cfg server.Config) *env {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg.Clock = clk
	return &env{Registry: registrytest.Start(t, cfg), clock: clk}
}

// client connects as cluster id, or as an admin when admin is set, or
// without a certificate when id is empty.
func (e *env) client(id string, admin bool, opts ...grpc.DialOption) registryv1.RegistryClient {
	return e.Client(id, admin, opts...)
}

func register(t *testing.T, c registryv1.RegistryClient, id string) {
	t.Helper()
	_, err := c.RegisterCluster(context.Background(), &registryv1.RegisterClusterRequest{Cluster: &registryv1.Cluster{Id: id, ClustersetId: "fleet", Region: "region-" + id}})
	if err != nil {
		t.Fatalf("registering %s: %v", id, err)
	}
}

func export(cluster string, minute int, portName string) *registryv1.Export {
	return &registryv1.Export{
		Key:           &registryv1.ExportKey{Namespace: "demo", Name: "echo", ClusterId: cluster},
		ExportedSince: timestamppb.New(time.Date(2026, 1, 1, 0, minute, 0, 0, time.UTC)),
		Type:          "ClusterSetIP",
		Ports:         []*registryv1.ServicePort{{Name: portName, Protocol: "TCP", Port: 80}},
		IpFamilies:    []string{"IPv4"},
		Weight:        1,
	}
}

func chunk(cluster, name, portName string, addrs ...string) *registryv1.EndpointChunk {
	c := &registryv1.EndpointChunk{
		Key:         &registryv1.ChunkKey{Namespace: "demo", Name: "echo", ClusterId: cluster, Chunk: name},
		AddressType: "IPv4",
		Ports:       []*registryv1.EndpointPort{{Name: portName, Protocol: "TCP", Port: 8080}},
	}
	for _, a := range addrs {
		c.Endpoints = append(c.Endpoints, &registryv1.Endpoint{Addresses: []string{a}, Conditions: &registryv1.EndpointConditions{Ready: true, Serving: true}})
	}
	return c
}

// watchStream collects the events of one watch.
type watchStream struct {
	events chan *registryv1.WatchEvent
	errs   chan error
	cancel context.CancelFunc
}

func watch(t *testing.T, c registryv1.RegistryClient, req *registryv1.WatchRequest) *watchStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := c.Watch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	w := &watchStream{events: make(chan *registryv1.WatchEvent, 100000), errs: make(chan error, 1), cancel: cancel}
	go func() {
		for {
			e, err := s.Recv()
			if err != nil {
				w.errs <- err
				return
			}
			w.events <- e
		}
	}()
	return w
}

// until reads events until one matches, failing after a timeout.
func (w *watchStream) until(t *testing.T, what string, match func(*registryv1.WatchEvent) bool) (seen []*registryv1.WatchEvent) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-w.events:
			seen = append(seen, e)
			if match(e) {
				return seen
			}
		case err := <-w.errs:
			t.Fatalf("watch ended waiting for %s: %v", what, err)
		case <-timeout:
			t.Fatalf("timed out waiting for %s; saw %d events", what, len(seen))
		}
	}
}

func isSynced(e *registryv1.WatchEvent) bool { return e.GetSynced() != nil }

func importWithClusters(ids ...string) func(*registryv1.WatchEvent) bool {
	return func(e *registryv1.WatchEvent) bool {
		imp := e.GetImportUpsert()
		if imp == nil || len(imp.GetClusters()) != len(ids) {
			return false
		}
		for i, c := range imp.GetClusters() {
			if c.GetClusterId() != ids[i] {
				return false
			}
		}
		return true
	}
}

func TestExportsBecomeAnImportWithCanonicalEndpoints(t *testing.T) {
	e := start(t, server.Config{})
	a, b, c := e.client("a", false), e.client("b", false), e.client("c", false)
	ctx := context.Background()
	for id, cl := range map[string]registryv1.RegistryClient{"a": a, "b": b, "c": c} {
		register(t, cl, id)
	}
	w := watch(t, c, &registryv1.WatchRequest{})
	w.until(t, "the first snapshot's synced mark", isSynced)

	if _, err := a.PutExport(ctx, &registryv1.PutExportRequest{Export: export("a", 0, "http")}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.PutExport(ctx, &registryv1.PutExportRequest{Export: export("b", 1, "web")}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.PutEndpoints(ctx, &registryv1.PutEndpointsRequest{Chunk: chunk("b", "echo-b1", "web", "10.244.2.5")}); err != nil {
		t.Fatal(err)
	}
	w.until(t, "an import with a and b", importWithClusters("a", "b"))
	seen := w.until(t, "b's chunk", func(ev *registryv1.WatchEvent) bool { return ev.GetEndpointsUpsert() != nil })
	got := seen[len(seen)-1].GetEndpointsUpsert()
	if p := got.GetPorts()[0]; p.GetName() != "http" || p.GetPort() != 8080 {
		t.Errorf("b's endpoints are served as %s/%d, want http/8080", p.GetName(), p.GetPort())
	}

	// Both exporters see the conflict in their export status.
	for _, c := range []struct {
		id     string
		client registryv1.RegistryClient
	}{{"a", a}, {"b", b}} {
		resp, err := c.client.ListExports(ctx, &registryv1.ListExportsRequest{ClusterId: c.id})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetStatuses()) != 1 || len(resp.GetStatuses()[0].GetConflicts()) != 1 {
			t.Fatalf("%s's statuses = %v, want one Port conflict", c.id, resp.GetStatuses())
		}
		conflict := resp.GetStatuses()[0].GetConflicts()[0]
		if conflict.GetReason() != "Port" || !strings.Contains(conflict.GetMessage(), "web 80/TCP of cluster b") || !strings.Contains(conflict.GetMessage(), "cluster a defines http 80/TCP") {
			t.Errorf("%s's conflict = %v, want a Port conflict naming web of b and http of a", c.id, conflict)
		}
	}
	resp, err := b.ListExports(ctx, &registryv1.ListExportsRequest{ClusterId: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if st := resp.GetStatuses()[0]; st.GetEndpointsGeneration() == 0 || len(st.GetEndpointChunks()) != 1 {
		t.Errorf("status does not report the endpoint set the registry holds: %v", st)
	}
}

func TestAuthorization(t *testing.T) {
	e := start(t, server.Config{})
	ctx := context.Background()
	a, b := e.client("a", false), e.client("b", false)
	register(t, a, "a")
	register(t, b, "b")
	admin := e.client("ops", true)

	tests := []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"a writes b's export", func() error {
			_, err := a.PutExport(ctx, &registryv1.PutExportRequest{Export: export("b", 0, "http")})
			return err
		}, codes.PermissionDenied},
		{"a writes b's endpoints", func() error {
			_, err := a.PutEndpoints(ctx, &registryv1.PutEndpointsRequest{Chunk: chunk("b", "x", "http", "10.0.0.1")})
			return err
		}, codes.PermissionDenied},
		{"a registers as b", func() error {
			_, err := a.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Cluster: &registryv1.Cluster{Id: "b", ClustersetId: "fleet"}})
			return err
		}, codes.PermissionDenied},
		{"a evicts b", func() error {
			_, err := a.EvictCluster(ctx, &registryv1.EvictClusterRequest{ClusterId: "b"})
			return err
		}, codes.PermissionDenied},
		{"a watches b's status", func() error {
			s, err := a.Watch(ctx, &registryv1.WatchRequest{ExportStatusClusterId: "b"})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}, codes.PermissionDenied},
		{"no certificate", func() error {
			_, err := e.client("", false).ListClusters(ctx, &registryv1.ListClustersRequest{})
			return err
		}, codes.Unauthenticated}, // the TLS handshake fails; the client's probe names the refusal
		{"admin evicts b", func() error {
			_, err := admin.EvictCluster(ctx, &registryv1.EvictClusterRequest{ClusterId: "b"})
			return err
		}, codes.OK},
		{"an invalid region is refused at registration", func() error {
			_, err := a.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Cluster: &registryv1.Cluster{Id: "a", ClustersetId: "fleet", Region: "US West (Oregon)"}})
			if err != nil && !strings.Contains(err.Error(), `cluster.region: Invalid value: "US West (Oregon)"`) {
				return fmt.Errorf("error does not name the field and value: %w", err)
			}
			return err
		}, codes.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := status.Code(tt.call()); got != tt.want {
				t.Fatalf("code = %s, want %s", got, tt.want)
			}
		})
	}
}

// openWatch watches until the snapshot's synced mark, or returns the
// error that ended the watch first.
func openWatch(t *testing.T, c registryv1.RegistryClient) (*watchStream, error) {
	t.Helper()
	w := watch(t, c, &registryv1.WatchRequest{})
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-w.events:
			if isSynced(ev) {
				return w, nil
			}
		case err := <-w.errs:
			w.cancel()
			return nil, err
		case <-timeout:
			t.Fatal("timed out waiting for a watch's synced mark or its end")
		}
	}
}

// refusedWatches reads fleetnet_registry_watchers_refused_total of limit.
func refusedWatches(t *testing.T, g prometheus.Gatherer, limit string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "fleetnet_registry_watchers_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "limit" && l.GetValue() == limit {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no fleetnet_registry_watchers_refused_total{limit=%q}", limit)
	return 0
}

// TestWatchesAreCappedPerIdentityAndInTotal: past a cap, a watch is refused
// with ResourceExhausted naming the caller and the cap, and counted; the
// watches held go on, other identities are admitted within the total, and
// a watch closed makes room for another.
func TestWatchesAreCappedPerIdentityAndInTotal(t *testing.T) {
	type who struct {
		id    string
		admin bool
	}
	a, b, c, d, ops := who{"a", false}, who{"b", false}, who{"c", false}, who{"d", false}, who{"ops", true}
	tests := []struct {
		name               string
		perIdentity, total int
		held               []who // admitted, in this order
		refused            who
		limit              string
		message            []string // the refusal names these
		others             []who    // admitted after the refusal
	}{
		{name: "a cluster past its cap", perIdentity: 3, total: 100, held: []who{a, a, a}, refused: a,
			limit: "per_identity", message: []string{"cluster:a", "--max-watches-per-identity=3"}, others: []who{b, ops}},
		// Administrators are capped alike; cluster ops is another identity.
		{name: "an administrator past its cap", perIdentity: 3, total: 100, held: []who{ops, ops, ops}, refused: ops,
			limit: "per_identity", message: []string{"admin:ops", "--max-watches-per-identity=3"}, others: []who{{"ops", false}, a}},
		{name: "the registry past its total", perIdentity: 3, total: 4, held: []who{a, a, b, c}, refused: d,
			limit: "total", message: []string{"cluster:d", "--max-watches=4"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			metrics := prometheus.NewRegistry()
			e := start(t, server.Config{MaxWatchesPerIdentity: tc.perIdentity, MaxWatches: tc.total, Registerer: metrics})
			clients := map[who]registryv1.RegistryClient{}
			client := func(w who) registryv1.RegistryClient {
				if clients[w] == nil {
					clients[w] = e.client(w.id, w.admin)
				}
				return clients[w]
			}
			var held []*watchStream
			for i, w := range tc.held {
				s, err := openWatch(t, client(w))
				if err != nil {
					t.Fatalf("watch %d of %v: %v", i+1, w, err)
				}
				held = append(held, s)
			}

			_, err := openWatch(t, client(tc.refused))
			if status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("watch past the cap: %v, want ResourceExhausted", err)
			}
			for _, want := range tc.message {
				if !strings.Contains(status.Convert(err).Message(), want) {
					t.Errorf("refusal %q does not name %s", status.Convert(err).Message(), want)
				}
			}
			for _, limit := range []string{"per_identity", "total"} {
				want := 0.0
				if limit == tc.limit {
					want = 1
				}
				if got := refusedWatches(t, metrics, limit); got != want {
					t.Errorf("refused watches {limit=%s} = %g, want %g", limit, got, want)
				}
			}
			for _, w := range tc.others {
				s, err := openWatch(t, client(w))
				if err != nil {
					t.Fatalf("%v's watch after the refusal: %v", w, err)
				}
				held = append(held, s)
			}

			// The watches held still receive changes.
			writer := e.client("writer", false)
			register(t, writer, "writer")
			if _, err := writer.PutExport(context.Background(), &registryv1.PutExportRequest{Export: export("writer", 0, "http")}); err != nil {
				t.Fatal(err)
			}
			for _, s := range held {
				s.until(t, "the writer's import", importWithClusters("writer"))
			}

			// A watch closed makes room: the refused caller gets in once
			// the registry has seen it end.
			held[0].cancel()
			testkit.Eventually(t, 10*time.Second, "a watch admitted in the closed one's place", func(context.Context) error {
				_, err := openWatch(t, client(tc.refused))
				if err != nil && status.Code(err) != codes.ResourceExhausted {
					t.Fatalf("watch after one closed: %v", err)
				}
				return err
			})
		})
	}
}

func TestLeaseExpiryAndReturn(t *testing.T) {
	e := start(t, server.Config{LeaseTTL: 10 * time.Second, GracePeriod: time.Hour})
	ctx := context.Background()
	a, b := e.client("a", false), e.client("b", false)
	register(t, a, "a")
	register(t, b, "b")
	for id, cl := range map[string]registryv1.RegistryClient{"a": a, "b": b} {
		if _, err := cl.PutExport(ctx, &registryv1.PutExportRequest{Export: export(id, 0, "http")}); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.PutEndpoints(ctx, &registryv1.PutEndpointsRequest{Chunk: chunk(id, "c1", "http", "10.244.0.1")}); err != nil {
			t.Fatal(err)
		}
	}
	w := watch(t, a, &registryv1.WatchRequest{})
	w.until(t, "import with a and b", importWithClusters("a", "b"))
	w.until(t, "synced", isSynced)

	// a renews, b does not: b leaves the import and its chunk goes.
	e.clock.Step(6 * time.Second)
	if _, err := a.RenewLease(ctx, &registryv1.RenewLeaseRequest{ClusterId: "a"}); err != nil {
		t.Fatal(err)
	}
	e.clock.Step(6 * time.Second)
	w.until(t, "import with a only", importWithClusters("a"))
	w.until(t, "b's chunk deleted", func(ev *registryv1.WatchEvent) bool { return ev.GetEndpointsDelete().GetClusterId() == "b" })

	_, err := b.RenewLease(ctx, &registryv1.RenewLeaseRequest{ClusterId: "b"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("renewal after expiry: %v, want NotFound", err)
	}
	// Records stayed for the grace period: registering again is enough.
	register(t, b, "b")
	w.until(t, "import with a and b again", importWithClusters("a", "b"))
	w.until(t, "b's chunk back", func(ev *registryv1.WatchEvent) bool { return ev.GetEndpointsUpsert().GetKey().GetClusterId() == "b" })
}

func TestGarbageCollectionAfterGracePeriod(t *testing.T) {
	e := start(t, server.Config{LeaseTTL: 10 * time.Second, GracePeriod: time.Minute})
	ctx := context.Background()
	a := e.client("a", false)
	register(t, a, "a")
	if _, err := a.PutExport(ctx, &registryv1.PutExportRequest{Export: export("a", 0, "http")}); err != nil {
		t.Fatal(err)
	}
	e.clock.Step(11 * time.Second)
	// Let the collector notice the dead cluster, then pass the grace period.
	testkit.Eventually(t, 10*time.Second, "the exports of the expired cluster to be collected", func(ctx context.Context) error {
		e.clock.Step(5 * time.Second)
		resp, err := a.ListExports(ctx, &registryv1.ListExportsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetExports()) != 0 {
			return fmt.Errorf("exports %v", resp.GetExports())
		}
		return nil
	})
	clusters, _ := a.ListClusters(ctx, &registryv1.ListClustersRequest{})
	if len(clusters.GetClusters()) != 0 {
		t.Errorf("cluster record not collected: %v", clusters.GetClusters())
	}
}

func TestWatchResumesFromItsRevision(t *testing.T) {
	e := start(t, server.Config{})
	ctx := context.Background()
	a := e.client("a", false)
	register(t, a, "a")
	if _, err := a.PutExport(ctx, &registryv1.PutExportRequest{Export: export("a", 0, "http")}); err != nil {
		t.Fatal(err)
	}
	w := watch(t, a, &registryv1.WatchRequest{})
	seen := w.until(t, "synced", isSynced)
	last := seen[len(seen)-1].GetRevision()
	w.cancel()

	if _, err := a.PutEndpoints(ctx, &registryv1.PutEndpointsRequest{Chunk: chunk("a", "c1", "http", "10.244.0.1")}); err != nil {
		t.Fatal(err)
	}
	w2 := watch(t, a, &registryv1.WatchRequest{ResumeRevision: last})
	seen = w2.until(t, "synced after resume", isSynced)
	var kinds []string
	for _, ev := range seen {
		kinds = append(kinds, fmt.Sprintf("%T", ev.GetEvent()))
	}
	if len(seen) != 2 || seen[0].GetEndpointsUpsert() == nil {
		t.Fatalf("resume sent %v, want only the missed chunk and a synced mark", kinds)
	}

	// A revision that is not held gets a fresh snapshot.
	w3 := watch(t, a, &registryv1.WatchRequest{ResumeRevision: 1 << 40})
	seen = w3.until(t, "synced", isSynced)
	if seen[0].GetReset_() == nil {
		t.Fatalf("unknown revision: first event %v, want a reset", seen[0])
	}
}

// resumeUntil watches like an agent: it resumes from the last revision it
// received whenever the stream ends, until match.
func resumeUntil(t *testing.T, c registryv1.RegistryClient, match func(*registryv1.WatchEvent) bool) {
	t.Helper()
	var last int64
	testkit.Eventually(t, 20*time.Second, "a matching event", func(ctx context.Context) error {
		s, err := c.Watch(ctx, &registryv1.WatchRequest{ResumeRevision: last})
		if err != nil {
			t.Fatal(err)
		}
		for {
			ev, err := s.Recv()
			if err != nil {
				if status.Code(err) != codes.Unavailable {
					t.Fatalf("watch ended with %v", err)
				}
				return err // resume from last
			}
			last = ev.GetRevision()
			if match(ev) {
				return nil
			}
		}
	})
}

// TestSlowWatcherIsCutOffOthersContinue: a watcher that falls behind by
// more than its bound in events, or in bytes, is cut off; writes and other
// watchers go on.
func TestSlowWatcherIsCutOffOthersContinue(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  server.Config
	}{
		{"past its events", server.Config{WatcherBuffer: 16}},
		// 200 chunks of 200 endpoints are far fewer events than the default
		// bound, and over a MiB.
		{"past its bytes", server.Config{WatcherBufferBytes: 64 << 10}},
	} {
		t.Run(tc.name, func(t *testing.T) { slowWatcherIsCutOff(t, tc.cfg) })
	}
}

func slowWatcherIsCutOff(t *testing.T, cfg server.Config) {
	e := start(t, cfg)
	ctx := context.Background()
	a := e.client("a", false)
	register(t, a, "a")
	if _, err := a.PutExport(ctx, &registryv1.PutExportRequest{Export: export("a", 0, "http")}); err != nil {
		t.Fatal(err)
	}
	// The slow watcher reads nothing past its snapshot until the end, and
	// its small HTTP/2 windows make the registry's sends to it block.
	slowCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	slowClient := e.client("a", false, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	slow, err := slowClient.Watch(slowCtx, &registryv1.WatchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// The stream is open before the registry subscribed it: read up to its
	// synced mark, so that the changes below reach it as changes rather
	// than in a snapshot taken after them (which nothing would cut off).
	for {
		ev, err := slow.Recv()
		if err != nil {
			t.Fatalf("slow watcher before its synced mark: %v", err)
		}
		if isSynced(ev) {
			break
		}
	}
	for i := range 200 {
		var addrs []string
		for j := range 200 {
			addrs = append(addrs, fmt.Sprintf("10.244.%d.%d", i, j+1))
		}
		c := chunk("a", fmt.Sprintf("c%d", i), "http", addrs...)
		if _, err := a.PutEndpoints(ctx, &registryv1.PutEndpointsRequest{Chunk: c}); err != nil {
			t.Fatal(err)
		}
	}
	// Writes were never held up by the slow watcher; a watcher that reads
	// gets everything, resuming after a cut-off if it was one.
	resumeUntil(t, a, func(ev *registryv1.WatchEvent) bool { return ev.GetEndpointsUpsert().GetKey().GetChunk() == "c199" })
	// The slow one was ended with a resumable error.
	for {
		_, err := slow.Recv()
		if err != nil {
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("slow watcher ended with %v, want Unavailable", err)
			}
			break
		}
	}
}

func TestEmptyFieldsMeanTheAPIDefaults(t *testing.T) {
	e := start(t, server.Config{})
	ctx := context.Background()
	a, b := e.client("a", false), e.client("b", false)
	register(t, a, "a")
	register(t, b, "b")
	stated := export("b", 1, "http")
	stated.SessionAffinity, stated.InternalTrafficPolicy = "None", "Cluster"
	empty := export("a", 0, "http")
	empty.SessionAffinity, empty.InternalTrafficPolicy = "", ""
	if _, err := a.PutExport(ctx, &registryv1.PutExportRequest{Export: empty}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.PutExport(ctx, &registryv1.PutExportRequest{Export: stated}); err != nil {
		t.Fatal(err)
	}
	resp, err := b.ListExports(ctx, &registryv1.ListExportsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range resp.GetStatuses() {
		if len(st.GetConflicts()) > 0 {
			t.Errorf("%s has conflicts %v; empty fields should mean the defaults", st.GetKey().GetClusterId(), st.GetConflicts())
		}
	}
}

// TestExportScopeIsEnforced shows fleetnet.dev/export-to as the registry
// enforces it: a cluster outside an export's scope is sent neither its
// endpoints nor the import it alone makes, in the watch, its snapshot, or
// the list calls; a scope that moves retracts what the cluster it left
// holds and sends it to the one it names; a malformed scope is refused.
func TestExportScopeIsEnforced(t *testing.T) {
	e := start(t, server.Config{})
	ctx := context.Background()
	a, b, c, admin := e.client("a", false), e.client("b", false), e.client("c", false), e.client("ops", true)
	for id, cl := range map[string]registryv1.RegistryClient{"a": a, "b": b, "c": c} {
		register(t, cl, id)
	}
	wb, wc, wadmin := watch(t, b, &registryv1.WatchRequest{}), watch(t, c, &registryv1.WatchRequest{}), watch(t, admin, &registryv1.WatchRequest{})
	for _, w := range []*watchStream{wb, wc, wadmin} {
		w.until(t, "the first snapshot's synced mark", isSynced)
	}

	bad := export("a", 0, "http")
	bad.ExportTo = []string{"b", "Not_A_Cluster", "b"}
	_, err := a.PutExport(ctx, &registryv1.PutExportRequest{Export: bad})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "exportTo[1]") || !strings.Contains(err.Error(), "exportTo[2]: Duplicate") {
		t.Fatalf("a malformed export_to: %v, want InvalidArgument naming exportTo[1] and the duplicate exportTo[2]", err)
	}

	scopedTo := func(to ...string) *registryv1.Export {
		ex := export("a", 0, "http")
		ex.ExportTo = to
		return ex
	}
	if _, err := a.PutExport(ctx, &registryv1.PutExportRequest{Export: scopedTo("b")}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.PutEndpoints(ctx, &registryv1.PutEndpointsRequest{Chunk: chunk("a", "echo-a1", "http", "10.244.1.5")}); err != nil {
		t.Fatal(err)
	}
	// A marker every cluster is sent, after a's: c reads up to it.
	marker := export("a", 0, "http")
	marker.Key.Name = "marker"
	if _, err := a.PutExport(ctx, &registryv1.PutExportRequest{Export: marker}); err != nil {
		t.Fatal(err)
	}
	isMarker := func(ev *registryv1.WatchEvent) bool { return ev.GetImportUpsert().GetKey().GetName() == "marker" }
	echoEvent := func(ev *registryv1.WatchEvent) bool {
		return ev.GetImportUpsert().GetKey().GetName() == "echo" || ev.GetEndpointsUpsert().GetKey().GetName() == "echo" ||
			ev.GetImportDelete().GetName() == "echo" || ev.GetEndpointsDelete().GetName() == "echo"
	}
	for _, w := range []*watchStream{wb, wadmin} {
		w.until(t, "a's scoped chunk", func(ev *registryv1.WatchEvent) bool { return ev.GetEndpointsUpsert().GetKey().GetName() == "echo" })
	}
	for _, ev := range wc.until(t, "the marker", isMarker) {
		if echoEvent(ev) {
			t.Errorf("c, outside a's scope, was sent %v", ev)
		}
	}
	imports, err := c.ListImports(ctx, &registryv1.ListImportsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range imports.GetImports() {
		if imp.GetKey().GetName() == "echo" {
			t.Errorf("c lists the import a scoped to b")
		}
	}
	exports, err := c.ListExports(ctx, &registryv1.ListExportsRequest{IncludeEndpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range exports.GetEndpoints() {
		if ch.GetKey().GetName() == "echo" {
			t.Errorf("c lists a's endpoints scoped to b: %v", ch.GetKey())
		}
	}
	resp, err := a.ListExports(ctx, &registryv1.ListExportsRequest{ClusterId: "a"})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range resp.GetStatuses() {
		if st.GetKey().GetName() == "echo" && strings.Join(st.GetImportedBy(), ",") != "b" {
			t.Errorf("a's status says imported by %v, want [b]", st.GetImportedBy())
		}
	}

	// The scope moves from b to c: b's copies are retracted, c gets them;
	// the administrator is sent no retraction.
	if _, err := a.PutExport(ctx, &registryv1.PutExportRequest{Export: scopedTo("c")}); err != nil {
		t.Fatal(err)
	}
	wb.until(t, "the import's retraction", func(ev *registryv1.WatchEvent) bool { return ev.GetImportDelete().GetName() == "echo" })
	wc.until(t, "a's chunk, now in c's scope", func(ev *registryv1.WatchEvent) bool { return ev.GetEndpointsUpsert().GetKey().GetName() == "echo" })
	marker.Key.Name = "marker2"
	if _, err := a.PutExport(ctx, &registryv1.PutExportRequest{Export: marker}); err != nil {
		t.Fatal(err)
	}
	for _, ev := range wadmin.until(t, "the second marker", func(ev *registryv1.WatchEvent) bool { return ev.GetImportUpsert().GetKey().GetName() == "marker2" }) {
		if ev.GetImportDelete() != nil || ev.GetEndpointsDelete() != nil {
			t.Errorf("the administrator was sent a retraction: %v", ev)
		}
	}
	// A new watch of b (a snapshot) holds nothing of echo; one of c does.
	for _, tc := range []struct {
		client registryv1.RegistryClient
		name   string
		want   bool
	}{{b, "b", false}, {c, "c", true}} {
		found := false
		for _, ev := range watch(t, tc.client, &registryv1.WatchRequest{}).until(t, "the snapshot", isSynced) {
			found = found || echoEvent(ev)
		}
		if found != tc.want {
			t.Errorf("%s's snapshot holds echo: %v, want %v", tc.name, found, tc.want)
		}
	}
}

// TestWatchNamespaces: a watch that names namespaces (a member's import
// policy) is sent the imports and endpoints of those alone; a malformed
// namespace is refused naming it.
func TestWatchNamespaces(t *testing.T) {
	e := start(t, server.Config{})
	ctx := context.Background()
	a, b := e.client("a", false), e.client("b", false)
	register(t, a, "a")
	register(t, b, "b")
	// The error arrives with the first receive.
	s, err := b.Watch(ctx, &registryv1.WatchRequest{Namespaces: []string{"web", "Not_A_Namespace"}})
	if err == nil {
		_, err = s.Recv()
	}
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "namespaces[1]") {
		t.Fatalf("a malformed namespace: %v, want InvalidArgument naming namespaces[1]", err)
	}
	w := watch(t, b, &registryv1.WatchRequest{Namespaces: []string{"web"}})
	w.until(t, "the first snapshot's synced mark", isSynced)
	for _, ns := range []string{"demo", "web"} {
		ex := export("a", 0, "http")
		ex.Key.Namespace = ns
		if _, err := a.PutExport(ctx, &registryv1.PutExportRequest{Export: ex}); err != nil {
			t.Fatal(err)
		}
		ch := chunk("a", "echo-a1", "http", "10.244.1.5")
		ch.Key.Namespace = ns
		if _, err := a.PutEndpoints(ctx, &registryv1.PutEndpointsRequest{Chunk: ch}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ev := range w.until(t, "web's chunk", func(ev *registryv1.WatchEvent) bool { return ev.GetEndpointsUpsert().GetKey().GetNamespace() == "web" }) {
		if ev.GetImportUpsert().GetKey().GetNamespace() == "demo" || ev.GetEndpointsUpsert().GetKey().GetNamespace() == "demo" {
			t.Errorf("a watch of namespace web was sent %v", ev)
		}
	}
}

// TestExportScopeBySelectorIsEnforced: the registry holds the properties
// clusters register with, refuses malformed ones and another cluster's
// id, refuses a malformed selector and stores a valid one canonically,
// and lists a selector-scoped import only to the clusters whose
// properties match, following a re-registration with other properties.
func TestExportScopeBySelectorIsEnforced(t *testing.T) {
	e := start(t, server.Config{})
	ctx := context.Background()
	clients := map[string]registryv1.RegistryClient{"a": e.client("a", false), "b": e.client("b", false), "c": e.client("c", false)}
	registerWith := func(id string, props map[string]string) error {
		_, err := clients[id].RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Cluster: &registryv1.Cluster{Id: id, ClustersetId: "fleet", Properties: props}})
		return err
	}
	for id, env := range map[string]string{"a": "", "b": "prod", "c": "dev"} {
		props := map[string]string{"cluster.clusterset.k8s.io": id}
		if env != "" {
			props["env"] = env
		}
		if err := registerWith(id, props); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		props map[string]string
		want  string
	}{
		{map[string]string{"env": "prod west"}, `cluster.properties[env]: Invalid value: "prod west"`},
		{map[string]string{"cluster.clusterset.k8s.io": "b"}, `cluster.properties[cluster.clusterset.k8s.io]: Invalid value: "b": must be the cluster's own "c"`},
	} {
		if err := registerWith("c", tt.props); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("registering with properties %v: %v, want InvalidArgument naming %s", tt.props, err, tt.want)
		}
	}

	bad := export("a", 0, "http")
	bad.ExportToSelector = "env in (prod"
	if _, err := clients["a"].PutExport(ctx, &registryv1.PutExportRequest{Export: bad}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `export.exportToSelector: Invalid value: "env in (prod"`) {
		t.Fatalf("a malformed selector: %v, want InvalidArgument naming it", err)
	}
	scoped := export("a", 0, "http")
	scoped.ExportToSelector = "env in (prod, staging)"
	if _, err := clients["a"].PutExport(ctx, &registryv1.PutExportRequest{Export: scoped}); err != nil {
		t.Fatal(err)
	}
	lists := func(id string, want bool) func(context.Context) error {
		return func(ctx context.Context) error {
			resp, err := clients[id].ListImports(ctx, &registryv1.ListImportsRequest{})
			if err != nil {
				return err
			}
			has := slices.ContainsFunc(resp.GetImports(), func(i *registryv1.Import) bool { return i.GetKey().GetName() == "echo" })
			if has != want {
				return fmt.Errorf("%s lists echo: %v, want %v", id, has, want)
			}
			return nil
		}
	}
	testkit.Eventually(t, 10*time.Second, "b (env=prod) to list echo", lists("b", true))
	if err := lists("c", false)(ctx); err != nil {
		t.Error(err)
	}
	exports, err := e.client("ops", true).ListExports(ctx, &registryv1.ListExportsRequest{ClusterId: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if got := exports.GetExports()[0].GetExportToSelector(); got != "env in (prod,staging)" {
		t.Errorf("stored selector %q, want the canonical env in (prod,staging)", got)
	}
	if by := exports.GetStatuses()[0].GetImportedBy(); !slices.Equal(by, []string{"b"}) {
		t.Errorf("imported_by %v, want [b]", by)
	}

	// c registers again as staging: it is in scope; as dev again: out.
	if err := registerWith("c", map[string]string{"env": "staging"}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "c (env=staging) to list echo", lists("c", true))
	if err := registerWith("c", map[string]string{"env": "dev"}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "c (env=dev) no longer to list echo", lists("c", false))
	clusters, err := clients["c"].ListClusters(ctx, &registryv1.ListClustersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range clusters.GetClusters() {
		if cl.GetId() == "c" && cl.GetProperties()["env"] != "dev" {
			t.Errorf("c's properties in the registry: %v, want env=dev", cl.GetProperties())
		}
	}
}

// TestScopedExportIsInvisibleInOthersImports: a cluster outside a scoped
// export's scope is sent, and lists, an import merged from the exports it
// may see alone: the scoped exporter appears in none of its clusters,
// ports or conflicts, in the watch, a new snapshot or ListImports, and no
// status it may list names a conflict with it; a cluster in the scope
// and the administrator see the merge of both, with the conflict.
func TestScopedExportIsInvisibleInOthersImports(t *testing.T) {
	e := start(t, server.Config{})
	ctx := context.Background()
	clients := map[string]registryv1.RegistryClient{"a": e.client("a", false), "b": e.client("b", false), "c": e.client("c", false), "d": e.client("d", false)}
	for id, cl := range clients {
		register(t, cl, id)
	}
	clients[""] = e.client("ops", true)
	live := map[string]*watchStream{}
	for id, cl := range clients {
		live[id] = watch(t, cl, &registryv1.WatchRequest{})
		live[id].until(t, "the first snapshot's synced mark", isSynced)
	}
	// a, the oldest, exports to b only with port "http"; c to everyone
	// with port "web": a Port conflict, which only b, a and the
	// administrator may know of.
	scoped := export("a", 0, "http")
	scoped.ExportTo = []string{"b"}
	if _, err := clients["a"].PutExport(ctx, &registryv1.PutExportRequest{Export: scoped}); err != nil {
		t.Fatal(err)
	}
	if _, err := clients["c"].PutExport(ctx, &registryv1.PutExportRequest{Export: export("c", 1, "web")}); err != nil {
		t.Fatal(err)
	}
	if _, err := clients["c"].PutEndpoints(ctx, &registryv1.PutEndpointsRequest{Chunk: chunk("c", "echo-c1", "web", "10.244.3.5")}); err != nil {
		t.Fatal(err)
	}

	mentionsA := func(imp *registryv1.Import) bool {
		for _, c := range imp.GetClusters() {
			if c.GetClusterId() == "a" {
				return true
			}
		}
		return len(imp.GetConflicts()) > 0 || imp.GetPorts()[0].GetName() != "web"
	}
	for _, tc := range []struct {
		viewer   string
		clusters []string
		port     string
	}{
		{"b", []string{"a", "c"}, "http"},
		{"", []string{"a", "c"}, "http"},
		{"c", []string{"c"}, "web"},
		{"d", []string{"c"}, "web"},
	} {
		name := tc.viewer
		if name == "" {
			name = "the administrator"
		}
		var last *registryv1.Import
		var port string
		// Until c's chunk has come in the port the viewer's import names:
		// every import the viewer was sent on the way is checked.
		for _, ev := range live[tc.viewer].until(t, name+"'s copy of c's chunk", func(ev *registryv1.WatchEvent) bool {
			return ev.GetEndpointsUpsert().GetKey().GetClusterId() == "c"
		}) {
			if imp := ev.GetImportUpsert(); imp != nil {
				last = imp
				if tc.port == "web" && mentionsA(imp) {
					t.Errorf("%s, outside a's scope, was sent %v", name, imp)
				}
			}
			if ch := ev.GetEndpointsUpsert(); ch != nil {
				port = ch.GetPorts()[0].GetName()
			}
		}
		if !importWithClusters(tc.clusters...)(&registryv1.WatchEvent{Event: &registryv1.WatchEvent_ImportUpsert{ImportUpsert: last}}) {
			t.Errorf("%s's last import lists %v, want clusters %v", name, last.GetClusters(), tc.clusters)
		}
		if port != tc.port {
			t.Errorf("%s is sent c's endpoints on port %q, want %q", name, port, tc.port)
		}
		if wantConflict := tc.port == "http"; (len(last.GetConflicts()) == 1) != wantConflict {
			t.Errorf("%s's import has conflicts %v, want a Port conflict: %v", name, last.GetConflicts(), wantConflict)
		}
		listed, err := clients[tc.viewer].ListImports(ctx, &registryv1.ListImportsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(listed.GetImports()) != 1 || !proto.Equal(listed.GetImports()[0], last) {
			t.Errorf("%s lists imports %v, want what it was sent, %v", name, listed.GetImports(), last)
		}
		for _, ev := range watch(t, clients[tc.viewer], &registryv1.WatchRequest{}).until(t, name+"'s new snapshot", isSynced) {
			if imp := ev.GetImportUpsert(); imp != nil && !proto.Equal(imp, last) {
				t.Errorf("%s's snapshot holds %v, want %v", name, imp, last)
			}
		}
	}
	// Statuses: c sees only its own export, so its conflicts are none;
	// d lists c's status without conflicts; a's names the conflict.
	for _, tc := range []struct {
		viewer, of string
		conflicts  int
	}{{"c", "c", 0}, {"d", "c", 0}, {"a", "a", 1}, {"b", "a", 0}, {"", "a", 1}} {
		resp, err := clients[tc.viewer].ListExports(ctx, &registryv1.ListExportsRequest{ClusterId: tc.of})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetStatuses()) != 1 || len(resp.GetStatuses()[0].GetConflicts()) != tc.conflicts {
			t.Errorf("%q lists %s's statuses %v, want one with %d conflicts", tc.viewer, tc.of, resp.GetStatuses(), tc.conflicts)
		}
	}
}

// TestImportsNameTheExportersGateway: a cluster's network and east-west
// gateway address, registered, reach every importer in its imports, and
// follow a re-registration; a malformed address is refused naming it.
func TestImportsNameTheExportersGateway(t *testing.T) {
	e := start(t, server.Config{})
	ctx := context.Background()
	a, b := e.client("a", false), e.client("b", false)
	register := func(c registryv1.RegistryClient, id, gw string) error {
		_, err := c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Cluster: &registryv1.Cluster{Id: id, ClustersetId: "fleet",
			Properties: map[string]string{keys.PropertyNetwork: "net-" + id}, EastwestGateway: gw}})
		return err
	}
	if err := register(a, "a", "192.0.2.1:15008"); err != nil {
		t.Fatal(err)
	}
	if err := register(b, "b", ""); err != nil {
		t.Fatal(err)
	}
	if err := register(a, "a", "192.0.2.1"); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `cluster.eastwestGateway: Invalid value: "192.0.2.1"`) {
		t.Fatalf("a gateway address without port: %v, want InvalidArgument naming it", err)
	}
	if _, err := a.PutExport(ctx, &registryv1.PutExportRequest{Export: export("a", 0, "http")}); err != nil {
		t.Fatal(err)
	}
	gateway := func(want string) func(context.Context) error {
		return func(ctx context.Context) error {
			resp, err := b.ListImports(ctx, &registryv1.ListImportsRequest{})
			if err != nil {
				return err
			}
			for _, i := range resp.GetImports() {
				for _, c := range i.GetClusters() {
					if c.GetClusterId() == "a" && c.GetNetwork() == "net-a" && c.GetEastwestGateway() == want {
						return nil
					}
				}
			}
			return fmt.Errorf("b's imports %v, want a on net-a with gateway %q", resp.GetImports(), want)
		}
	}
	testkit.Eventually(t, 10*time.Second, "b's import naming a's gateway", gateway("192.0.2.1:15008"))
	if err := register(a, "a", "gw.a.example:15008"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "b's import following a's new gateway", gateway("gw.a.example:15008"))
}
