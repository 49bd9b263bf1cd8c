package armsim

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/cdn/armcdn/v2"
)

// Front Door Standard/Premium limits, per tier, as "Azure Front Door
// Standard and Premium service limits" in "Azure subscription and service
// limits, quotas, and constraints" lists them ([AFD-LIMITS]:
// https://learn.microsoft.com/azure/azure-resource-manager/management/azure-subscription-service-limits#azure-front-door-standard-and-premium-service-limits,
// include file includes/front-door-limits.md). Only the counts of the
// resources the simulation keeps are modelled; the composite route
// metric ([AFD-ROUTING-LIMITS]) and patterns per route are not.
//
// Front Door does not document what it answers to a create past a limit.
// ARM's "Resolve errors for resource quotas"
// (https://learn.microsoft.com/azure/azure-resource-manager/troubleshooting/error-resource-quota)
// gives the code ResourceQuotaExceeded and a message naming the type, the
// quota and the current count; the simulation answers that with 400
// (status and wording simulated).
type afdLimit struct {
	// name is the limit as [AFD-LIMITS] words it.
	name string
	typ  string
	// perParent: counted within the resource's parent (an origin group's
	// origins, a rule set's rules) rather than within its profile.
	perParent         bool
	standard, premium int
}

var afdLimits = []afdLimit{
	{name: "Maximum endpoint per profile", typ: TypeAFDEndpoint, standard: 10, premium: 25},
	{name: "Maximum custom domain per profile", typ: TypeCustomDomain, standard: 100, premium: 500},
	{name: "Maximum origin groups per profile", typ: TypeOriginGroup, standard: 100, premium: 200},
	{name: "Maximum origins per origin group", typ: TypeOrigin, perParent: true, standard: 50, premium: 50},
	{name: "Maximum origins per profile", typ: TypeOrigin, standard: 100, premium: 200},
	{name: "Maximum routes per profile", typ: TypeRoute, standard: 100, premium: 200},
	{name: "Maximum rule set per profile", typ: TypeRuleSet, standard: 100, premium: 200},
	{name: "Maximum rules per rule set", typ: TypeRule, perParent: true, standard: 100, premium: 100},
	{name: "Maximum security policy per profile", typ: TypeSecurityPolicy, standard: 100, premium: 200},
}

// checkAFDLimits refuses the creation of id when its profile (or its
// parent, for a per-parent limit) already holds the maximum of its type
// for the profile's tier. Updates of existing resources are never
// refused: they add nothing.
func checkAFDLimits(v *View, id ID) error {
	sku := profileSKU(v, id)
	for _, l := range afdLimits {
		if !strings.EqualFold(l.typ, id.Type()) {
			continue
		}
		max := l.standard
		if sku == string(armcdn.SKUNamePremiumAzureFrontDoor) {
			max = l.premium
		}
		scope := profileOf(id)
		if l.perParent {
			scope, _ = id.Parent()
		}
		n := 0
		v.Each(l.typ, func(r Resource) {
			in := profileOf(r.ID).Key() == scope.Key()
			if l.perParent {
				p, _ := r.ID.Parent()
				in = p.Key() == scope.Key()
			}
			if in {
				n++
			}
		})
		if n >= max {
			return &Error{Status: http.StatusBadRequest, Code: "ResourceQuotaExceeded", // status and wording simulated, see above
				Message: fmt.Sprintf("Creating the resource of type %s would exceed the quota of %d resources of type %s per %s (%s, %s). The current resource count is %d, please delete some resources of this type before creating a new one.",
					l.typ, max, l.typ, scopeWord(l), scope.Name(), sku, n)}
		}
	}
	return nil
}

func scopeWord(l afdLimit) string {
	if l.perParent {
		return "parent resource"
	}
	return "profile"
}
