package diagnose

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	networkingv1alpha1 "github.com/fleetnet/fleetnet/api/networking/v1alpha1"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/miekg/dns"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func cond(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg}
}

func healthyExport() *mcsv1beta1.ServiceExport {
	return &mcsv1beta1.ServiceExport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "echo"},
		Status: mcsv1beta1.ServiceExportStatus{Conditions: []metav1.Condition{
			cond("Valid", metav1.ConditionTrue, "Valid", ""),
			cond("Ready", metav1.ConditionTrue, "Ready", ""),
			cond("Conflict", metav1.ConditionFalse, "NoConflicts", ""),
		}},
	}
}

func slice(cluster string, ready ...bool) discoveryv1.EndpointSlice {
	s := discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "imported-" + cluster,
		Labels: map[string]string{mcsv1beta1.LabelSourceCluster: cluster}}}
	for _, r := range ready {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.244.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(r)}})
	}
	return s
}

// healthy returns the facts of a service exported by east and west and
// imported by hub, every step of which holds.
func healthy() *Facts {
	key := func(c string) *registryv1.ExportKey {
		return &registryv1.ExportKey{Namespace: "demo", Name: "echo", ClusterId: c}
	}
	expires := timestamppb.New(now.Add(20 * time.Second))
	ports := []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}}
	return &Facts{
		Target: Target{Cluster: "hub", Namespace: "demo", Name: "echo"},
		Now:    now,
		Registry: &RegistryFacts{
			Address: "registry:7443",
			Clusters: []*registryv1.Cluster{
				{Id: "east", Live: true, LeaseExpiresAt: expires},
				{Id: "hub", Live: true, LeaseExpiresAt: expires},
				{Id: "west", Live: true, LeaseExpiresAt: expires},
			},
			Exports: []*registryv1.Export{
				{Key: key("east"), Type: "ClusterSetIP", Ports: ports},
				{Key: key("west"), Type: "ClusterSetIP", Ports: ports},
			},
			Statuses: []*registryv1.ExportStatus{
				{Key: key("east"), Participating: true, EndpointChunks: []string{"a"}},
				{Key: key("west"), Participating: true, EndpointChunks: []string{"b"}},
			},
			Import: &registryv1.Import{Key: &registryv1.ImportKey{Namespace: "demo", Name: "echo"}, Type: "ClusterSetIP", Ports: ports,
				Clusters: []*registryv1.ImportCluster{{ClusterId: "east"}, {ClusterId: "west"}}},
		},
		Clusters: map[string]*ClusterFacts{
			"east": {Export: healthyExport()},
			"west": {Export: healthyExport()},
			"hub": {
				NamespaceExists: true,
				Import: &mcsv1beta1.ServiceImport{
					ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "echo",
						Annotations: map[string]string{keys.AnnotationDerivedService: "derived-abc"}},
					Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.96.0.10"},
						Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
					Status: mcsv1beta1.ServiceImportStatus{
						Clusters:   []mcsv1beta1.ClusterStatus{{Cluster: "east"}, {Cluster: "west"}},
						Conditions: []metav1.Condition{cond("Ready", metav1.ConditionTrue, "Ready", "")},
					},
				},
				DerivedServiceName: "derived-abc",
				DerivedService: &corev1.Service{
					ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "derived-abc", Labels: map[string]string{keys.LabelManagedBy: keys.ManagedByAgent}},
					Spec:       corev1.ServiceSpec{ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"}},
				},
				Slices: []discoveryv1.EndpointSlice{slice("east", true, true), slice("west", true)},
			},
		},
		DNS: &DNSFacts{Name: "echo.demo.svc.clusterset.local.",
			Fleetnet: &DNSAnswer{Server: "127.0.0.1:5353", Addrs: []string{"10.96.0.10"}},
			Cluster:  &DNSAnswer{Server: "10.96.0.10:53", Addrs: []string{"10.96.0.10"}},
		},
		Edge: healthyEdge(),
	}
}

