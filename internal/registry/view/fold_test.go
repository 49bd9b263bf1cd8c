package view

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/registry/keyspace"
	"github.com/fleetnet/fleetnet/internal/registry/store"
	"google.golang.org/protobuf/proto"
)

// watcherState is what one watcher holds after folding the events it was
// sent: per service, its import and canonical chunks.
type watcherState map[svcKey]*heldService

type heldService struct {
	imp    *registryv1.Import
	chunks map[chunkID]*registryv1.EndpointChunk
}

// fold applies the events whose audience includes watcher, as an agent's
// stream does (an import delete drops the service's chunks too).
func (w watcherState) fold(watcher string, evs []Event) {
	for _, e := range evs {
		if !e.Audience.Includes(watcher) {
			continue
		}
		entry := func(ns, name string) *heldService {
			k := svcKey{ns, name}
			if w[k] == nil {
				w[k] = &heldService{chunks: map[chunkID]*registryv1.EndpointChunk{}}
			}
			return w[k]
		}
		switch ev := e.GetEvent().(type) {
		case *registryv1.WatchEvent_Reset_:
			clear(w)
		case *registryv1.WatchEvent_ImportUpsert:
			entry(ev.ImportUpsert.GetKey().GetNamespace(), ev.ImportUpsert.GetKey().GetName()).imp = ev.ImportUpsert
		case *registryv1.WatchEvent_ImportDelete:
			delete(w, svcKey{ev.ImportDelete.GetNamespace(), ev.ImportDelete.GetName()})
		case *registryv1.WatchEvent_EndpointsUpsert:
			k := ev.EndpointsUpsert.GetKey()
			entry(k.GetNamespace(), k.GetName()).chunks[chunkID{k.GetClusterId(), k.GetChunk()}] = ev.EndpointsUpsert
		case *registryv1.WatchEvent_EndpointsDelete:
			k := ev.EndpointsDelete
			if h := w[svcKey{k.GetNamespace(), k.GetName()}]; h != nil {
				delete(h.chunks, chunkID{k.GetClusterId(), k.GetChunk()})
				if h.imp == nil && len(h.chunks) == 0 {
					delete(w, svcKey{k.GetNamespace(), k.GetName()})
				}
			}
		}
	}
}

// diffStates says how a watcher's folded state differs from the one a
// fresh snapshot gives it, ignoring trace parents; "" when equal.
func diffStates(got, want watcherState) string {
	for k, h := range want {
		g := got[k]
		switch {
		case g == nil:
			return fmt.Sprintf("%v missing", k)
		case !registryv1.EqualIgnoringTrace(g.imp, h.imp):
			return fmt.Sprintf("%v: import %v, want %v", k, g.imp, h.imp)
		case len(g.chunks) != len(h.chunks):
			return fmt.Sprintf("%v: %d chunks, want %d", k, len(g.chunks), len(h.chunks))
		}
		for id, c := range h.chunks {
			if !registryv1.EqualIgnoringTrace(g.chunks[id], c) {
				return fmt.Sprintf("%v: chunk %v is %v, want %v", k, id, g.chunks[id], c)
			}
		}
	}
	for k := range got {
		if want[k] == nil {
			return fmt.Sprintf("%v held, want none", k)
		}
	}
	return ""
}

