package frontdoor

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/cdn/armcdn/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/frontdoor/armfrontdoor"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/azure/armsim"
	"github.com/fleetnet/fleetnet/internal/azure/armutil"

	"github.com/fleetnet/fleetnet/internal/gateway/provider/azure/frontdoor/annotations"
)

var testTarget = target{subscription: sub, resourceGroup: rg, owner: owner}

func planGateway(routes ...edgev1.Route) edgev1.Gateway {
	return edgev1.Gateway{Namespace: "web", Name: "public", Listeners: []edgev1.Listener{{Name: "http", Port: 80, Protocol: edgev1.ProtocolHTTP,
		VirtualHosts: []edgev1.VirtualHost{{Hostname: "*", Routes: routes}}}}}
}

var planOrigins = map[string]Origin{"fe-east": {Host: "203.0.113.1"}, "fe-west": {Host: "203.0.113.2"}, "fe-bad": {Problem: "reading load balancer kubernetes: 404 ResourceNotFound"}}

func planBackend(name string, weight int32, clusters map[string]int32) edgev1.Backend {
	b := edgev1.Backend{Kind: edgev1.KindServiceImport, Namespace: "web", Name: name, Port: 8080, Weight: weight, Policy: edgev1.DefaultBackendPolicy()}
	for _, c := range []string{"east", "west", "bad"} {
		if w, ok := clusters[c]; ok {
			b.Clusters = append(b.Clusters, edgev1.ClusterEndpoints{Cluster: c, Weight: w, RegionalFrontend: "fe-" + c})
		}
	}
	return b
}

// What Front Door cannot express is refused per route match, naming the
// feature; the rest is planned.
func TestPlanRefusals(t *testing.T) {
	api := planBackend("api", 1, map[string]int32{"east": 1})
	with := func(f func(*edgev1.Route)) edgev1.Route {
		r := route("r", 0, "/x", api)
		f(&r)
		return r
	}
	tests := []struct {
		name  string
		route edgev1.Route
		want  string // "" when it is served
	}{
		{"plain", route("r", 0, "/x", api), ""},
		{"header match", with(func(r *edgev1.Route) {
			r.Headers = []edgev1.ValueMatch{{Type: edgev1.MatchExact, Name: "x-canary", Value: "1"}}
		}), "header matches (x-canary) are not expressible"},
		{"query match", with(func(r *edgev1.Route) {
			r.QueryParams = []edgev1.ValueMatch{{Type: edgev1.MatchExact, Name: "v", Value: "2"}}
		}), "query parameter matches (v)"},
		{"method", with(func(r *edgev1.Route) { r.Method = "POST" }), "the method match POST is not expressible"},
		{"direct response", with(func(r *edgev1.Route) {
			r.Backends = nil
			r.DirectResponse = &edgev1.DirectResponse{Status: 500, Reason: "no backends"}
		}), "a direct response (500, no backends)"},
		{"timeouts", with(func(r *edgev1.Route) { r.Timeouts.RequestMillis = 5000 }), "timeouts are not expressible per route"},
		{"backend filter", with(func(r *edgev1.Route) {
			b := api
			b.Filters = []edgev1.Filter{{Type: edgev1.FilterRequestHeaderModifier, RequestHeaderModifier: &edgev1.HeaderModifier{}}}
			r.Backends = []edgev1.Backend{b}
		}), "filters of backendRef web/api are not expressible"},
		{"redirect port", with(func(r *edgev1.Route) {
			r.Backends = nil
			r.Filters = []edgev1.Filter{{Type: edgev1.FilterRequestRedirect, RequestRedirect: &edgev1.Redirect{Hostname: "x.example.com", Port: 8443, StatusCode: 302}}}
		}), "a redirect to port 8443 is not expressible"},
		{"redirect prefix", with(func(r *edgev1.Route) {
			r.Filters = []edgev1.Filter{{Type: edgev1.FilterRequestRedirect, RequestRedirect: &edgev1.Redirect{Path: &edgev1.PathModifier{Type: edgev1.PathReplacePrefix, Value: "/y"}, StatusCode: 302}}}
		}), "a redirect replacing the path prefix is not expressible"},
		{"hostname rewrite", with(func(r *edgev1.Route) {
			r.Filters = []edgev1.Filter{{Type: edgev1.FilterURLRewrite, URLRewrite: &edgev1.Rewrite{Hostname: "internal.example.com"}}}
		}), "a hostname rewrite (internal.example.com) is not expressible per route"},
		{"no origin", route("r", 0, "/x", planBackend("api", 1, map[string]int32{"bad": 1})), "no cluster of its backends has a Front Door origin: cluster bad: reading load balancer kubernetes: 404 ResourceNotFound"},
		{"invalid backends", with(func(r *edgev1.Route) {
			b := api
			b.Invalid = &edgev1.Invalid{Reason: "BackendNotFound", Message: "no such service"}
			r.Backends = []edgev1.Backend{b}
		}), "none of its backends resolves"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := planFor(testTarget, planGateway(tt.route), annotations.Defaults(annotations.SKUStandard), planOrigins)
			if tt.want == "" {
				if len(g.refused) != 0 || len(g.routes) != 1 {
					t.Fatalf("refused %v, routes %d", g.refused, len(g.routes))
				}
				return
			}
			if len(g.refused) != 1 || !strings.Contains(g.refused[0].Reason, tt.want) || len(g.routes) != 0 {
				t.Fatalf("refused %v (routes %d), want one refusal containing %q", g.refused, len(g.routes), tt.want)
			}
			if r := g.refused[0]; r.RouteName != "r" || !strings.HasPrefix(r.String(), "HTTPRoute web/r rule 0 match 0: ") {
				t.Errorf("refusal %s", r)
			}
		})
	}
}

