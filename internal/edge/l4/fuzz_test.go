package l4

import (
	"encoding/json"
	"testing"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
)

// FuzzCompile compiles any model document the edge may decode: it never
// panics, and what it accepts holds only ports in range.
func FuzzCompile(f *testing.F) {
	seed, _ := json.Marshal(edgev1.Model{Version: "v1", LoadBalancers: []edgev1.LoadBalancer{{Namespace: "demo", Name: "db", Class: "edge",
		Ports: []edgev1.LoadBalancerPort{{Port: 5432, TargetPort: 5432, Protocol: edgev1.ProtocolTCP, Clusters: []edgev1.ClusterEndpoints{{Cluster: "east", Weight: 1,
			Endpoints: []edgev1.Endpoint{{Address: "10.0.0.1", Port: 5432, Ready: true, Serving: true}}}}}, {Port: 53, Protocol: edgev1.ProtocolUDP}}}}})
	f.Add(seed)
	f.Add([]byte(`{"loadBalancers":[{"ports":[{"port":0,"protocol":"SCTP"},{"port":99999,"protocol":"TCP"}]}]}`))
	met := newMetrics(nil, func() *table { return nil }, func() int64 { return 0 })
	f.Fuzz(func(t *testing.T, doc []byte) {
		m := &edgev1.Model{}
		if json.Unmarshal(doc, m) != nil {
			return
		}
		tbl, _, err := compile(m, met)
		if err != nil {
			return
		}
		for k := range tbl.services {
			if k.port < 1 || k.port > 65535 {
				t.Fatalf("accepted port %d", k.port)
			}
		}
	})
}
