// Package store is fleetnet-discovery's state, its single source of truth:
// the pools keyed by namespace/name, each pool's members per cluster, a
// revision advanced by one per change, a bounded history of changes for
// resuming watches, and the fan-out to watchers.
//
// Pool sources put their state in level-based (Replace, Delete,
// ReplaceSource: "this is what I have now") and the store computes the
// changes, so a source that repeats itself causes no event. The store does
// no IO and never waits for a watcher: a watcher that falls behind is cut
// off and resumes from its last revision.
//
// Each pool carries its audience, the clusters that may see it (the
// registry's rule, registry/view's Audience): a caller that is a cluster is
// shown only the pools whose audience includes it (Viewer), and a pool
// whose audience changes is a change of its own, so that a watch can tell
// a cluster that a pool left its sight.
package store

import (
	"cmp"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"sync"
	"time"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
	"github.com/fleetnet/fleetnet/internal/registry/view"
)

// Defaults of Options.
const (
	DefaultHistory = 10000
	DefaultBuffer  = 1024
)

// Options configure a Store.
type Options struct {
	// History is how many changes, at least, are kept for resuming
	// watches (up to twice as many are, as history is trimmed in bulk); a
	// watch from an older revision gets a reset and a fresh snapshot.
	History int
	// Buffer is how many events a watcher may have pending before it is
	// cut off.
	Buffer int
	// Base is the revision of the empty store; the first change is Base+1.
	// A process that starts from empty state should take a value larger
	// than any revision its previous incarnation served (the app takes the
	// start time in microseconds), so that a client resuming across a
	// restart is told to reset instead of being handed another process's
	// revisions.
	Base int64
	// Now stamps events with the time of their change, from which delivery
	// latency is measured; nil is time.Now.
	Now func() time.Time
}

// Key names a pool.
type Key struct{ Namespace, Name string }

func (k Key) String() string { return k.Namespace + "/" + k.Name }

// KeyOf returns the key of p.
func KeyOf(p *discoveryv1.Pool) Key { return Key{p.Namespace, p.Name} }

// Audience is who may see a pool: the registry's own rule
// (registry/view.Audience), which fleetnet-discovery applies to callers that
// are clusters.
type Audience = view.Audience

// Scoped is a pool with its audience.
type Scoped struct {
	Pool     discoveryv1.Pool
	Audience Audience
}

// Viewer is who reads the store: every pool (administrators, and the
// identities of discovery's own roles), or one cluster, which sees the
// pools whose audience includes it. The zero Viewer sees nothing, and so
// does a cluster without a name: seeing everything comes from the role,
// never from a name.
type Viewer struct {
	all     bool
	cluster string
}

// EveryPool is the viewer that sees every pool.
func EveryPool() Viewer { return Viewer{all: true} }

// ClusterViewer is the viewer of cluster id.
func ClusterViewer(id string) Viewer { return Viewer{cluster: id} }

// Sees says whether the viewer may see a pool of audience a.
func (v Viewer) Sees(a Audience) bool {
	return v.all || (v.cluster != "" && a.Includes(v.cluster))
}

// EveryPool says whether the viewer sees every pool.
func (v Viewer) EveryPool() bool { return v.all }

// Event is a watch event with its encoding cached: a thousand watchers of
// one change share one encoding. Events and the pools they carry are never
// modified once made.
type Event struct {
	discoveryv1.Event
	// At is when the store applied the change (zero for marks made for one
	// watcher).
	At time.Time
	// Audience is the pool's, for snapshot and upsert events.
	Audience Audience

	once    sync.Once
	encoded []byte
}

// JSON returns the event's JSON encoding, computed once.
func (e *Event) JSON() []byte {
	e.once.Do(func() {
		b, err := json.Marshal(&e.Event)
		if err != nil {
			// Only plain data is marshalled: this cannot happen.
			panic(err)
		}
		e.encoded = b
	})
	return e.encoded
}

// Store holds the pools. It is safe for concurrent use.
type Store struct {
	opts Options

	mu    sync.Mutex
	rev   int64
	pools map[Key]*poolState
	// endpoints counts the endpoints of every pool, for metrics.
	endpoints int
	// history holds the changes after revision start, one per revision.
	history  []*Event
	start    int64
	watchers map[*Watcher]struct{}
	cutOffs  int64
}

type poolState struct {
	// sources holds each source's normalized contribution, and audiences
	// the audience each gave it.
	sources   map[string]*discoveryv1.Pool
	audiences map[string]Audience
	// merged is what is served, with its revision, to audience: the
	// clusters every contribution's audience includes.
	merged   *discoveryv1.Pool
	audience Audience
	// snapshot is merged as a snapshot event, made on first use.
	snapshot *Event
}

