package view

import (
	"testing"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/registry/keyspace"
	"github.com/fleetnet/fleetnet/internal/registry/store"
	"google.golang.org/protobuf/proto"
)

func traced[M interface {
	proto.Message
	GetTraceParent() string
}](m M, tp string) M {
	return registryv1.WithTraceParent(m, tp)
}

const (
	tp1 = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	tp2 = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
)

// A record written again with only another trace_parent is no change: no
// import or chunk event goes out (a republish after a restart, or a
// resync, costs no watcher anything). A changed record's events carry its
// trace_parent: the import the export's, a chunk its own.
func TestViewTraceParentIsNoChange(t *testing.T) {
	l := &log{data: map[string]store.KV{}}
	v := New()
	apply := func(evs ...store.Event) []Event {
		t.Helper()
		out, err := v.Apply(evs)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	apply(l.put(t, keyspace.ClusterKey("a"), &registryv1.Cluster{Id: "a", ClustersetId: "fleet"}))
	apply(l.put(t, keyspace.LiveKey("a"), nil))
	e, c := exp("a", 0, "http"), chunk("a", "a1", "http", "10.0.0.1")

	for _, step := range []struct {
		name  string
		event func() store.Event
		want  []string
		// traces are the trace_parents of the import and chunk events.
		traces map[string]string
	}{
		{"export, traced", func() store.Event { return l.put(t, keyspace.ExportKey(e.Key), traced(e, tp1)) }, []string{"status:a", "import"}, map[string]string{"import": tp1}},
		{"chunk, traced", func() store.Event { return l.put(t, keyspace.ChunkKey(c.Key), traced(c, tp1)) }, []string{"status:a", "chunk:a/a1"}, map[string]string{"chunk:a/a1": tp1}},
		{"export again, another trace", func() store.Event { return l.put(t, keyspace.ExportKey(e.Key), traced(e, tp2)) }, nil, nil},
		{"export again, no trace", func() store.Event { return l.put(t, keyspace.ExportKey(e.Key), e) }, nil, nil},
		{"chunk again, another trace", func() store.Event { return l.put(t, keyspace.ChunkKey(c.Key), traced(c, tp2)) }, []string{"status:a"}, nil},
		{"export changed, traced", func() store.Event { return l.put(t, keyspace.ExportKey(e.Key), traced(exp("a", 0, "web"), tp2)) }, []string{"import", "chunk:a/a1"},
			map[string]string{"import": tp2, "chunk:a/a1": tp2}},
	} {
		t.Run(step.name, func(t *testing.T) {
			out := apply(step.event())
			expectEvents(t, kinds(out), step.want...)
			for i, name := range kinds(out) {
				got := ""
				switch ev := out[i].GetEvent().(type) {
				case *registryv1.WatchEvent_ImportUpsert:
					got = ev.ImportUpsert.GetTraceParent()
				case *registryv1.WatchEvent_EndpointsUpsert:
					got = ev.EndpointsUpsert.GetTraceParent()
				}
				if got != step.traces[name] {
					t.Errorf("%s carries trace_parent %q, want %q", name, got, step.traces[name])
				}
			}
		})
	}
}
