package proxy

import (
	"encoding/json"
	"testing"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
)

// FuzzCompile compiles any model document the edge may decode (without
// certificates): it never panics, and an HTTPS port it accepts has a
// certificate.
func FuzzCompile(f *testing.F) {
	seed, _ := json.Marshal(edgev1.Model{Version: "v1", Gateways: []edgev1.Gateway{{Namespace: "demo", Name: "gw", Listeners: []edgev1.Listener{{Name: "http", Port: 80,
		Protocol: edgev1.ProtocolHTTP, VirtualHosts: []edgev1.VirtualHost{{Hostname: "*.example.com", Routes: []edgev1.Route{{RouteNamespace: "demo", RouteName: "r",
			Path: edgev1.PathMatch{Type: "RegularExpression", Value: "^/a(b+)$"}, Method: "GET",
			Headers:     []edgev1.ValueMatch{{Type: edgev1.MatchExact, Name: "x", Value: "y"}},
			QueryParams: []edgev1.ValueMatch{{Type: edgev1.MatchRegularExpression, Name: "q", Value: "[a-"}},
			Backends: []edgev1.Backend{{Kind: edgev1.KindServiceImport, Namespace: "demo", Name: "echo", Port: 80, Weight: 1,
				Clusters: []edgev1.ClusterEndpoints{{Cluster: "east", Weight: 1, EffectiveWeight: 1, Endpoints: []edgev1.Endpoint{{Address: "10.0.0.1", Port: 8080, Ready: true, Serving: true}}}},
				Policy:   edgev1.DefaultBackendPolicy()}}}}}}}}}}})
	f.Add(seed)
	f.Add([]byte(`{"gateways":[{"listeners":[{"port":443,"protocol":"HTTPS"},{"port":443,"protocol":"HTTP"}]}]}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		m := &edgev1.Model{}
		if json.Unmarshal(doc, m) != nil {
			return
		}
		tbl, err := compile(m, nil, "eu")
		if err != nil {
			return
		}
		for _, p := range tbl.ports {
			if p.tls && p.defaultCert == nil {
				t.Fatalf("HTTPS port %d accepted without a certificate", p.number)
			}
		}
	})
}
