package importstate

import (
	"testing"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
)

func TestApply(t *testing.T) {
	key := func(ns, name string) string { return ns + "/" + name }
	chunk := func(cluster, name string) *registryv1.WatchEvent {
		return &registryv1.WatchEvent{Event: &registryv1.WatchEvent_EndpointsUpsert{EndpointsUpsert: &registryv1.EndpointChunk{
			Key: &registryv1.ChunkKey{Namespace: "demo", Name: "echo", ClusterId: cluster, Chunk: name}}}}
	}
	dropChunk := func(cluster, name string) *registryv1.WatchEvent {
		return &registryv1.WatchEvent{Event: &registryv1.WatchEvent_EndpointsDelete{EndpointsDelete: &registryv1.ChunkKey{
			Namespace: "demo", Name: "echo", ClusterId: cluster, Chunk: name}}}
	}
	m := map[string]*Import{}
	apply := func(ev *registryv1.WatchEvent) {
		t.Helper()
		if k, ok := Apply(m, ev, key); !ok || k != "demo/echo" {
			t.Fatalf("Apply touched %q, %v", k, ok)
		}
	}
	// Chunks may come before their import.
	apply(chunk("east", "a"))
	apply(chunk("east", "b"))
	if d := m["demo/echo"]; d == nil || d.Import != nil || len(d.Chunks["east"]) != 2 {
		t.Fatalf("after two chunks: %+v", d)
	}
	apply(&registryv1.WatchEvent{Event: &registryv1.WatchEvent_ImportUpsert{ImportUpsert: &registryv1.Import{Key: &registryv1.ImportKey{Namespace: "demo", Name: "echo"}}}})
	apply(dropChunk("east", "a"))
	apply(dropChunk("east", "b"))
	if d := m["demo/echo"]; d == nil || d.Import == nil || len(d.Chunks) != 0 {
		t.Fatalf("an import without chunks must stay: %+v", d)
	}
	apply(&registryv1.WatchEvent{Event: &registryv1.WatchEvent_ImportDelete{ImportDelete: &registryv1.ImportKey{Namespace: "demo", Name: "echo"}}})
	if len(m) != 0 {
		t.Fatalf("after the import's delete: %v", m)
	}
	// Chunks alone, all deleted: nothing is left.
	apply(chunk("west", "a"))
	apply(dropChunk("west", "a"))
	if len(m) != 0 {
		t.Fatalf("after a lone chunk's delete: %v", m)
	}
	if _, ok := Apply(m, &registryv1.WatchEvent{Event: &registryv1.WatchEvent_Synced{}}, key); ok {
		t.Error("a synced mark touched an import")
	}
}
