package model

import (
	"fmt"
	"github.com/fleetnet/fleetnet/api/keys"
	"testing"
	"time"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

var t0 = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

func cluster(id, region string, live bool, leaseLeft time.Duration) *registryv1.Cluster {
	return &registryv1.Cluster{Id: id, Region: region, Live: live, LeaseExpiresAt: timestamppb.New(t0.Add(leaseLeft))}
}

func export(ns, name, cluster string) *registryv1.Export {
	return &registryv1.Export{Key: &registryv1.ExportKey{Namespace: ns, Name: name, ClusterId: cluster}, Weight: 1, Type: "ClusterSetIP"}
}

func scoped(e *registryv1.Export, to ...string) *registryv1.Export {
	e.ExportTo = to
	return e
}

func status(ns, name, cluster string, importedBy []string, conflicts ...*registryv1.Conflict) *registryv1.ExportStatus {
	return &registryv1.ExportStatus{Key: &registryv1.ExportKey{Namespace: ns, Name: name, ClusterId: cluster}, Participating: len(conflicts) == 0, ImportedBy: importedBy, Conflicts: conflicts}
}

func imp(ns, name string, clusters ...string) *registryv1.Import {
	i := &registryv1.Import{Key: &registryv1.ImportKey{Namespace: ns, Name: name}, Type: "ClusterSetIP",
		Ports: []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}}}
	for _, c := range clusters {
		i.Clusters = append(i.Clusters, &registryv1.ImportCluster{ClusterId: c, Weight: 1})
	}
	return i
}

