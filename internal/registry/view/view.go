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
	"strings"

	"github.com/fleetnet/fleetnet/api/keys"
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

	// What was derived, and streamed, last: each service's groups (sorted
	// by sig), and its exports' statuses.
	groups   map[svcKey][]*group
	statuses map[svcKey]map[string]*registryv1.ExportStatus
}

// New returns an empty view at revision 0.
func New() *View {
	return &View{
		clusters: map[string]*registryv1.Cluster{},
		live:     map[string]store.LeaseID{},
		exports:  map[svcKey]map[string]exportRecord{},
		chunks:   map[svcKey]map[chunkID]chunkRecord{},
		groups:   map[svcKey][]*group{},
		statuses: map[svcKey]map[string]*registryv1.ExportStatus{},
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
		m[id] = merge.Cluster{Live: live, Region: c.GetRegion(), Network: c.GetProperties()[keys.PropertyNetwork], EastWestGateway: c.GetEastwestGateway()}
	}
	return m
}

// A service's group is the clusters that may see the same set of its
// exports (sig, their exporters' ids): they are sent the same import, the
// merge of those exports alone, and the same canonical chunks. An
// unscoped service has one group, everyone; each combination of scopes a
// cluster falls in makes another, and the administrators, who see every
// export, are in the group that sees them all.
type group struct {
	sig string
	aud Audience
	imp *registryv1.Import
	// canon holds the canonical chunks of the exporters that participate
	// in imp, as imp names their ports.
	canon map[chunkID]*registryv1.EndpointChunk
}

// plan is a group before its merge: who, and which exports they see.
type plan struct {
	sig     string
	visible []string
	aud     Audience
}

// plans partitions the watchers of a service by the exports they may see,
// given each export's audience (ids sorted). Clusters that no scope names
// see the unscoped exports alone; they are one group, "all but" the named
// clusters and the administrators.
func plans(ids []string, auds map[string]Audience) []plan {
	named := map[string]bool{}
	var unscoped []string
	for _, id := range ids {
		if a := auds[id]; a.IsEveryone() {
			unscoped = append(unscoped, id)
		} else {
			for c := range a.clusters {
				named[c] = true
			}
		}
	}
	visible := map[string][]string{}
	members := map[string][]string{}
	add := func(c string) {
		var vis []string
		for _, id := range ids {
			if c == Admins || auds[id].Includes(c) {
				vis = append(vis, id)
			}
		}
		if len(vis) == 0 {
			return
		}
		sig := strings.Join(vis, ",")
		visible[sig] = vis
		members[sig] = append(members[sig], c)
	}
	for _, c := range slices.Sorted(maps.Keys(named)) {
		add(c)
	}
	add(Admins)
	restSig := strings.Join(unscoped, ",")
	if len(unscoped) > 0 {
		visible[restSig] = unscoped
	}
	out := make([]plan, 0, len(visible))
	for _, sig := range slices.Sorted(maps.Keys(visible)) {
		p := plan{sig: sig, visible: visible[sig], aud: Only(members[sig]...)}
		if len(unscoped) > 0 && sig == restSig {
			except := maps.Clone(named)
			except[Admins] = true
			for _, c := range members[sig] {
				delete(except, c)
			}
			p.aud = allBut(except)
			if len(except) == 0 {
				p.aud = Everyone()
			}
		}
		out = append(out, p)
	}
	return out
}