// TestViewEventsFoldToTheSnapshot drives a view through random changes
// of exports (scoped by names and selectors, ports named differently),
// chunks, leases and cluster properties, and checks after each that every
// watcher — each cluster and the administrators — holds, from the events
// it was sent, exactly what a fresh snapshot of a view loaded from the
// store gives it: the per-group diff neither leaks nor loses anything.
func TestViewEventsFoldToTheSnapshot(t *testing.T) {
	clusters := []string{"a", "b", "c", "d"}
	watchers := append([]string{Admins}, clusters...)
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		l := &log{data: map[string]store.KV{}}
		v := New()
		states := map[string]watcherState{}
		for _, w := range watchers {
			states[w] = watcherState{}
		}
		apply := func(ev store.Event) {
			t.Helper()
			out, err := v.Apply([]store.Event{ev})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range watchers {
				states[w].fold(w, out)
			}
		}
		for _, id := range clusters {
			apply(l.put(t, keyspace.ClusterKey(id), clusterWith(id, "env", "prod")))
			apply(l.put(t, keyspace.LiveKey(id), nil))
		}
		for step := range 60 {
			id := clusters[rng.IntN(len(clusters))]
			var what string
			switch rng.IntN(7) {
			case 0, 1:
				e := exp(id, rng.IntN(3), []string{"http", "web"}[rng.IntN(2)])
				switch rng.IntN(3) {
				case 1:
					e.ExportTo = []string{clusters[rng.IntN(len(clusters))]}
				case 2:
					e.ExportToSelector = "env=prod"
				}
				what = fmt.Sprintf("export from %s to %v %q", id, e.ExportTo, e.ExportToSelector)
				apply(l.put(t, keyspace.ExportKey(e.Key), e))
			case 2:
				what = "unexport from " + id
				apply(l.del(keyspace.ExportKey(exp(id, 0, "http").Key)))
			case 3:
				c := chunk(id, "c"+fmt.Sprint(rng.IntN(2)), []string{"http", "web"}[rng.IntN(2)], fmt.Sprintf("10.0.%d.%d", rng.IntN(4), rng.IntN(4)))
				what = "chunk " + c.GetKey().GetChunk() + " from " + id
				apply(l.put(t, keyspace.ChunkKey(c.Key), c))
			case 4:
				if _, live := v.live[id]; live {
					what = "lease lapses: " + id
					apply(l.del(keyspace.LiveKey(id)))
				} else {
					what = "lease back: " + id
					apply(l.put(t, keyspace.LiveKey(id), nil))
				}
			case 6:
				c := chunk(id, "c"+fmt.Sprint(rng.IntN(2)), "http")
				what = "chunk " + c.GetKey().GetChunk() + " of " + id + " deleted"
				apply(l.del(keyspace.ChunkKey(c.Key)))
			case 5:
				env := []string{"prod", "dev"}[rng.IntN(2)]
				what = "properties of " + id + ": env=" + env
				apply(l.put(t, keyspace.ClusterKey(id), clusterWith(id, "env", env)))
			}
			loaded := New()
			if err := loaded.Load(l.kvs(), l.rev); err != nil {
				t.Fatal(err)
			}
			snap := loaded.Snapshot("")
			for _, w := range slices.Sorted(slices.Values(watchers)) {
				want := watcherState{}
				want.fold(w, snap)
				if d := diffStates(states[w], want); d != "" {
					t.Fatalf("seed %d, step %d (%s): watcher %q: %s", seed, step, what, w, d)
				}
				// The exporters' statuses (chunk lists, generations,
				// conflicts, imported_by) are the loaded view's.
				if got, want := v.ExportStatuses(w), loaded.ExportStatuses(w); !slices.EqualFunc(got, want, func(a, b *registryv1.ExportStatus) bool { return proto.Equal(a, b) }) {
					t.Fatalf("seed %d, step %d (%s): ExportStatuses(%q) = %v, want %v", seed, step, what, w, got, want)
				}
				// What ImportsFor says is what the watcher holds.
				var listed []*registryv1.Import
				for _, s := range sortedServices(want) {
					listed = append(listed, want[s].imp)
				}
				if got := loaded.ImportsFor(w); len(got) != len(listed) || !slices.EqualFunc(got, listed, func(a, b *registryv1.Import) bool { return proto.Equal(a, b) }) {
					t.Fatalf("seed %d, step %d: ImportsFor(%q) = %v, want %v", seed, step, w, got, listed)
				}
			}
		}
	}
}
