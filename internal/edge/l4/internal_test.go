package l4

import (
	"reflect"
	"testing"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/edge/health"
)

// A UDP endpoint is out of picks while a refusal's ejection runs.
func TestUDPEndpointRefused(t *testing.T) {
	e := &endpoint{}
	if !e.healthy(0) {
		t.Fatal("a new endpoint is not healthy")
	}
	e.refuse(100)
	if e.healthy(100+int64(udpEjection)-1) || !e.healthy(100+int64(udpEjection)) {
		t.Error("the ejection does not last udpEjection")
	}
}

// Zero fields of a load balancer take the defaults, except DrainMillis,
// whose zero closes at once; the check is always a TCP connect.
func TestCompileDefaults(t *testing.T) {
	def := edgev1.DefaultBackendPolicy().HealthCheck
	type settings struct {
		check                            edgev1.HealthCheck
		connect, tcpIdle, udpIdle, drain time.Duration
	}
	tests := []struct {
		name string
		in   edgev1.LoadBalancer
		want settings
	}{
		{"zero", edgev1.LoadBalancer{}, settings{
			check:   edgev1.HealthCheck{Type: edgev1.HealthCheckTCP, IntervalMillis: def.IntervalMillis, TimeoutMillis: def.TimeoutMillis, HealthyThreshold: def.HealthyThreshold, UnhealthyThreshold: def.UnhealthyThreshold},
			connect: time.Second, tcpIdle: time.Hour, udpIdle: time.Minute, drain: 0,
		}},
		{"set", edgev1.LoadBalancer{
			HealthCheck:          edgev1.HealthCheck{Type: "HTTP", Path: "/x", IntervalMillis: 2000, TimeoutMillis: 100, HealthyThreshold: 3, UnhealthyThreshold: 4},
			ConnectTimeoutMillis: 50, TCPIdleMillis: 5000, UDPIdleMillis: 6000, DrainMillis: 7000,
		}, settings{
			check:   edgev1.HealthCheck{Type: edgev1.HealthCheckTCP, IntervalMillis: 2000, TimeoutMillis: 100, HealthyThreshold: 3, UnhealthyThreshold: 4},
			connect: 50 * time.Millisecond, tcpIdle: 5 * time.Second, udpIdle: 6 * time.Second, drain: 7 * time.Second,
		}},
	}
	met := newMetrics(nil, nil, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := compileService("demo/x", &tt.in, edgev1.LoadBalancerPort{Port: 1, Protocol: edgev1.ProtocolTCP}, met)
			got := settings{check: s.check, connect: s.connect, tcpIdle: s.tcpIdle, udpIdle: s.udpIdle, drain: s.drain}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// An endpoint that an HTTP backend and a load balancer check alike is
// one unit of the shared checker.
func TestTrackSharesUnits(t *testing.T) {
	c := health.New()
	c.Close()
	ep := edgev1.Endpoint{Address: "10.0.0.1", Port: 5432, Ready: true}
	m := &edgev1.Model{LoadBalancers: []edgev1.LoadBalancer{{Namespace: "d", Name: "db", Ports: []edgev1.LoadBalancerPort{
		{Port: 5432, Protocol: edgev1.ProtocolTCP, Clusters: []edgev1.ClusterEndpoints{{Cluster: "east", Weight: 1, Endpoints: []edgev1.Endpoint{ep}}}},
		{Port: 5432, Protocol: edgev1.ProtocolUDP, Clusters: []edgev1.ClusterEndpoints{{Cluster: "east", Weight: 1, Endpoints: []edgev1.Endpoint{ep}}}},
	}}}}
	tb, _, err := compile(m, newMetrics(nil, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	track(c.NewSet(), tb)
	var httpUnit *health.Target
	c.NewSet().Track(func(unit func(health.Key) *health.Target) {
		httpUnit = unit(health.Key{Address: "10.0.0.1", Port: 5432, Check: edgev1.DefaultBackendPolicy().HealthCheck})
	})
	tcp := tb.services[sockKey{5432, edgev1.ProtocolTCP}].clusters[0].ready[0].health
	udp := tb.services[sockKey{5432, edgev1.ProtocolUDP}].clusters[0].ready[0].health
	switch {
	case tcp != httpUnit:
		t.Error("the load balancer's default check and the HTTP default check are two units")
	case udp != nil:
		t.Error("a UDP endpoint has an active check")
	case c.Units() != 1:
		t.Errorf("%d units, want 1", c.Units())
	}
}
