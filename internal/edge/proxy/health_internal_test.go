package proxy

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/gateway/model"
)

func TestCompilePolicy(t *testing.T) {
	def := model.DefaultBackendPolicy()
	defCheck := def.HealthCheck
	tests := []struct {
		name string
		in   model.BackendPolicy
		want policy
	}{
		{"zero is the default", model.BackendPolicy{}, policy{
			check: defCheck, consecutive5xx: 5, ejection: 10 * time.Second, attempts: 1,
			connect: time.Second, localFirst: false,
		}},
		{"partial: zero fields take the default's, zeros that mean something stay", model.BackendPolicy{
			HealthCheck: model.HealthCheck{Type: model.HealthCheckHTTP, IntervalMillis: 2000},
			Locality:    model.LocalityLocalFirst,
		}, policy{
			check:    model.HealthCheck{Type: model.HealthCheckHTTP, Path: "/", IntervalMillis: 2000, TimeoutMillis: 300, HealthyThreshold: 1, UnhealthyThreshold: 2},
			ejection: 10 * time.Second, connect: time.Second, localFirst: true,
		}},
		{"every field set", model.BackendPolicy{
			Source:               "demo/p",
			HealthCheck:          model.HealthCheck{Type: model.HealthCheckHTTP, Path: "/healthz", Hostname: "h", IntervalMillis: 100, TimeoutMillis: 50, HealthyThreshold: 3, UnhealthyThreshold: 4},
			Passive:              model.PassiveHealthCheck{Consecutive5xx: 7, EjectionMillis: 2000},
			Retry:                model.Retry{Attempts: 3, Codes: []int32{502, 503}},
			ConnectTimeoutMillis: 250, BackendRequestMillis: 900, Locality: model.LocalityWeighted,
		}, policy{
			check:          model.HealthCheck{Type: model.HealthCheckHTTP, Path: "/healthz", Hostname: "h", IntervalMillis: 100, TimeoutMillis: 50, HealthyThreshold: 3, UnhealthyThreshold: 4},
			consecutive5xx: 7, ejection: 2 * time.Second, attempts: 3, codes: []int32{502, 503},
			connect: 250 * time.Millisecond, backendRequest: 900 * time.Millisecond,
		}},
		{"a TCP check drops path and host; unknown type and locality fall back", model.BackendPolicy{
			Source:      "demo/p",
			HealthCheck: model.HealthCheck{Type: "GRPC", Path: "/x", Hostname: "h"},
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

// The health of a unit through a script of active check results and
// passive events, with HealthyThreshold 2 and UnhealthyThreshold 2.
func TestTargetStates(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type step struct {
		at  time.Duration // since t0
		do  string        // ok, fail, connect (failed to connect), 5xx, 2xx
		up  bool          // healthy after the step
		why string
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"active check out and back", []step{
			{0, "fail", true, "one failure is not enough"},
			{1, "ok", true, "a success resets the failures"},
			{2, "fail", true, ""},
			{3, "fail", false, "two in a row"},
			{4, "ok", false, "one success is not enough"},
			{5, "ok", true, "two in a row"},
		}},
		{"a failed connection ejects at once; successes after it bring back", []step{
			{0, "ok", true, ""},
			{1, "connect", false, ""},
			{2, "ok", false, ""},
			{3, "ok", true, ""},
		}},
		{"5xx in a row eject for the ejection time", []step{
			{0, "5xx", true, ""},
			{0, "2xx", true, "an answer below 500 resets the count"},
			{0, "5xx", true, ""},
			{0, "5xx", true, ""},
			{0, "5xx", false, "three in a row"},
			{5 * time.Second, "ok", false, "within the ejection time"},
			{9 * time.Second, "ok", false, ""},
			{10 * time.Second, "ok", false, "the first success after it"},
			{11 * time.Second, "ok", true, "the second"},
		}},
	}
	p := &policy{consecutive5xx: 3, ejection: 10 * time.Second}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg := &target{key: checkKey{check: model.HealthCheck{HealthyThreshold: 2, UnhealthyThreshold: 2}}, wake: make(chan struct{}, 1)}
			for i, s := range tt.steps {
				now := t0.Add(s.at)
				switch s.do {
				case "ok", "fail":
					tg.observe(s.do == "ok", now)
				case "connect":
					tg.failedToConnect()
				case "5xx", "2xx":
					tg.answered(s.do == "5xx", p, func() time.Time { return now })
				}
				if tg.healthy() != s.up {
					t.Errorf("step %d (%s at %s, %s): healthy %v, want %v", i, s.do, s.at, s.why, tg.healthy(), s.up)
				}
			}
		})
	}
}

