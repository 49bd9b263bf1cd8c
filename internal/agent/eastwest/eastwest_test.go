package eastwest

import (
	"errors"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/api/keys"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/eastwest/ports"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func cluster(id, network, gateway string) *registryv1.ImportCluster {
	return &registryv1.ImportCluster{ClusterId: id, Network: network, EastwestGateway: gateway, Weight: 1}
}

func imp(typ string, ports []*registryv1.ServicePort, clusters ...*registryv1.ImportCluster) *registryv1.Import {
	return &registryv1.Import{Key: &registryv1.ImportKey{Namespace: "demo", Name: "echo"}, Type: typ, Ports: ports, Clusters: clusters}
}

var (
	tcp80  = []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}}
	mixed  = []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}, {Name: "dns", Protocol: "UDP", Port: 53}}
	udp53  = []*registryv1.ServicePort{{Name: "dns", Protocol: "UDP", Port: 53}}
	east   = cluster("east", "a", "")
	west   = cluster("west", "b", "192.0.2.2:15008")
	north  = cluster("north", "c", "")
	hereGW = Local{Network: "a", Gateway: true}
)

func TestDecide(t *testing.T) {
	tests := []struct {
		name  string
		imp   *registryv1.Import
		local Local
		want  Decision
		// status, reason and message of the Networks condition; "" for none.
		status, reason, message string
	}{
		{name: "one network", imp: imp("ClusterSetIP", tcp80, east), local: hereGW, want: Decision{Direct: []string{"east"}}},
		{name: "the fleet's one network (no property anywhere)", imp: imp("ClusterSetIP", tcp80, cluster("east", "", "")), local: Local{}, want: Decision{Direct: []string{"east"}}},
		{name: "another network, through the gateways", imp: imp("ClusterSetIP", tcp80, east, west), local: hereGW,
			want:   Decision{Through: true, Direct: []string{"east"}, Via: []string{"west"}, Carried: []int32{80}},
			status: "True", reason: keys.ReasonThroughEastWestGateway, message: "service port→gateway port: 80→15100) to clusters west through theirs and to this network's clusters east directly"},
		{name: "no gateway here", imp: imp("ClusterSetIP", tcp80, east, west), local: Local{Network: "a"},
			want:   Decision{Direct: []string{"east"}, Unreachable: []Unreachable{{"west", "b", "this cluster runs no east-west gateway (fleetnet-agent --eastwest-gateway-service)"}}},
			status: "False", reason: keys.ReasonClustersUnreachable, message: `west (network "b"): this cluster runs no east-west gateway`},
		{name: "no gateway there", imp: imp("ClusterSetIP", tcp80, east, west, north), local: hereGW,
			want: Decision{Through: true, Direct: []string{"east"}, Via: []string{"west"}, Carried: []int32{80},
				Unreachable: []Unreachable{{"north", "c", "it publishes no east-west gateway address (fleetnet-agent --eastwest-gateway-address)"}}},
			status: "False", reason: keys.ReasonClustersUnreachable, message: `north (network "c"): it publishes no east-west gateway address`},
		{name: "headless", imp: imp("Headless", tcp80, east, west), local: hereGW,
			want:   Decision{Direct: []string{"east"}, Unreachable: []Unreachable{{"west", "b", "a headless import's clients dial pod addresses, which do not cross networks"}}},
			status: "False", reason: keys.ReasonClustersUnreachable, message: "headless"},
		{name: "UDP only", imp: imp("ClusterSetIP", udp53, east, west), local: hereGW,
			want:   Decision{Direct: []string{"east"}, Unreachable: []Unreachable{{"west", "b", "the import has no TCP port (ports 53/UDP), and east-west gateways carry TCP only"}}},
			status: "False", reason: keys.ReasonClustersUnreachable, message: "ports 53/UDP"},
		{name: "TCP and UDP", imp: imp("ClusterSetIP", mixed, west), local: hereGW,
			want:   Decision{Through: true, Via: []string{"west"}, Carried: []int32{80}, Uncarried: []string{"53/UDP"}},
			status: "True", reason: keys.ReasonThroughEastWestGateway, message: "ports 53/UDP have no endpoints here"},
		{name: "every exporter elsewhere, no gateway here", imp: imp("ClusterSetIP", tcp80, west), local: Local{Network: "a"},
			want:   Decision{Unreachable: []Unreachable{{"west", "b", "this cluster runs no east-west gateway (fleetnet-agent --eastwest-gateway-service)"}}},
			status: "False", reason: keys.ReasonClustersUnreachable, message: "served by no cluster"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(tt.imp, tt.local)
			if !equalDecision(got, tt.want) {
				t.Fatalf("Decide = %+v\nwant %+v", got, tt.want)
			}
			c := got.Condition(map[int32]int32{80: 15100}, 3)
			if tt.status == "" {
				if c != nil {
					t.Fatalf("condition %+v, want none", c)
				}
				return
			}
			if c == nil || c.Type != keys.ConditionNetworks || string(c.Status) != tt.status || c.Reason != tt.reason || !strings.Contains(c.Message, tt.message) || c.ObservedGeneration != 3 {
				t.Fatalf("condition %+v, want %s/%s containing %q", c, tt.status, tt.reason, tt.message)
			}
		})
	}
}

