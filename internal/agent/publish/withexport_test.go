package publish

import (
	"context"
	"testing"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/registry/registrytest"
	"github.com/fleetnet/fleetnet/internal/registry/server"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// A new export goes to the registry with its chunks in one write; what the
// registry acknowledged is not written again, and a later change of one
// chunk is one write of that chunk. A registry that does not take chunks
// with the export (fakeRegistry, as before PutExport had them) gets them
// one by one: TestPublishCarriesItsTraceAndIgnoresStoredOnes.
func TestPublishWritesANewExportWithItsChunks(t *testing.T) {
	reg := registrytest.Start(t, server.Config{})
	cl := reg.Client("a", false)
	ctx := context.Background()
	if _, err := cl.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Cluster: &registryv1.Cluster{Id: "a", ClustersetId: "fleet", Region: "r"}}); err != nil {
		t.Fatal(err)
	}
	p := New(cl, "a", nil)
	e, c1 := records()
	e.IpFamilies, e.Weight, e.ExportedSince = []string{"IPv4"}, 1, timestamppb.Now()
	c2 := proto.Clone(c1).(*registryv1.EndpointChunk)
	c2.Key.Chunk, c2.Endpoints[0].Addresses = "s2", []string{"10.0.0.2"}

	steps := []struct {
		name   string
		chunks []*registryv1.EndpointChunk
		writes int
	}{
		{"a new export with two chunks", []*registryv1.EndpointChunk{c1, c2}, 1},
		{"the same again", []*registryv1.EndpointChunk{c1, c2}, 0},
		{"one chunk changed", []*registryv1.EndpointChunk{c1, withAddress(c2, "10.0.0.3")}, 1},
	}
	for _, s := range steps {
		n, err := p.Publish(ctx, e, s.chunks)
		if err != nil || n != s.writes {
			t.Fatalf("%s: %d writes, %v; want %d", s.name, n, err, s.writes)
		}
		held, err := cl.ListExports(ctx, &registryv1.ListExportsRequest{ClusterId: "a", IncludeEndpoints: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(held.GetExports()) != 1 || len(held.GetEndpoints()) != len(s.chunks) {
			t.Fatalf("%s: the registry holds %d exports and %d chunks, want 1 and %d", s.name, len(held.GetExports()), len(held.GetEndpoints()), len(s.chunks))
		}
	}
	if _, revs, ok := p.Acknowledged(ExportKey{"demo", "echo"}); !ok || len(revs) != 2 || revs["s1"] == 0 {
		t.Errorf("acknowledged chunk revisions %v (%v), want both chunks with their revisions", revs, ok)
	}
}

func withAddress(c *registryv1.EndpointChunk, addr string) *registryv1.EndpointChunk {
	c = proto.Clone(c).(*registryv1.EndpointChunk)
	c.Endpoints[0].Addresses = []string{addr}
	return c
}