// healthyEdge is the hub's HTTPRoute demo/echo through Gateway demo/gw
// and load balancer demo/echo-lb, both of the ServiceImport, and one edge
// that holds healthy endpoints of both.
func healthyEdge() *EdgeFacts {
	accepted := []metav1.Condition{cond("Accepted", metav1.ConditionTrue, "Accepted", ""), cond("ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs", "")}
	route := gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "echo"},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}},
			Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
				Group: ptr.To(gwv1.Group(mcsv1beta1.GroupName)), Kind: ptr.To(gwv1.Kind("ServiceImport")), Name: "echo"}}}}}},
		},
		Status: gwv1.HTTPRouteStatus{RouteStatus: gwv1.RouteStatus{Parents: []gwv1.RouteParentStatus{{
			ParentRef: gwv1.ParentReference{Name: "gw"}, ControllerName: keys.GatewayControllerName, Conditions: accepted}}}},
	}
	return &EdgeFacts{
		Hub:    "hub",
		Routes: []gwv1.HTTPRoute{route},
		Gateways: map[string]*gwv1.Gateway{"demo/gw": {ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "gw"},
			Status: gwv1.GatewayStatus{Conditions: []metav1.Condition{cond("Programmed", metav1.ConditionTrue, "Programmed", "")},
				Addresses: []gwv1.GatewayStatusAddress{{Value: "127.0.0.1"}}}}},
		LoadBalancers: []networkingv1alpha1.MultiClusterLoadBalancer{{
			ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "echo-lb"},
			Spec:       networkingv1alpha1.MultiClusterLoadBalancerSpec{ServiceImportName: "echo", Class: networkingv1alpha1.LoadBalancerClassEdge},
			Status: networkingv1alpha1.MultiClusterLoadBalancerStatus{Conditions: []metav1.Condition{
				cond("Accepted", metav1.ConditionTrue, "Accepted", ""), cond("ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs", ""),
				cond("Programmed", metav1.ConditionTrue, "Programmed", "")}},
		}},
		Edges: []EdgeMetrics{{URL: "http://127.0.0.1:17407/metrics",
			Backend:       map[string]EndpointHealth{"east": {Healthy: 2}, "west": {Healthy: 1}},
			LoadBalancers: map[string]map[string]map[string]EndpointHealth{"demo/echo-lb": {"5432/TCP": {"east": {Healthy: 2}, "west": {Healthy: 1}}}},
		}},
	}
}

func find(steps []Step, name string) (Step, bool) {
	for _, s := range steps {
		if s.Name == name {
			return s, true
		}
	}
	return Step{}, false
}

