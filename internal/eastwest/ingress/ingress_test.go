package ingress_test

import (
	"slices"
	"testing"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/eastwest/ingress"
	"github.com/fleetnet/fleetnet/internal/eastwest/tunnel"
	"github.com/fleetnet/fleetnet/internal/registry/view"
)

// TestAuthorize is the rule table: who may reach which exported port.
func TestAuthorize(t *testing.T) {
	// Scopes as the registry writes them on the exports' statuses.
	everyone := view.StatusAudience(&registryv1.ExportStatus{ToEveryCluster: true})
	westOnly := view.StatusAudience(&registryv1.ExportStatus{ImportedBy: []string{"west"}})
	oldRegistry := view.StatusAudience(&registryv1.ExportStatus{}) // neither field: nobody
	table := ingress.NewTable([]ingress.Export{
		{Namespace: "demo", Name: "echo", Audience: everyone, Ports: map[int32][]string{80: {"10.244.1.5:8080", "10.244.1.6:8080"}, 443: {}}},
		{Namespace: "demo", Name: "db", Audience: westOnly, Ports: map[int32][]string{5432: {"10.244.1.7:5432"}}},
		{Namespace: "demo", Name: "legacy", Audience: oldRegistry, Ports: map[int32][]string{80: {"10.244.1.8:80"}}},
	})
	for _, tc := range []struct {
		caller    string
		target    tunnel.Target
		reason    string // "" when allowed
		status    int
		endpoints []string
	}{
		{caller: "west", target: tunnel.Target{Namespace: "demo", Name: "echo", Port: 80}, endpoints: []string{"10.244.1.5:8080", "10.244.1.6:8080"}},
		{caller: "hub", target: tunnel.Target{Namespace: "demo", Name: "echo", Port: 80}, endpoints: []string{"10.244.1.5:8080", "10.244.1.6:8080"}},
		{caller: "west", target: tunnel.Target{Namespace: "demo", Name: "db", Port: 5432}, endpoints: []string{"10.244.1.7:5432"}},
		{caller: "hub", target: tunnel.Target{Namespace: "demo", Name: "db", Port: 5432}, reason: tunnel.ReasonOutOfScope, status: 404},
		{caller: "west", target: tunnel.Target{Namespace: "demo", Name: "legacy", Port: 80}, reason: tunnel.ReasonOutOfScope, status: 404},
		{caller: "", target: tunnel.Target{Namespace: "demo", Name: "echo", Port: 80}, reason: tunnel.ReasonNotCluster, status: 403},
		{caller: "west", target: tunnel.Target{Namespace: "demo", Name: "echo", Port: 8080}, reason: tunnel.ReasonNotExported, status: 404},
		{caller: "west", target: tunnel.Target{Namespace: "other", Name: "echo", Port: 80}, reason: tunnel.ReasonNotExported, status: 404},
		{caller: "west", target: tunnel.Target{Namespace: "demo", Name: "echo", Port: 443}, reason: tunnel.ReasonNoEndpoint, status: 503},
	} {
		got, ref := table.Authorize(tc.caller, tc.target)
		if tc.reason != "" {
			if ref == nil || ref.Reason != tc.reason || ref.Status != tc.status || got != nil {
				t.Errorf("%q → %s: %v, %+v; want refused %d %s", tc.caller, tc.target, got, ref, tc.status, tc.reason)
			}
			continue
		}
		slices.Sort(got)
		if ref != nil || !slices.Equal(got, tc.endpoints) {
			t.Errorf("%q → %s: %v, %+v; want %v", tc.caller, tc.target, got, ref, tc.endpoints)
		}
	}
}

// Streams spread over the endpoints: each comes first about as often.
func TestAuthorizeSpreads(t *testing.T) {
	eps := []string{"a:1", "b:1", "c:1", "d:1"}
	table := ingress.NewTable([]ingress.Export{{Namespace: "demo", Name: "echo", Audience: view.Everyone(), Ports: map[int32][]string{80: eps}}})
	first := map[string]int{}
	const n = 4000
	for range n {
		got, _ := table.Authorize("west", tunnel.Target{Namespace: "demo", Name: "echo", Port: 80})
		if len(got) != len(eps) {
			t.Fatalf("%v: want every endpoint, to try in turn", got)
		}
		first[got[0]]++
	}
	for _, e := range eps {
		if c := first[e]; c < n/len(eps)*8/10 || c > n/len(eps)*12/10 {
			t.Errorf("%s first %d times of %d, want about %d", e, c, n, n/len(eps))
		}
	}
}

// A model's east-west section reads as the registry's statuses say, with
// ready endpoints alone.
func TestFromModel(t *testing.T) {
	table := ingress.FromModel(&edgev1.EastWest{Exports: []edgev1.EastWestExport{
		{Namespace: "demo", Name: "echo", ToEveryCluster: true, Ports: []edgev1.EastWestPort{{Port: 80, Endpoints: []edgev1.Endpoint{
			{Address: "10.244.1.5", Port: 8080, Ready: true, Serving: true},
			{Address: "10.244.1.6", Port: 8080, Ready: false, Serving: true}, // terminating
			{Address: "fd00::7", Port: 8080, Ready: true, Serving: true},
		}}}},
		{Namespace: "demo", Name: "db", ImportedBy: []string{"west"}, Ports: []edgev1.EastWestPort{{Port: 5432, Endpoints: []edgev1.Endpoint{{Address: "10.244.1.7", Port: 5432, Ready: true}}}}},
	}})
	got, ref := table.Authorize("hub", tunnel.Target{Namespace: "demo", Name: "echo", Port: 80})
	slices.Sort(got)
	if ref != nil || !slices.Equal(got, []string{"10.244.1.5:8080", "[fd00::7]:8080"}) {
		t.Errorf("echo for hub: %v, %+v", got, ref)
	}
	if _, ref := table.Authorize("hub", tunnel.Target{Namespace: "demo", Name: "db", Port: 5432}); ref == nil || ref.Reason != tunnel.ReasonOutOfScope {
		t.Errorf("db for hub: %+v, want out of scope", ref)
	}
	if got, ref := table.Authorize("west", tunnel.Target{Namespace: "demo", Name: "db", Port: 5432}); ref != nil || len(got) != 1 {
		t.Errorf("db for west: %v, %+v", got, ref)
	}
	if _, ref := ingress.FromModel(nil).Authorize("west", tunnel.Target{Namespace: "demo", Name: "db", Port: 5432}); ref == nil || ref.Reason != tunnel.ReasonNotExported {
		t.Errorf("no section: %+v, want not exported", ref)
	}
}
