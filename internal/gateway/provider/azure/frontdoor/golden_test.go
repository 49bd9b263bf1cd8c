package frontdoor

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/azure/armsim"

	"github.com/fleetnet/fleetnet/internal/gateway/provider/azure/frontdoor/annotations"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.json from the current plans")

// goldenGraph is a graph as a reviewer reads it: every resource's name,
// what it serves and the body the provider writes.
type goldenGraph struct {
	Profile  any                  `json:"profile"`
	Endpoint any                  `json:"endpoint"`
	Domains  []goldenNamed        `json:"domains,omitempty"`
	Groups   []goldenGroup        `json:"originGroups,omitempty"`
	RuleSets []goldenRules        `json:"ruleSets,omitempty"`
	Routes   []goldenNamed        `json:"routes,omitempty"`
	Security *goldenNamed         `json:"securityPolicy,omitempty"`
	Refused  []string             `json:"refused,omitempty"`
	Notes    []string             `json:"notes,omitempty"`
	Settings annotations.Settings `json:"settings"`
}

type goldenNamed struct {
	Name  string `json:"name"`
	Label string `json:"label,omitempty"`
	Body  any    `json:"body"`
}

type goldenGroup struct {
	goldenNamed
	Origins []goldenNamed `json:"origins"`
}

type goldenRules struct {
	Name  string        `json:"name"`
	Rules []goldenNamed `json:"rules"`
}

func golden(g graph) goldenGraph {
	out := goldenGraph{Profile: goldenNamed{Name: g.profileName, Body: g.profile}, Endpoint: goldenNamed{Name: g.endpoint.name, Body: g.endpoint.v},
		Notes: g.notes, Settings: g.settings}
	for _, d := range g.domains {
		out.Domains = append(out.Domains, goldenNamed{d.name, d.label, d.v})
	}
	for _, og := range g.groups {
		gg := goldenGroup{goldenNamed: goldenNamed{og.name, og.label, og.v}}
		for _, o := range og.origins {
			gg.Origins = append(gg.Origins, goldenNamed{o.name, o.label, o.v})
		}
		out.Groups = append(out.Groups, gg)
	}
	for _, rs := range g.ruleSets {
		gr := goldenRules{Name: rs.name}
		for _, r := range rs.rules {
			gr.Rules = append(gr.Rules, goldenNamed{r.name, "", r.v})
		}
		out.RuleSets = append(out.RuleSets, gr)
	}
	for _, r := range g.routes {
		out.Routes = append(out.Routes, goldenNamed{r.name, r.label, r.v})
	}
	if g.security != nil {
		out.Security = &goldenNamed{g.security.name, g.security.label, g.security.v}
	}
	for _, r := range g.refused {
		out.Refused = append(out.Refused, r.String())
	}
	return out
}

// The plans of a public Standard Gateway and of a Premium Private Link
// Gateway with a WAF, as golden files (go test -run Golden -update
// rewrites them).
func TestGoldenPlans(t *testing.T) {
	h := newHarness(t, armsim.Options{})
	h.frontends["east"] = "/subscriptions/s/resourceGroups/mc-east/providers/Microsoft.Network/loadBalancers/kubernetes/frontendIPConfigurations/web"
	h.frontends["west"] = "/subscriptions/s/resourceGroups/mc-west/providers/Microsoft.Network/loadBalancers/kubernetes/frontendIPConfigurations/web"
	public := map[string]Origin{h.frontends["east"]: {Host: "203.0.113.10"}, h.frontends["west"]: {Host: "203.0.113.20"}}
	private := map[string]Origin{
		h.frontends["east"]: {Host: "10.1.0.10", PrivateLink: "/subscriptions/s/resourceGroups/mc-east/providers/Microsoft.Network/privateLinkServices/pls-east", PrivateLinkLocation: "eastus"},
		h.frontends["west"]: {Problem: "no Private Link Service in resource group mc-west uses internal frontend web of load balancer kubernetes"},
	}
	waf := "/subscriptions/s/resourceGroups/security/providers/Microsoft.Network/FrontDoorWebApplicationFirewallPolicies/fleetwaf"
	for _, tt := range []struct {
		name    string
		gw      edgev1.Gateway
		sku     annotations.SKU
		origins map[string]Origin
	}{
		{"public-standard", h.gateway("afd-standard", nil), annotations.SKUStandard, public},
		{"private-premium-waf", h.gateway("afd-premium", map[string]string{keys.AnnotationAzureConnectivity: "private-link", keys.AnnotationAzureWAFPolicy: waf,
			keys.AnnotationAzureProbePath: "/healthz", keys.AnnotationAzureOriginHostHeader: "app.example.com"}), annotations.SKUPremium, private},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := annotations.Parse(tt.gw.Annotations, tt.sku)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(golden(planFor(testTarget, tt.gw, s, tt.origins)), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", tt.name+".golden.json")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the plan (run with -update and read the diff):\n%s", path, got)
			}
		})
	}
}
