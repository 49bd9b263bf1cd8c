package model

import (
	"cmp"
	"fmt"
	"github.com/fleetnet/fleetnet/api/keys"
	"slices"
	"strings"
	"time"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
)

// FleetView is the fleet page: clusters by region and the totals.
type FleetView struct {
	Revision  uint64          `json:"revision"`
	Feeds     map[string]Feed `json:"feeds"`
	Clusters  int             `json:"clusters"`
	Live      int             `json:"live"`
	Services  int             `json:"services"`
	Conflicts int             `json:"conflicts"`
	Regions   []RegionView    `json:"regions"`
}

// RegionView is one region's clusters.
type RegionView struct {
	Name     string        `json:"name"`
	Clusters []ClusterView `json:"clusters"`
}

// ClusterView is one cluster of the fleet page.
type ClusterView struct {
	ID     string `json:"id"`
	Region string `json:"region"`
	// Network is the cluster's network.fleetnet.dev property ("" for the
	// fleet's one network), EastWestGateway the address its east-west
	// gateway takes other networks' streams at ("" when it has none).
	Network         string `json:"network,omitempty"`
	EastWestGateway string `json:"eastWestGateway,omitempty"`
	// AgentVersion is the version its agent announced (docs/upgrades.md).
	AgentVersion string    `json:"agentVersion,omitempty"`
	Live         bool      `json:"live"`
	RegisteredAt time.Time `json:"registeredAt,omitzero"`
	// Since is when the console saw the cluster become live or not
	// (zero: it was so when the console started), Seconds how long ago.
	Since   time.Time `json:"since,omitzero"`
	Seconds float64   `json:"seconds"`
	Exports int       `json:"exports"`
	// Imports counts the imports the registry sends it.
	Imports int `json:"imports"`
	// Conflicts counts its exports that are in conflict.
	Conflicts int `json:"conflicts"`
}

// Fleet returns the fleet page.
func (m *Model) Fleet() FleetView {
	services := m.sortedServices()
	m.mu.RLock()
	defer m.mu.RUnlock()
	now := m.now()
	v := FleetView{
		Revision: m.rev, Feeds: map[string]Feed{FeedRegistry: m.registry, FeedHub: m.hub, FeedEdge: m.edge},
		Clusters: len(m.clusters), Services: len(services),
	}
	byCluster := map[string]*ClusterView{}
	view := func(id string) *ClusterView {
		c := byCluster[id]
		if c == nil {
			c = &ClusterView{ID: id}
			byCluster[id] = c
		}
		return c
	}
	for id, c := range m.clusters {
		cv := view(id)
		cv.Region, cv.Live = c.GetRegion(), c.GetLive()
		cv.Network, cv.EastWestGateway = c.GetProperties()[keys.PropertyNetwork], c.GetEastwestGateway()
		cv.AgentVersion = c.GetAgentVersion()
		if c.GetRegisteredAt() != nil {
			cv.RegisteredAt = c.GetRegisteredAt().AsTime()
		}
		if since, ok := m.since[id]; ok {
			cv.Since, cv.Seconds = since, now.Sub(since).Round(time.Second).Seconds()
		}
		if cv.Live {
			v.Live++
		}
	}
	conflicted := map[Service]bool{}
	for k, st := range m.statuses {
		// Exports of clusters the registry no longer lists are not shown.
		if _, ok := byCluster[k.Cluster]; !ok {
			continue
		}
		if len(st.GetConflicts()) > 0 {
			view(k.Cluster).Conflicts++
			conflicted[k.Service] = true
		}
	}
	for k := range m.exports {
		if c := byCluster[k.Cluster]; c != nil {
			c.Exports++
		}
	}
	for s := range m.imports {
		scope, scoped := m.scopeOf[s]
		for id, c := range byCluster {
			if !scoped || scope[id] {
				c.Imports++
			}
		}
	}
	v.Conflicts = len(conflicted)
	regions := map[string]*RegionView{}
	for _, c := range byCluster {
		r := regions[c.Region]
		if r == nil {
			r = &RegionView{Name: c.Region}
			regions[c.Region] = r
		}
		r.Clusters = append(r.Clusters, *c)
	}
	for _, r := range regions {
		slices.SortFunc(r.Clusters, func(a, b ClusterView) int { return strings.Compare(a.ID, b.ID) })
		v.Regions = append(v.Regions, *r)
	}
	slices.SortFunc(v.Regions, func(a, b RegionView) int { return strings.Compare(a.Name, b.Name) })
	return v
}

