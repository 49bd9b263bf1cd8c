package dev

import (
	"net/netip"
	"testing"
)

// A dual-stack cluster's Pods and node take the same host number in its
// IPv6 pod range as in its IPv4 one, inside the bridge's IPv6 prefix; a
// single-stack cluster has no IPv6 side.
func TestDualStackAddresses(t *testing.T) {
	bridge := netip.MustParsePrefix(bridgeAddressV6).Masked()
	for _, tc := range []struct {
		name      string
		c         ClusterState
		pod       string // the IPv4 address handed out
		wantPod   string // its IPv6 address ("" for none)
		wantNode  string
		nodePorts string
		wantErr   bool
	}{
		{
			name: "first cluster", pod: "10.244.0.131", wantPod: "fd00:10:244::83", wantNode: "fd00:10:244::fe",
			c:         ClusterState{Name: "hub", DualStack: true, PodCIDRs: []string{"10.244.0.0/24", "fd00:10:244::/64"}},
			nodePorts: `"10.244.0.254/32", "fd00:10:244::fe/128"`,
		},
		{
			name: "third cluster", pod: "10.244.2.253", wantPod: "fd00:10:244:2::fd", wantNode: "fd00:10:244:2::fe",
			c:         ClusterState{Name: "west", DualStack: true, PodCIDRs: []string{"10.244.2.0/24", "fd00:10:244:2::/64"}},
			nodePorts: `"10.244.2.254/32", "fd00:10:244:2::fe/128"`,
		},
		{
			name: "single-stack", pod: "10.244.1.128",
			c:         ClusterState{Name: "east", PodCIDRs: []string{"10.244.1.0/24"}},
			nodePorts: `"10.244.1.254/32"`,
		},
		{
			name: "dual-stack without an IPv6 range", pod: "10.244.1.128", wantErr: true,
			c: ClusterState{Name: "east", DualStack: true, PodCIDRs: []string{"10.244.1.0/24"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v6, err := podAddressV6(tc.c, netip.MustParseAddr(tc.pod))
			switch {
			case tc.wantErr:
				if err == nil {
					t.Fatalf("podAddressV6 = %s, want an error naming the missing range", v6)
				}
				return
			case !tc.c.DualStack:
				if node := tc.c.NodeAddressV6(); node.IsValid() {
					t.Errorf("NodeAddressV6 = %s, want none", node)
				}
			default:
				if err != nil || v6.String() != tc.wantPod {
					t.Errorf("podAddressV6 = %s, %v; want %s", v6, err, tc.wantPod)
				}
				if node := tc.c.NodeAddressV6(); node.String() != tc.wantNode || !bridge.Contains(node) || !bridge.Contains(v6) {
					t.Errorf("NodeAddressV6 = %s (pod %s), want %s, both in the bridge's %s", node, v6, tc.wantNode, bridge)
				}
			}
			if got := nodePortAddresses(tc.c); got != tc.nodePorts {
				t.Errorf("nodePortAddresses = %s, want %s", got, tc.nodePorts)
			}
		})
	}
}