// Patterns, precedence, weights, rules and the security policy.
func TestPlanGraph(t *testing.T) {
	api := planBackend("api", 1, map[string]int32{"east": 1, "west": 3})
	canary := planBackend("canary", 0, map[string]int32{"east": 1})
	exact := route("exact", 0, "/api", api)
	exact.Path.Type = edgev1.PathExact
	headers := route("site", 0, "/", planBackend("site", 1, map[string]int32{"east": 1}))
	headers.Filters = []edgev1.Filter{
		{Type: edgev1.FilterRequestHeaderModifier, RequestHeaderModifier: &edgev1.HeaderModifier{Set: []edgev1.Header{{Name: "a", Value: "1"}}, Add: []edgev1.Header{{Name: "b", Value: "2"}}, Remove: []string{"c", "d", "e"}}},
		{Type: edgev1.FilterURLRewrite, URLRewrite: &edgev1.Rewrite{Path: &edgev1.PathModifier{Type: edgev1.PathReplacePrefix, Value: "/v2"}}},
	}
	gw := planGateway(exact, route("prefix", 0, "/api/", api, canary), headers, route("shadowed", 0, "/api", api))
	gw.Listeners = append(gw.Listeners, edgev1.Listener{Name: "alt", Port: 8080, Protocol: edgev1.ProtocolHTTP},
		edgev1.Listener{Name: "wild", Port: 443, Protocol: edgev1.ProtocolHTTPS, VirtualHosts: []edgev1.VirtualHost{{Hostname: "*.example.com"}}})
	s := annotations.Defaults(annotations.SKUPremium)
	s.WAFPolicyID = "/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/FrontDoorWebApplicationFirewallPolicies/waf"
	s.OriginHostHeader = "app.example.com"
	g := planFor(testTarget, gw, s, planOrigins)

	var got []string
	for _, r := range g.routes {
		var pats []string
		for _, p := range r.v.Properties.PatternsToMatch {
			pats = append(pats, *p)
		}
		got = append(got, fmt.Sprintf("%s %v rules=%d", r.label, pats, len(r.v.Properties.RuleSets)))
	}
	want := []string{
		"web/exact rule 0 on the endpoint's domain [/api] rules=0",
		"web/prefix rule 0 on the endpoint's domain [/api/*] rules=0",
		"web/site rule 0 on the endpoint's domain [/*] rules=1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("routes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(g.refused) != 1 || g.refused[0].RouteName != "shadowed" || !strings.Contains(g.refused[0].Reason, "already served by Front Door route fn-prefix-") {
		t.Errorf("refused %v", g.refused)
	}
	// Origin groups: api (east 1, west 3); api+canary (canary weight 0
	// disabled).
	var groups []string
	for _, og := range g.groups {
		var os []string
		for _, o := range og.origins {
			os = append(os, fmt.Sprintf("%s=%d/%s/%s", armutil.Deref(o.v.Properties.HostName), armutil.Deref(o.v.Properties.Weight), armutil.Deref(o.v.Properties.EnabledState), armutil.Deref(o.v.Properties.OriginHostHeader)))
		}
		groups = append(groups, og.label+" "+strings.Join(os, ","))
	}
	wantGroups := []string{
		"web/api:8080 203.0.113.1=1/Enabled/app.example.com,203.0.113.2=3/Enabled/app.example.com",
		"web/api:8080+web/canary:8080 203.0.113.1=1/Enabled/app.example.com,203.0.113.2=3/Enabled/app.example.com,203.0.113.1=1/Disabled/app.example.com",
		"web/site:8080 203.0.113.1=1/Enabled/app.example.com",
	}
	if strings.Join(groups, "\n") != strings.Join(wantGroups, "\n") {
		t.Errorf("groups:\n%s\nwant:\n%s", strings.Join(groups, "\n"), strings.Join(wantGroups, "\n"))
	}
	// Header modifier (5 actions) and rewrite (1): two rules of at most
	// five actions.
	if len(g.ruleSets) != 1 || len(g.ruleSets[0].rules) != 2 || len(g.ruleSets[0].rules[0].v.Properties.Actions) != 5 {
		t.Fatalf("rule sets %+v", g.ruleSets)
	}
	rw, ok := g.ruleSets[0].rules[1].v.Properties.Actions[0].(*armcdn.URLRewriteAction)
	if !ok || armutil.Deref(rw.Parameters.SourcePattern) != "/" || armutil.Deref(rw.Parameters.Destination) != "/v2" || !armutil.Deref(rw.Parameters.PreserveUnmatchedPath) {
		t.Errorf("rewrite %+v", g.ruleSets[0].rules[1].v.Properties.Actions[0])
	}
	notes := strings.Join(g.notes, "; ")
	for _, n := range []string{"listener alt on port 8080 is not served", "hostname *.example.com of listener wild is not served"} {
		if !strings.Contains(notes, n) {
			t.Errorf("notes %q lack %q", notes, n)
		}
	}
	if g.security == nil || len(g.security.v.Properties.Parameters.(*armcdn.SecurityPolicyWebApplicationFirewallParameters).Associations[0].Domains) != 1 {
		t.Errorf("security policy %+v", g.security)
	}
	if armutil.Deref(g.profile.SKU.Name) != armcdn.SKUNamePremiumAzureFrontDoor {
		t.Errorf("sku %v", armutil.Deref(g.profile.SKU.Name))
	}
}

// Weights above Front Door's 1000 are scaled, keeping the ratio.
func TestPlanWeightScaling(t *testing.T) {
	b := planBackend("api", 100, map[string]int32{"east": 100, "west": 1})
	g := planFor(testTarget, planGateway(route("r", 0, "/", b)), annotations.Defaults(annotations.SKUStandard), planOrigins)
	var ws []int32
	for _, o := range g.groups[0].origins {
		ws = append(ws, armutil.Deref(o.v.Properties.Weight))
	}
	if fmt.Sprint(ws) != "[1000 10]" {
		t.Errorf("weights %v, want [1000 10]", ws)
	}
}

// A WAF policy attaches through a security policy over the Gateway's
// domains; a WAF policy of another tier is refused by Azure with its
// message.
func TestWAFSecurityPolicy(t *testing.T) {
	for _, tt := range []struct {
		name, wafSKU string
		wantErr      string
	}{
		{"same tier", string(armfrontdoor.SKUNamePremiumAzureFrontDoor), ""},
		{"other tier", string(armfrontdoor.SKUNameStandardAzureFrontDoor), "400 BadRequest: Security policy"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, armsim.Options{Polls: 1})
			waf := armsim.ResourceID(sub, "security", armsim.TypeWAFPolicy, "fleetwaf")
			if err := h.sim.Seed(waf, armfrontdoor.WebApplicationFirewallPolicy{Location: to.Ptr("Global"), SKU: &armfrontdoor.SKU{Name: to.Ptr(armfrontdoor.SKUName(tt.wafSKU))}}); err != nil {
				t.Fatal(err)
			}
			p := h.provider()
			err := p.Deploy(context.Background(), modelOf("v1", h.gateway("afd-premium", map[string]string{keys.AnnotationAzureWAFPolicy: waf.String()})))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sps := h.sim.Resources(armsim.TypeSecurityPolicy)
			if len(sps) != 1 {
				t.Fatalf("security policies %v", sps)
			}
			sp, _ := armsim.Lookup[armcdn.SecurityPolicy](h.sim, sps[0].ID)
			params := sp.Properties.Parameters.(*armcdn.SecurityPolicyWebApplicationFirewallParameters)
			if !strings.EqualFold(armutil.Deref(params.WafPolicy.ID), waf.String()) || len(params.Associations[0].Domains) != 2 {
				t.Errorf("security policy %+v", params)
			}
			// The WAF detached: the security policy goes before anything.
			n := len(h.sim.Writes())
			if err := p.Deploy(context.Background(), modelOf("v2", h.gateway("afd-premium", nil))); err != nil {
				t.Fatal(err)
			}
			if w := h.writes(n); len(w) != 1 || !strings.HasPrefix(w[0], "DELETE securityPolicies ") {
				t.Errorf("writes %v", w)
			}
		})
	}
}

// A long message is clipped within a condition's limit, saying how much
// was left out.
func TestClip(t *testing.T) {
	parts := make([]string, 500)
	for i := range parts {
		parts[i] = strings.Repeat("x", 40)
	}
	got := clip(parts)
	if len(got) > maxMessage || !strings.HasSuffix(got, "more") {
		t.Errorf("clipped to %d characters, ending %q", len(got), got[len(got)-20:])
	}
	if clip([]string{"a", "b"}) != "a; b" {
		t.Error("short messages changed")
	}
}
