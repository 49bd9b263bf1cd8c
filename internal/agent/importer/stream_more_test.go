package importer

import (
	"context"
	"log/slog"
	"testing"
	"time"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/registry/registrytest"
	"github.com/fleetnet/fleetnet/internal/registry/server"
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
