package frontdoor

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/gateway/provider/azure/frontdoor/annotations"
)

// limit is one of Front Door Standard/Premium's limits on the resources
// the provider creates, per tier, from "Azure Front Door Standard and
// Premium service limits" in "Azure subscription and service limits,
// quotas, and constraints"
// (https://learn.microsoft.com/azure/azure-resource-manager/management/azure-subscription-service-limits#azure-front-door-standard-and-premium-service-limits).
// Checking them before writing keeps a Gateway that cannot fit from
// leaving half a graph in Azure (Azure refuses the create past a limit
// only when it comes).
type limit struct {
	// name is the limit in messages.
	name string
	kind string
	// perParent: counted within each parent (an origin group's origins, a
	// rule set's rules) instead of the whole profile.
	perParent         bool
	standard, premium int
}

// limits are those on what the provider creates. Not checked: path
// patterns per route (the provider writes at most two) and the composite
// route metric (docs/azure-front-door.md, "Sizing").
var limits = []limit{
	{name: "endpoints", kind: kindEndpoint, standard: 10, premium: 25},
	{name: "custom domains", kind: kindDomain, standard: 100, premium: 500},
	{name: "origin groups", kind: kindOriginGroup, standard: 100, premium: 200},
	{name: "origins per origin group", kind: kindOrigin, perParent: true, standard: 50, premium: 50},
	{name: "origins", kind: kindOrigin, standard: 100, premium: 200},
	{name: "routes", kind: kindRoute, standard: 100, premium: 200},
	{name: "rule sets", kind: kindRuleSet, standard: 100, premium: 200},
	{name: "rules per rule set", kind: kindRule, perParent: true, standard: 100, premium: 100},
	{name: "security policies", kind: kindSecurity, standard: 100, premium: 200},
}

func (l limit) max(tier annotations.SKU) int {
	if tier == annotations.SKUPremium {
		return l.premium
	}
	return l.standard
}

// limitError is a Gateway that does not fit its profile: each exceeded
// limit in one line.
type limitError struct{ exceeded []string }

func (e *limitError) Error() string {
	return "Azure Front Door limits exceeded, nothing written: " + strings.Join(e.exceeded, "; ")
}

// Reason is keys.ReasonAzureLimitExceeded.
func (e *limitError) Reason() string { return keys.ReasonAzureLimitExceeded }

// checkLimits counts what the profile will hold while w runs: the
// planned resources and those Azure has that stay until the new ones
// serve (the provider creates before it deletes, fail static) or that are
// not fleetnet's, less the routes w removes before writing routes
// (blocking). It is pure: a refusal writes nothing.
func (w *graphWrite) checkLimits(profile string, tier annotations.SKU) error {
	// held are the resources' keys by kind and scope.
	held := map[string]map[string]map[string]bool{}
	add := func(kind string, path []string) {
		for _, per := range []bool{false, true} {
			scope := pathKey(path[:1])
			if per {
				scope = pathKey(path[:len(path)-1])
			}
			k := kind + fmt.Sprint(per)
			if held[k] == nil {
				held[k] = map[string]map[string]bool{}
			}
			if held[k][scope] == nil {
				held[k][scope] = map[string]bool{}
			}
			held[k][scope][pathKey(path)] = true
		}
	}
	labels := map[string]string{}
	for _, it := range w.items {
		add(it.kind, it.path)
		labels[it.kind+pathKey(it.path)] = it.label
	}
	for kind, es := range w.obs.res {
		for _, e := range es {
			if kind == kindRoute && w.p.owns(w.key, kind, e) && !w.wanted[resourceKey(kind, e.path)] && w.blocking(e) {
				continue
			}
			add(kind, e.path)
		}
	}
	var exceeded []string
	for _, l := range limits {
		max := l.max(tier)
		for _, scope := range slices.Sorted(maps.Keys(held[l.kind+fmt.Sprint(l.perParent)])) {
			n := len(held[l.kind+fmt.Sprint(l.perParent)][scope])
			if n <= max {
				continue
			}
			where := ""
			if l.perParent {
				parent := scope[strings.LastIndex(scope, "/")+1:]
				if lb := labels[kindOriginGroup+scope]; l.kind == kindOrigin && lb != "" {
					parent += " (" + lb + ")"
				}
				where = " in " + map[string]string{kindOrigin: kindOriginGroup, kindRule: kindRuleSet}[l.kind] + " " + parent
			}
			exceeded = append(exceeded, fmt.Sprintf("%s: the Gateway needs %d%s on profile %s (%s), the limit is %d", l.name, n, where, profile, tier, max))
		}
	}
	if len(exceeded) == 0 {
		return nil
	}
	return &limitError{exceeded: exceeded}
}