func TestDiagnose(t *testing.T) {
	tests := []struct {
		name    string
		breakIt func(f *Facts)
		// fails are the steps that must fail, each with a word its detail
		// or fix must hold; every other step present must hold or be
		// skipped.
		fails map[string]string
		// warns: the same for steps that warn (!).
		warns map[string]string
		// absent are steps that must not be reported (they would only
		// repeat the cause).
		absent []string
	}{
		{name: "healthy", breakIt: func(*Facts) {}},
		{
			name:    "west on another network, through the gateways",
			breakIt: func(f *Facts) { acrossNetworks(f, true) },
			// No fails or warns: the path holds through both gateways.
		},
		{
			name:    "west on another network, no gateway here",
			breakIt: func(f *Facts) { acrossNetworks(f, false) },
			fails:   map[string]string{"networks from hub": "this cluster runs no east-west gateway"},
		},
		{
			name: "the gateway has no ready endpoint",
			breakIt: func(f *Facts) {
				acrossNetworks(f, true)
				f.Clusters["hub"].Slices = []discoveryv1.EndpointSlice{slice("hub", false)}
			},
			fails: map[string]string{"EndpointSlices in hub": "--eastwest-gateway-service"},
		},
		{
			name: "namespace missing in the importing cluster",
			breakIt: func(f *Facts) {
				f.Clusters["hub"] = &ClusterFacts{}
				f.DNS = nil
			},
			fails:  map[string]string{"namespace in hub": "create namespace demo"},
			absent: []string{"ServiceImport in hub", "derived Service in hub", "EndpointSlices in hub"},
		},
		{
			name: "conflict on the export",
			breakIt: func(f *Facts) {
				f.Clusters["west"].Export.Status.Conditions[2] = cond("Conflict", metav1.ConditionTrue, "PortConflict", "port 80 is http in east, web in west")
				f.Registry.Statuses[1].Conflicts = []*registryv1.Conflict{{Reason: "PortConflict", Message: "port 80 is http in east, web in west"}}
			},
			fails: map[string]string{"ServiceExport in west": "PortConflict", "registry export from west": "PortConflict"},
		},
		{
			name: "exporting cluster's lease expired",
			breakIt: func(f *Facts) {
				f.Registry.Clusters[2] = &registryv1.Cluster{Id: "west", Live: false, LeaseExpiresAt: timestamppb.New(now.Add(-90 * time.Second))}
				f.Registry.Statuses[1].Participating = false
				f.Registry.Import.Clusters = f.Registry.Import.Clusters[:1]
				f.Clusters["hub"].Import.Status.Clusters = f.Clusters["hub"].Import.Status.Clusters[:1]
				f.Clusters["hub"].Slices = f.Clusters["hub"].Slices[:1]
			},
			fails: map[string]string{"lease of west": "1m30s ago", "registry export from west": "lease of west"},
		},
		{
			name: "importing cluster's lease expired and the import never arrived",
			breakIt: func(f *Facts) {
				f.Registry.Clusters[1] = &registryv1.Cluster{Id: "hub", Live: false}
				f.Clusters["hub"].Import = nil
				f.DNS.Fleetnet = &DNSAnswer{Server: "127.0.0.1:5353", Rcode: dns.RcodeNameError}
				f.DNS.Cluster = nil
			},
			fails: map[string]string{"lease of hub": "renew", "ServiceImport in hub": "lease of hub", "fleetnet-dns (127.0.0.1:5353)": "NXDOMAIN"},
		},
		{
			name: "export not imported by the cluster (its agent is behind)",
			breakIt: func(f *Facts) {
				f.Clusters["hub"].Import = nil
				f.DNS = nil
			},
			fails:  map[string]string{"ServiceImport in hub": "has not imported it"},
			absent: []string{"derived Service in hub"},
		},
		{
			name: "nothing exports: ServiceExport invalid, nothing in the registry",
			breakIt: func(f *Facts) {
				f.Clusters["west"].Export = nil
				f.Clusters["east"].Export.Status.Conditions = []metav1.Condition{cond("Valid", metav1.ConditionFalse, "NoService", "Service demo/echo not found")}
				f.Registry.Exports, f.Registry.Statuses, f.Registry.Import = nil, nil, nil
				f.Clusters["hub"].Import = nil
				f.DNS = nil
			},
			fails: map[string]string{"ServiceExport in east": "create Service demo/echo", "registry export from east": "no export",
				"registry merge": "no live cluster", "ServiceImport in hub": "registry merge"},
			absent: []string{"ServiceExport in west"},
		},
		{
			name: "every export scoped away from the importing cluster",
			breakIt: func(f *Facts) {
				for _, e := range f.Registry.Exports {
					e.ExportTo = []string{"east", "west"}
				}
				f.Registry.Import = nil // the registry sends hub none
				f.Clusters["hub"].Import = nil
				f.DNS = nil
			},
			fails: map[string]string{"registry export from east": "add hub to the annotation fleetnet.dev/export-to", "registry export from west": "does not send west's endpoints to hub",
				"registry merge": "every live export is scoped away from it", "ServiceImport in hub": "hub"},
		},
		{
			// East's live export is scoped away; west's reaches hub but
			// west is down: scoping, not a missing export, is the cause.
			name: "the live export scoped away, the one that reaches the importer's cluster down",
			breakIt: func(f *Facts) {
				f.Registry.Exports[0].ExportTo = []string{"west"}
				f.Registry.Clusters[2] = &registryv1.Cluster{Id: "west", Live: false, LeaseExpiresAt: timestamppb.New(now.Add(-90 * time.Second))}
				f.Registry.Import = nil
				f.Clusters["hub"].Import = nil
				f.DNS = nil
			},
			fails: map[string]string{"registry merge": "every live export is scoped away from it", "lease of west": "expired", "ServiceImport in hub": "registry merge"},
			warns: map[string]string{"registry export from east": "scoped to west"},
		},
		{
			name: "every export scoped away by a selector the importing cluster does not match",
			breakIt: func(f *Facts) {
				for _, e := range f.Registry.Exports {
					e.ExportToSelector = "env=prod"
				}
				for _, st := range f.Registry.Statuses {
					st.ImportedBy = []string{"east", "west"}
				}
				f.Registry.Import = nil
				f.Clusters["hub"].Import = nil
				f.DNS = nil
			},
			fails: map[string]string{"registry export from east": "give hub a ClusterProperty that env=prod matches",
				"registry export from west": "scoped to the clusters matching env=prod (fleetnet.dev/export-to-selector)",
				"registry merge":            "scoped away", "ServiceImport in hub": "hub"},
		},
		{
			name: "registry unreachable",
			breakIt: func(f *Facts) {
				f.Registry = &RegistryFacts{Address: "registry:7443", Err: errors.New("connection refused")}
			},
			fails:  map[string]string{"registry": "--registry"},
			absent: []string{"lease of hub", "registry export from east"},
		},
		{
			name: "no ready endpoint anywhere",
			breakIt: func(f *Facts) {
				f.Clusters["hub"].Slices = []discoveryv1.EndpointSlice{slice("east", false), slice("west")}
			},
			fails: map[string]string{"EndpointSlices in hub": "east 0/1 ready, west 0/0 ready"},
		},
		{
			name: "derived Service missing",
			breakIt: func(f *Facts) {
				f.Clusters["hub"].DerivedService = nil
			},
			fails: map[string]string{"derived Service in hub": "derived-abc"},
		},
		{
			name: "fleetnet-dns does not answer",
			breakIt: func(f *Facts) {
				f.DNS.Fleetnet = &DNSAnswer{Server: "127.0.0.1:5353", Err: errors.New("i/o timeout")}
				f.DNS.Cluster = nil
			},
			fails: map[string]string{"fleetnet-dns (127.0.0.1:5353)": "listens at 127.0.0.1:5353"},
		},
		{
			name: "cluster DNS does not forward the zone",
			breakIt: func(f *Facts) {
				f.DNS.Cluster = &DNSAnswer{Server: "10.96.0.10:53", Rcode: dns.RcodeNameError}
			},
			fails: map[string]string{"cluster DNS (10.96.0.10:53)": "does not forward clusterset.local"},
		},
		{
			name: "stale DNS answer",
			breakIt: func(f *Facts) {
				f.DNS.Fleetnet.Addrs = []string{"10.96.0.99"}
			},
			fails: map[string]string{"fleetnet-dns (127.0.0.1:5353)": "stale"},
		},
		{
			name: "edge not asked",
			breakIt: func(f *Facts) {
				f.Edge = nil
			},
			absent: []string{"HTTPRoute demo/echo", "Gateway demo/gw"},
		},
		{
			name: "route not accepted by its Gateway's listeners",
			breakIt: func(f *Facts) {
				f.Edge.Routes[0].Status.Parents[0].Conditions[0] = cond("Accepted", metav1.ConditionFalse, "NotAllowedByListeners", "no listener allows routes from namespace demo")
			},
			fails: map[string]string{"HTTPRoute demo/echo": "allowedRoutes"},
		},
		{
			name: "route's ServiceImport in another namespace without a ReferenceGrant",
			breakIt: func(f *Facts) {
				f.Edge.Routes[0].Status.Parents[0].Conditions[1] = cond("ResolvedRefs", metav1.ConditionFalse, "RefNotPermitted", "backendRef demo/echo not permitted")
			},
			fails: map[string]string{"HTTPRoute demo/echo": "ReferenceGrant"},
		},
		{
			name: "route no fleetnet Gateway has taken",
			breakIt: func(f *Facts) {
				f.Edge.Routes[0].Status.Parents = nil
			},
			fails: map[string]string{"HTTPRoute demo/echo": keys.GatewayControllerName},
		},
		{
			name: "Gateway not programmed",
			breakIt: func(f *Facts) {
				f.Edge.Gateways["demo/gw"].Status.Conditions[0] = cond("Programmed", metav1.ConditionFalse, "Pending", "waiting for the edges to acknowledge version 4")
			},
			fails: map[string]string{"Gateway demo/gw": "edges"},
		},
		{
			name: "Gateway missing",
			breakIt: func(f *Facts) {
				delete(f.Edge.Gateways, "demo/gw")
			},
			fails: map[string]string{"Gateway demo/gw": "does not exist"},
		},
		{
			name: "load balancer not programmed",
			breakIt: func(f *Facts) {
				f.Edge.LoadBalancers[0].Status.Conditions[2] = cond("Programmed", metav1.ConditionFalse, "Pending", "not acknowledged")
			},
			fails: map[string]string{"MultiClusterLoadBalancer demo/echo-lb": "provider"},
		},
		{
			name: "hub unreachable",
			breakIt: func(f *Facts) {
				f.Edge = &EdgeFacts{Hub: "hub", Err: errors.New(`no kube context "hub"`)}
			},
			fails: map[string]string{"hub hub": "--context hub="},
		},
		{
			name: "edge metrics unreachable",
			breakIt: func(f *Facts) {
				f.Edge.Edges[0] = EdgeMetrics{URL: "http://127.0.0.1:17407/metrics", Err: errors.New("connection refused")}
			},
			fails: map[string]string{"edge 127.0.0.1:17407": "--edge-metrics"},
		},
		{
			name: "every endpoint ejected by the edge's health checks",
			breakIt: func(f *Facts) {
				f.Edge.Edges[0].Backend = map[string]EndpointHealth{"east": {Ejected: 2}, "west": {Ejected: 1}}
			},
			fails: map[string]string{"edge 127.0.0.1:17407, backend": "health check"},
		},
		{
			// One port dark while another serves: judged per port, not
			// summed into "healthy".
			name: "a load balancer port with every endpoint ejected",
			breakIt: func(f *Facts) {
				f.Edge.Edges[0].LoadBalancers["demo/echo-lb"]["53/UDP"] = map[string]EndpointHealth{"east": {Ejected: 2}, "west": {Ejected: 1}}
			},
			fails: map[string]string{"edge 127.0.0.1:17407, load balancer demo/echo-lb port 53/UDP": "health checks eject every endpoint"},
		},
		{
			name: "edge without the backend in its model",
			breakIt: func(f *Facts) {
				f.Edge.Edges[0].Backend = nil
				f.Edge.Edges[0].LoadBalancers = nil
			},
			fails: map[string]string{"edge 127.0.0.1:17407, backend": "no model",
				"edge 127.0.0.1:17407, load balancer demo/echo-lb": "connected"},
		},
		{
			name: "importing cluster unreachable",
			breakIt: func(f *Facts) {
				f.Clusters["hub"] = &ClusterFacts{Err: errors.New(`no kube context "hub"`)}
			},
			fails: map[string]string{"cluster hub": "--context hub="},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := healthy()
			tc.breakIt(f)
			steps := Diagnose(f)
			for status, byName := range map[Status]map[string]string{Fail: tc.fails, Warn: tc.warns} {
				for name, word := range byName {
					s, ok := find(steps, name)
					if !ok {
						t.Errorf("no step %q", name)
						continue
					}
					if s.Status != status {
						t.Errorf("step %q: %s %s, want %s", name, s.Status, s.Detail, status)
					}
					if !strings.Contains(s.Detail+" "+s.Fix, word) {
						t.Errorf("step %q says %q / %q: want %q in it", name, s.Detail, s.Fix, word)
					}
				}
			}
			for _, s := range steps {
				_, fail := tc.fails[s.Name]
				if _, warn := tc.warns[s.Name]; !fail && !warn && (s.Status == Fail || s.Status == Warn) {
					t.Errorf("step %q: %s %s (%s), want ✓ or -", s.Name, s.Status, s.Detail, s.Fix)
				}
			}
			for _, name := range tc.absent {
				if s, ok := find(steps, name); ok {
					t.Errorf("step %q reported (%s %s), want none", name, s.Status, s.Detail)
				}
			}
			if got, want := Failed(steps), len(tc.fails) > 0; got != want {
				t.Errorf("Failed = %v, want %v", got, want)
			}
			if t.Failed() {
				var b bytes.Buffer
				_ = Write(&b, f.Target, steps)
				t.Log("\n" + b.String())
			}
		})
	}
}

