// Package registry_test runs fleetnet-registry as a process: durability
// across SIGKILL with the embedded etcd, and replicas on one external etcd.
package registry_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/controlplane"
	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/fleetnet/fleetnet/internal/registry/client"
	"github.com/fleetnet/fleetnet/internal/testkit"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

var registryBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fleetnet-registry-bin")
	if err != nil {
		panic(err)
	}
	registryBinary = filepath.Join(dir, "fleetnet-registry")
	build := exec.Command("go", "build", "-o", registryBinary, "github.com/fleetnet/fleetnet/cmd/fleetnet-registry")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "building fleetnet-registry: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// certs writes a fleet CA, a registry certificate and client certificates.
type certs struct{ dir string }

func newCerts(t *testing.T, clusters ...string) certs {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Write(dir, "ca"); err != nil {
		t.Fatal(err)
	}
	kp, err := ca.ServingCert("registry", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := kp.Write(dir, "registry"); err != nil {
		t.Fatal(err)
	}
	for _, id := range clusters {
		kp, err := ca.ClusterCert(id)
		if err != nil {
			t.Fatal(err)
		}
		if err := kp.Write(dir, id); err != nil {
			t.Fatal(err)
		}
	}
	return certs{dir}
}

func (c certs) client(t *testing.T, addr, id string) registryv1.RegistryClient {
	t.Helper()
	cl, conn, err := client.Dial(client.Options{Address: addr, CAFile: filepath.Join(c.dir, "ca.crt"),
		CertFile: filepath.Join(c.dir, id+".crt"), KeyFile: filepath.Join(c.dir, id+".key")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return cl
}

// startRegistry runs the binary with args and waits until it serves.
func startRegistry(t *testing.T, c certs, logDir string, args ...string) (*controlplane.Process, string) {
	t.Helper()
	addr := testkit.FreeAddr(t)
	args = append([]string{
		"--listen=" + addr, "--metrics-listen=",
		"--tls-cert-file=" + filepath.Join(c.dir, "registry.crt"),
		"--tls-key-file=" + filepath.Join(c.dir, "registry.key"),
		"--client-ca-file=" + filepath.Join(c.dir, "ca.crt"),
	}, args...)
	p, err := controlplane.Start("fleetnet-registry", registryBinary, args, filepath.Join(logDir, "registry.log"), controlplane.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(5 * time.Second) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	probe := c.client(t, addr, "probe")
	if err := p.WaitFor(ctx, "serving", func(ctx context.Context) error {
		_, err := probe.ListClusters(ctx, &registryv1.ListClustersRequest{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return p, addr
}

func export(cluster string, i int) *registryv1.Export {
	return &registryv1.Export{
		Key:           &registryv1.ExportKey{Namespace: "demo", Name: fmt.Sprintf("svc-%d", i), ClusterId: cluster},
		ExportedSince: timestamppb.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		Type:          "ClusterSetIP",
		Ports:         []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}},
		IpFamilies:    []string{"IPv4"},
		Weight:        1,
	}
}

func TestAcknowledgedWritesSurviveSIGKILL(t *testing.T) {
	c := newCerts(t, "a", "probe")
	dataDir := filepath.Join(t.TempDir(), "data")
	logDir := t.TempDir()
	p, addr := startRegistry(t, c, logDir, "--data-dir="+dataDir)
	a := c.client(t, addr, "a")
	ctx := context.Background()
	if _, err := a.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Cluster: &registryv1.Cluster{Id: "a", ClustersetId: "fleet"}}); err != nil {
		t.Fatal(err)
	}

	// Write concurrently; kill the registry while writes are in flight, right
	// after a batch of acknowledgements.
	var mu sync.Mutex
	acked := map[string]bool{}
	var wg sync.WaitGroup
	writeCtx, stopWriting := context.WithCancel(ctx)
	for w := range 4 {
		wg.Go(func() {
			for i := w; writeCtx.Err() == nil; i += 4 {
				e := export("a", i)
				if _, err := a.PutExport(writeCtx, &registryv1.PutExportRequest{Export: e}); err != nil {
					return
				}
				mu.Lock()
				acked[e.GetKey().GetName()] = true
				n := len(acked)
				mu.Unlock()
				if n == 300 {
					p.Kill() // SIGKILL, with other writes still in flight
				}
			}
		})
	}
	wg.Wait()
	stopWriting()
	if ok, _ := p.Exited(); !ok {
		t.Fatal("registry was not killed")
	}

	_, addr = startRegistry(t, c, logDir, "--data-dir="+dataDir)
	resp, err := c.client(t, addr, "a").ListExports(ctx, &registryv1.ListExportsRequest{ClusterId: "a"})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, e := range resp.GetExports() {
		have[e.GetKey().GetName()] = true
	}
	var lost []string
	for name := range acked {
		if !have[name] {
			lost = append(lost, name)
		}
	}
	if len(lost) > 0 {
		t.Fatalf("%d of %d acknowledged writes lost after SIGKILL: %v", len(lost), len(acked), lost)
	}
	t.Logf("%d acknowledged writes, all present after SIGKILL and restart (%d records held)", len(acked), len(have))
}

// collect reads a watch until stop says so.
func collect(t *testing.T, cl registryv1.RegistryClient, synced func(), stop func(*registryv1.WatchEvent) bool) []*registryv1.WatchEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := cl.Watch(ctx, &registryv1.WatchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var out []*registryv1.WatchEvent
	for {
		e, err := s.Recv()
		if err != nil {
			t.Fatalf("watch: %v (after %d events)", err, len(out))
		}
		out = append(out, e)
		if e.GetSynced() != nil && synced != nil {
			synced()
			synced = nil
		}
		if stop(e) {
			return out
		}
	}
}

func TestReplicasOnOneEtcdStreamIdentically(t *testing.T) {
	etcd := startEtcd(t)
	c := newCerts(t, "a", "b", "probe")
	_, addr1 := startRegistry(t, c, t.TempDir(), "--etcd-endpoints="+etcd.Endpoint)
	_, addr2 := startRegistry(t, c, t.TempDir(), "--etcd-endpoints="+etcd.Endpoint)

	ctx := context.Background()
	// a writes through replica 1, b through replica 2.
	writers := map[string]registryv1.RegistryClient{"a": c.client(t, addr1, "a"), "b": c.client(t, addr2, "b")}
	for id, cl := range writers {
		if _, err := cl.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Cluster: &registryv1.Cluster{Id: id, ClustersetId: "fleet"}}); err != nil {
			t.Fatal(err)
		}
	}
	// Both watch from the start, before the writes.
	type result struct {
		events []*registryv1.WatchEvent
	}
	results := make([]result, 2)
	var wg, synced sync.WaitGroup
	for i, addr := range []string{addr1, addr2} {
		synced.Add(1)
		wg.Go(func() {
			results[i].events = collect(t, c.client(t, addr, "probe"), synced.Done, func(e *registryv1.WatchEvent) bool {
				return e.GetEndpointsUpsert().GetKey().GetChunk() == "last"
			})
		})
	}
	synced.Wait()
	for i := range 20 {
		for id, cl := range writers {
			e := export(id, i%5)
			e.ExportedSince = timestamppb.New(time.Date(2026, 1, 1, 0, i, 0, 0, time.UTC))
			if _, err := cl.PutExport(ctx, &registryv1.PutExportRequest{Export: e}); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, err := writers["a"].PutEndpoints(ctx, &registryv1.PutEndpointsRequest{Chunk: &registryv1.EndpointChunk{
		Key: &registryv1.ChunkKey{Namespace: "demo", Name: "svc-0", ClusterId: "a", Chunk: "last"}, AddressType: "IPv4",
		Ports:     []*registryv1.EndpointPort{{Name: "http", Protocol: "TCP", Port: 8080}},
		Endpoints: []*registryv1.Endpoint{{Addresses: []string{"10.244.0.9"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	// Both started from a snapshot at possibly different revisions; compare
	// what followed the later of the two starts.
	from := max(results[0].events[0].GetRevision(), results[1].events[0].GetRevision())
	tail := func(evs []*registryv1.WatchEvent) []*registryv1.WatchEvent {
		for i, e := range evs {
			if e.GetSynced() != nil {
				evs = evs[i+1:]
				break
			}
		}
		var out []*registryv1.WatchEvent
		for _, e := range evs {
			if e.GetRevision() > from {
				out = append(out, e)
			}
		}
		return out
	}
	s1, s2 := tail(results[0].events), tail(results[1].events)
	if len(s1) == 0 || len(s1) != len(s2) {
		t.Fatalf("replica streams differ in length: %d vs %d", len(s1), len(s2))
	}
	for i := range s1 {
		if !proto.Equal(s1[i], s2[i]) {
			t.Fatalf("replica streams differ at event %d:\n%v\n%v", i, s1[i], s2[i])
		}
	}
	t.Logf("two replicas streamed %d identical events", len(s1))
}

// A registry on an etcd that others write to too (the API servers of a
// small fleet, say) reads its view at the store's current revision, which
// those writes move without an event under the registry's prefix: reads
// must not wait for a registry write to catch up (they waited 10 s and
// failed before progress notifications; found by `make chaos`).
func TestReadsOnASharedEtcdDoNotWaitForRegistryWrites(t *testing.T) {
	etcd := startEtcd(t)
	c := newCerts(t, "a", "probe")
	_, addr := startRegistry(t, c, t.TempDir(), "--etcd-endpoints="+etcd.Endpoint)
	ctx := context.Background()
	a := c.client(t, addr, "a")
	if _, err := a.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Cluster: &registryv1.Cluster{Id: "a", ClustersetId: "fleet"}}); err != nil {
		t.Fatal(err)
	}
	other, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	probe := c.client(t, addr, "probe")
	for i := range 5 {
		if _, err := other.Put(ctx, fmt.Sprintf("/registry/pods/p%d", i), "x"); err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		start := time.Now()
		resp, err := probe.ListClusters(rctx, &registryv1.ListClustersRequest{})
		cancel()
		if err != nil {
			t.Fatalf("ListClusters after another client's write %d: %v (after %s)", i, err, time.Since(start).Round(time.Millisecond))
		}
		if len(resp.GetClusters()) != 1 {
			t.Fatalf("ListClusters: %v, want cluster a", resp.GetClusters())
		}
	}
}

// startEtcd runs an external etcd for registry replicas; the test stops it.
func startEtcd(t *testing.T) *controlplane.Etcd {
	t.Helper()
	bins, err := controlplane.FindBinaries()
	if err != nil {
		t.Fatal(err)
	}
	etcd, err := controlplane.StartEtcd(context.Background(), bins, controlplane.EtcdConfig{
		Dir: t.TempDir(), ClientPort: testkit.FreePort(t), PeerPort: testkit.FreePort(t),
	}, controlplane.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { etcd.Stop(5 * time.Second) })
	return etcd
}
