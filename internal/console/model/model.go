// Package model is fleetnet-console's picture of the fleet: what the
// registry, the hub and the edges said last, each kept by its own feed, and
// the views the web UI shows, computed from it on request. It holds no
// Kubernetes or network code: the feeds write into it, the server reads.
//
// Every change bumps one revision and wakes the watchers (the UI's event
// streams), which then fetch the view they show again: a view is a function
// of the model, never patched, so a missed change can't leave the page
// wrong.
package model

import (
	"slices"
	"strings"
	"sync"
	"time"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"google.golang.org/protobuf/proto"
)

// Service is a namespace and name: a ServiceImport across the fleet.
type Service struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

func (s Service) String() string { return s.Namespace + "/" + s.Name }

// exportKey is one cluster's export of a Service.
type exportKey struct {
	Service
	Cluster string
}

// chunkKey is one endpoint chunk of an export.
type chunkKey struct {
	exportKey
	Chunk string
}

// endpointCount is how many endpoints a chunk holds, and how many ready.
type endpointCount struct{ ready, total int }

// Model is the console's state. The zero value is not usable: use New.
type Model struct {
	mu  sync.RWMutex
	rev uint64
	// wake is closed and replaced at each change.
	wake chan struct{}
	now  func() time.Time

	registry Feed
	clusters map[string]*registryv1.Cluster
	// since is when the console saw each cluster's liveness change.
	since    map[string]time.Time
	exports  map[exportKey]*registryv1.Export
	statuses map[exportKey]*registryv1.ExportStatus
	imports  map[Service]*registryv1.Import
	chunks   map[chunkKey]endpointCount
	// sorted is every Service known, sorted; nil when it must be made again.
	sorted []Service
	// Indexes kept with the records, so that a page costs the services it
	// shows rather than the whole fleet: each service's exporting clusters
	// (sorted) and scope (set by SetExports), each export's endpoint counts
	// (kept with the chunks).
	exportersOf map[Service][]string
	scopeOf     map[Service]map[string]bool
	readyOf     map[exportKey]endpointCount

	hub  Feed
	hubs Hub

	edge    Feed
	traffic Traffic
}

// Feed is how one of the console's sources is doing.
type Feed struct {
	// Synced is true once the feed holds a whole picture.
	Synced bool `json:"synced"`
	// Error is the last failure while it is not resolved, empty otherwise.
	Error string `json:"error,omitempty"`
	// Since is when Error began.
	Since time.Time `json:"since,omitzero"`
}

// New returns an empty model.
func New() *Model {
	return &Model{
		wake: make(chan struct{}), now: time.Now,
		clusters: map[string]*registryv1.Cluster{}, since: map[string]time.Time{}, exports: map[exportKey]*registryv1.Export{},
		statuses: map[exportKey]*registryv1.ExportStatus{}, imports: map[Service]*registryv1.Import{},
		chunks: map[chunkKey]endpointCount{}, exportersOf: map[Service][]string{}, scopeOf: map[Service]map[string]bool{},
		readyOf: map[exportKey]endpointCount{},
	}
}

// SetClock replaces time.Now (tests).
func (m *Model) SetClock(now func() time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = now
}

// Revision is the model's revision and a channel closed at the next change.
func (m *Model) Revision() (uint64, <-chan struct{}) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.rev, m.wake
}

// changed records a change; m.mu is held for writing.
func (m *Model) changed() {
	m.rev++
	close(m.wake)
	m.wake = make(chan struct{})
}

// SetFeed records how a feed is doing ("registry", "hub" or "edge").
func (m *Model) SetFeed(name string, f Feed) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.feed(name)
	if p == nil {
		return
	}
	if f.Error != "" && p.Error != "" {
		f.Since = p.Since
	}
	if *p == f {
		return
	}
	*p = f
	m.changed()
}

// Feeds returns how each feed is doing, by name.
func (m *Model) Feeds() map[string]Feed {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return map[string]Feed{FeedRegistry: m.registry, FeedHub: m.hub, FeedEdge: m.edge}
}

func (m *Model) feed(name string) *Feed {
	switch name {
	case FeedRegistry:
		return &m.registry
	case FeedHub:
		return &m.hub
	case FeedEdge:
		return &m.edge
	}
	return nil
}