// acrossNetworks puts west on network b with a gateway; hub's import goes
// through hub's gateway (through) or leaves west out.
func acrossNetworks(f *Facts, through bool) {
	f.Registry.Clusters[2].Properties = map[string]string{keys.PropertyNetwork: "b"}
	f.Registry.Clusters[2].EastwestGateway = "192.0.2.2:15008"
	f.Registry.Import.Clusters[1].Network, f.Registry.Import.Clusters[1].EastwestGateway = "b", "192.0.2.2:15008"
	hub := f.Clusters["hub"]
	if !through {
		hub.Slices = hub.Slices[:1]
		hub.Import.Status.Conditions = append(hub.Import.Status.Conditions, cond(keys.ConditionNetworks, metav1.ConditionFalse, keys.ReasonClustersUnreachable,
			`clusters of other networks left out: west (network "b"): this cluster runs no east-west gateway (fleetnet-agent --eastwest-gateway-service); served by clusters east`))
		return
	}
	hub.DerivedService.Annotations = map[string]string{keys.AnnotationEastWestPorts: "80=15100"}
	gw := slice("hub", true)
	gw.Ports = []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](15100)}}
	hub.Slices = []discoveryv1.EndpointSlice{gw}
	hub.Import.Status.Conditions = append(hub.Import.Status.Conditions, cond(keys.ConditionNetworks, metav1.ConditionTrue, keys.ReasonThroughEastWestGateway, "through this cluster's east-west gateway"))
}

