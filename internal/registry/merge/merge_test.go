package merge

import (
	"fmt"
	"testing"
	"time"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"
)

var (
	t0  = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	key = &registryv1.ImportKey{Namespace: "ns", Name: "web"}
)

// export builds a ClusterSetIP export of ns/web from cluster, exported
// minutes after t0, with the given ports, then applies mods.
func export(cluster string, minutes int, ports []*registryv1.ServicePort, mods ...func(*registryv1.Export)) *registryv1.Export {
	e := &registryv1.Export{
		Key:             &registryv1.ExportKey{Namespace: "ns", Name: "web", ClusterId: cluster},
		ExportedSince:   timestamppb.New(t0.Add(time.Duration(minutes) * time.Minute)),
		Type:            "ClusterSetIP",
		Ports:           ports,
		SessionAffinity: "None",
		IpFamilies:      []string{"IPv4"},
		Weight:          1,
	}
	for _, m := range mods {
		m(e)
	}
	return e
}

func port(name string, p int32) *registryv1.ServicePort {
	return &registryv1.ServicePort{Name: name, Protocol: "TCP", Port: p}
}

func live(ids ...string) map[string]Cluster {
	m := map[string]Cluster{}
	for _, id := range ids {
		m[id] = Cluster{Live: true, Region: "region-" + id}
	}
	return m
}

func reasons(s *registryv1.ExportStatus) []string {
	var out []string
	for _, c := range s.GetConflicts() {
		out = append(out, c.GetReason())
	}
	return out
}

