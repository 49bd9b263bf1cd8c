package endpointranges_test

import (
	"reflect"
	"strings"
	"testing"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/edge/endpointranges"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in      []string
		wantErr string
		want    string
	}{
		{in: nil, want: "every address"},
		{in: endpointranges.Private, want: "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,fc00::/7"},
		{in: []string{" 10.244.0.0/16 "}, want: "10.244.0.0/16"},
		{in: []string{"10.244.0.1"}, wantErr: `"10.244.0.1" is not a CIDR range`},
		{in: []string{"pods.example"}, wantErr: `"pods.example" is not a CIDR range`},
		{in: []string{"10.244.0.1/16"}, wantErr: `did you mean 10.244.0.0/16?`},
	} {
		r, err := endpointranges.Parse(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Parse(%q): error %v, want one with %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || r.String() != tc.want {
			t.Errorf("Parse(%q) = %s, %v; want %s", tc.in, r, err, tc.want)
		}
	}
}

func TestAllows(t *testing.T) {
	private, err := endpointranges.Parse(endpointranges.Private)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := endpointranges.Parse([]string{"10.244.0.0/16", "fd00:10:244::/48"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ranges endpointranges.Ranges
		addr   string
		want   bool
	}{
		{endpointranges.Ranges{}, "203.0.113.7", true},
		{endpointranges.Ranges{}, "echo.example.com", false}, // a name is never dialled
		{private, "10.1.2.3", true},
		{private, "172.31.255.255", true},
		{private, "172.32.0.1", false},
		{private, "100.64.0.9", true},
		{private, "fd12::1", true},
		{private, "8.8.8.8", false},
		{private, "2001:db8::1", false},
		{private, "::ffff:10.0.0.1", true}, // mapped: the kernel dials 10.0.0.1
		{private, "::ffff:8.8.8.8", false},
		{pods, "10.244.3.4", true},
		{pods, "10.0.0.1", false}, // the hub's own network, say
		{pods, "fd00:10:244:0:1::5", true},
		{pods, "fd00:10:245::5", false},
	} {
		if got := tc.ranges.Allows(tc.addr); got != tc.want {
			t.Errorf("%s allows %s: %v, want %v", tc.ranges, tc.addr, got, tc.want)
		}
	}
}

func TestFilter(t *testing.T) {
	pods, err := endpointranges.Parse([]string{"10.244.0.0/16"})
	if err != nil {
		t.Fatal(err)
	}
	ep := func(addr string, ready bool) edgev1.Endpoint {
		return edgev1.Endpoint{Address: addr, Port: 8080, Ready: ready, Serving: ready}
	}
	backend := func(clusters ...edgev1.ClusterEndpoints) edgev1.Backend {
		return edgev1.Backend{Kind: "ServiceImport", Namespace: "demo", Name: "echo", Weight: 1, Clusters: clusters}
	}
	m := &edgev1.Model{
		Gateways: []edgev1.Gateway{{Namespace: "demo", Name: "web", Listeners: []edgev1.Listener{{Name: "http", Port: 80, VirtualHosts: []edgev1.VirtualHost{{Hostname: "*", Routes: []edgev1.Route{
			{RouteName: "mixed", Backends: []edgev1.Backend{backend(
				edgev1.ClusterEndpoints{Cluster: "east", Weight: 10, EffectiveWeight: 20, Endpoints: []edgev1.Endpoint{ep("10.0.0.5", true), ep("10.244.1.5", true)}},
				edgev1.ClusterEndpoints{Cluster: "west", Weight: 10, EffectiveWeight: 10, Endpoints: []edgev1.Endpoint{ep("10.244.2.5", true)}},
			)}},
			{RouteName: "outside", Filters: []edgev1.Filter{{Type: edgev1.FilterRequestMirror, RequestMirror: &edgev1.Mirror{Backend: backend(
				edgev1.ClusterEndpoints{Cluster: "east", Weight: 1, EffectiveWeight: 1, Endpoints: []edgev1.Endpoint{ep("169.254.169.254", true)}},
			)}}}, Backends: []edgev1.Backend{backend(
				edgev1.ClusterEndpoints{Cluster: "east", Weight: 1, EffectiveWeight: 2, Endpoints: []edgev1.Endpoint{ep("10.0.0.5", true), ep("10.0.0.6", true)}},
			)}},
		}}}}}}},
		LoadBalancers: []edgev1.LoadBalancer{{Namespace: "demo", Name: "lb", Ports: []edgev1.LoadBalancerPort{{Port: 53, Clusters: []edgev1.ClusterEndpoints{
			{Cluster: "east", Weight: 1, EffectiveWeight: 0, Draining: true, Endpoints: []edgev1.Endpoint{ep("10.0.0.5", true), ep("10.244.1.9", true)}},
		}}}}},
	}
	withheld := pods.Filter(m)
	want := []endpointranges.Withheld{
		{Object: "demo/web", Cluster: "east", Address: "10.0.0.5"},
		{Object: "demo/web", Cluster: "east", Address: "169.254.169.254"},
		{Object: "demo/web", Cluster: "east", Address: "10.0.0.6"},
		{Object: "demo/lb", Cluster: "east", Address: "10.0.0.5"},
	}
	if !reflect.DeepEqual(withheld, want) {
		t.Errorf("withheld %+v,\nwant %+v", withheld, want)
	}
	routes := m.Gateways[0].Listeners[0].VirtualHosts[0].Routes
	mixed := routes[0].Backends[0]
	if got := mixed.Clusters[0]; len(got.Endpoints) != 1 || got.Endpoints[0].Address != "10.244.1.5" || got.EffectiveWeight != 10 {
		t.Errorf("east of mixed: %+v, want 10.244.1.5 alone with effective weight 10", got)
	}
	if mixed.Clusters[1].EffectiveWeight != 10 || mixed.NoReadyEndpoints {
		t.Errorf("west of mixed changed: %+v", mixed)
	}
	if out := routes[1].Backends[0]; out.Clusters[0].EffectiveWeight != 0 || len(out.Clusters[0].Endpoints) != 0 || !out.NoReadyEndpoints {
		t.Errorf("a backend left without endpoints: %+v, want no endpoints, weight 0, NoReadyEndpoints", out)
	}
	if mir := routes[1].Filters[0].RequestMirror.Backend; len(mir.Clusters[0].Endpoints) != 0 {
		t.Errorf("the mirror kept %+v", mir.Clusters[0].Endpoints)
	}
	if lb := m.LoadBalancers[0].Ports[0].Clusters[0]; len(lb.Endpoints) != 1 || lb.EffectiveWeight != 0 {
		t.Errorf("the draining load balancer cluster: %+v, want one endpoint and still weight 0", lb)
	}
	ew := &edgev1.Model{EastWest: &edgev1.EastWest{Exports: []edgev1.EastWestExport{{Namespace: "demo", Name: "echo", ToEveryCluster: true,
		Ports: []edgev1.EastWestPort{{Port: 80, Endpoints: []edgev1.Endpoint{ep("10.244.0.9", true), ep("10.96.0.1", true)}}}}}}}
	if got := pods.Filter(ew); len(got) != 1 || got[0].Address != "10.96.0.1" || got[0].Object != "demo/echo" {
		t.Errorf("east-west exports: withheld %+v, want 10.96.0.1", got)
	}
	if eps := ew.EastWest.Exports[0].Ports[0].Endpoints; len(eps) != 1 || eps[0].Address != "10.244.0.9" {
		t.Errorf("east-west exports kept %+v", eps)
	}
	// Another network's gateway is not an endpoint: its address is kept.
	via := &edgev1.Model{LoadBalancers: []edgev1.LoadBalancer{{Namespace: "demo", Name: "lb", Ports: []edgev1.LoadBalancerPort{{Port: 80, Clusters: []edgev1.ClusterEndpoints{
		{Cluster: "west", Weight: 1, EffectiveWeight: 3, Endpoints: []edgev1.Endpoint{ep("203.0.113.10", true)}, Via: &edgev1.Via{Namespace: "demo", Name: "echo", Port: 80, ReadyEndpoints: 3}},
	}}}}}}
	if got := pods.Filter(via); len(got) != 0 || len(via.LoadBalancers[0].Ports[0].Clusters[0].Endpoints) != 1 {
		t.Errorf("a gateway of another network: withheld %+v", got)
	}
	if got := (endpointranges.Ranges{}).Filter(m); got != nil {
		t.Errorf("no ranges withheld %v", got)
	}
}