// recompute derives the groups, canonical chunks and statuses of one
// service and returns the events for what changed, each to its audience.
// Every cluster is in at most one group before and one after; it is sent
// the difference between the two (a cluster whose group changes gets the
// new import, which replaces the old, and the chunks that differ), and a
// cluster in no group any more gets deletes (retractions). An exporter's
// status is the merge its own cluster sees, so that its conflicts never
// name an export scoped away from it. The statuses' events come first:
// a reader of every status that re-serves the imports to clusters of its
// own (fleetnet-discovery, through StatusAudience and SameImport) learns
// that a scope narrowed before the import written with it.
func (v *View) recompute(s svcKey, t *touch) []Event {
	if old := v.groups[s]; !t.full && len(old) > 0 {
		return v.recomputeChunks(s, old, t)
	}
	key := &registryv1.ImportKey{Namespace: s.namespace, Name: s.name}
	byCluster := v.exports[s]
	ids := slices.Sorted(maps.Keys(byCluster))
	auds := make(map[string]Audience, len(byCluster))
	for _, id := range ids {
		auds[id] = byCluster[id].scope.audience(v.clusters)
	}
	info := v.clusterInfo()
	old := v.groups[s]
	oldBySig := make(map[string]*group, len(old))
	for _, g := range old {
		oldBySig[g.sig] = g
	}

	statuses := map[string]*registryv1.ExportStatus{}
	var groups []*group
	// before holds, for an old group whose canonical chunks are changed
	// in place, what diff must compare with.
	before := map[*group]*group{}
	for _, p := range plans(ids, auds) {
		exports := make([]*registryv1.Export, 0, len(p.visible))
		for _, id := range p.visible {
			exports = append(exports, byCluster[id].export)
		}
		res := merge.Merge(key, exports, info)
		for _, id := range p.visible {
			if p.aud.Includes(id) {
				statuses[id] = res.Statuses[id]
			}
		}
		if res.Import == nil {
			continue
		}
		g := &group{sig: p.sig, aud: p.aud, imp: res.Import, canon: map[chunkID]*registryv1.EndpointChunk{}}
		base := oldBySig[p.sig]
		// Only a change of content makes a new import: a record written
		// again with another trace changes nothing.
		if base != nil && registryv1.EqualIgnoringTrace(base.imp, g.imp) {
			g.imp = base.imp
		} else {
			g.imp.TraceParent = t.traceParent
			base = nil // every chunk may be named anew
		}
		participating := map[string]bool{}
		for _, c := range g.imp.GetClusters() {
			participating[c.GetClusterId()] = true
		}
		canonical := func(id chunkID) {
			rec, ok := v.chunks[s][id]
			if !ok || !participating[id.cluster] {
				delete(g.canon, id)
				return
			}
			want := merge.CanonicalChunk(g.imp, byCluster[id.cluster].export, rec.chunk)
			if have := oldCanon(base, oldBySig[p.sig], id); have != nil && registryv1.EqualIgnoringTrace(want, have) {
				want = have
			}
			g.canon[id] = want
		}
		if base != nil && !t.full {
			// Only some chunks changed, and nothing that decides the
			// groups: the group keeps its map, changed in place (a chunk
			// change costs the chunk, not the service), and diff is
			// handed the touched chunks' previous values as the old
			// group's.
			prev := make(map[chunkID]*registryv1.EndpointChunk, len(t.chunks))
			for id := range t.chunks {
				prev[id] = base.canon[id]
			}
			g.canon = base.canon
			for id := range t.chunks {
				canonical(id)
			}
			before[base] = &group{sig: base.sig, aud: base.aud, imp: base.imp, canon: prev}
		} else {
			for id := range v.chunks[s] {
				canonical(id)
			}
		}
		groups = append(groups, g)
	}

	if len(before) > 0 {
		old = slices.Clone(old)
		for i, o := range old {
			if b := before[o]; b != nil {
				old[i] = b
			}
		}
	}
	head, chunkEvents, tail := v.diff(key, old, groups, t)
	if len(groups) == 0 {
		delete(v.groups, s)
	} else {
		v.groups[s] = groups
	}

	// Statuses, with the endpoint chunks the registry holds per export, and
	// for a scoped export the live clusters it goes to.
	for id, st := range statuses {
		if aud := auds[id]; aud.IsEveryone() {
			st.ToEveryCluster = true
		} else {
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
	var statusEvents []Event
	oldStatuses := v.statuses[s]
	for _, id := range slices.Sorted(maps.Keys(oldStatuses)) {
		if _, ok := statuses[id]; !ok {
			statusEvents = append(statusEvents, Event{WatchEvent: &registryv1.WatchEvent{Event: &registryv1.WatchEvent_ExportStatusDelete{ExportStatusDelete: oldStatuses[id].GetKey()}}})
		}
	}
	for _, id := range slices.Sorted(maps.Keys(statuses)) {
		st := statuses[id]
		sort.Strings(st.EndpointChunks)
		if !proto.Equal(st, oldStatuses[id]) {
			statusEvents = append(statusEvents, Event{WatchEvent: &registryv1.WatchEvent{Event: &registryv1.WatchEvent_ExportStatus{ExportStatus: st}}})
		}
	}
	if len(statuses) == 0 {
		delete(v.statuses, s)
	} else {
		v.statuses[s] = statuses
	}
	return slices.Concat(statusEvents, head, chunkEvents, tail)
}

// recomputeChunks is recompute for a change of endpoint chunks alone.
// The merge reads exports and clusters only, so every group keeps its
// watchers and its import: the touched chunks are made canonical again in
// each group's map, each group is sent those that changed, and only the
// touched exporters' statuses, whose chunk lists changed, are counted
// again (and sent first, as recompute sends them). A chunk change so costs its chunk once per group, not a merge
// per group and a diff of every group with every other (11 ms for a
// Service of 100 exporters of which 50 are scoped to one cluster each;
// BenchmarkChunkChange).
func (v *View) recomputeChunks(s svcKey, groups []*group, t *touch) []Event {
	byCluster := v.exports[s]
	var chunks eventSet
	for _, g := range groups {
		participating := map[string]bool{}
		for _, c := range g.imp.GetClusters() {
			participating[c.GetClusterId()] = true
		}
		for id := range t.chunks {
			have := g.canon[id]
			rec, ok := v.chunks[s][id]
			if !ok || !participating[id.cluster] {
				delete(g.canon, id)
			} else {
				want := merge.CanonicalChunk(g.imp, byCluster[id.cluster].export, rec.chunk)
				if have != nil && registryv1.EqualIgnoringTrace(want, have) {
					want = have
				}
				g.canon[id] = want
			}
			if e, ok := chunkEvent(have, g.canon[id], g.aud, false); ok {
				chunks.add(id, e)
			}
		}
	}
	var statusEvents []Event
	oldStatuses := v.statuses[s]
	var statuses map[string]*registryv1.ExportStatus // a copy once one changes
	touched := map[string]bool{}
	for id := range t.chunks {
		touched[id.cluster] = true
	}
	for _, c := range slices.Sorted(maps.Keys(touched)) {
		was := oldStatuses[c]
		if was == nil {
			continue // chunks without an export: served to no one
		}
		st := proto.Clone(was).(*registryv1.ExportStatus)
		st.EndpointChunks, st.EndpointsGeneration = nil, 0
		for id, rec := range v.chunks[s] {
			if id.cluster == c {
				st.EndpointChunks = append(st.EndpointChunks, id.chunk)
				st.EndpointsGeneration = max(st.EndpointsGeneration, rec.rev)
			}
		}
		sort.Strings(st.EndpointChunks)
		if !proto.Equal(st, was) {
			if statuses == nil {
				statuses = maps.Clone(oldStatuses)
			}
			statuses[c] = st
			statusEvents = append(statusEvents, Event{WatchEvent: &registryv1.WatchEvent{Event: &registryv1.WatchEvent_ExportStatus{ExportStatus: st}}})
		}
	}
	if statuses != nil {
		v.statuses[s] = statuses
	}
	return append(statusEvents, chunks.events()...)
}

// chunkEvent is the event that takes a watcher of aud from chunk have to
// chunk want (nil: none), if they differ.
func chunkEvent(have, want *registryv1.EndpointChunk, aud Audience, retract bool) (Event, bool) {
	switch {
	case want == nil && have != nil:
		return Event{WatchEvent: &registryv1.WatchEvent{Event: &registryv1.WatchEvent_EndpointsDelete{EndpointsDelete: have.GetKey()}}, Audience: aud, Retract: retract}, true
	case want != nil && want != have && !registryv1.EqualIgnoringTrace(want, have):
		return Event{WatchEvent: &registryv1.WatchEvent{Event: &registryv1.WatchEvent_EndpointsUpsert{EndpointsUpsert: want}}, Audience: aud}, true
	}
	return Event{}, false
}

// oldCanon is the chunk the group of the same clusters held before, if
// any, so that an unchanged chunk keeps its message (and its encoding).
func oldCanon(base, same *group, id chunkID) *registryv1.EndpointChunk {
	if base != nil {
		return base.canon[id]
	}
	if same != nil {
		return same.canon[id]
	}
	return nil
}

// diff returns the events that take every watcher from its group in old
// to its group in groups: imports (upserts, and deletes to clusters that
// no group includes any more) first, then chunks, then, when the service
// is gone for everyone, its import's deletion. Events of equal content
// for several audiences are sent once to their union.
func (v *View) diff(key *registryv1.ImportKey, old, groups []*group, t *touch) (head, chunkEvents, tail []Event) {
	var imports, chunks eventSet
	oldAll, newAll := Only(), Only()
	for _, g := range old {
		oldAll = oldAll.Union(g.aud)
	}
	for _, g := range groups {
		newAll = newAll.Union(g.aud)
	}
	sendChunks := func(from, to *group, aud Audience, all bool, retract bool) {
		ids := t.chunks
		if all {
			ids = map[chunkID]bool{}
			for _, g := range []*group{from, to} {
				if g != nil {
					for id := range g.canon {
						ids[id] = true
					}
				}
			}
		}
		for id := range ids {
			var have, want *registryv1.EndpointChunk
			if from != nil {
				have = from.canon[id]
			}
			if to != nil {
				want = to.canon[id]
			}
			if e, ok := chunkEvent(have, want, aud, retract); ok {
				chunks.add(id, e)
			}
		}
	}
	for _, g := range groups {
		for _, o := range old {
			in := o.aud.Intersect(g.aud)
			if in.IsEmpty() {
				continue
			}
			if g.imp != o.imp {
				imports.add(chunkID{}, Event{WatchEvent: &registryv1.WatchEvent{Event: &registryv1.WatchEvent_ImportUpsert{ImportUpsert: g.imp}}, Audience: in})
			}
			sendChunks(o, g, in, t.full || g.imp != o.imp || g.sig != o.sig, false)
		}
		if fresh := g.aud.Minus(oldAll); !fresh.IsEmpty() {
			imports.add(chunkID{}, Event{WatchEvent: &registryv1.WatchEvent{Event: &registryv1.WatchEvent_ImportUpsert{ImportUpsert: g.imp}}, Audience: fresh})
			sendChunks(nil, g, fresh, true, false)
		}
	}
	// To those it was sent to: a cluster outside the scope never learns
	// the service was there.
	gone := len(groups) == 0
	for _, o := range old {
		left := o.aud.Minus(newAll)
		if left.IsEmpty() {
			continue
		}
		sendChunks(o, nil, left, true, !gone)
		del := Event{WatchEvent: &registryv1.WatchEvent{Event: &registryv1.WatchEvent_ImportDelete{ImportDelete: key}}, Audience: left, Retract: !gone}
		if gone {
			tail = append(tail, del)
		} else {
			imports.add(chunkID{}, del)
		}
	}
	return imports.events(), chunks.events(), tail
}

// eventSet collects a service's events by chunk (the zero chunkID for the
// import) and sends equal events for several audiences once, to their
// union. Each watcher gets at most one event per chunk from a
// recomputation, so merging them reorders nothing a watcher sees.
type eventSet struct {
	byID map[chunkID][]Event
}

func (s *eventSet) add(id chunkID, e Event) {
	if s.byID == nil {
		s.byID = map[chunkID][]Event{}
	}
	list := s.byID[id]
	for i, have := range list {
		if have.Retract == e.Retract && sameEvent(have.WatchEvent, e.WatchEvent) {
			list[i].Audience = have.Audience.Union(e.Audience)
			return
		}
	}
	s.byID[id] = append(list, e)
}

// sameEvent compares two events of one service and chunk: the same kind
// and, for upserts, the same message or content.
func sameEvent(a, b *registryv1.WatchEvent) bool {
	switch x := a.GetEvent().(type) {
	case *registryv1.WatchEvent_ImportUpsert:
		y := b.GetImportUpsert()
		return y != nil && (x.ImportUpsert == y || proto.Equal(x.ImportUpsert, y))
	case *registryv1.WatchEvent_EndpointsUpsert:
		y := b.GetEndpointsUpsert()
		return y != nil && (x.EndpointsUpsert == y || proto.Equal(x.EndpointsUpsert, y))
	case *registryv1.WatchEvent_ImportDelete:
		return b.GetImportDelete() != nil
	case *registryv1.WatchEvent_EndpointsDelete:
		return b.GetEndpointsDelete() != nil
	}
	return false
}

// events returns the set in chunk order, deletes (retractions first)
// before upserts within a chunk.
func (s *eventSet) events() []Event {
	var out []Event
	for _, id := range slices.SortedFunc(maps.Keys(s.byID), func(a, b chunkID) int {
		if a.cluster != b.cluster {
			return cmpString(a.cluster, b.cluster)
		}
		return cmpString(a.chunk, b.chunk)
	}) {
		list := s.byID[id]
		rank := func(e Event) int {
			switch {
			case e.Retract:
				return 0
			case e.GetImportDelete() != nil || e.GetEndpointsDelete() != nil:
				return 1
			}
			return 2
		}
		slices.SortStableFunc(list, func(a, b Event) int { return rank(a) - rank(b) })
		out = append(out, list...)
	}
	return out
}

// Snapshot returns the full state as watch events: a reset, every import
// and canonical chunk of every group to its audience, the export statuses
// of statusCluster (all when it is "*", none when empty), and a synced
// mark, all at the view's revision.
func (v *View) Snapshot(statusCluster string) []Event {
	out := []Event{{WatchEvent: &registryv1.WatchEvent{Event: &registryv1.WatchEvent_Reset_{Reset_: &registryv1.Reset{}}}}}
	for _, s := range sortedServices(v.groups) {
		for _, g := range v.groups[s] {
			out = append(out, Event{WatchEvent: &registryv1.WatchEvent{Event: &registryv1.WatchEvent_ImportUpsert{ImportUpsert: g.imp}}, Audience: g.aud})
			for _, id := range sortedChunkIDs(g.canon) {
				out = append(out, Event{WatchEvent: &registryv1.WatchEvent{Event: &registryv1.WatchEvent_EndpointsUpsert{EndpointsUpsert: g.canon[id]}}, Audience: g.aud})
			}
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

// Imports returns every import as administrators see it (the merge of
// every export), sorted by namespace and name.
func (v *View) Imports() []*registryv1.Import {
	return v.ImportsFor(Admins)
}

// ImportsFor returns the imports a cluster is sent (its exports' scopes
// allowing), each the merge of the exports it may see, sorted by
// namespace and name.
func (v *View) ImportsFor(cluster string) []*registryv1.Import {
	var out []*registryv1.Import
	for _, s := range sortedServices(v.groups) {
		for _, g := range v.groups[s] {
			if g.aud.Includes(cluster) {
				out = append(out, g.imp)
				break
			}
		}
	}
	return out
}

// ChunkAudience is who may see the export (and the endpoints) that
// cluster makes of namespace/name: its scope.
func (v *View) ChunkAudience(namespace, name, cluster string) Audience {
	rec, ok := v.exports[svcKey{namespace, name}][cluster]
	if !ok {
		return Only()
	}
	return rec.scope.audience(v.clusters)
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
