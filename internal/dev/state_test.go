package dev

import (
	"fmt"
	"slices"
	"testing"
)

// Every port of a fleet is used once and lies in the range the fleet says
// it uses, with and without HA.
func TestPortsAreDistinctAndInRange(t *testing.T) {
	for _, ha := range []bool{false, true} {
		for _, clusters := range [][]string{{"hub"}, {"hub", "east", "west"}} {
			t.Run(fmt.Sprintf("ha=%t/%d clusters", ha, len(clusters)), func(t *testing.T) {
				s := newState("/fleet", Options{Clusters: clusters, BasePort: 20000, HA: ha, Nodes: true})
				seen := map[int]string{}
				for _, p := range s.ports() {
					if other, ok := seen[p.port]; ok {
						t.Errorf("port %d is %s's and %s's", p.port, other, p)
					}
					seen[p.port] = p.String()
					if p.port < s.BasePort || p.port > s.lastPort() {
						t.Errorf("port %d of %s outside %d–%d", p.port, p, s.BasePort, s.lastPort())
					}
					if !slices.Contains(s.Components(), p.component) {
						t.Errorf("port %d belongs to %q, not a component of the fleet", p.port, p.component)
					}
				}
				wantEtcd, wantRegistry := 1, 1
				if ha {
					wantEtcd, wantRegistry = 3, 2
				}
				if got := s.EtcdMembers(); len(got) != wantEtcd || got[0] != ComponentEtcd {
					t.Errorf("etcd members %v, want %d starting with %q", got, wantEtcd, ComponentEtcd)
				}
				if got := s.RegistryReplicas(); len(got) != wantRegistry || got[0] != ComponentRegistry {
					t.Errorf("registry replicas %v, want %d starting with %q", got, wantRegistry, ComponentRegistry)
				}
				for _, r := range s.RegistryReplicas() {
					if s.MetricsAddresses()[r] == "" {
						t.Errorf("no metrics address for %s", r)
					}
				}
			})
		}
	}
}