// TestNetworkPathNamesBothGateways: the step says which clusters hub's
// gateway dials and which it reaches through whose gateway.
func TestNetworkPathNamesBothGateways(t *testing.T) {
	f := healthy()
	acrossNetworks(f, true)
	s, ok := find(Diagnose(f), "networks from hub")
	if !ok || s.Status != OK || !strings.Contains(s.Detail, "east (the default network, hub's) by hub's gateway, directly") ||
		!strings.Contains(s.Detail, "west (network b) through hub's gateway to west's at 192.0.2.2:15008") {
		t.Fatalf("step %+v", s)
	}
	if s, _ := find(Diagnose(f), "EndpointSlices in hub"); !strings.Contains(s.Detail, "1/1 gateway endpoints ready on ports 15100") {
		t.Errorf("slices step %+v", s)
	}
	if _, ok := find(Diagnose(healthy()), "networks from hub"); ok {
		t.Error("a one-network import shows a networks step")
	}
}

// TestWriteShowsFixOnlyForBrokenSteps: a reader looks for → to find what to
// do, so a step that holds has none.
func TestWriteShowsFixOnlyForBrokenSteps(t *testing.T) {
	var b bytes.Buffer
	steps := []Step{{Name: "a", Status: OK, Detail: "fine", Fix: "unused"}, {Name: "b", Status: Fail, Detail: "broken", Fix: "repair b"}}
	if err := Write(&b, Target{Cluster: "hub", Namespace: "demo", Name: "echo"}, steps); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.Contains(out, "unused") || !strings.Contains(out, "→ repair b") || !strings.Contains(out, "✗  b") {
		t.Errorf("report:\n%s", out)
	}
}

