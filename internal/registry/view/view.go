// Package view derives what the registry serves (imports, canonical endpoint
// chunks, per-export status) from the records in its store, and turns each
// change of the store into the smallest watch events that describe it. It
// is deterministic: the same store events give the same watch events, so
// registry replicas on one etcd stream identically. It does no IO and is not
// safe for concurrent use.
package view

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/registry/keyspace"
	"github.com/fleetnet/fleetnet/internal/registry/merge"
	"github.com/fleetnet/fleetnet/internal/registry/store"
	"google.golang.org/protobuf/proto"
)

type svcKey struct{ namespace, name string }

type chunkID struct{ cluster, chunk string }

type chunkRecord struct {
	chunk *registryv1.EndpointChunk
	rev   int64
}

type exportRecord struct {
	export *registryv1.Export
	rev    int64
	// scope is the export's, parsed once; nil when unscoped.
	scope *scope
}

// View is the registry's derived state at one store revision.
type View struct {
	rev      int64
	clusters map[string]*registryv1.Cluster
	live     map[string]store.LeaseID
	exports  map[svcKey]map[string]exportRecord
	chunks   map[svcKey]map[chunkID]chunkRecord

	// What was derived, and streamed, last.
	imports  map[svcKey]*registryv1.Import
	canon    map[svcKey]map[chunkID]*registryv1.EndpointChunk
	statuses map[svcKey]map[string]*registryv1.ExportStatus
	// Who was sent each import, and each exporting cluster's chunks.
	importAud map[svcKey]Audience
	chunkAud  map[svcKey]map[string]Audience
}

// New returns an empty view at revision 0.
func New() *View {
	return &View{
		clusters: map[string]*registryv1.Cluster{},
		live:     map[string]store.LeaseID{},
		exports:  map[svcKey]map[string]exportRecord{},
		chunks:   map[svcKey]map[chunkID]chunkRecord{},
		imports:  map[svcKey]*registryv1.Import{},
		canon:    map[svcKey]map[chunkID]*registryv1.EndpointChunk{},
		statuses: map[svcKey]map[string]*registryv1.ExportStatus{},

		importAud: map[svcKey]Audience{},
		chunkAud:  map[svcKey]map[string]Audience{},
	}
}

// Revision is the store revision the view reflects.
func (v *View) Revision() int64 { return v.rev }

// Advance moves the view to rev, a revision of the store that changed
// nothing the view holds (a progress notification).
func (v *View) Advance(rev int64) { v.rev = max(v.rev, rev) }

// Load fills an empty view from a listing of the store at rev.
func (v *View) Load(kvs []store.KV, rev int64) error {
	events := make([]store.Event, 0, len(kvs))
	for _, kv := range kvs {
		events = append(events, store.Event{Type: store.EventPut, KV: kv})
	}
	if _, err := v.apply(events); err != nil {
		return err
	}
	v.rev = rev
	return nil
}

// Apply applies store events (in revision order) and returns the watch
// events that describe their effect, each with the revision of its cause
// and its audience.
func (v *View) Apply(events []store.Event) ([]Event, error) {
	var out []Event
	for len(events) > 0 {
		rev := events[0].KV.ModRevision
		n := 1
		for n < len(events) && events[n].KV.ModRevision == rev {
			n++
		}
		evs, err := v.apply(events[:n])
		if err != nil {
			return out, err
		}
		for _, e := range evs {
			e.Revision = rev
		}
		out = append(out, evs...)
		v.rev = rev
		events = events[n:]
	}
	return out, nil
}

// touch records which services a change affects: all of a service's chunks
// (full) or only some.
type touch struct {
	full   bool
	chunks map[chunkID]bool
	// traceParent is that of the last export written in the change: the
	// import it changes carries it to the watchers.
	traceParent string
}