// ServicesPage is one page of the services list.
type ServicesPage struct {
	Revision uint64 `json:"revision"`
	Query    string `json:"query"`
	// Total is how many services match the query; Offset is where the
	// page starts among them.
	Total  int          `json:"total"`
	Offset int          `json:"offset"`
	Items  []ServiceRow `json:"items"`
}

// ServiceRow is a service in the list.
type ServiceRow struct {
	Service
	Type string `json:"type,omitempty"`
	// Exporters are the clusters that export it, sorted.
	Exporters []ExporterBadge `json:"exporters"`
	Ready     int             `json:"ready"`
	// SentTo is how many registered clusters the registry sends its
	// import to (its scope's, or all).
	SentTo int `json:"sentTo"`
	// Conflicts counts its conflicts (the import's, or its exporters'),
	// FirstConflict says the first.
	Conflicts     int    `json:"conflicts"`
	FirstConflict string `json:"firstConflict,omitempty"`
}

// ExporterBadge is one exporting cluster of a service row.
type ExporterBadge struct {
	Cluster string `json:"cluster"`
	// InImport: the cluster's endpoints are part of the merged import
	// (its lease is live and it participates).
	InImport bool `json:"inImport"`
	Ready    int  `json:"ready"`
}

// MaxPage bounds a page's size.
const MaxPage = 500

// Services returns the services that match query, from offset, at most
// limit (MaxPage at most). A query is words, all of which must match: a
// word matches a service whose NAMESPACE/NAME contains it; cluster:ID
// matches services that ID exports; is:conflict those in conflict.
func (m *Model) Services(query string, offset, limit int) (ServicesPage, error) {
	q, err := parseQuery(query)
	if err != nil {
		return ServicesPage{}, err
	}
	limit = min(max(limit, 1), MaxPage)
	offset = max(offset, 0)
	services := m.sortedServices()
	m.mu.RLock()
	defer m.mu.RUnlock()
	page := ServicesPage{Revision: m.rev, Query: query, Offset: offset, Items: []ServiceRow{}}
	for _, s := range services {
		if !q.matches(m, s) {
			continue
		}
		page.Total++
		if page.Total <= offset || len(page.Items) >= limit {
			continue
		}
		page.Items = append(page.Items, m.row(s))
	}
	return page, nil
}

// sentTo is how many registered clusters s is sent to; m.mu is held.
func (m *Model) sentTo(s Service) int {
	scope, scoped := m.scopeOf[s]
	if !scoped {
		return len(m.clusters)
	}
	n := 0
	for id := range m.clusters {
		if scope[id] {
			n++
		}
	}
	return n
}

// conflicts are a service's conflicts: the import's, or else its
// exporters'; m.mu is held.
func (m *Model) conflicts(s Service) []*registryv1.Conflict {
	if cs := m.imports[s].GetConflicts(); len(cs) > 0 {
		return cs
	}
	for _, c := range m.exportersOf[s] {
		if cs := m.statuses[exportKey{s, c}].GetConflicts(); len(cs) > 0 {
			return cs
		}
	}
	return nil
}

// row makes a service's row; m.mu is held.
func (m *Model) row(s Service) ServiceRow {
	r := ServiceRow{Service: s, Exporters: []ExporterBadge{}}
	imp := m.imports[s]
	r.Type = imp.GetType()
	in := map[string]bool{}
	for _, c := range imp.GetClusters() {
		in[c.GetClusterId()] = true
	}
	for _, c := range m.exportersOf[s] {
		n := m.readyOf[exportKey{s, c}]
		r.Exporters = append(r.Exporters, ExporterBadge{Cluster: c, InImport: in[c], Ready: n.ready})
		if in[c] {
			r.Ready += n.ready
		}
	}
	if imp != nil {
		r.SentTo = m.sentTo(s)
	}
	cs := m.conflicts(s)
	r.Conflicts = len(cs)
	if len(cs) > 0 {
		r.FirstConflict = cs[0].GetReason() + ": " + cs[0].GetMessage()
	}
	return r
}

// query is a parsed services query.
type query struct {
	words    []string
	clusters []string
	conflict bool
}

func parseQuery(s string) (query, error) {
	var q query
	for _, w := range strings.Fields(s) {
		switch {
		case strings.HasPrefix(w, "cluster:"):
			id := strings.TrimPrefix(w, "cluster:")
			if id == "" {
				return q, fmt.Errorf("query %q: cluster: needs a cluster id, e.g. cluster:west", s)
			}
			q.clusters = append(q.clusters, id)
		case w == "is:conflict":
			q.conflict = true
		case strings.HasPrefix(w, "is:"):
			return q, fmt.Errorf("query %q: %s is not known; is:conflict is", s, w)
		default:
			q.words = append(q.words, strings.ToLower(w))
		}
	}
	return q, nil
}