// TestEdgeHealthStep: a cluster without a healthy endpoint at the edge is
// a warning (its share goes elsewhere), none anywhere breaks the path.
func TestEdgeHealthStep(t *testing.T) {
	for _, tc := range []struct {
		name   string
		health map[string]EndpointHealth
		want   Status
		detail string
		fix    string
	}{
		{"all healthy", map[string]EndpointHealth{"east": {Healthy: 2}, "west": {Healthy: 1}}, OK, "east 2 healthy; west 1 healthy", ""},
		{"west ejected", map[string]EndpointHealth{"east": {Healthy: 2}, "west": {Ejected: 1}}, Warn, "west 0 healthy, 1 ejected", "no healthy endpoint in west"},
		{"all ejected", map[string]EndpointHealth{"east": {Ejected: 2}}, Fail, "east 0 healthy, 2 ejected", "health checks eject every endpoint"},
		{"no endpoint", map[string]EndpointHealth{}, Fail, "no endpoint", "has no endpoint of this backend"},
		{"none healthy, none ejected", map[string]EndpointHealth{"east": {}}, Fail, "east 0 healthy", "has no endpoint of this backend"},
	} {
		s := healthStep("edge", tc.health)
		if s.Status != tc.want || !strings.Contains(s.Detail, tc.detail) || !strings.Contains(s.Fix, tc.fix) {
			t.Errorf("%s: %s %q (fix %q), want %s with %q (fix with %q)", tc.name, s.Status, s.Detail, s.Fix, tc.want, tc.detail, tc.fix)
		}
	}
}

// An unreadable hub does not hide what the edges say.
func TestEdgeStepsWithoutTheHub(t *testing.T) {
	f := &Facts{Edge: &EdgeFacts{Hub: "hub", Err: errors.New("connection refused"), Edges: []EdgeMetrics{{
		URL: "http://edge:9090/metrics", Backend: map[string]EndpointHealth{"east": {Healthy: 1}},
	}}}}
	steps := edgeSteps(f)
	if len(steps) < 2 || steps[0].Status != Fail || !strings.Contains(steps[0].Name, "hub") {
		t.Fatalf("steps %+v: want the hub's failure first", steps)
	}
	var edge bool
	for _, s := range steps[1:] {
		edge = edge || strings.Contains(s.Detail, "east 1 healthy")
	}
	if !edge {
		t.Errorf("steps %+v: the edge's health is missing", steps)
	}
}
