package edgev1

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// FuzzDecodeModel decodes any document an edge may be sent: it never
// panics, and a model it accepts encodes and decodes to the same model
// (testdata/fuzz holds the inputs fuzzing found).
func FuzzDecodeModel(f *testing.F) {
	seed, _ := json.Marshal(Model{Version: "v1", Gateways: []Gateway{{Namespace: "demo", Name: "gw", Listeners: []Listener{{Name: "http", Port: 80,
		Protocol: ProtocolHTTP, VirtualHosts: []VirtualHost{{Hostname: "*", Routes: []Route{{RouteNamespace: "demo", RouteName: "r",
			Path: PathMatch{Type: PathPrefix, Value: "/"}, Backends: []Backend{{Kind: KindServiceImport, Namespace: "demo", Name: "echo", Port: 80, Weight: 1,
				Clusters: []ClusterEndpoints{{Cluster: "east", Weight: 1, EffectiveWeight: 1, Endpoints: []Endpoint{{Address: "10.0.0.1", Port: 8080, Ready: true, Serving: true}}}},
				Policy:   DefaultBackendPolicy()}}}}}}}}}},
		LoadBalancers: []LoadBalancer{{Namespace: "demo", Name: "db", Class: "edge", Ports: []LoadBalancerPort{{Port: 5432, TargetPort: 5432, Protocol: ProtocolTCP}}}}})
	f.Add(seed)
	f.Add([]byte(`{"version":"x","gateways":null}`))
	f.Add([]byte(`{"gateways":[{"listeners":[{"port":-1,"certificates":[{"digest":"d"}]}]}],"loadBalancers":[{"ports":[{"port":70000}]}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		m, _, err := DecodeModel(&ModelUpdate{ContentType: ModelContentType, Model: doc})
		if err != nil {
			return
		}
		again, _, err := EncodeModel(m)
		if err != nil {
			t.Fatalf("an accepted model does not encode: %v", err)
		}
		m2, _, err := DecodeModel(&ModelUpdate{ContentType: ModelContentType, Model: again})
		if err != nil {
			t.Fatalf("its encoding does not decode: %v", err)
		}
		// An empty list and none are the same model (omitempty drops both).
		if d := cmp.Diff(m, m2, cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("round trip changed the model (-first +second):\n%s", d)
		}
	})
}
