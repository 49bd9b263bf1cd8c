package crossregion

import (
	"strings"
	"testing"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
)

func TestResourceName(t *testing.T) {
	long := strings.Repeat("n", 253)
	names := map[string]string{}
	for _, tc := range []struct{ owner, ns, name string }{
		{"fleet", "demo", "db"},
		{"fleet", "a-b", "c"},
		{"fleet", "a", "b-c"},
		{"other-fleet", "demo", "db"},
		{"fleet", strings.Repeat("s", 63), long},
		{"fleet", strings.Repeat("s", 63), long[:252] + "m"},
		{"fleet", "demo", "db.v2"},
	} {
		n := resourceName(tc.owner, tc.ns, tc.name)
		if !azureName.MatchString(n) || len(n) > 80 {
			t.Errorf("resourceName(%q, %q, %q) = %q: not a valid Azure name", tc.owner, tc.ns, tc.name, n)
		}
		if n != resourceName(tc.owner, tc.ns, tc.name) {
			t.Errorf("resourceName(%q, %q, %q) is not deterministic", tc.owner, tc.ns, tc.name)
		}
		key := tc.owner + "|" + tc.ns + "/" + tc.name
		for other, on := range names {
			if on == n {
				t.Errorf("%s and %s share the name %s", key, other, n)
			}
		}
		names[key] = n
	}
	if got := resourceName("fleet", "demo", "db"); !strings.HasPrefix(got, "fleetnet-demo-db-") {
		t.Errorf("resourceName = %q, want a readable fleetnet-demo-db- prefix", got)
	}
	for _, s := range []string{"east", "eu-west-1", "a/b", "-x-", strings.Repeat("c", 90), "..."} {
		if n := childName(s); !azureName.MatchString(n) {
			t.Errorf("childName(%q) = %q: not a valid Azure name", s, n)
		}
	}
}

func frontend(rg string) string {
	return "/subscriptions/sub/resourceGroups/" + rg + "/providers/Microsoft.Network/loadBalancers/kubernetes/frontendIPConfigurations/fe"
}

func TestPlan(t *testing.T) {
	tg := target{subscription: "sub", resourceGroup: "rg", location: "westeurope", owner: "fleet"}
	east := edgev1.ClusterEndpoints{Cluster: "east", Region: "eastus", Weight: 1, RegionalFrontend: frontend("MC_east")}
	west := edgev1.ClusterEndpoints{Cluster: "west", Region: "westus", Weight: 1, RegionalFrontend: frontend("MC_west")}
	with := func(c edgev1.ClusterEndpoints, f func(*edgev1.ClusterEndpoints)) edgev1.ClusterEndpoints {
		f(&c)
		return c
	}
	port := func(p, target int32, proto string, cs ...edgev1.ClusterEndpoints) edgev1.LoadBalancerPort {
		return edgev1.LoadBalancerPort{Port: p, TargetPort: target, Protocol: proto, Clusters: cs}
	}
	for _, tc := range []struct {
		name     string
		ports    []edgev1.LoadBalancerPort
		backends []string
		rules    []string
		refused  []string // substrings, in order
		notes    []string
	}{
		{name: "two clusters, two ports", ports: []edgev1.LoadBalancerPort{port(53, 53, edgev1.ProtocolUDP, east, west), port(5432, 5432, edgev1.ProtocolTCP, east, west)},
			backends: []string{"east", "west"}, rules: []string{"udp-53", "tcp-5432"}},
		{name: "port differs from targetPort", ports: []edgev1.LoadBalancerPort{port(5432, 5432, edgev1.ProtocolTCP, east), port(8080, 80, edgev1.ProtocolTCP, east)},
			backends: []string{"east"}, rules: []string{"tcp-5432"}, refused: []string{"port 8080/TCP is not served", "targetPort) is 80"}},
		{name: "UDP port 3", ports: []edgev1.LoadBalancerPort{port(3, 3, edgev1.ProtocolUDP, east)}, backends: []string{"east"}, refused: []string{"port 3/UDP"}},
		{name: "draining and weight 0 left out", ports: []edgev1.LoadBalancerPort{port(5432, 5432, edgev1.ProtocolTCP,
			with(east, func(c *edgev1.ClusterEndpoints) { c.Draining = true }), with(west, func(c *edgev1.ClusterEndpoints) { c.Weight = 0 }))}, rules: []string{"tcp-5432"}},
		{name: "no regional frontend", ports: []edgev1.LoadBalancerPort{port(5432, 5432, edgev1.ProtocolTCP, east, with(west, func(c *edgev1.ClusterEndpoints) { c.RegionalFrontend = "" }))},
			backends: []string{"east"}, rules: []string{"tcp-5432"}, notes: []string{"cluster west has no regional load balancer frontend"}},
		{name: "not a frontend id", ports: []edgev1.LoadBalancerPort{port(5432, 5432, edgev1.ProtocolTCP, with(east, func(c *edgev1.ClusterEndpoints) { c.RegionalFrontend = "10.0.0.1" }))},
			rules: []string{"tcp-5432"}, notes: []string{"cluster east publishes a regional frontend that is not"}},
		{name: "unequal weights", ports: []edgev1.LoadBalancerPort{port(5432, 5432, edgev1.ProtocolTCP, with(east, func(c *edgev1.ClusterEndpoints) { c.Weight = 100 }),
			with(west, func(c *edgev1.ClusterEndpoints) { c.Weight = 50 }))},
			backends: []string{"east", "west"}, rules: []string{"tcp-5432"}, notes: []string{"weights are not expressible (east 100, west 50)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := planFor(tg, edgev1.LoadBalancer{Namespace: "demo", Name: "db", Class: Class, Ports: tc.ports})
			var backends, rules []string
			for _, a := range p.lb.Properties.BackendAddressPools[0].Properties.LoadBalancerBackendAddresses {
				backends = append(backends, *a.Name)
			}
			for _, r := range p.lb.Properties.LoadBalancingRules {
				rules = append(rules, *r.Name)
				if *r.Properties.FrontendPort != *r.Properties.BackendPort {
					t.Errorf("rule %s: frontend port %d, backend port %d", *r.Name, *r.Properties.FrontendPort, *r.Properties.BackendPort)
				}
			}
			if strings.Join(backends, ",") != strings.Join(tc.backends, ",") {
				t.Errorf("backends %v, want %v", backends, tc.backends)
			}
			if strings.Join(rules, ",") != strings.Join(tc.rules, ",") {
				t.Errorf("rules %v, want %v", rules, tc.rules)
			}
			refused, notes := strings.Join(p.refused, "; "), strings.Join(p.notes, "; ")
			for _, s := range tc.refused {
				if !strings.Contains(refused, s) {
					t.Errorf("refused %q lacks %q", refused, s)
				}
			}
			if len(tc.refused) == 0 && refused != "" {
				t.Errorf("refused %q", refused)
			}
			for _, s := range tc.notes {
				if !strings.Contains(notes, s) {
					t.Errorf("notes %q lack %q", notes, s)
				}
			}
			if len(tc.notes) == 0 && notes != "" {
				t.Errorf("notes %q", notes)
			}
			// The plan is what Azure has once applied: no difference with itself.
			if d := loadBalancerDiff(p.lb, &p.lb); len(d) > 0 {
				t.Errorf("a plan differs from itself: %v", d)
			}
			if d := publicIPDiff(p.pip, &p.pip); len(d) > 0 {
				t.Errorf("a plan differs from itself: %v", d)
			}
		})
	}
}