// New returns an empty store.
func New(o Options) *Store {
	if o.History <= 0 {
		o.History = DefaultHistory
	}
	if o.Buffer <= 0 {
		o.Buffer = DefaultBuffer
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Store{opts: o, rev: o.Base, start: o.Base, pools: map[Key]*poolState{}, watchers: map[*Watcher]struct{}{}}
}

// Revision returns the current revision.
func (s *Store) Revision() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev
}

// Stats are counts for metrics.
type Stats struct {
	Revision                   int64
	Pools, Endpoints, Watchers int
	// HistoryStart is the oldest revision a watch can resume from.
	HistoryStart int64
	// CutOffs counts watchers cut off for falling behind, ever.
	CutOffs int64
}

// Stats returns the store's counts.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{Revision: s.rev, Pools: len(s.pools), Endpoints: s.endpoints, Watchers: len(s.watchers), HistoryStart: s.start, CutOffs: s.cutOffs}
}

// Get returns a pool. The pool is shared: callers must not modify it.
func (s *Store) Get(k Key) (*discoveryv1.Pool, bool) {
	return s.GetFor(EveryPool(), k)
}

// GetFor returns a pool that v may see: one it may not is not found, as
// one that does not exist. The pool is shared: callers must not modify it.
func (s *Store) GetFor(v Viewer, k Key) (*discoveryv1.Pool, bool) {
	p, aud, ok := s.Lookup(k)
	if !ok || !v.Sees(aud) {
		return nil, false
	}
	return p, true
}

// Lookup returns a pool and its audience.
func (s *Store) Lookup(k Key) (*discoveryv1.Pool, Audience, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps, ok := s.pools[k]
	if !ok {
		return nil, view.Only(), false
	}
	return ps.merged, ps.audience, true
}

// List returns every pool that keep accepts (nil accepts all), sorted by
// namespace and name, and the revision they reflect. The pools are shared:
// callers must not modify them.
func (s *Store) List(keep func(*discoveryv1.Pool) bool) (int64, []*discoveryv1.Pool) {
	return s.ListFor(EveryPool(), keep)
}

// ListFor is List of the pools v may see.
func (s *Store) ListFor(v Viewer, keep func(*discoveryv1.Pool) bool) (int64, []*discoveryv1.Pool) {
	s.mu.Lock()
	out := make([]*discoveryv1.Pool, 0, len(s.pools))
	for _, ps := range s.pools {
		if v.Sees(ps.audience) && (keep == nil || keep(ps.merged)) {
			out = append(out, ps.merged)
		}
	}
	rev := s.rev
	s.mu.Unlock()
	slices.SortFunc(out, comparePools)
	return rev, out
}

func comparePools(a, b *discoveryv1.Pool) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// Replace sets source's contribution to pool p, which every caller may
// see: its labels and clusters. The pool served merges every source's
// contribution. It returns the revision after the call; nothing changes,
// and no event is sent, when the merged pool stays the same.
func (s *Store) Replace(source string, p discoveryv1.Pool) int64 {
	return s.ReplaceScoped(source, p, view.Everyone())
}

// ReplaceScoped is Replace for a pool that the clusters of aud alone may
// see (callers that see every pool see it too). The merged pool's audience
// is the clusters that every contribution's includes; a change of it alone
// is a change of the pool.
func (s *Store) ReplaceScoped(source string, p discoveryv1.Pool, aud Audience) int64 {
	n := normalize(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	var changed []*Event
	if e := s.setLocked(source, KeyOf(n), n, aud); e != nil {
		changed = append(changed, e)
	}
	s.publishLocked(changed)
	return s.rev
}

// Delete removes source's contribution to pool k; the pool goes when no
// source contributes to it.
func (s *Store) Delete(source string, k Key) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var changed []*Event
	if e := s.setLocked(source, k, nil, view.Only()); e != nil {
		changed = append(changed, e)
	}
	s.publishLocked(changed)
	return s.rev
}

// ReplaceSource sets everything source contributes, pools every caller may
// see: pools it contributed before and are not in pools lose its
// contribution. A source uses it after it (re)loaded its state. Every
// changed pool takes one revision; watchers receive all of them or are
// cut off.
func (s *Store) ReplaceSource(source string, pools []discoveryv1.Pool) int64 {
	scoped := make([]Scoped, len(pools))
	for i, p := range pools {
		scoped[i] = Scoped{Pool: p, Audience: view.Everyone()}
	}
	return s.ReplaceSourceScoped(source, scoped)
}

