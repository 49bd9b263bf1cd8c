package model

import (
	"net/netip"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// With an address pool every Gateway gets an address of its own, keeps the
// one its status holds, and older Gateways keep theirs over newer ones.
func TestGatewayAddresses(t *testing.T) {
	base := loadInput(t, "testdata/routing.yaml")
	var web gwv1.Gateway
	for _, gw := range base.Gateways {
		if gw.Name == "web" {
			web = gw
		}
	}
	type gateway struct {
		name   string
		age    time.Duration // created this long ago
		status string        // an address its status holds
	}
	tests := []struct {
		name     string
		pool     string
		gateways []gateway
		want     map[string]string // address by Gateway; "" for none
		problems []string          // Gateways told the pool is exhausted
	}{
		{"no pool: the edges' addresses", "", []gateway{{name: "a"}, {name: "b"}}, map[string]string{"a": "", "b": ""}, nil},
		{"the lowest free addresses, oldest first", "127.0.1.0/24", []gateway{{name: "young", age: time.Minute}, {name: "old", age: time.Hour}},
			map[string]string{"old": "127.0.1.1", "young": "127.0.1.2"}, nil},
		{"an address in status is kept", "127.0.1.0/24", []gateway{{name: "a", age: time.Hour}, {name: "b", age: time.Minute, status: "127.0.1.7"}},
			map[string]string{"a": "127.0.1.1", "b": "127.0.1.7"}, nil},
		{"the older holder wins a claimed address", "127.0.1.0/24", []gateway{{name: "copy", age: time.Minute, status: "127.0.1.1"}, {name: "holder", age: time.Hour, status: "127.0.1.1"}},
			map[string]string{"holder": "127.0.1.1", "copy": "127.0.1.2"}, nil},
		{"an address outside the pool is not kept", "127.0.1.0/24", []gateway{{name: "a", status: "10.0.0.1"}}, map[string]string{"a": "127.0.1.1"}, nil},
		{"exhausted: the newest is not served", "127.0.1.0/31", []gateway{{name: "a", age: time.Hour}, {name: "b", age: time.Minute}},
			map[string]string{"a": "127.0.1.1"}, []string{"b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base
			in.Gateways = nil
			for _, g := range tt.gateways {
				gw := web.DeepCopy()
				gw.Name = g.name
				gw.CreationTimestamp = metav1.NewTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Add(-g.age))
				if g.status != "" {
					gw.Status.Addresses = []gwv1.GatewayStatusAddress{{Value: g.status}}
				}
				in.Gateways = append(in.Gateways, *gw)
			}
			if tt.pool != "" {
				in.AddressPool = netip.MustParsePrefix(tt.pool)
			}
			res := Build(in)
			for name, want := range tt.want {
				g, ok := findGateway(res.Model, web.Namespace, name)
				if !ok {
					t.Errorf("%s is not in the model", name)
					continue
				}
				if g.Address != want {
					t.Errorf("%s at %q, want %q", name, g.Address, want)
				}
				for _, st := range res.Status.Gateways {
					if st.Name == name && (want == "" && st.Addresses != nil || want != "" && (len(st.Addresses) != 1 || st.Addresses[0] != want)) {
						t.Errorf("%s's status addresses %v, want %q", name, st.Addresses, want)
					}
				}
			}
			for _, name := range tt.problems {
				if _, ok := findGateway(res.Model, web.Namespace, name); ok {
					t.Errorf("%s is served without an address", name)
				}
				for _, st := range res.Status.Gateways {
					if st.Name == name && st.AddressProblem == "" {
						t.Errorf("%s's status says nothing of the exhausted pool", name)
					}
				}
			}
		})
	}
}