func equalDecision(a, b Decision) bool {
	return a.Through == b.Through && slices.Equal(a.Direct, b.Direct) && slices.Equal(a.Via, b.Via) &&
		slices.Equal(a.Unreachable, b.Unreachable) && slices.Equal(a.Carried, b.Carried) && slices.Equal(a.Uncarried, b.Uncarried)
}

func TestAllocator(t *testing.T) {
	echo := types.NamespacedName{Namespace: "demo", Name: "echo"}
	web := types.NamespacedName{Namespace: "demo", Name: "web"}
	db := types.NamespacedName{Namespace: "demo", Name: "db"}
	loads := 0
	recorded := func() (map[types.NamespacedName]map[int32]int32, error) {
		loads++
		// echo's derived Service records 80 on 15101, from before a restart.
		return map[types.NamespacedName]map[int32]int32{echo: {80: 15101}}, nil
	}
	a := &Allocator{Range: ports.Range{First: 15100, Last: 15102}}
	// Another import asks first: it does not take echo's recorded port.
	if got, err := a.Assign(web, []int32{80, 443}, recorded); err != nil || !maps.Equal(got, map[int32]int32{80: 15100, 443: 15102}) {
		t.Fatalf("web: %v %v", got, err)
	}
	if got, err := a.Assign(echo, []int32{80}, recorded); err != nil || !maps.Equal(got, map[int32]int32{80: 15101}) {
		t.Fatalf("echo: %v %v, want its recorded 15101", got, err)
	}
	if loads != 1 {
		t.Errorf("records read %d times, want once", loads)
	}
	// The range is full: a clear error naming the port, the others kept.
	got, err := a.Assign(db, []int32{5432}, recorded)
	if err == nil || !strings.Contains(err.Error(), "15100-15102 are all taken") || !strings.Contains(err.Error(), "demo/db:5432") || len(got) != 0 {
		t.Fatalf("db: %v %v, want exhaustion", got, err)
	}
	// web drops 443 and echo leaves: their ports are free again.
	if got, err := a.Assign(web, []int32{80}, recorded); err != nil || !maps.Equal(got, map[int32]int32{80: 15100}) {
		t.Fatalf("web again: %v %v", got, err)
	}
	a.Release(echo)
	if got, err := a.Assign(db, []int32{5432}, recorded); err != nil || len(got) != 1 || (got[5432] != 15101 && got[5432] != 15102) {
		t.Fatalf("db after frees: %v %v", got, err)
	}
	// A read that fails fails the assignment, and is tried again.
	b := &Allocator{Range: ports.Range{First: 15100, Last: 15102}}
	if _, err := b.Assign(echo, []int32{80}, func() (map[types.NamespacedName]map[int32]int32, error) { return nil, errors.New("no cache") }); err == nil {
		t.Fatal("want the read's error")
	}
	if got, err := b.Assign(echo, []int32{80}, recorded); err != nil || got[80] != 15101 {
		t.Fatalf("after a failed read: %v %v", got, err)
	}
}

func TestPortsAnnotation(t *testing.T) {
	m := map[int32]int32{443: 15101, 80: 15100}
	s := FormatPorts(m)
	if s != "80=15100,443=15101" {
		t.Fatalf("FormatPorts = %q", s)
	}
	if got, err := ParsePorts(s); err != nil || !maps.Equal(got, m) {
		t.Fatalf("ParsePorts(%q) = %v, %v", s, got, err)
	}
	for _, bad := range []string{"80", "80=", "x=1", "80=70000", "0=15100", "80=15100,,"} {
		if _, err := ParsePorts(bad); err == nil || !strings.Contains(err.Error(), "want <service port>=<gateway port>") {
			t.Errorf("ParsePorts(%q): %v, want an error", bad, err)
		}
	}
}