func TestMerge(t *testing.T) {
	tests := []struct {
		name      string
		exports   []*registryv1.Export
		clusters  map[string]Cluster
		wantPorts []*registryv1.ServicePort
		wantType  string
		// wantConflicts lists the conflict reasons per cluster; clusters not
		// named have none.
		wantConflicts map[string][]string
		wantClusters  []string
		wantFamilies  []string
		// wantLabels and wantAnnotations are the import's; nil when unset.
		wantLabels, wantAnnotations map[string]string
	}{
		{
			name:         "single export",
			exports:      []*registryv1.Export{export("a", 0, []*registryv1.ServicePort{port("http", 80)})},
			clusters:     live("a"),
			wantPorts:    []*registryv1.ServicePort{port("http", 80)},
			wantType:     "ClusterSetIP",
			wantClusters: []string{"a"},
			wantFamilies: []string{"IPv4"},
		},
		{
			name: "ports are the union by port and protocol",
			exports: []*registryv1.Export{
				export("a", 0, []*registryv1.ServicePort{port("http", 80)}),
				export("b", 1, []*registryv1.ServicePort{port("http", 80), port("metrics", 9090)}),
			},
			clusters:      live("a", "b"),
			wantPorts:     []*registryv1.ServicePort{port("http", 80), port("metrics", 9090)},
			wantType:      "ClusterSetIP",
			wantConflicts: map[string][]string{"a": {ReasonPort}, "b": {ReasonPort}},
			wantClusters:  []string{"a", "b"},
			wantFamilies:  []string{"IPv4"},
		},
		{
			name: "the oldest export names a shared port",
			exports: []*registryv1.Export{
				export("b", 1, []*registryv1.ServicePort{port("web", 80)}),
				export("a", 0, []*registryv1.ServicePort{port("http", 80)}),
			},
			clusters:      live("a", "b"),
			wantPorts:     []*registryv1.ServicePort{port("http", 80)},
			wantType:      "ClusterSetIP",
			wantConflicts: map[string][]string{"a": {ReasonPort}, "b": {ReasonPort}},
			wantClusters:  []string{"a", "b"},
			wantFamilies:  []string{"IPv4"},
		},
		{
			name: "same protocol number on UDP is another port",
			exports: []*registryv1.Export{
				export("a", 0, []*registryv1.ServicePort{port("dns", 53)}),
				export("b", 1, []*registryv1.ServicePort{{Name: "dns-udp", Protocol: "UDP", Port: 53}}),
			},
			clusters:      live("a", "b"),
			wantPorts:     []*registryv1.ServicePort{port("dns", 53), {Name: "dns-udp", Protocol: "UDP", Port: 53}},
			wantType:      "ClusterSetIP",
			wantConflicts: map[string][]string{"a": {ReasonPort}, "b": {ReasonPort}},
			wantClusters:  []string{"a", "b"},
			wantFamilies:  []string{"IPv4"},
		},
		{
			name: "unnamed beside named keeps the oldest export's ports whole",
			exports: []*registryv1.Export{
				export("a", 0, []*registryv1.ServicePort{port("", 80)}),
				export("b", 1, []*registryv1.ServicePort{port("http", 80), port("admin", 81)}),
			},
			clusters:      live("a", "b"),
			wantPorts:     []*registryv1.ServicePort{port("", 80)},
			wantType:      "ClusterSetIP",
			wantConflicts: map[string][]string{"a": {ReasonPort}, "b": {ReasonPort}},
			wantClusters:  []string{"a", "b"},
			wantFamilies:  []string{"IPv4"},
		},
		{
			name: "one unnamed port in every export is fine",
			exports: []*registryv1.Export{
				export("a", 0, []*registryv1.ServicePort{port("", 80)}),
				export("b", 1, []*registryv1.ServicePort{port("", 80)}),
			},
			clusters:     live("a", "b"),
			wantPorts:    []*registryv1.ServicePort{port("", 80)},
			wantType:     "ClusterSetIP",
			wantClusters: []string{"a", "b"},
			wantFamilies: []string{"IPv4"},
		},
		{
			name: "the oldest export decides type, affinity, policies",
			exports: []*registryv1.Export{
				export("a", 0, []*registryv1.ServicePort{port("http", 80)}, func(e *registryv1.Export) {
					e.SessionAffinity, e.SessionAffinityTimeoutSeconds = "ClientIP", 300
				}),
				export("b", 1, []*registryv1.ServicePort{port("http", 80)}, func(e *registryv1.Export) {
					e.Type = "Headless"
					e.InternalTrafficPolicy = "Local"
					e.TrafficDistribution = "PreferClose"
				}),
				export("c", 2, []*registryv1.ServicePort{port("http", 80)}, func(e *registryv1.Export) {
					e.SessionAffinity, e.SessionAffinityTimeoutSeconds = "ClientIP", 60
				}),
			},
			clusters:  live("a", "b", "c"),
			wantPorts: []*registryv1.ServicePort{port("http", 80)},
			wantType:  "ClusterSetIP",
			wantConflicts: map[string][]string{
				"a": {ReasonType, ReasonSessionAffinity, ReasonSessionAffinityConfig, ReasonInternalTrafficPolicy, ReasonTrafficDistribution},
				"b": {ReasonType, ReasonSessionAffinity, ReasonSessionAffinityConfig, ReasonInternalTrafficPolicy, ReasonTrafficDistribution},
				"c": {ReasonType, ReasonSessionAffinity, ReasonSessionAffinityConfig, ReasonInternalTrafficPolicy, ReasonTrafficDistribution},
			},
			wantClusters: []string{"a", "b", "c"},
			wantFamilies: []string{"IPv4"},
		},
		{
			name: "equal times fall back to cluster id",
			exports: []*registryv1.Export{
				export("b", 0, []*registryv1.ServicePort{port("b", 80)}),
				export("a", 0, []*registryv1.ServicePort{port("a", 80)}),
			},
			clusters:      live("a", "b"),
			wantPorts:     []*registryv1.ServicePort{port("a", 80)},
			wantType:      "ClusterSetIP",
			wantConflicts: map[string][]string{"a": {ReasonPort}, "b": {ReasonPort}},
			wantClusters:  []string{"a", "b"},
			wantFamilies:  []string{"IPv4"},
		},
		{
			name: "a cluster without a live lease does not participate",
			exports: []*registryv1.Export{
				export("a", 0, []*registryv1.ServicePort{port("old", 80)}),
				export("b", 1, []*registryv1.ServicePort{port("http", 80)}),
			},
			clusters:     map[string]Cluster{"a": {Live: false}, "b": {Live: true}},
			wantPorts:    []*registryv1.ServicePort{port("http", 80)},
			wantType:     "ClusterSetIP",
			wantClusters: []string{"b"},
			wantFamilies: []string{"IPv4"},
		},
		{
			name:     "no live cluster, no import",
			exports:  []*registryv1.Export{export("a", 0, []*registryv1.ServicePort{port("http", 80)})},
			clusters: map[string]Cluster{},
		},
		{
			name: "labels and annotations: the oldest export's, whole",
			exports: []*registryv1.Export{
				export("a", 0, []*registryv1.ServicePort{port("http", 80)}, func(e *registryv1.Export) {
					e.Labels = map[string]string{"tier": "web"}
				}),
				export("b", 1, []*registryv1.ServicePort{port("http", 80)}, func(e *registryv1.Export) {
					e.Labels = map[string]string{"tier": "api", "team": "x"}
					e.Annotations = map[string]string{"note": "b"}
				}),
				export("c", 2, []*registryv1.ServicePort{port("http", 80)}, func(e *registryv1.Export) {
					e.Annotations = map[string]string{"note": "c"}
				}),
			},
			clusters:  live("a", "b", "c"),
			wantPorts: []*registryv1.ServicePort{port("http", 80)},
			wantType:  "ClusterSetIP",
			wantConflicts: map[string][]string{
				"a": {ReasonLabels, ReasonAnnotations},
				"b": {ReasonLabels, ReasonAnnotations},
				"c": {ReasonLabels, ReasonAnnotations},
			},
			wantClusters: []string{"a", "b", "c"},
			wantFamilies: []string{"IPv4"},
			wantLabels:   map[string]string{"tier": "web"},
		},
		{
			name: "IP families: union, disjoint is a conflict",
			exports: []*registryv1.Export{
				export("a", 0, []*registryv1.ServicePort{port("http", 80)}),
				export("b", 1, []*registryv1.ServicePort{port("http", 80)}, func(e *registryv1.Export) { e.IpFamilies = []string{"IPv6", "IPv4"} }),
				export("c", 2, []*registryv1.ServicePort{port("http", 80)}, func(e *registryv1.Export) { e.IpFamilies = []string{"IPv6"} }),
			},
			clusters:      live("a", "b", "c"),
			wantPorts:     []*registryv1.ServicePort{port("http", 80)},
			wantType:      "ClusterSetIP",
			wantConflicts: map[string][]string{"a": {ReasonIPFamily}, "b": {ReasonIPFamily}, "c": {ReasonIPFamily}},
			wantClusters:  []string{"a", "b", "c"},
			wantFamilies:  []string{"IPv4", "IPv6"},
		},
		{
			name: "different stacks that share a family agree",
			exports: []*registryv1.Export{
				export("a", 0, []*registryv1.ServicePort{port("http", 80)}),
				export("b", 1, []*registryv1.ServicePort{port("http", 80)}, func(e *registryv1.Export) { e.IpFamilies = []string{"IPv6", "IPv4"} }),
			},
			clusters:     live("a", "b"),
			wantPorts:    []*registryv1.ServicePort{port("http", 80)},
			wantType:     "ClusterSetIP",
			wantClusters: []string{"a", "b"},
			wantFamilies: []string{"IPv4", "IPv6"},
		},
		{
			// mcs-api conformance: "should expose the union of the
			// constituent service ports".
			name: "a clean union of different port lists is still a conflict",
			exports: []*registryv1.Export{
				export("a", 0, []*registryv1.ServicePort{port("http", 80)}),
				export("b", 1, []*registryv1.ServicePort{port("http", 80), {Name: "stcp", Protocol: "SCTP", Port: 142}}),
			},
			clusters:      live("a", "b"),
			wantPorts:     []*registryv1.ServicePort{port("http", 80), {Name: "stcp", Protocol: "SCTP", Port: 142}},
			wantType:      "ClusterSetIP",
			wantConflicts: map[string][]string{"a": {ReasonPort}, "b": {ReasonPort}},
			wantClusters:  []string{"a", "b"},
			wantFamilies:  []string{"IPv4"},
		},
		{
			// mcs-api conformance: "with conflicting ports".
			name: "one name for two port numbers: the oldest's wins",
			exports: []*registryv1.Export{
				export("b", 1, []*registryv1.ServicePort{port("http", 81)}),
				export("a", 0, []*registryv1.ServicePort{port("http", 80)}),
			},
			clusters:      live("a", "b"),
			wantPorts:     []*registryv1.ServicePort{port("http", 80)},
			wantType:      "ClusterSetIP",
			wantConflicts: map[string][]string{"a": {ReasonPort}, "b": {ReasonPort}},
			wantClusters:  []string{"a", "b"},
			wantFamilies:  []string{"IPv4"},
		},
		{
			name: "appProtocol of a shared port: the oldest's wins",
			exports: []*registryv1.Export{
				export("a", 0, []*registryv1.ServicePort{{Name: "grpc", Protocol: "TCP", Port: 9000, AppProtocol: "kubernetes.io/h2c"}}),
				export("b", 1, []*registryv1.ServicePort{{Name: "grpc", Protocol: "TCP", Port: 9000}, port("admin", 9001)}),
			},
			clusters:      live("a", "b"),
			wantPorts:     []*registryv1.ServicePort{{Name: "grpc", Protocol: "TCP", Port: 9000, AppProtocol: "kubernetes.io/h2c"}, port("admin", 9001)},
			wantType:      "ClusterSetIP",
			wantConflicts: map[string][]string{"a": {ReasonPort}, "b": {ReasonPort}},
			wantClusters:  []string{"a", "b"},
			wantFamilies:  []string{"IPv4"},
		},
		{
			name: "the same ports in another order agree",
			exports: []*registryv1.Export{
				export("a", 0, []*registryv1.ServicePort{port("http", 80), port("admin", 81)}),
				export("b", 1, []*registryv1.ServicePort{port("admin", 81), port("http", 80)}),
			},
			clusters:     live("a", "b"),
			wantPorts:    []*registryv1.ServicePort{port("http", 80), port("admin", 81)},
			wantType:     "ClusterSetIP",
			wantClusters: []string{"a", "b"},
			wantFamilies: []string{"IPv4"},
		},
		{
			// mcs-api conformance: "with conflicting annotations and labels".
			name: "different keys: the import has the oldest export's only",
			exports: []*registryv1.Export{
				export("a", 0, []*registryv1.ServicePort{port("http", 80)}, func(e *registryv1.Export) {
					e.Labels = map[string]string{"dummy-label": "true"}
					e.Annotations = map[string]string{"dummy-annotation": "true"}
				}),
				export("b", 1, []*registryv1.ServicePort{port("http", 80)}, func(e *registryv1.Export) {
					e.Labels = map[string]string{"dummy-label2": "true"}
					e.Annotations = map[string]string{"dummy-annotation2": "true"}
				}),
			},
			clusters:        live("a", "b"),
			wantPorts:       []*registryv1.ServicePort{port("http", 80)},
			wantType:        "ClusterSetIP",
			wantConflicts:   map[string][]string{"a": {ReasonLabels, ReasonAnnotations}, "b": {ReasonLabels, ReasonAnnotations}},
			wantClusters:    []string{"a", "b"},
			wantFamilies:    []string{"IPv4"},
			wantLabels:      map[string]string{"dummy-label": "true"},
			wantAnnotations: map[string]string{"dummy-annotation": "true"},
		},
		{
			name: "equal labels and annotations agree",
			exports: []*registryv1.Export{
				export("a", 0, []*registryv1.ServicePort{port("http", 80)}, func(e *registryv1.Export) { e.Labels = map[string]string{"tier": "web"} }),
				export("b", 1, []*registryv1.ServicePort{port("http", 80)}, func(e *registryv1.Export) { e.Labels = map[string]string{"tier": "web"} }),
			},
			clusters:     live("a", "b"),
			wantPorts:    []*registryv1.ServicePort{port("http", 80)},
			wantType:     "ClusterSetIP",
			wantClusters: []string{"a", "b"},
			wantFamilies: []string{"IPv4"},
			wantLabels:   map[string]string{"tier": "web"},
		},
		{
			name: "a conflict with a cluster that left ends",
			exports: []*registryv1.Export{
				export("a", 0, []*registryv1.ServicePort{port("http", 80)}),
				export("b", 1, []*registryv1.ServicePort{port("http", 80)}, func(e *registryv1.Export) { e.Type = "Headless" }),
			},
			clusters:     map[string]Cluster{"a": {Live: true, Region: "region-a"}, "b": {Live: false}},
			wantPorts:    []*registryv1.ServicePort{port("http", 80)},
			wantType:     "ClusterSetIP",
			wantClusters: []string{"a"},
			wantFamilies: []string{"IPv4"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Merge(key, tt.exports, tt.clusters)
			if len(res.Statuses) != len(tt.exports) {
				t.Errorf("%d statuses for %d exports", len(res.Statuses), len(tt.exports))
			}
			for id, s := range res.Statuses {
				if diff := cmp.Diff(tt.wantConflicts[id], reasons(s)); diff != "" {
					t.Errorf("conflicts of %s (-want +got):\n%s\n%v", id, diff, s.GetConflicts())
				}
				if s.GetParticipating() != tt.clusters[id].Live {
					t.Errorf("participating of %s = %v", id, s.GetParticipating())
				}
			}
			if tt.wantType == "" {
				if res.Import != nil {
					t.Fatalf("import = %v, want none", res.Import)
				}
				return
			}
			imp := res.Import
			for id, st := range res.Statuses {
				if st.GetParticipating() && !cmp.Equal(st.GetConflicts(), imp.GetConflicts(), protocmp.Transform()) {
					t.Errorf("%s reports %v, the import %v", id, st.GetConflicts(), imp.GetConflicts())
				}
			}
			if diff := cmp.Diff(tt.wantLabels, imp.GetLabels()); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantAnnotations, imp.GetAnnotations()); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantPorts, imp.GetPorts(), protocmp.Transform()); diff != "" {
				t.Errorf("ports (-want +got):\n%s", diff)
			}
			if imp.GetType() != tt.wantType {
				t.Errorf("type = %s, want %s", imp.GetType(), tt.wantType)
			}
			var ids []string
			for _, c := range res.Import.GetClusters() {
				ids = append(ids, c.GetClusterId())
				if c.GetRegion() != tt.clusters[c.GetClusterId()].Region {
					t.Errorf("region of %s = %q", c.GetClusterId(), c.GetRegion())
				}
			}
			if diff := cmp.Diff(tt.wantClusters, ids); diff != "" {
				t.Errorf("clusters (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantFamilies, imp.GetIpFamilies()); diff != "" {
				t.Errorf("IP families (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCanonicalChunkRenamesPortsAndKeepsTargets(t *testing.T) {
	a := export("a", 0, []*registryv1.ServicePort{port("http", 80)})
	b := export("b", 1, []*registryv1.ServicePort{port("web", 80), port("debug", 6060)})
	res := Merge(key, []*registryv1.Export{a, b}, live("a", "b"))
	// The import has http/80 and debug/6060 (the union).
	chunk := &registryv1.EndpointChunk{
		Key:         &registryv1.ChunkKey{Namespace: "ns", Name: "web", ClusterId: "b", Chunk: "web-abc"},
		AddressType: "IPv4",
		Ports: []*registryv1.EndpointPort{
			{Name: "web", Protocol: "TCP", Port: 9090},
			{Name: "debug", Protocol: "TCP", Port: 6060},
			{Name: "gone", Protocol: "TCP", Port: 7000},
		},
		Endpoints: []*registryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}},
	}
	got := CanonicalChunk(res.Import, b, chunk)
	want := []*registryv1.EndpointPort{
		{Name: "http", Protocol: "TCP", Port: 9090},
		{Name: "debug", Protocol: "TCP", Port: 6060},
	}
	if diff := cmp.Diff(want, got.GetPorts(), protocmp.Transform()); diff != "" {
		t.Errorf("ports (-want +got):\n%s", diff)
	}
	if len(got.GetEndpoints()) != 1 || got.GetKey().GetChunk() != "web-abc" {
		t.Errorf("chunk lost its endpoints or key: %v", got)
	}

	// When the oldest export's ports are kept whole, the other export's
	// endpoint ports that the import lacks are dropped.
	c := export("a", 0, []*registryv1.ServicePort{port("", 80)})
	res = Merge(key, []*registryv1.Export{c, b}, live("a", "b"))
	got = CanonicalChunk(res.Import, b, chunk)
	want = []*registryv1.EndpointPort{{Name: "", Protocol: "TCP", Port: 9090}}
	if diff := cmp.Diff(want, got.GetPorts(), protocmp.Transform()); diff != "" {
		t.Errorf("ports with the oldest kept whole (-want +got):\n%s", diff)
	}
}

// Conflict messages name the property, each value with its clusters, and
// what the import uses, so a reader of any one ServiceExport sees the whole
// disagreement.
func TestConflictMessages(t *testing.T) {
	tests := []struct {
		name    string
		exports []*registryv1.Export
		want    []string
	}{
		{
			name: "type",
			exports: []*registryv1.Export{
				export("east", 0, []*registryv1.ServicePort{port("http", 80)}),
				export("west", 1, []*registryv1.ServicePort{port("http", 80)}, func(e *registryv1.Export) { e.Type = "Headless" }),
				export("hub", 2, []*registryv1.ServicePort{port("http", 80)}),
			},
			want: []string{"type differs: ClusterSetIP in east, hub, Headless in west; the import uses ClusterSetIP of cluster east, the oldest export"},
		},
		{
			name: "ports left out",
			exports: []*registryv1.Export{
				export("east", 0, []*registryv1.ServicePort{port("http", 80)}),
				export("west", 1, []*registryv1.ServicePort{port("http", 81), port("admin", 82)}),
			},
			want: []string{"ports differ: [http 80/TCP] in east, [http 81/TCP, admin 82/TCP] in west; the import has [http 80/TCP, admin 82/TCP]; " +
				`left out: http 81/TCP of cluster west (cluster east names 80/TCP "http")`},
		},
		{
			name: "ports kept whole",
			exports: []*registryv1.Export{
				export("east", 0, []*registryv1.ServicePort{port("", 80)}),
				export("west", 1, []*registryv1.ServicePort{port("http", 80), port("admin", 81)}),
			},
			want: []string{"ports differ: [(unnamed) 80/TCP] in east, [http 80/TCP, admin 81/TCP] in west; the import has [(unnamed) 80/TCP]; " +
				"the union would mix unnamed and named ports, so the import keeps the ports of cluster east, the oldest export"},
		},
		{
			name: "labels",
			exports: []*registryv1.Export{
				export("east", 0, []*registryv1.ServicePort{port("http", 80)}, func(e *registryv1.Export) { e.Labels = map[string]string{"tier": "web"} }),
				export("west", 1, []*registryv1.ServicePort{port("http", 80)}),
			},
			want: []string{`exportedLabels differ: {tier="web"} in east, {} in west; the import uses {tier="web"} of cluster east, the oldest export`},
		},
		{
			name: "many clusters are counted, not listed",
			exports: func() []*registryv1.Export {
				var out []*registryv1.Export
				for i := range 8 {
					out = append(out, export(fmt.Sprintf("c%d", i), i, []*registryv1.ServicePort{port("http", 80)}))
				}
				out[7].Type = "Headless"
				return out
			}(),
			want: []string{"type differs: ClusterSetIP in c0, c1, c2, c3, c4 and 2 more, Headless in c7; the import uses ClusterSetIP of cluster c0, the oldest export"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clusters := map[string]Cluster{}
			for _, e := range tt.exports {
				clusters[e.GetKey().GetClusterId()] = Cluster{Live: true}
			}
			res := Merge(key, tt.exports, clusters)
			var got []string
			for _, c := range res.Import.GetConflicts() {
				got = append(got, c.GetMessage())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
		})
	}
}

// Each cluster's weight and regional frontend travel to the import's
// clusters, whatever the other clusters export.
func TestImportClustersCarryPerClusterValues(t *testing.T) {
	const fe = "/subscriptions/s/resourceGroups/mc-east/providers/Microsoft.Network/loadBalancers/kubernetes/frontendIPConfigurations/a1"
	const pls = "/subscriptions/s/resourceGroups/mc-east/providers/Microsoft.Network/privateLinkServices/pls-a1"
	ports := []*registryv1.ServicePort{port("http", 80)}
	res := Merge(key, []*registryv1.Export{
		export("east", 0, ports, func(e *registryv1.Export) {
			e.Weight, e.RegionalFrontend, e.PrivateLinkService, e.PrivateLinkAutoApproval = 3, fe, pls, true
		}),
		export("west", 1, ports),
	}, live("east", "west"))
	got := map[string]*registryv1.ImportCluster{}
	for _, c := range res.Import.GetClusters() {
		got[c.GetClusterId()] = c
	}
	if c := got["east"]; c.GetWeight() != 3 || c.GetRegionalFrontend() != fe || c.GetRegion() != "region-east" || c.GetPrivateLinkService() != pls || !c.GetPrivateLinkAutoApproval() {
		t.Errorf("east = %v", c)
	}
	if c := got["west"]; c.GetWeight() != 1 || c.GetRegionalFrontend() != "" || c.GetPrivateLinkService() != "" || c.GetPrivateLinkAutoApproval() {
		t.Errorf("west = %v", c)
	}
}
