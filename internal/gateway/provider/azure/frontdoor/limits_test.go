package frontdoor

import (
	"context"
	"fmt"
	"strings"
	"testing"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/azure/armsim"
)

// sized is an HTTPS Gateway web/<name> with routes path matches on
// app.example.com, hosts more hostnames (one route each), a route
// setting headers request headers (five actions to a rule), and its
// first backend on clusters extra clusters besides east.
func (h *harness) sized(name, class string, routes, hosts, headers, clusters int) edgev1.Gateway {
	h.t.Helper()
	cs := []edgev1.ClusterEndpoints{h.cluster("east", 1)}
	for i := 0; i < clusters; i++ {
		c := fmt.Sprintf("c%d", i)
		if h.frontends[c] == "" {
			ids, err := h.sim.SeedRegionalLoadBalancer(sub, memberRG+"-"+c, "kubernetes", "eastus", armsim.RegionalFrontend{Name: "web", TCP: []int32{80}})
			if err != nil {
				h.t.Fatal(err)
			}
			h.frontends[c] = ids[0]
		}
		cs = append(cs, h.cluster(c, 1))
	}
	vhs := []edgev1.VirtualHost{{Hostname: "app.example.com"}}
	for i := 0; i < routes; i++ {
		vhs[0].Routes = append(vhs[0].Routes, route("r", i, fmt.Sprintf("/p%d", i), backend("api", 1, cs...)))
	}
	if headers > 0 {
		r := route("hdr", 0, "/hdr", backend("api", 1, cs...))
		hm := &edgev1.HeaderModifier{}
		for i := 0; i < headers; i++ {
			hm.Set = append(hm.Set, edgev1.Header{Name: fmt.Sprintf("x-h%d", i), Value: "v"})
		}
		r.Filters = []edgev1.Filter{{Type: edgev1.FilterRequestHeaderModifier, RequestHeaderModifier: hm}}
		vhs[0].Routes = append(vhs[0].Routes, r)
	}
	for i := 0; i < hosts; i++ {
		vhs = append(vhs, edgev1.VirtualHost{Hostname: fmt.Sprintf("h%d.example.com", i), Routes: []edgev1.Route{route("h", i, "/", backend("api", 1, cs...))}})
	}
	return edgev1.Gateway{Namespace: "web", Name: name, Generation: 1, Class: class, UID: "uid-" + name,
		Listeners: []edgev1.Listener{{Name: "https", Port: 443, Protocol: edgev1.ProtocolHTTPS, VirtualHosts: vhs}}}
}

// A Gateway whose graph would take its profile past a limit of its tier
// is not deployed: Programmed=False with reason AzureLimitExceeded naming
// the limit, the tier, the count and the maximum, one Warning event, and
// no write to Azure for it; another Gateway of the same model deploys.
// Without the check, the simulation refuses the create past the limit
// (400 ResourceQuotaExceeded) after part of the graph is written.
func TestLimitsCheckedBeforeDeploying(t *testing.T) {
	for _, tc := range []struct {
		name                             string
		class                            string
		routes, hosts, headers, clusters int
		want                             string // "" when it fits
	}{
		{name: "routes Standard", class: "afd-standard", routes: 101,
			want: "routes: the Gateway needs 101 on profile %s (Standard), the limit is 100"},
		{name: "routes Premium fit", class: "afd-premium", routes: 101},
		{name: "custom domains Standard", class: "afd-standard", routes: 1, hosts: 100,
			want: "custom domains: the Gateway needs 101 on profile %s (Standard), the limit is 100"},
		{name: "rules per rule set", class: "afd-premium", routes: 1, headers: 501,
			want: "rules per rule set: the Gateway needs 101 in rule set "},
		{name: "origins per origin group", class: "afd-premium", routes: 1, clusters: 50,
			want: "origins per origin group: the Gateway needs 51 in origin group "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, skip := range []bool{false, true} {
				if skip && tc.want == "" {
					continue
				}
				h := newHarness(t, armsim.Options{})
				p := h.provider()
				p.skipLimits = skip
				big := h.sized("big", tc.class, tc.routes, tc.hosts, tc.headers, tc.clusters)
				small := h.sized("small", tc.class, 1, 0, 0, 0)
				small.Listeners[0].VirtualHosts[0].Hostname = "small.example.com"
				bigProfile := profileName(owner, "web", "big")
				_ = p.Deploy(context.Background(), modelOf("v1", big, small))

				if g := p.Gateways()["web/small"]; g.Reason != "" {
					t.Errorf("web/small: reason %q message %q", g.Reason, g.Message)
				}
				g := p.Gateways()["web/big"]
				if tc.want == "" {
					if g.Reason != "" || len(h.sim.Resources(armsim.TypeRoute)) != tc.routes+1 {
						t.Errorf("fitting Gateway: reason %q message %q, %d routes", g.Reason, g.Message, len(h.sim.Resources(armsim.TypeRoute)))
					}
					continue
				}
				wrote := false
				for _, w := range h.sim.Writes() {
					wrote = wrote || strings.Contains(w.ID, "/profiles/"+bigProfile)
				}
				if skip {
					// What Azure answers without the check.
					if g.Reason != keys.ReasonAzureRequestFailed || !strings.Contains(g.Message, "400 ResourceQuotaExceeded") || !wrote {
						t.Errorf("unchecked: reason %q message %q wrote %v", g.Reason, g.Message, wrote)
					}
					continue
				}
				want := tc.want
				if strings.Contains(want, "%s") {
					want = fmt.Sprintf(want, bigProfile)
				}
				if g.Served || g.Reason != keys.ReasonAzureLimitExceeded || !strings.Contains(g.Message, want) {
					t.Errorf("reason %q message %q, want %s with %q", g.Reason, g.Message, keys.ReasonAzureLimitExceeded, want)
				}
				if wrote {
					t.Error("the Gateway over a limit was written to Azure")
				}
				var evs []string
				for _, e := range h.eventList() {
					if strings.HasPrefix(e, "web/big ") {
						evs = append(evs, e)
					}
				}
				if len(evs) != 1 || !strings.HasPrefix(evs[0], "web/big "+keys.ReasonAzureLimitExceeded+" ") || !strings.Contains(evs[0], want) {
					t.Errorf("events %v", evs)
				}
			}
		})
	}
}