// The feeds.
const (
	FeedRegistry = "registry"
	FeedHub      = "hub"
	FeedEdge     = "edge"
)

// SetClusters replaces the clusters (the registry's ListClusters).
func (m *Model) SetClusters(clusters []*registryv1.Cluster) {
	next := make(map[string]*registryv1.Cluster, len(clusters))
	for _, c := range clusters {
		next[c.GetId()] = c
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if sameMap(m.clusters, next) {
		return
	}
	now := m.now()
	for id, c := range next {
		// The first sight of a cluster says nothing of when it changed.
		if old, ok := m.clusters[id]; ok && old.GetLive() != c.GetLive() {
			m.since[id] = now
		}
	}
	for id := range m.since {
		if next[id] == nil {
			delete(m.since, id)
		}
	}
	m.clusters = next
	m.changed()
}

// SetExports replaces the exports and their statuses (the registry's
// ListExports).
func (m *Model) SetExports(exports []*registryv1.Export, statuses []*registryv1.ExportStatus) {
	nextE := make(map[exportKey]*registryv1.Export, len(exports))
	for _, e := range exports {
		nextE[exportKeyOf(e.GetKey())] = e
	}
	nextS := make(map[exportKey]*registryv1.ExportStatus, len(statuses))
	for _, s := range statuses {
		nextS[exportKeyOf(s.GetKey())] = s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if sameMap(m.exports, nextE) && sameMap(m.statuses, nextS) {
		return
	}
	if !sameKeys(m.exports, nextE) {
		m.sorted = nil
	}
	m.exports, m.statuses = nextE, nextS
	m.exportersOf, m.scopeOf = indexExports(nextE, nextS)
	m.changed()
}

// indexExports makes each service's sorted exporters, and the scopes of
// scoped services: a service whose every export names its clusters
// (fleetnet.dev/export-to) or selects them (fleetnet.dev/export-to-selector,
// whose matches the registry reports in the status's imported_by) is sent
// to those only; one that any cluster exports to all has no scope (every
// cluster).
func indexExports(exports map[exportKey]*registryv1.Export, statuses map[exportKey]*registryv1.ExportStatus) (map[Service][]string, map[Service]map[string]bool) {
	exporters := map[Service][]string{}
	scopes := map[Service]map[string]bool{}
	open := map[Service]bool{}
	for k, e := range exports {
		exporters[k.Service] = append(exporters[k.Service], k.Cluster)
		if len(e.GetExportTo()) == 0 && e.GetExportToSelector() == "" {
			open[k.Service] = true
			continue
		}
		if scopes[k.Service] == nil {
			scopes[k.Service] = map[string]bool{}
		}
		for _, to := range e.GetExportTo() {
			scopes[k.Service][to] = true
		}
		if e.GetExportToSelector() != "" {
			for _, to := range statuses[k].GetImportedBy() {
				scopes[k.Service][to] = true
			}
		}
	}
	for _, cs := range exporters {
		slices.Sort(cs)
	}
	for s := range open {
		delete(scopes, s)
	}
	return exporters, scopes
}

// ImportState is the registry watch's picture: imports and endpoint
// chunks. A feed stages a snapshot in one and hands it over whole.
type ImportState struct {
	Imports map[Service]*registryv1.Import
	Chunks  map[chunkKey]endpointCount
}

// NewImportState returns an empty state.
func NewImportState() *ImportState {
	return &ImportState{Imports: map[Service]*registryv1.Import{}, Chunks: map[chunkKey]endpointCount{}}
}

// Apply applies one watch event to s; it says whether it was one of
// imports or endpoints.
func (s *ImportState) Apply(ev *registryv1.WatchEvent) bool {
	switch e := ev.GetEvent().(type) {
	case *registryv1.WatchEvent_ImportUpsert:
		s.Imports[serviceOf(e.ImportUpsert.GetKey())] = e.ImportUpsert
	case *registryv1.WatchEvent_ImportDelete:
		delete(s.Imports, serviceOf(e.ImportDelete))
	case *registryv1.WatchEvent_EndpointsUpsert:
		s.Chunks[chunkKeyOf(e.EndpointsUpsert.GetKey())] = countEndpoints(e.EndpointsUpsert)
	case *registryv1.WatchEvent_EndpointsDelete:
		delete(s.Chunks, chunkKeyOf(e.EndpointsDelete))
	default:
		return false
	}
	return true
}

// ReplaceImports puts a whole snapshot in place (the watch's synced mark).
func (m *Model) ReplaceImports(s *ImportState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.imports, m.chunks = s.Imports, s.Chunks
	m.readyOf = map[exportKey]endpointCount{}
	for k, n := range s.Chunks {
		m.readyOf[k.exportKey] = m.readyOf[k.exportKey].plus(n, 1)
	}
	m.sorted = nil
	m.changed()
}

// ApplyImportEvent applies one delta of the watch past its snapshot.
func (m *Model) ApplyImportEvent(ev *registryv1.WatchEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := ImportState{Imports: m.imports, Chunks: m.chunks}
	if _, isImport := ev.GetEvent().(*registryv1.WatchEvent_ImportUpsert); isImport {
		if _, known := m.imports[serviceOf(ev.GetImportUpsert().GetKey())]; !known {
			m.sorted = nil
		}
	}
	if _, isDelete := ev.GetEvent().(*registryv1.WatchEvent_ImportDelete); isDelete {
		m.sorted = nil
	}
	// The export's counts lose the chunk's old ones and gain its new.
	var ck *chunkKey
	switch e := ev.GetEvent().(type) {
	case *registryv1.WatchEvent_EndpointsUpsert:
		k := chunkKeyOf(e.EndpointsUpsert.GetKey())
		ck = &k
	case *registryv1.WatchEvent_EndpointsDelete:
		k := chunkKeyOf(e.EndpointsDelete)
		ck = &k
	}
	if ck != nil {
		if old, ok := m.chunks[*ck]; ok {
			m.readyOf[ck.exportKey] = m.readyOf[ck.exportKey].plus(old, -1)
		}
	}
	if !s.Apply(ev) {
		return
	}
	if ck != nil {
		if n, ok := m.chunks[*ck]; ok {
			m.readyOf[ck.exportKey] = m.readyOf[ck.exportKey].plus(n, 1)
		}
		if m.readyOf[ck.exportKey] == (endpointCount{}) {
			delete(m.readyOf, ck.exportKey)
		}
	}
	m.changed()
}

// plus adds sign × n.
func (c endpointCount) plus(n endpointCount, sign int) endpointCount {
	return endpointCount{ready: c.ready + sign*n.ready, total: c.total + sign*n.total}
}

func countEndpoints(c *registryv1.EndpointChunk) endpointCount {
	var n endpointCount
	for _, ep := range c.GetEndpoints() {
		k := len(ep.GetAddresses())
		n.total += k
		// KEP-1645: a nil ready condition counts as ready.
		if ep.GetConditions() == nil || ep.GetConditions().GetReady() {
			n.ready += k
		}
	}
	return n
}

func serviceOf(k *registryv1.ImportKey) Service {
	return Service{Namespace: k.GetNamespace(), Name: k.GetName()}
}

func exportKeyOf(k *registryv1.ExportKey) exportKey {
	return exportKey{Service{k.GetNamespace(), k.GetName()}, k.GetClusterId()}
}

func chunkKeyOf(k *registryv1.ChunkKey) chunkKey {
	return chunkKey{exportKey{Service{k.GetNamespace(), k.GetName()}, k.GetClusterId()}, k.GetChunk()}
}

// services is every Service known, sorted; m.mu is held.
func (m *Model) services() []Service {
	if m.sorted != nil {
		return m.sorted
	}
	seen := make(map[Service]bool, len(m.imports))
	for s := range m.imports {
		seen[s] = true
	}
	for k := range m.exports {
		seen[k.Service] = true
	}
	out := make([]Service, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Service) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// sortedServices returns the sorted Services, making them again under the
// write lock when a change dropped them.
func (m *Model) sortedServices() []Service {
	m.mu.RLock()
	s := m.sorted
	m.mu.RUnlock()
	if s != nil {
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sorted = m.services()
	return m.sorted
}

// sameMap compares two maps of protobuf messages by content.
func sameMap[K comparable, V proto.Message](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !proto.Equal(v, w) {
			return false
		}
	}
	return true
}

func sameKeys[K comparable, V any](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}