func (v *View) apply(events []store.Event) ([]Event, error) {
	touched := map[svcKey]*touch{}
	mark := func(s svcKey) *touch {
		t := touched[s]
		if t == nil {
			t = &touch{chunks: map[chunkID]bool{}}
			touched[s] = t
		}
		return t
	}
	// A cluster's registration and lease touch its exports, and the
	// exports scoped to it (their imported_by), by name or by a selector
	// that matches its properties before or after the change (which
	// retracts or adds the import and its endpoints).
	markCluster := func(id string, before, after map[string]string) {
		for s, byCluster := range v.exports {
			for exporter, rec := range byCluster {
				if sc := rec.scope; exporter == id || (sc != nil && (slices.Contains(sc.names, id) || sc.matches(before) || sc.matches(after))) {
					mark(s).full = true
					break
				}
			}
		}
	}
	properties := func(id string) map[string]string { return v.clusters[id].GetProperties() }
	for _, ev := range events {
		p := keyspace.Parse(ev.KV.Key)
		put := ev.Type == store.EventPut
		switch p.Kind {
		case keyspace.KindCluster:
			before := properties(p.ClusterID)
			if put {
				c := &registryv1.Cluster{}
				if err := proto.Unmarshal(ev.KV.Value, c); err != nil {
					return nil, fmt.Errorf("decoding %s: %w", ev.KV.Key, err)
				}
				v.clusters[p.ClusterID] = c
			} else {
				delete(v.clusters, p.ClusterID)
			}
			markCluster(p.ClusterID, before, properties(p.ClusterID))
		case keyspace.KindLive:
			if put {
				id, err := keyspace.DecodeLease(ev.KV.Value)
				if err != nil {
					return nil, err
				}
				v.live[p.ClusterID] = id
			} else {
				delete(v.live, p.ClusterID)
			}
			markCluster(p.ClusterID, properties(p.ClusterID), nil)
		case keyspace.KindExport:
			s := svcKey{p.Export.GetNamespace(), p.Export.GetName()}
			if put {
				e := &registryv1.Export{}
				if err := proto.Unmarshal(ev.KV.Value, e); err != nil {
					return nil, fmt.Errorf("decoding %s: %w", ev.KV.Key, err)
				}
				if v.exports[s] == nil {
					v.exports[s] = map[string]exportRecord{}
				}
				v.exports[s][p.ClusterID] = exportRecord{export: e, rev: ev.KV.ModRevision, scope: newScope(p.ClusterID, e)}
				mark(s).traceParent = e.GetTraceParent()
			} else {
				delete(v.exports[s], p.ClusterID)
				if len(v.exports[s]) == 0 {
					delete(v.exports, s)
				}
			}
			mark(s).full = true
		case keyspace.KindChunk:
			s := svcKey{p.Chunk.GetNamespace(), p.Chunk.GetName()}
			id := chunkID{p.ClusterID, p.Chunk.GetChunk()}
			if put {
				c := &registryv1.EndpointChunk{}
				if err := proto.Unmarshal(ev.KV.Value, c); err != nil {
					return nil, fmt.Errorf("decoding %s: %w", ev.KV.Key, err)
				}
				if v.chunks[s] == nil {
					v.chunks[s] = map[chunkID]chunkRecord{}
				}
				v.chunks[s][id] = chunkRecord{chunk: c, rev: ev.KV.ModRevision}
			} else {
				delete(v.chunks[s], id)
				if len(v.chunks[s]) == 0 {
					delete(v.chunks, s)
				}
			}
			mark(s).chunks[id] = true
		}
	}
	keys := slices.SortedFunc(maps.Keys(touched), func(a, b svcKey) int {
		if a.namespace != b.namespace {
			return cmpString(a.namespace, b.namespace)
		}
		return cmpString(a.name, b.name)
	})
	var out []Event
	for _, s := range keys {
		out = append(out, v.recompute(s, touched[s])...)
	}
	return out, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (v *View) clusterInfo() map[string]merge.Cluster {
	m := make(map[string]merge.Cluster, len(v.clusters))
	for id, c := range v.clusters {
		_, live := v.live[id]
		m[id] = merge.Cluster{Live: live, Region: c.GetRegion()}
	}
	return m
}

// recompute derives the import, canonical chunks and statuses of one service
// and returns the events for what changed, each to its audience: an
// export's endpoints to its scope, the import to the union of its exports'
// scopes. When a scope no longer includes a cluster, that cluster gets
// deletes (retractions); when it newly includes one, the import and chunks
// are sent again to the whole scope.
func (v *View) recompute(s svcKey, t *touch) []Event {
	key := &registryv1.ImportKey{Namespace: s.namespace, Name: s.name}
	byCluster := v.exports[s]
	exports := make([]*registryv1.Export, 0, len(byCluster))
	auds := make(map[string]Audience, len(byCluster))
	all := make([]Audience, 0, len(byCluster))
	for _, id := range slices.Sorted(maps.Keys(byCluster)) {
		exports = append(exports, byCluster[id].export)
		auds[id] = byCluster[id].scope.audience(v.clusters)
		all = append(all, auds[id])
	}
	res := merge.Merge(key, exports, v.clusterInfo())
	importAud := union(all)

	var head, chunkEvents, tail []Event
	old := v.imports[s]
	oldAud := v.importAud[s]
	switch {
	case res.Import == nil && old != nil:
		// To those it was sent to: a cluster outside the scope never
		// learns the service was there.
		delete(v.imports, s)
		delete(v.importAud, s)
		tail = append(tail, Event{WatchEvent: &registryv1.WatchEvent{Event: &registryv1.WatchEvent_ImportDelete{ImportDelete: key}}, Audience: oldAud})
	case res.Import != nil:
		if old != nil {
			if gone := oldAud.Minus(importAud); !gone.IsEmpty() {
				head = append(head, Event{WatchEvent: &registryv1.WatchEvent{Event: &registryv1.WatchEvent_ImportDelete{ImportDelete: key}}, Audience: gone, Retract: true})
			}
		}
		// Only a change of content is sent: a record written again with
		// another trace changes nothing.
		if old == nil || !registryv1.EqualIgnoringTrace(old, res.Import) || !oldAud.Equal(importAud) {
			res.Import.TraceParent = t.traceParent
			v.imports[s] = res.Import
			v.importAud[s] = importAud
			head = append(head, Event{WatchEvent: &registryv1.WatchEvent{Event: &registryv1.WatchEvent_ImportUpsert{ImportUpsert: res.Import}}, Audience: importAud})
			t.full = true // ports may have been renamed, or the audience changed
		}
	}

	// Canonical chunks.
	ids := map[chunkID]bool{}
	if t.full {
		for id := range v.chunks[s] {
			ids[id] = true
		}
		for id := range v.canon[s] {
			ids[id] = true
		}
	} else {
		maps.Copy(ids, t.chunks)
	}
	participating := map[string]bool{}
	for _, c := range res.Import.GetClusters() {
		participating[c.GetClusterId()] = true
	}
	oldChunkAud := v.chunkAud[s]
	for _, id := range slices.SortedFunc(maps.Keys(ids), func(a, b chunkID) int {
		if a.cluster != b.cluster {
			return cmpString(a.cluster, b.cluster)
		}
		return cmpString(a.chunk, b.chunk)
	}) {
		var want *registryv1.EndpointChunk
		if rec, ok := v.chunks[s][id]; ok && participating[id.cluster] {
			want = merge.CanonicalChunk(res.Import, byCluster[id.cluster].export, rec.chunk)
		}
		have := v.canon[s][id]
		newAud := auds[id.cluster]
		prevAud, sent := oldChunkAud[id.cluster]
		rescoped := sent && !prevAud.Equal(newAud)
		switch {
		case want == nil && have != nil:
			delete(v.canon[s], id)
			if len(v.canon[s]) == 0 {
				delete(v.canon, s)
			}
			// To those it was sent to (everyone when that is unknown).
			gone := Everyone()
			if sent {
				gone = prevAud
			}
			chunkEvents = append(chunkEvents, Event{WatchEvent: &registryv1.WatchEvent{Event: &registryv1.WatchEvent_EndpointsDelete{EndpointsDelete: have.GetKey()}}, Audience: gone})
		case want != nil && (rescoped || !registryv1.EqualIgnoringTrace(want, have)):
			if gone := prevAud.Minus(newAud); rescoped && have != nil && !gone.IsEmpty() {
				chunkEvents = append(chunkEvents, Event{WatchEvent: &registryv1.WatchEvent{Event: &registryv1.WatchEvent_EndpointsDelete{EndpointsDelete: have.GetKey()}}, Audience: gone, Retract: true})
			}
			if v.canon[s] == nil {
				v.canon[s] = map[chunkID]*registryv1.EndpointChunk{}
			}
			v.canon[s][id] = want
			chunkEvents = append(chunkEvents, Event{WatchEvent: &registryv1.WatchEvent{Event: &registryv1.WatchEvent_EndpointsUpsert{EndpointsUpsert: want}}, Audience: newAud})
		}
	}
	if len(auds) == 0 {
		delete(v.chunkAud, s)
	} else {
		v.chunkAud[s] = auds
	}

	// Statuses, with the endpoint chunks the registry holds per export, and
	// for a scoped export the live clusters it goes to.
	statuses := map[string]*registryv1.ExportStatus{}
	for id, st := range res.Statuses {
		statuses[id] = st
		if aud := auds[id]; !aud.IsEveryone() {
			st.ImportedBy = slices.Sorted(maps.Keys(aud.clusters))
			st.ImportedBy = slices.DeleteFunc(st.ImportedBy, func(c string) bool {
				_, live := v.live[c]
				return c == id || !live
			})
			if len(st.ImportedBy) == 0 {
				st.ImportedBy = nil
			}
		}
	}
	for id, rec := range v.chunks[s] {
		st := statuses[id.cluster]
		if st == nil {
			continue // chunks without an export: served to no one
		}
		st.EndpointChunks = append(st.EndpointChunks, id.chunk)
		st.EndpointsGeneration = max(st.EndpointsGeneration, rec.rev)
	}
	oldStatuses := v.statuses[s]
	for _, id := range slices.Sorted(maps.Keys(oldStatuses)) {
		if _, ok := statuses[id]; !ok {
			tail = append(tail, Event{WatchEvent: &registryv1.WatchEvent{Event: &registryv1.WatchEvent_ExportStatusDelete{ExportStatusDelete: oldStatuses[id].GetKey()}}})
		}
	}
	for _, id := range slices.Sorted(maps.Keys(statuses)) {
		st := statuses[id]
		sort.Strings(st.EndpointChunks)
		if !proto.Equal(st, oldStatuses[id]) {
			tail = append(tail, Event{WatchEvent: &registryv1.WatchEvent{Event: &registryv1.WatchEvent_ExportStatus{ExportStatus: st}}})
		}
	}
	if len(statuses) == 0 {
		delete(v.statuses, s)
	} else {
		v.statuses[s] = statuses
	}
	return append(append(head, chunkEvents...), tail...)
}

// Snapshot returns the full state as watch events: a reset, every import,
// every canonical chunk, the export statuses of statusCluster (all when it
// is "*", none when empty), and a synced mark, all at the view's revision.
func (v *View) Snapshot(statusCluster string) []Event {
	out := []Event{{WatchEvent: &registryv1.WatchEvent{Event: &registryv1.WatchEvent_Reset_{Reset_: &registryv1.Reset{}}}}}
	for _, s := range sortedServices(v.imports) {
		out = append(out, Event{WatchEvent: &registryv1.WatchEvent{Event: &registryv1.WatchEvent_ImportUpsert{ImportUpsert: v.imports[s]}}, Audience: importAudience(v.importAud, s)})
		for _, id := range sortedChunkIDs(v.canon[s]) {
			aud, ok := v.chunkAud[s][id.cluster]
			out = append(out, Event{WatchEvent: &registryv1.WatchEvent{Event: &registryv1.WatchEvent_EndpointsUpsert{EndpointsUpsert: v.canon[s][id]}}, Audience: known(aud, ok)})
		}
	}
	if statusCluster != "" {
		for _, st := range v.ExportStatuses(statusCluster) {
			out = append(out, Event{WatchEvent: &registryv1.WatchEvent{Event: &registryv1.WatchEvent_ExportStatus{ExportStatus: st}}})
		}
	}
	out = append(out, Event{WatchEvent: &registryv1.WatchEvent{Event: &registryv1.WatchEvent_Synced{Synced: &registryv1.Synced{}}}})
	for _, e := range out {
		e.Revision = v.rev
	}
	return out
}

func importAudience(m map[svcKey]Audience, s svcKey) Audience {
	aud, ok := m[s]
	return known(aud, ok)
}

// known is aud when it was recorded, else nobody: an audience the view
// did not record withholds rather than leaks.
func known(aud Audience, ok bool) Audience {
	if !ok {
		return Only()
	}
	return aud
}

func sortedChunkIDs(m map[chunkID]*registryv1.EndpointChunk) []chunkID {
	return slices.SortedFunc(maps.Keys(m), func(a, b chunkID) int {
		if a.cluster != b.cluster {
			return cmpString(a.cluster, b.cluster)
		}
		return cmpString(a.chunk, b.chunk)
	})
}

func sortedServices[T any](m map[svcKey]T) []svcKey {
	return slices.SortedFunc(maps.Keys(m), func(a, b svcKey) int {
		if a.namespace != b.namespace {
			return cmpString(a.namespace, b.namespace)
		}
		return cmpString(a.name, b.name)
	})
}

// Imports returns every import, sorted by namespace and name.
func (v *View) Imports() []*registryv1.Import {
	out := make([]*registryv1.Import, 0, len(v.imports))
	for _, s := range sortedServices(v.imports) {
		out = append(out, v.imports[s])
	}
	return out
}

// ChunkAudience is who is sent the endpoints that cluster exports for
// namespace/name.
func (v *View) ChunkAudience(namespace, name, cluster string) Audience {
	rec, ok := v.exports[svcKey{namespace, name}][cluster]
	if !ok {
		return Only()
	}
	return rec.scope.audience(v.clusters)
}

// ImportsFor returns the imports a cluster is sent (its exports' scopes
// allowing), sorted by namespace and name.
func (v *View) ImportsFor(cluster string) []*registryv1.Import {
	var out []*registryv1.Import
	for _, s := range sortedServices(v.imports) {
		if importAudience(v.importAud, s).Includes(cluster) {
			out = append(out, v.imports[s])
		}
	}
	return out
}

// ExportStatuses returns the statuses of a cluster's exports ("*": all).
func (v *View) ExportStatuses(cluster string) []*registryv1.ExportStatus {
	var out []*registryv1.ExportStatus
	for _, s := range sortedServices(v.statuses) {
		for _, id := range slices.Sorted(maps.Keys(v.statuses[s])) {
			if cluster == "*" || cluster == id {
				out = append(out, v.statuses[s][id])
			}
		}
	}
	return out
}

// Exports returns a cluster's exports ("*": all), with the revision each was
// last written at.
func (v *View) Exports(cluster string) []*registryv1.Export {
	var out []*registryv1.Export
	for _, s := range sortedServices(v.exports) {
		for _, id := range slices.Sorted(maps.Keys(v.exports[s])) {
			if cluster == "*" || cluster == id {
				rec := v.exports[s][id]
				e := proto.Clone(rec.export).(*registryv1.Export)
				e.Revision = rec.rev
				out = append(out, e)
			}
		}
	}
	return out
}

// Clusters returns every cluster, with liveness, sorted by id.
func (v *View) Clusters() []*registryv1.Cluster {
	out := make([]*registryv1.Cluster, 0, len(v.clusters))
	for _, id := range slices.Sorted(maps.Keys(v.clusters)) {
		c := proto.Clone(v.clusters[id]).(*registryv1.Cluster)
		_, c.Live = v.live[id]
		out = append(out, c)
	}
	return out
}

// Cluster returns one cluster, and whether it is live.
func (v *View) Cluster(id string) (*registryv1.Cluster, store.LeaseID, bool) {
	c, ok := v.clusters[id]
	if !ok {
		return nil, 0, false
	}
	return c, v.live[id], true
}

// DeadClusters returns the clusters that have a record but no live lease.
func (v *View) DeadClusters() []string {
	var out []string
	for _, id := range slices.Sorted(maps.Keys(v.clusters)) {
		if _, ok := v.live[id]; !ok {
			out = append(out, id)
		}
	}
	return out
}

// Chunks returns a cluster's endpoint chunks ("*": all) as their exporter
// wrote them, sorted by key.
func (v *View) Chunks(cluster string) []*registryv1.EndpointChunk {
	var out []*registryv1.EndpointChunk
	for _, s := range sortedServices(v.chunks) {
		ids := slices.SortedFunc(maps.Keys(v.chunks[s]), func(a, b chunkID) int {
			if a.cluster != b.cluster {
				return cmpString(a.cluster, b.cluster)
			}
			return cmpString(a.chunk, b.chunk)
		})
		for _, id := range ids {
			if cluster == "*" || cluster == id.cluster {
				out = append(out, v.chunks[s][id].chunk)
			}
		}
	}
	return out
}