// ReplaceSourceScoped is ReplaceSource with each pool's audience (see
// ReplaceScoped).
func (s *Store) ReplaceSourceScoped(source string, pools []Scoped) int64 {
	want := make(map[Key]*discoveryv1.Pool, len(pools))
	auds := make(map[Key]Audience, len(pools))
	for _, p := range pools {
		n := normalize(p.Pool)
		want[KeyOf(n)] = n
		auds[KeyOf(n)] = p.Audience
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var changed []*Event
	// Deterministic order, so that two stores fed alike number alike.
	keys := slices.SortedFunc(maps.Keys(s.pools), compareKeys)
	for _, k := range keys {
		if _, ok := s.pools[k].sources[source]; ok && want[k] == nil {
			if e := s.setLocked(source, k, nil, view.Only()); e != nil {
				changed = append(changed, e)
			}
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(want), compareKeys) {
		if e := s.setLocked(source, k, want[k], auds[k]); e != nil {
			changed = append(changed, e)
		}
	}
	s.publishLocked(changed)
	return s.rev
}

func compareKeys(a, b Key) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// setLocked sets (or, with nil, removes) one contribution of audience aud
// and returns the event of the change, or nil when the served pool and its
// audience did not change.
func (s *Store) setLocked(source string, k Key, contribution *discoveryv1.Pool, aud Audience) *Event {
	ps := s.pools[k]
	if ps == nil {
		if contribution == nil {
			return nil
		}
		ps = &poolState{sources: map[string]*discoveryv1.Pool{}, audiences: map[string]Audience{}}
	}
	if contribution == nil {
		if _, ok := ps.sources[source]; !ok {
			return nil
		}
		delete(ps.sources, source)
		delete(ps.audiences, source)
	} else {
		ps.sources[source] = contribution
		ps.audiences[source] = aud
	}
	old := ps.merged
	if len(ps.sources) == 0 {
		delete(s.pools, k)
		s.endpoints -= countEndpoints(old)
		s.rev++
		return &Event{Event: discoveryv1.Event{Type: discoveryv1.EventDelete, Revision: s.rev, Pool: &discoveryv1.Pool{Namespace: k.Namespace, Name: k.Name, Clusters: []discoveryv1.PoolCluster{}}}, At: s.opts.Now()}
	}
	merged := merge(k, ps.sources)
	audience := view.Everyone()
	for _, a := range ps.audiences {
		audience = audience.Intersect(a)
	}
	if old != nil {
		merged.Revision = old.Revision
		if reflect.DeepEqual(merged, old) && audience.Equal(ps.audience) {
			return nil
		}
	}
	s.rev++
	merged.Revision = s.rev
	ps.merged, ps.audience, ps.snapshot = merged, audience, nil
	s.pools[k] = ps
	s.endpoints += countEndpoints(merged) - countEndpoints(old)
	return &Event{Event: discoveryv1.Event{Type: discoveryv1.EventUpsert, Revision: s.rev, Pool: merged}, At: s.opts.Now(), Audience: audience}
}

func countEndpoints(p *discoveryv1.Pool) int {
	if p == nil {
		return 0
	}
	n := 0
	for _, c := range p.Clusters {
		n += len(c.Endpoints)
	}
	return n
}

// publishLocked records changes in history and hands them to every watcher.
func (s *Store) publishLocked(changed []*Event) {
	if len(changed) == 0 {
		return
	}
	s.history = append(s.history, changed...)
	if len(s.history) > 2*s.opts.History {
		// Trim in bulk, so that keeping history costs O(1) per change.
		drop := len(s.history) - s.opts.History
		s.start = s.history[drop-1].Revision
		s.history = slices.Clone(s.history[drop:])
	}
	for w := range s.watchers {
		// All or nothing: a watcher holds whole changes only, so the last
		// revision it received is always a safe place to resume from.
		if len(w.ch)+len(changed) > cap(w.ch) {
			s.cutOffLocked(w)
			continue
		}
		for _, e := range changed {
			w.ch <- e
		}
	}
}

func (s *Store) cutOffLocked(w *Watcher) {
	delete(s.watchers, w)
	s.cutOffs++
	close(w.cut)
}

// Watcher receives the store's changes.
type Watcher struct {
	s   *Store
	ch  chan *Event
	cut chan struct{}
}

// C delivers changes in revision order.
func (w *Watcher) C() <-chan *Event { return w.ch }

// CutOff is closed when the watcher fell behind and was dropped: it gets
// no more changes (those already in C are whole) and must resume from the
// last revision it received.
func (w *Watcher) CutOff() <-chan struct{} { return w.cut }

// Stop ends the watch.
func (w *Watcher) Stop() {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	delete(w.s.watchers, w)
}

// Watch subscribes to changes and returns the events that bring a client
// at revision from up to date, atomically with the subscription:
//
//   - from 0: a snapshot (one snapshot event per pool) and a synced mark;
//   - from a revision within history: the changes after it;
//   - from one older than history (or newer than the store, as after a
//     restart): a reset mark, a snapshot and a synced mark.
func (s *Store) Watch(from int64) (*Watcher, []*Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := &Watcher{s: s, ch: make(chan *Event, s.opts.Buffer), cut: make(chan struct{})}
	s.watchers[w] = struct{}{}
	if from > 0 && from >= s.start && from <= s.rev {
		// history[i] has revision start+1+i: one change per revision.
		i := int(from - s.start)
		return w, slices.Clone(s.history[i:])
	}
	var initial []*Event
	if from != 0 {
		initial = append(initial, &Event{Event: discoveryv1.Event{Type: discoveryv1.EventReset, Revision: s.rev}})
	}
	keys := slices.SortedFunc(maps.Keys(s.pools), compareKeys)
	for _, k := range keys {
		ps := s.pools[k]
		if ps.snapshot == nil {
			ps.snapshot = &Event{Event: discoveryv1.Event{Type: discoveryv1.EventSnapshot, Revision: ps.merged.Revision, Pool: ps.merged}, Audience: ps.audience}
		}
		initial = append(initial, ps.snapshot)
	}
	initial = append(initial, &Event{Event: discoveryv1.Event{Type: discoveryv1.EventSynced, Revision: s.rev}})
	return w, initial
}

// normalize copies p into the store's canonical form: clusters sorted by
// name, endpoints by instance id, ports by name, empty lists as empty (not
// nil) so that equal pools compare and encode equal.
func normalize(p discoveryv1.Pool) *discoveryv1.Pool {
	out := &discoveryv1.Pool{Namespace: p.Namespace, Name: p.Name, Clusters: make([]discoveryv1.PoolCluster, 0, len(p.Clusters))}
	if len(p.Labels) > 0 {
		out.Labels = maps.Clone(p.Labels)
	}
	for _, c := range p.Clusters {
		nc := discoveryv1.PoolCluster{Cluster: c.Cluster, Region: c.Region, Endpoints: make([]discoveryv1.Endpoint, 0, len(c.Endpoints))}
		for _, e := range c.Endpoints {
			nc.Endpoints = append(nc.Endpoints, normalizeEndpoint(e))
		}
		slices.SortStableFunc(nc.Endpoints, func(a, b discoveryv1.Endpoint) int { return cmp.Compare(a.InstanceID, b.InstanceID) })
		out.Clusters = append(out.Clusters, nc)
	}
	slices.SortStableFunc(out.Clusters, func(a, b discoveryv1.PoolCluster) int { return cmp.Compare(a.Cluster, b.Cluster) })
	return out
}

func normalizeEndpoint(e discoveryv1.Endpoint) discoveryv1.Endpoint {
	e.Addresses = append(make([]string, 0, len(e.Addresses)), e.Addresses...)
	if len(e.Ports) == 0 {
		e.Ports = nil
	} else {
		e.Ports = slices.Clone(e.Ports)
		slices.SortStableFunc(e.Ports, func(a, b discoveryv1.Port) int { return cmp.Compare(a.Name, b.Name) })
	}
	return e
}

// merge combines the contributions of every source, taken in the order of
// the sources' names: the first source's value wins a label key, a
// cluster's region and an instance id that two sources give.
func merge(k Key, sources map[string]*discoveryv1.Pool) *discoveryv1.Pool {
	if len(sources) == 1 {
		for _, p := range sources {
			cp := *p
			return &cp
		}
	}
	out := &discoveryv1.Pool{Namespace: k.Namespace, Name: k.Name}
	byCluster := map[string]*discoveryv1.PoolCluster{}
	seen := map[string]map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(sources)) {
		p := sources[name]
		for lk, lv := range p.Labels {
			if out.Labels == nil {
				out.Labels = map[string]string{}
			}
			if _, ok := out.Labels[lk]; !ok {
				out.Labels[lk] = lv
			}
		}
		for _, c := range p.Clusters {
			mc := byCluster[c.Cluster]
			if mc == nil {
				mc = &discoveryv1.PoolCluster{Cluster: c.Cluster, Region: c.Region, Endpoints: []discoveryv1.Endpoint{}}
				byCluster[c.Cluster] = mc
				seen[c.Cluster] = map[string]bool{}
			}
			for _, e := range c.Endpoints {
				if !seen[c.Cluster][e.InstanceID] {
					seen[c.Cluster][e.InstanceID] = true
					mc.Endpoints = append(mc.Endpoints, e)
				}
			}
		}
	}
	out.Clusters = make([]discoveryv1.PoolCluster, 0, len(byCluster))
	for _, name := range slices.Sorted(maps.Keys(byCluster)) {
		c := byCluster[name]
		slices.SortStableFunc(c.Endpoints, func(a, b discoveryv1.Endpoint) int { return cmp.Compare(a.InstanceID, b.InstanceID) })
		out.Clusters = append(out.Clusters, *c)
	}
	return out
}
