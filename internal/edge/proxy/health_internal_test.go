package proxy

import (
	"reflect"
	"testing"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/edge/health"
)

func TestCompilePolicy(t *testing.T) {
	def := edgev1.DefaultBackendPolicy()
	defCheck := def.HealthCheck
	tests := []struct {
		name string
		in   edgev1.BackendPolicy
		want policy
	}{
		{"zero is the default", edgev1.BackendPolicy{}, policy{
			check: defCheck, consecutive5xx: 5, ejection: 10 * time.Second, attempts: 1,
			connect: time.Second, localFirst: false,
		}},
		{"partial: zero fields take the default's, zeros that mean something stay", edgev1.BackendPolicy{
			HealthCheck: edgev1.HealthCheck{Type: edgev1.HealthCheckHTTP, IntervalMillis: 2000},
			Locality:    edgev1.LocalityLocalFirst,
		}, policy{
			check:    edgev1.HealthCheck{Type: edgev1.HealthCheckHTTP, Path: "/", IntervalMillis: 2000, TimeoutMillis: 300, HealthyThreshold: 1, UnhealthyThreshold: 2},
			ejection: 10 * time.Second, connect: time.Second, localFirst: true,
		}},
		{"every field set", edgev1.BackendPolicy{
			Source:               "demo/p",
			HealthCheck:          edgev1.HealthCheck{Type: edgev1.HealthCheckHTTP, Path: "/healthz", Hostname: "h", IntervalMillis: 100, TimeoutMillis: 50, HealthyThreshold: 3, UnhealthyThreshold: 4},
			Passive:              edgev1.PassiveHealthCheck{Consecutive5xx: 7, EjectionMillis: 2000},
			Retry:                edgev1.Retry{Attempts: 3, Codes: []int32{502, 503}},
			ConnectTimeoutMillis: 250, BackendRequestMillis: 900, Locality: edgev1.LocalityWeighted,
		}, policy{
			check:          edgev1.HealthCheck{Type: edgev1.HealthCheckHTTP, Path: "/healthz", Hostname: "h", IntervalMillis: 100, TimeoutMillis: 50, HealthyThreshold: 3, UnhealthyThreshold: 4},
			consecutive5xx: 7, ejection: 2 * time.Second, attempts: 3, codes: []int32{502, 503},
			connect: 250 * time.Millisecond, backendRequest: 900 * time.Millisecond,
		}},
		{"a TCP check drops path and host; unknown type and locality fall back", edgev1.BackendPolicy{
			Source:      "demo/p",
			HealthCheck: edgev1.HealthCheck{Type: "GRPC", Path: "/x", Hostname: "h"},
			Locality:    "Nearest",
		}, policy{check: defCheck, ejection: 10 * time.Second, connect: time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := compilePolicy(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// A model swap keeps the state of the units it still has, starts new ones
// healthy and forgets the others; a backend with another check on the
// same endpoint has a unit of its own.
func TestTrackAcrossModels(t *testing.T) {
	h := health.New()
	h.Close() // no probes: the test sets the states
	set := h.NewSet()
	httpCheck := edgev1.DefaultBackendPolicy()
	httpCheck.HealthCheck.Type, httpCheck.HealthCheck.Path = edgev1.HealthCheckHTTP, "/healthz"
	ep := func(addr string) edgev1.Endpoint { return edgev1.Endpoint{Address: addr, Port: 80, Ready: true} }
	tableOf := func(addrs ...string) *table {
		var eps []edgev1.Endpoint
		for _, a := range addrs {
			eps = append(eps, ep(a))
		}
		clusters := []edgev1.ClusterEndpoints{{Cluster: "east", Weight: 1, EffectiveWeight: int64(len(eps)), Endpoints: eps}}
		tcp := edgev1.Backend{Kind: edgev1.KindServiceImport, Namespace: "d", Name: "tcp", Weight: 1, Clusters: clusters}
		checked := edgev1.Backend{Kind: edgev1.KindServiceImport, Namespace: "d", Name: "http", Weight: 1, Clusters: clusters, Policy: httpCheck}
		m := &edgev1.Model{Gateways: []edgev1.Gateway{{Listeners: []edgev1.Listener{{Port: 80, Protocol: edgev1.ProtocolHTTP, VirtualHosts: []edgev1.VirtualHost{{Hostname: "*", Routes: []edgev1.Route{
			{Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/tcp"}, Backends: []edgev1.Backend{tcp}},
			{Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/http"}, Backends: []edgev1.Backend{checked}},
		}}}}}}}}
		tb, err := compile(m, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		track(set, tb)
		return tb
	}
	// units returns the units of the /tcp and /http backends by address.
	units := func(tb *table) (tcp, checked map[string]*health.Target) {
		tcp, checked = map[string]*health.Target{}, map[string]*health.Target{}
		for b := range tb.backends() {
			into := checked
			if b.Name == "tcp" {
				into = tcp
			}
			for _, e := range b.clusters[0].ready {
				into[e.Address] = e.health
			}
		}
		return tcp, checked
	}

	tcp1, http1 := units(tableOf("10.0.0.1", "10.0.0.2"))
	if h.Units() != 4 || tcp1["10.0.0.1"] == http1["10.0.0.1"] {
		t.Fatalf("%d units, want one per endpoint and check", h.Units())
	}
	http1["10.0.0.1"].Eject(time.Time{})
	tcp2, http2 := units(tableOf("10.0.0.1", "10.0.0.3"))
	switch {
	case http2["10.0.0.1"] != http1["10.0.0.1"] || http2["10.0.0.1"].Healthy():
		t.Errorf("10.0.0.1's HTTP check lost its state across the swap")
	case tcp2["10.0.0.1"] != tcp1["10.0.0.1"] || !tcp2["10.0.0.1"].Healthy():
		t.Errorf("10.0.0.1's TCP check changed with the HTTP one")
	case !tcp2["10.0.0.3"].Healthy() || !http2["10.0.0.3"].Healthy():
		t.Errorf("a new endpoint does not start healthy")
	case h.Units() != 4:
		t.Errorf("%d units, want 4 (10.0.0.2's forgotten)", h.Units())
	}
}