// The pick's rules, on a backend whose clusters each have one endpoint,
// with the health and tries each case sets.
func TestPickRules(t *testing.T) {
	tests := []struct {
		name       string
		localFirst bool
		down       []string // clusters whose endpoint is ejected
		tried      []string
		last       string // the cluster of the attempt before
		want       []string
	}{
		{"weighted over every cluster", false, nil, nil, "", []string{"eu1", "eu2", "us"}},
		{"local first: the region's clusters", true, nil, nil, "", []string{"eu1", "eu2"}},
		{"local first: the others when the region's are out", true, []string{"eu1", "eu2"}, nil, "", []string{"us"}},
		{"local first: a retry goes to a local cluster not tried", true, nil, []string{"eu1"}, "eu1", []string{"eu2"}},
		{"local first: then to the others", true, nil, []string{"eu1", "eu2"}, "eu2", []string{"us"}},
		{"a retry avoids tried clusters", false, nil, []string{"eu1", "us"}, "us", []string{"eu2"}},
		{"every cluster tried: another healthy endpoint", false, nil, []string{"eu1", "eu2", "us"}, "us", []string{"eu1", "eu2"}},
		{"every endpoint out: any ready one", false, []string{"eu1", "eu2", "us"}, nil, "", []string{"eu1", "eu2", "us"}},
		{"every endpoint out, a retry: any ready one but the last", false, []string{"eu1", "eu2", "us"}, []string{"us"}, "us", []string{"eu1", "eu2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &backend{policy: policy{localFirst: tt.localFirst}}
			var tried uint64
			var last *endpoint
			for i, name := range []string{"eu1", "eu2", "us"} {
				c := &cluster{ClusterEndpoints: model.ClusterEndpoints{Cluster: name, Weight: 1}, bit: 1 << i, local: name != "us"}
				c.ready = []endpoint{{health: &target{}}}
				c.ready[0].health.down.Store(slices.Contains(tt.down, name))
				if slices.Contains(tt.tried, name) {
					tried |= c.bit
				}
				if tt.last == name {
					last = &c.ready[0]
				}
				b.clusters = append(b.clusters, c)
			}
			seen := map[string]bool{}
			for range 200 {
				c, _ := b.pick(tried, last)
				if c == nil {
					t.Fatal("nothing picked")
				}
				seen[c.Cluster] = true
			}
			for _, w := range tt.want {
				if !seen[w] {
					t.Errorf("never picked %s (picked %v)", w, seen)
				}
				delete(seen, w)
			}
			if len(seen) > 0 {
				t.Errorf("picked %v too, want only %v", seen, tt.want)
			}
		})
	}
}

// A model swap keeps the state of the units it still has, starts new ones
// healthy and forgets the others; a backend with another check on the
// same endpoint has a unit of its own.
func TestTrackAcrossModels(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no probes: the test sets the states
	h := newHealth(ctx)
	httpCheck := model.DefaultBackendPolicy()
	httpCheck.HealthCheck.Type, httpCheck.HealthCheck.Path = model.HealthCheckHTTP, "/healthz"
	ep := func(addr string) model.Endpoint { return model.Endpoint{Address: addr, Port: 80, Ready: true} }
	tableOf := func(addrs ...string) *table {
		var eps []model.Endpoint
		for _, a := range addrs {
			eps = append(eps, ep(a))
		}
		clusters := []model.ClusterEndpoints{{Cluster: "east", Weight: 1, EffectiveWeight: int64(len(eps)), Endpoints: eps}}
		tcp := model.Backend{Kind: model.KindServiceImport, Namespace: "d", Name: "tcp", Weight: 1, Clusters: clusters}
		checked := model.Backend{Kind: model.KindServiceImport, Namespace: "d", Name: "http", Weight: 1, Clusters: clusters, Policy: httpCheck}
		m := &model.Model{Gateways: []model.Gateway{{Listeners: []model.Listener{{Port: 80, Protocol: model.ProtocolHTTP, VirtualHosts: []model.VirtualHost{{Hostname: "*", Routes: []model.Route{
			{Path: model.PathMatch{Type: model.PathPrefix, Value: "/tcp"}, Backends: []model.Backend{tcp}},
			{Path: model.PathMatch{Type: model.PathPrefix, Value: "/http"}, Backends: []model.Backend{checked}},
		}}}}}}}}
		tb, err := compile(m, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		h.track(tb)
		return tb
	}
	// units returns the units of the /tcp and /http backends by address.
	units := func(tb *table) (tcp, checked map[string]*target) {
		tcp, checked = map[string]*target{}, map[string]*target{}
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
	if len(h.targets) != 4 || tcp1["10.0.0.1"] == http1["10.0.0.1"] {
		t.Fatalf("%d units, want one per endpoint and check", len(h.targets))
	}
	http1["10.0.0.1"].eject(time.Time{})
	tcp2, http2 := units(tableOf("10.0.0.1", "10.0.0.3"))
	switch {
	case http2["10.0.0.1"] != http1["10.0.0.1"] || http2["10.0.0.1"].healthy():
		t.Errorf("10.0.0.1's HTTP check lost its state across the swap")
	case tcp2["10.0.0.1"] != tcp1["10.0.0.1"] || !tcp2["10.0.0.1"].healthy():
		t.Errorf("10.0.0.1's TCP check changed with the HTTP one")
	case !tcp2["10.0.0.3"].healthy() || !http2["10.0.0.3"].healthy():
		t.Errorf("a new endpoint does not start healthy")
	case len(h.targets) != 4:
		t.Errorf("%d units, want 4 (10.0.0.2's forgotten)", len(h.targets))
	}
}