func chunk(ns, name, cluster string, ready, notReady int) *registryv1.WatchEvent {
	c := &registryv1.EndpointChunk{Key: &registryv1.ChunkKey{Namespace: ns, Name: name, ClusterId: cluster, Chunk: "a"}}
	for i := range ready + notReady {
		c.Endpoints = append(c.Endpoints, &registryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.0.0.%d", i)}, Conditions: &registryv1.EndpointConditions{Ready: i < ready}})
	}
	return &registryv1.WatchEvent{Event: &registryv1.WatchEvent_EndpointsUpsert{EndpointsUpsert: c}}
}

// fleet is three clusters: web exported by east and west (west's lease
// gone), db by west in conflict, api by hub.
func fleet(t *testing.T) *Model {
	t.Helper()
	m := New()
	m.SetClock(func() time.Time { return t0 })
	west := cluster("west", "us", false, -3*time.Second)
	west.Properties, west.EastwestGateway = map[string]string{keys.PropertyNetwork: "b"}, "192.0.2.2:15008"
	m.SetClusters([]*registryv1.Cluster{
		cluster("hub", "eu", true, 8*time.Second), cluster("east", "us", true, 9*time.Second), west,
	})
	conflict := &registryv1.Conflict{Reason: "Port", Message: "port 5432/TCP of west differs from east's 5433/TCP"}
	m.SetExports(
		[]*registryv1.Export{export("demo", "web", "east"), export("demo", "web", "west"), export("demo", "db", "west"), export("demo", "db", "east"), scoped(export("ops", "api", "hub"), "east", "gone")},
		[]*registryv1.ExportStatus{
			status("demo", "web", "east", []string{"hub", "west"}), status("demo", "web", "west", []string{"hub", "east"}),
			status("demo", "db", "west", nil, conflict), status("demo", "db", "east", []string{"hub"}),
			status("ops", "api", "hub", []string{"east", "west"}),
		})
	s := NewImportState()
	for _, ev := range []*registryv1.WatchEvent{
		{Event: &registryv1.WatchEvent_ImportUpsert{ImportUpsert: imp("demo", "web", "east")}},
		{Event: &registryv1.WatchEvent_ImportUpsert{ImportUpsert: imp("demo", "db", "east")}},
		{Event: &registryv1.WatchEvent_ImportUpsert{ImportUpsert: imp("ops", "api", "hub")}},
		chunk("demo", "web", "east", 2, 1), chunk("demo", "web", "west", 3, 0), chunk("ops", "api", "hub", 1, 0),
	} {
		s.Apply(ev)
	}
	m.ReplaceImports(s)
	return m
}

func TestFleet(t *testing.T) {
	v := fleet(t).Fleet()
	if v.Clusters != 3 || v.Live != 2 || v.Services != 3 || v.Conflicts != 1 {
		t.Fatalf("totals: clusters %d live %d services %d conflicts %d, want 3 2 3 1", v.Clusters, v.Live, v.Services, v.Conflicts)
	}
	if len(v.Regions) != 2 || v.Regions[0].Name != "eu" || v.Regions[1].Name != "us" {
		t.Fatalf("regions %+v, want eu, us", v.Regions)
	}
	got := map[string]ClusterView{}
	for _, r := range v.Regions {
		for _, c := range r.Clusters {
			got[c.ID] = c
		}
	}
	for _, want := range []ClusterView{
		// ops/api is scoped to east (and a cluster that is not registered).
		{ID: "hub", Region: "eu", Live: true, Exports: 1, Imports: 2},
		{ID: "east", Region: "us", Live: true, Exports: 2, Imports: 3},
		{ID: "west", Region: "us", Network: "b", EastWestGateway: "192.0.2.2:15008", Live: false, Exports: 2, Imports: 2, Conflicts: 1},
	} {
		if got[want.ID] != want {
			t.Errorf("cluster %s: %+v, want %+v", want.ID, got[want.ID], want)
		}
	}
}

func TestServices(t *testing.T) {
	m := fleet(t)
	for _, tc := range []struct {
		query         string
		offset, limit int
		want          []string
		total         int
		err           bool
	}{
		{query: "", limit: 50, want: []string{"demo/db", "demo/web", "ops/api"}, total: 3},
		{query: "", offset: 1, limit: 1, want: []string{"demo/web"}, total: 3},
		{query: "DEMO", limit: 50, want: []string{"demo/db", "demo/web"}, total: 2},
		{query: "demo we", limit: 50, want: []string{"demo/web"}, total: 1},
		{query: "cluster:hub", limit: 50, want: []string{"ops/api"}, total: 1},
		{query: "cluster:west demo", limit: 50, want: []string{"demo/db", "demo/web"}, total: 2},
		{query: "is:conflict", limit: 50, want: []string{"demo/db"}, total: 1},
		{query: "nothing", limit: 50, want: []string{}, total: 0},
		{query: "cluster:", err: true},
		{query: "is:broken", err: true},
	} {
		t.Run(tc.query, func(t *testing.T) {
			p, err := m.Services(tc.query, tc.offset, tc.limit)
			if tc.err {
				if err == nil {
					t.Fatalf("no error for %q", tc.query)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, it := range p.Items {
				got = append(got, it.String())
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) || p.Total != tc.total {
				t.Errorf("items %v total %d, want %v total %d", got, p.Total, tc.want, tc.total)
			}
		})
	}
	p, _ := m.Services("web", 0, 10)
	row := p.Items[0]
	// west exports web, but its lease is gone: not in the import, its
	// endpoints not counted.
	want := []ExporterBadge{{Cluster: "east", InImport: true, Ready: 2}, {Cluster: "west", InImport: false, Ready: 3}}
	if fmt.Sprint(row.Exporters) != fmt.Sprint(want) || row.Ready != 2 || row.SentTo != 3 || row.Conflicts != 0 {
		t.Errorf("web row %+v, want exporters %v ready 2 sentTo 3", row, want)
	}
	p, _ = m.Services("ops/api", 0, 10)
	if r := p.Items[0]; r.SentTo != 1 {
		t.Errorf("api row %+v, want sentTo 1 (its scope: east)", r)
	}
	p, _ = m.Services("db", 0, 10)
	if r := p.Items[0]; r.Conflicts != 1 || r.FirstConflict != "Port: port 5432/TCP of west differs from east's 5433/TCP" {
		t.Errorf("db row %+v, want its conflict", r)
	}
}

func TestServicesFollowWatch(t *testing.T) {
	m := fleet(t)
	rev, wake := m.Revision()
	m.ApplyImportEvent(&registryv1.WatchEvent{Event: &registryv1.WatchEvent_ImportUpsert{ImportUpsert: imp("new", "svc", "hub")}})
	select {
	case <-wake:
	default:
		t.Fatal("a watch event did not wake the watchers")
	}
	if r, _ := m.Revision(); r != rev+1 {
		t.Errorf("revision %d, want %d", r, rev+1)
	}
	if p, _ := m.Services("new/", 0, 10); p.Total != 1 {
		t.Errorf("a new import is not listed: %+v", p)
	}
	m.ApplyImportEvent(&registryv1.WatchEvent{Event: &registryv1.WatchEvent_ImportDelete{ImportDelete: &registryv1.ImportKey{Namespace: "new", Name: "svc"}}})
	if p, _ := m.Services("new/", 0, 10); p.Total != 0 {
		t.Errorf("a deleted import is listed: %+v", p)
	}
	// Endpoint deltas keep the counts: east's chunk goes from 2 ready of 3
	// to 1 of 1, then a second chunk of 4 comes and the first goes.
	ready := func() (int, int) {
		v := m.ServiceDetail(Service{"demo", "web"})
		return v.Clusters[0].Ready, v.Clusters[0].Endpoints
	}
	m.ApplyImportEvent(chunk("demo", "web", "east", 1, 0))
	if r, n := ready(); r != 1 || n != 1 {
		t.Errorf("after an update: %d ready of %d, want 1 of 1", r, n)
	}
	second := chunk("demo", "web", "east", 4, 0)
	second.GetEndpointsUpsert().Key.Chunk = "b"
	m.ApplyImportEvent(second)
	m.ApplyImportEvent(&registryv1.WatchEvent{Event: &registryv1.WatchEvent_EndpointsDelete{EndpointsDelete: &registryv1.ChunkKey{Namespace: "demo", Name: "web", ClusterId: "east", Chunk: "a"}}})
	if r, n := ready(); r != 4 || n != 4 {
		t.Errorf("after a second chunk and the first's delete: %d ready of %d, want 4 of 4", r, n)
	}
	// The same clusters again change nothing.
	rev, _ = m.Revision()
	west := cluster("west", "us", false, -3*time.Second)
	west.Properties, west.EastwestGateway = map[string]string{keys.PropertyNetwork: "b"}, "192.0.2.2:15008"
	m.SetClusters([]*registryv1.Cluster{
		cluster("hub", "eu", true, 8*time.Second), cluster("east", "us", true, 9*time.Second), west,
	})
	if r, _ := m.Revision(); r != rev {
		t.Errorf("unchanged clusters moved the revision from %d to %d", rev, r)
	}
}

func TestServiceDetail(t *testing.T) {
	v := fleet(t).ServiceDetail(Service{"demo", "web"})
	if !v.Found || v.Type != "ClusterSetIP" || fmt.Sprint(v.Ports) != "[80/TCP (http)]" || fmt.Sprint(v.SentTo) != "[east hub west]" || v.Scope != nil {
		t.Fatalf("detail %+v", v)
	}
	if len(v.Clusters) != 2 {
		t.Fatalf("clusters %+v", v.Clusters)
	}
	east, west := v.Clusters[0], v.Clusters[1]
	if east.ID != "east" || !east.InImport || !east.Live || east.Ready != 2 || east.Endpoints != 3 {
		t.Errorf("east %+v", east)
	}
	if west.ID != "west" || west.InImport || west.Live || west.Ready != 3 {
		t.Errorf("west %+v", west)
	}
	if v := fleet(t).ServiceDetail(Service{"ops", "api"}); fmt.Sprint(v.SentTo) != "[east]" || fmt.Sprint(v.Scope) != "[east gone]" {
		t.Errorf("scoped service: sent to %v, scope %v; want [east], [east gone]", v.SentTo, v.Scope)
	}
	if v := fleet(t).ServiceDetail(Service{"no", "such"}); v.Found {
		t.Errorf("unknown service found: %+v", v)
	}
}

func TestEntryPoints(t *testing.T) {
	m := fleet(t)
	m.SetHub(Hub{
		Routes: []Route{{Namespace: "demo", Name: "web", Rules: []RouteRule{{Backends: []BackendRef{{Kind: "ServiceImport", Namespace: "demo", Name: "web", Weight: 1}}}}}},
		LoadBalancers: []LoadBalancer{{Namespace: "demo", Name: "db", Clusters: []BackendCluster{
			{Name: "east", State: "Healthy", Weight: 1, ReadyEndpoints: 3}, {Name: "west", State: "Draining", Weight: 1, ReadyEndpoints: 1},
			{Name: "hub", State: "Healthy", Weight: 2, ReadyEndpoints: 3},
		}}},
	})
	m.SetTraffic(Traffic{At: t0,
		Routes:        map[string]map[string]float64{"demo/web/0": {"east": 30}},
		Backends:      map[string]map[string]EndpointHealth{"ServiceImport/demo/web": {"east": {Healthy: 1, Ejected: 1}}},
		LoadBalancers: map[string]map[string]float64{"demo/db": {"east": 1, "hub": 3}},
	})
	v := m.EntryPoints()
	rs := v.Routes[0].RuleSplits[0]
	if rs.RequestsPerSecond != 30 || len(rs.Backends[0].Clusters) != 1 {
		t.Fatalf("rule %+v", rs)
	}
	if c := rs.Backends[0].Clusters[0]; c.Cluster != "east" || c.Share != 1 || c.Live != 1 || c.Healthy != 1 || c.Ejected != 1 || c.Ready != 2 {
		t.Errorf("web east %+v", c)
	}
	split := map[string]ClusterSplit{}
	for _, c := range v.LoadBalancers[0].Split {
		split[c.Cluster] = c
	}
	// Effective weights: east 1×3, hub 2×3, west draining 0.
	for id, want := range map[string][2]float64{"east": {3.0 / 9, 0.25}, "hub": {6.0 / 9, 0.75}, "west": {0, 0}} {
		if got := split[id]; !near(got.Share, want[0]) || !near(got.Live, want[1]) {
			t.Errorf("load balancer %s: share %.3f live %.3f, want %.3f %.3f", id, got.Share, got.Live, want[0], want[1])
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func TestLivenessSince(t *testing.T) {
	m := fleet(t)
	now := t0
	m.SetClock(func() time.Time { return now })
	now = t0.Add(5 * time.Second)
	m.SetClusters([]*registryv1.Cluster{
		cluster("hub", "eu", true, 0), cluster("east", "us", true, 0), cluster("west", "us", true, 0),
	})
	now = t0.Add(7 * time.Second)
	for _, r := range m.Fleet().Regions {
		for _, c := range r.Clusters {
			switch {
			case c.ID == "west" && (!c.Since.Equal(t0.Add(5*time.Second)) || c.Seconds != 2):
				t.Errorf("west came back at +5s: since %v, %vs ago", c.Since, c.Seconds)
			case c.ID != "west" && !c.Since.IsZero():
				t.Errorf("%s did not change, yet since %v", c.ID, c.Since)
			}
		}
	}
}

func TestFeedKeepsErrorSince(t *testing.T) {
	m := New()
	m.SetFeed(FeedEdge, Feed{Error: "down", Since: t0})
	m.SetFeed(FeedEdge, Feed{Error: "down", Since: t0.Add(time.Minute)})
	if f := m.Feeds()[FeedEdge]; !f.Since.Equal(t0) {
		t.Errorf("since %v, want the first failure's %v", f.Since, t0)
	}
}

// BenchmarkServicesPage is one page of the services list, and one search,
// at 5,000 services exported by three of 100 clusters each.
func BenchmarkServicesPage(b *testing.B) {
	m := New()
	var cs []*registryv1.Cluster
	for i := range 100 {
		cs = append(cs, cluster(fmt.Sprintf("c%03d", i), "r", true, 0))
	}
	m.SetClusters(cs)
	var exports []*registryv1.Export
	var statuses []*registryv1.ExportStatus
	s := NewImportState()
	for i := range 5000 {
		ns, name := fmt.Sprintf("ns-%d", i/500), fmt.Sprintf("svc-%05d", i)
		var ids []string
		for k := range 3 {
			id := fmt.Sprintf("c%03d", (i+k)%100)
			ids = append(ids, id)
			exports = append(exports, export(ns, name, id))
			statuses = append(statuses, status(ns, name, id, nil))
			s.Apply(chunk(ns, name, id, 2, 0))
		}
		s.Apply(&registryv1.WatchEvent{Event: &registryv1.WatchEvent_ImportUpsert{ImportUpsert: imp(ns, name, ids...)}})
	}
	m.SetExports(exports, statuses)
	m.ReplaceImports(s)
	for _, q := range []string{"", "svc-040 cluster:c099"} {
		b.Run(fmt.Sprintf("query=%q", q), func(b *testing.B) {
			for range b.N {
				if _, err := m.Services(q, 0, 50); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A service scoped by fleetnet.dev/export-to-selector is sent to the
// clusters the registry found matching (the status's imported_by).
func TestSelectorScopedService(t *testing.T) {
	m := fleet(t)
	e := export("ops", "api", "hub")
	e.ExportToSelector = "env=prod"
	m.SetExports([]*registryv1.Export{e}, []*registryv1.ExportStatus{status("ops", "api", "hub", []string{"east"})})
	if v := m.ServiceDetail(Service{"ops", "api"}); fmt.Sprint(v.SentTo) != "[east]" || fmt.Sprint(v.Scope) != "[east]" {
		t.Errorf("selector-scoped service: sent to %v, scope %v; want [east], [east]", v.SentTo, v.Scope)
	}
}
