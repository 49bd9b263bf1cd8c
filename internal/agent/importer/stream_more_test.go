package importer

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/registry/registrytest"
	"github.com/fleetnet/fleetnet/internal/registry/server"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/types"
)

// An export written with its endpoints (one registry revision) is asked to
// be reconciled only once the stream holds all of it: the import's first
// reconcile finds its endpoints, and writes its slices with the Service.
func TestStreamAppliesARevisionWhole(t *testing.T) {
	reg := registrytest.Start(t, server.Config{})
	exporter, importer := reg.Client("a", false), reg.Client("b", false)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for id, c := range map[string]registryv1.RegistryClient{"a": exporter, "b": importer} {
		if _, err := c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Cluster: &registryv1.Cluster{Id: id, ClustersetId: "fleet", Region: "r"}}); err != nil {
			t.Fatal(err)
		}
	}
	key := types.NamespacedName{Namespace: "demo", Name: "echo"}
	type change struct {
		key    types.NamespacedName
		chunks int
	}
	changes := make(chan change, 100)
	s := &Stream{Client: importer, Log: slog.New(slog.DiscardHandler)}
	s.Changed = func(k types.NamespacedName) {
		d, _ := s.Get(k)
		n := 0
		if d != nil {
			for _, byChunk := range d.Chunks {
				n += len(byChunk)
			}
		}
		changes <- change{k, n}
	}
	go func() { _ = s.Start(ctx) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, synced := s.Keys(); synced {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("stream not synced within 10s")
		}
	}

	chunk := func(name, addr string) *registryv1.EndpointChunk {
		return &registryv1.EndpointChunk{Key: &registryv1.ChunkKey{Namespace: "demo", Name: "echo", ClusterId: "a", Chunk: name}, AddressType: "IPv4",
			Ports:     []*registryv1.EndpointPort{{Name: "http", Protocol: "TCP", Port: 8080}},
			Endpoints: []*registryv1.Endpoint{{Addresses: []string{addr}, Conditions: &registryv1.EndpointConditions{Ready: true, Serving: true}}}}
	}
	_, err := exporter.PutExport(ctx, &registryv1.PutExportRequest{
		Export: &registryv1.Export{Key: &registryv1.ExportKey{Namespace: "demo", Name: "echo", ClusterId: "a"}, ExportedSince: timestamppb.Now(),
			Type: "ClusterSetIP", Ports: []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}}, IpFamilies: []string{"IPv4"}, Weight: 1},
		Chunks: []*registryv1.EndpointChunk{chunk("s1", "10.244.0.1"), chunk("s2", "10.244.0.2"), chunk("s3", "10.244.0.3")},
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-changes:
		if c.key != key || c.chunks != 3 {
			t.Fatalf("first change asked for: %v holding %d chunks, want %v holding all 3 written with the export", c.key, c.chunks, key)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no change asked for within 10s")
	}
}

// replayServer serves one watch: a resume's replay whose last change shares
// its revision with the synced mark after it (marked more, as the registry
// sends it), then nothing.
type replayServer struct {
	registryv1.UnimplementedRegistryServer
}

func (replayServer) Watch(_ *registryv1.WatchRequest, stream grpc.ServerStreamingServer[registryv1.WatchEvent]) error {
	imp := &registryv1.Import{Key: &registryv1.ImportKey{Namespace: "demo", Name: "echo"}, Type: "ClusterSetIP",
		Ports: []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}}}
	for _, ev := range []*registryv1.WatchEvent{
		{Revision: 7, More: true, Event: &registryv1.WatchEvent_ImportUpsert{ImportUpsert: imp}},
		{Revision: 7, Event: &registryv1.WatchEvent_Synced{Synced: &registryv1.Synced{}}},
	} {
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
	<-stream.Context().Done()
	return nil
}

// A revision whose last event is the synced mark is whole when the mark
// comes: its imports are reconciled then, not at the next change.
func TestStreamReleasesARevisionAtTheSyncedMark(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	registryv1.RegisterRegistryServer(gs, replayServer{})
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	changed := make(chan types.NamespacedName, 10)
	s := &Stream{Client: registryv1.NewRegistryClient(conn), Log: slog.New(slog.DiscardHandler), Changed: func(k types.NamespacedName) { changed <- k }}
	go func() { _ = s.Start(ctx) }()
	select {
	case k := <-changed:
		if k != (types.NamespacedName{Namespace: "demo", Name: "echo"}) {
			t.Fatalf("changed %v, want demo/echo", k)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the import replayed before the synced mark was never asked to be reconciled")
	}
}
