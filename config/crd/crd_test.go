package crd

import (
	"io/fs"
	"testing"
)

// TestHubAppliesEachCRDOnce: the hub's list (All, then GatewayCluster)
// names every CRD file of the package exactly once, so that fleet init
// and the local fleet apply each once and count them right; a member's
// (All) has BackendTrafficPolicy, which GatewayCluster then leaves out.
func TestHubAppliesEachCRDOnce(t *testing.T) {
	hub, err := Hub()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, c := range hub {
		seen[c.Name]++
	}
	for name, n := range seen {
		if n != 1 {
			t.Errorf("the hub applies %s %d times, want once", name, n)
		}
	}
	var names []string
	for _, pattern := range []string{"*.yaml", "gateway-api/*.yaml", "networking/*.yaml"} {
		more, err := fs.Glob(files, pattern)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, more...)
	}
	if len(hub) != len(names) {
		t.Errorf("the hub applies %d CRDs, the package holds %d files", len(hub), len(names))
	}
	member, err := All()
	if err != nil {
		t.Fatal(err)
	}
	const policy = "backendtrafficpolicies.networking.fleetnet.dev"
	found := false
	for _, c := range member {
		found = found || c.Name == policy
	}
	if !found {
		t.Errorf("All lacks %s, which every member's agent reads", policy)
	}
}
