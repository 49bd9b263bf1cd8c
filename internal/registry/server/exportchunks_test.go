package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/registry/server"
	"github.com/fleetnet/fleetnet/internal/registry/validate"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// An export written with its chunks is one revision: a watcher receives
// the import and its endpoints as consecutive events of that revision,
// every one but the last marked more, so that an importer applies them
// together; a later change of one chunk alone is one event without more.
func TestExportWithChunksIsOneEvent(t *testing.T) {
	e := start(t, server.Config{})
	a, b := e.client("a", false), e.client("b", false)
	register(t, a, "a")
	register(t, b, "b")
	w := watch(t, b, &registryv1.WatchRequest{})
	w.until(t, "the first snapshot's synced mark", isSynced)

	ctx := context.Background()
	resp, err := a.PutExport(ctx, &registryv1.PutExportRequest{Export: export("a", 0, "http"),
		Chunks: []*registryv1.EndpointChunk{chunk("a", "c1", "http", "10.244.0.1"), chunk("a", "c2", "http", "10.244.0.2")}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetChunksWritten() != 2 {
		t.Fatalf("chunks_written = %d, want 2", resp.GetChunksWritten())
	}
	seen := w.until(t, "the export's last event", func(ev *registryv1.WatchEvent) bool { return !ev.GetMore() })
	var imports, chunks int
	for i, ev := range seen {
		if ev.GetRevision() != resp.GetRevision() {
			t.Errorf("event %d at revision %d, want the write's %d: %v", i, ev.GetRevision(), resp.GetRevision(), ev)
		}
		if ev.GetImportUpsert() != nil {
			imports++
		}
		if ev.GetEndpointsUpsert() != nil {
			chunks++
		}
	}
	if imports != 1 || chunks != 2 {
		t.Fatalf("the write reached the watcher as %d import and %d endpoint events (%v), want 1 and 2 in one revision", imports, chunks, seen)
	}

	if _, err := a.PutEndpoints(ctx, &registryv1.PutEndpointsRequest{Chunk: chunk("a", "c1", "http", "10.244.0.9")}); err != nil {
		t.Fatal(err)
	}
	if ev := w.until(t, "the chunk change", func(ev *registryv1.WatchEvent) bool { return ev.GetEndpointsUpsert() != nil }); ev[len(ev)-1].GetMore() {
		t.Errorf("a change of one chunk was marked more: %v", ev[len(ev)-1])
	}
	got, err := a.ListExports(ctx, &registryv1.ListExportsRequest{ClusterId: "a", IncludeEndpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.GetExports()) != 1 || len(got.GetEndpoints()) != 2 {
		t.Errorf("the registry holds %d exports and %d chunks, want 1 and 2", len(got.GetExports()), len(got.GetEndpoints()))
	}
}

// Chunks written with an export belong to it and to the caller: a cluster
// cannot slip another cluster's or another service's endpoints into its
// own export's transaction, nor pass the size bounds.
func TestExportWithChunksRefused(t *testing.T) {
	e := start(t, server.Config{})
	a := e.client("a", false)
	register(t, a, "a")
	other := chunk("b", "c1", "http", "10.244.0.1")
	otherService := chunk("a", "c1", "http", "10.244.0.1")
	otherService.Key.Name = "web"
	var many []*registryv1.EndpointChunk
	for i := range validate.MaxChunksWithExport + 1 {
		many = append(many, chunk("a", fmt.Sprintf("c%d", i), "http", "10.244.0.1"))
	}
	tests := []struct {
		name   string
		chunks []*registryv1.EndpointChunk
		want   string
	}{
		{"another cluster's chunk", []*registryv1.EndpointChunk{other}, "chunks[0].key: Invalid value: \"b/demo/echo\""},
		{"another service's chunk", []*registryv1.EndpointChunk{otherService}, "chunks[0].key: Invalid value: \"a/demo/web\""},
		{"a chunk named twice", []*registryv1.EndpointChunk{chunk("a", "c1", "http", "10.244.0.1"), chunk("a", "c1", "http", "10.244.0.2")}, "chunks[1].key.chunk: Duplicate value: \"c1\""},
		{"too many chunks", many, fmt.Sprintf("chunks: Too many: %d: must have at most %d items", len(many), validate.MaxChunksWithExport)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := a.PutExport(context.Background(), &registryv1.PutExportRequest{Export: export("a", 0, "http"), Chunks: tt.chunks})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tt.want) {
				t.Fatalf("PutExport = %v, want InvalidArgument naming %q", err, tt.want)
			}
		})
	}
	got, err := a.ListExports(context.Background(), &registryv1.ListExportsRequest{ClusterId: "a", IncludeEndpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.GetExports())+len(got.GetEndpoints()) != 0 {
		t.Errorf("refused writes left records: %v", got)
	}
}

// A watch resumed from before the write replays it and ends with the
// synced mark at the same revision: the replay's last change is marked
// more, and the mark (without more) completes the revision. The agent's
// stream relies on exactly this (importer
// TestStreamReleasesARevisionAtTheSyncedMark).
func TestResumedWatchMarksTheReplayUpToTheSyncedMark(t *testing.T) {
	e := start(t, server.Config{})
	a, b := e.client("a", false), e.client("b", false)
	register(t, a, "a")
	register(t, b, "b")
	ctx := context.Background()
	before, err := b.ListClusters(ctx, &registryv1.ListClustersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := a.PutExport(ctx, &registryv1.PutExportRequest{Export: export("a", 0, "http"),
		Chunks: []*registryv1.EndpointChunk{chunk("a", "c1", "http", "10.244.0.1")}})
	if err != nil {
		t.Fatal(err)
	}
	w := watch(t, b, &registryv1.WatchRequest{ResumeRevision: before.GetRevision()})
	seen := w.until(t, "the synced mark", isSynced)
	if len(seen) < 3 || seen[0].GetReset_() != nil {
		t.Fatalf("resumed watch sent %v, want a replay of the import and its chunk, then the synced mark", seen)
	}
	last, mark := seen[len(seen)-2], seen[len(seen)-1]
	if mark.GetRevision() != resp.GetRevision() || mark.GetMore() {
		t.Errorf("synced mark %v: want revision %d without more", mark, resp.GetRevision())
	}
	if last.GetRevision() != resp.GetRevision() || !last.GetMore() {
		t.Errorf("the replay's last change %v: want revision %d marked more (the mark shares it)", last, resp.GetRevision())
	}
}