func chunk(port int32, addrs ...string) map[string]*registryv1.EndpointChunk {
	c := &registryv1.EndpointChunk{AddressType: "IPv4", Ports: []*registryv1.EndpointPort{{Name: "http", Protocol: "TCP", Port: port}}}
	for i, a := range addrs {
		c.Endpoints = append(c.Endpoints, &registryv1.Endpoint{Addresses: []string{a}, Conditions: &registryv1.EndpointConditions{Ready: i > 0 || len(addrs) == 1, Serving: true}})
	}
	return map[string]*registryv1.EndpointChunk{"c0": c}
}

func TestModel(t *testing.T) {
	i := imp("ClusterSetIP", tcp80, east, west, cluster("south", "b", "gw.south.example:15008"))
	d := Decide(i, hereGW)
	r := Route{Key: types.NamespacedName{Namespace: "demo", Name: "echo"}, Import: i, Decision: d, Ports: map[int32]int32{80: 15100},
		// east: 1 ready of 2; west: 2 ready of 3; south's name does not resolve.
		Chunks: map[string]map[string]*registryv1.EndpointChunk{"east": chunk(8080, "10.244.0.2", "10.244.0.1"), "west": chunk(8080, "10.244.1.1", "10.244.1.2", "10.244.1.3"), "south": chunk(8080, "10.244.1.9")}}
	exports := []Export{{Namespace: "demo", Name: "api", Status: &registryv1.ExportStatus{ImportedBy: []string{"west"}},
		Ports: map[int32][]edgev1.Endpoint{443: {{Address: "10.244.0.7", Port: 8443, Ready: true}}}}}
	m, problems := Model([]Route{r}, exports, func(host string) (netip.Addr, error) { return netip.Addr{}, errors.New("no such host " + host) })
	if len(problems) != 1 || !strings.Contains(problems[0], "cluster south's east-west gateway \"gw.south.example:15008\": no such host gw.south.example") {
		t.Errorf("problems %q", problems)
	}
	if len(m.LoadBalancers) != 1 || len(m.LoadBalancers[0].Ports) != 1 {
		t.Fatalf("load balancers %+v", m.LoadBalancers)
	}
	p := m.LoadBalancers[0].Ports[0]
	if p.Port != 15100 || p.TargetPort != 80 || p.Protocol != edgev1.ProtocolTCP || len(p.Clusters) != 2 {
		t.Fatalf("port %+v, want 15100 to 80 with east and west", p)
	}
	e, w := p.Clusters[0], p.Clusters[1]
	if e.Cluster != "east" || e.Via != nil || len(e.Endpoints) != 2 || e.Endpoints[0].Address != "10.244.0.1" || e.Endpoints[0].Port != 8080 || !e.Endpoints[0].Ready || e.Endpoints[1].Ready || e.EffectiveWeight != 1 {
		t.Errorf("east = %+v, want its two pods dialled directly, one ready", e)
	}
	if w.Cluster != "west" || w.Via == nil || *w.Via != (edgev1.Via{Namespace: "demo", Name: "echo", Port: 80, ReadyEndpoints: 2}) ||
		len(w.Endpoints) != 1 || w.Endpoints[0].Address != "192.0.2.2" || w.Endpoints[0].Port != 15008 || w.EffectiveWeight != 2 {
		t.Errorf("west = %+v, want its gateway with 2 ready endpoints behind it", w)
	}
	if ew := m.EastWest; ew == nil || len(ew.Exports) != 1 || ew.Exports[0].Name != "api" || !slices.Equal(ew.Exports[0].ImportedBy, []string{"west"}) || ew.Exports[0].ToEveryCluster ||
		len(ew.Exports[0].Ports) != 1 || ew.Exports[0].Ports[0].Port != 443 || ew.Exports[0].Ports[0].Endpoints[0].Port != 8443 {
		t.Errorf("east-west exports %+v", m.EastWest)
	}
	r.Ports = map[int32]int32{80: 15101}
	if again, _ := Model([]Route{r}, exports, nil); m.Version == "" || m.Version == again.Version {
		t.Errorf("versions %q and %q: want a hash that differs with content", m.Version, again.Version)
	}
	if c := d.Condition(r.Ports, 1); c.Status != metav1.ConditionTrue {
		t.Errorf("condition %+v: south, by name, is reachable here", c)
	}
}