func (q query) matches(m *Model, s Service) bool {
	name := strings.ToLower(s.String())
	for _, w := range q.words {
		if !strings.Contains(name, w) {
			return false
		}
	}
	for _, c := range q.clusters {
		if !slices.Contains(m.exportersOf[s], c) {
			return false
		}
	}
	return !q.conflict || len(m.conflicts(s)) > 0
}

// ServiceView is one service's page.
type ServiceView struct {
	Revision uint64 `json:"revision"`
	Service
	Found bool   `json:"found"`
	Type  string `json:"type,omitempty"`
	// Ports are as the merged import has them, e.g. "80/TCP (http)".
	Ports    []string         `json:"ports"`
	Clusters []ServiceCluster `json:"clusters"`
	// SentTo are the registered clusters the registry sends its import to.
	SentTo   []string          `json:"sentTo"`
	Conflict []ConflictMessage `json:"conflicts"`
	// Scope are the clusters its exports are limited to
	// (fleetnet.dev/export-to); empty for every cluster.
	Scope []string `json:"scope,omitempty"`
}

// ServiceCluster is one exporting cluster of a service.
type ServiceCluster struct {
	ID            string            `json:"id"`
	Region        string            `json:"region"`
	Live          bool              `json:"live"`
	Participating bool              `json:"participating"`
	InImport      bool              `json:"inImport"`
	Weight        uint32            `json:"weight"`
	Ready         int               `json:"ready"`
	Endpoints     int               `json:"endpoints"`
	ExportedSince time.Time         `json:"exportedSince,omitzero"`
	Conflicts     []ConflictMessage `json:"conflicts"`
}

// ConflictMessage is a conflict's reason and message.
type ConflictMessage struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// ServiceDetail returns one service's page.
func (m *Model) ServiceDetail(s Service) ServiceView {
	m.mu.RLock()
	defer m.mu.RUnlock()
	v := ServiceView{Revision: m.rev, Service: s, Ports: []string{}, Clusters: []ServiceCluster{}, SentTo: []string{}, Conflict: []ConflictMessage{}}
	imp := m.imports[s]
	in := map[string]*registryv1.ImportCluster{}
	for _, c := range imp.GetClusters() {
		in[c.GetClusterId()] = c
	}
	if imp != nil {
		v.Found = true
		v.Type = imp.GetType()
		for _, p := range imp.GetPorts() {
			port := fmt.Sprintf("%d/%s", p.GetPort(), cmp.Or(p.GetProtocol(), "TCP"))
			if p.GetName() != "" {
				port += " (" + p.GetName() + ")"
			}
			v.Ports = append(v.Ports, port)
		}
		v.Conflict = conflictMessages(imp.GetConflicts())
	}
	scope := map[string]bool{}
	for _, id := range m.exportersOf[s] {
		k := exportKey{s, id}
		e := m.exports[k]
		v.Found = true
		st := m.statuses[k]
		c := ServiceCluster{
			ID: k.Cluster, Region: m.clusters[k.Cluster].GetRegion(), Live: m.clusters[k.Cluster].GetLive(),
			Participating: st.GetParticipating(), InImport: in[k.Cluster] != nil, Weight: e.GetWeight(),
			Ready: m.readyOf[k].ready, Endpoints: m.readyOf[k].total, Conflicts: conflictMessages(st.GetConflicts()),
		}
		if e.GetExportedSince() != nil {
			c.ExportedSince = e.GetExportedSince().AsTime()
		}
		v.Clusters = append(v.Clusters, c)
		for _, to := range e.GetExportTo() {
			scope[to] = true
		}
		if e.GetExportToSelector() != "" {
			for _, to := range st.GetImportedBy() {
				scope[to] = true
			}
		}
	}
	if imp != nil {
		for id := range m.clusters {
			if sc, scoped := m.scopeOf[s]; !scoped || sc[id] {
				v.SentTo = append(v.SentTo, id)
			}
		}
		slices.Sort(v.SentTo)
	}
	if _, scoped := m.scopeOf[s]; scoped {
		v.Scope = sortedKeys(scope)
	}
	return v
}

func conflictMessages(cs []*registryv1.Conflict) []ConflictMessage {
	out := make([]ConflictMessage, 0, len(cs))
	for _, c := range cs {
		out = append(out, ConflictMessage{Reason: c.GetReason(), Message: c.GetMessage()})
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
