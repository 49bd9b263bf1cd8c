package armsim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/cdn/armcdn/v2"
	cdnfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/cdn/armcdn/v2/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/frontdoor/armfrontdoor"
	fdfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/frontdoor/armfrontdoor/fake"
)

// Azure Front Door Standard/Premium (Microsoft.Cdn), its WAF policies
// (Microsoft.Network/FrontDoorWebApplicationFirewallPolicies) and the
// Private Link Services its Premium origins reach
// (Microsoft.Network/privateLinkServices).
//
// What the simulation keeps as Front Door does:
//   - every Front Door resource has a provisioningState (ARM's operation)
//     and a separate deploymentStatus (its propagation to the edge):
//     NotStarted after each write, then InProgress, then Succeeded, moving
//     on with reads after provisioning succeeded (Options.DeployReads), so
//     that a client sees provisioning end long before deployment does;
//     FailDeployment makes one end Failed; ReportNotStarted makes reads
//     show NotStarted while the edge serves (see ReportNotStarted);
//   - references must resolve (a route's origin group, rule sets and
//     custom domains; a security policy's WAF policy and domains; a Private
//     Link origin's Private Link Service) and a resource still referenced
//     cannot be deleted, so that a client must withdraw in dependency
//     order;
//   - Private Link origins exist only on Premium; creating one makes the
//     profile's private endpoint request a Pending connection on the
//     Private Link Service, which its owner approves or rejects: see
//     privatelink.go for each behaviour's source and what is not
//     documented (the origin's sharedPrivateLinkResource.status
//     following the connection's is not);
//   - a custom domain's validation stays Pending until ValidateDomain (the
//     owner's DNS TXT record), as a managed certificate's does.
//   - customer certificates: a secret (Microsoft.Cdn/profiles/secrets) of
//     type CustomerCertificate references a Key Vault secret, whose id is
//     checked for shape; a custom domain with certificateType
//     CustomerCertificate names a secret of its profile, which cannot be
//     deleted while it does; a wildcard custom domain (*.contoso.com) must
//     use a customer certificate: see prepareSecret and wildcardDomain.
//   - a create past one of the tier's per-profile limits (routes, origin
//     groups, origins, custom domains, rule sets, rules per rule set, ...)
//     is refused: see limits.go.
//
// Codes marked "simulated code" are the simulation's where the service's
// documentation states a rule without the error it returns.

// Front Door resource types.
const (
	TypeProfile            = "Microsoft.Cdn/profiles"
	TypeAFDEndpoint        = "Microsoft.Cdn/profiles/afdEndpoints"
	TypeRoute              = "Microsoft.Cdn/profiles/afdEndpoints/routes"
	TypeOriginGroup        = "Microsoft.Cdn/profiles/originGroups"
	TypeOrigin             = "Microsoft.Cdn/profiles/originGroups/origins"
	TypeRuleSet            = "Microsoft.Cdn/profiles/ruleSets"
	TypeRule               = "Microsoft.Cdn/profiles/ruleSets/rules"
	TypeSecurityPolicy     = "Microsoft.Cdn/profiles/securityPolicies"
	TypeCustomDomain       = "Microsoft.Cdn/profiles/customDomains"
	TypeSecret             = "Microsoft.Cdn/profiles/secrets"
	TypeWAFPolicy          = "Microsoft.Network/FrontDoorWebApplicationFirewallPolicies"
	TypePrivateLinkService = "Microsoft.Network/privateLinkServices"
)

// Deployment statuses of Front Door resources.
const (
	DeployNotStarted = "NotStarted"
	DeployInProgress = "InProgress"
	DeploySucceeded  = "Succeeded"
	DeployFailed     = "Failed"
)

var (
	// afdName: letters, digits and inner hyphens (profiles, endpoints,
	// origin groups, origins, routes, custom domains, security policies).
	afdName = regexp.MustCompile(`^[a-zA-Z0-9]+(-*[a-zA-Z0-9])*$`)
	// ruleName: a letter, then letters and digits (rule sets and rules).
	ruleName = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9]*$`)
)

func (s *Sim) registerFrontDoor() {
	for _, t := range []string{TypeProfile, TypeAFDEndpoint, TypeRoute, TypeOriginGroup, TypeOrigin, TypeRuleSet, TypeRule, TypeSecurityPolicy, TypeCustomDomain, TypeSecret} {
		s.kinds[strings.ToLower(t)] = &Kind{Type: t, Prepare: s.prepareAFD, Settle: settleAFD, Observed: s.observeAFD, CheckDelete: checkDeleteAFD}
	}
	s.kinds[strings.ToLower(TypeWAFPolicy)] = &Kind{Type: TypeWAFPolicy, Prepare: prepareWAF}
	s.kinds[strings.ToLower(TypePrivateLinkService)] = &Kind{Type: TypePrivateLinkService,
		Prepare: func(_ *View, _ ID, body, prev []byte) ([]byte, error) { return keepConnections(body, prev) }} // privatelink.go
	s.mounts["microsoft.cdn"] = cdnfake.NewServerFactoryTransport(s.cdnServers())
	s.mounts[strings.ToLower(TypeWAFPolicy)] = fdfake.NewServerFactoryTransport(s.wafServers())
	s.network.PrivateLinkServicesServer = s.plsServer()
}

// SetDeployReads changes Options.DeployReads for reads from now on.
func (s *Sim) SetDeployReads(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.DeployReads = n
}

// FailDeployment makes the deployment of the Front Door resource id end
// Failed (the one running, or the next); writing the resource again after
// that deploys it again.
func (s *Sim) FailDeployment(id ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failDeploy[id.Key()] = true
}

// ReportNotStarted makes reads of Front Door resources show
// deploymentStatus NotStarted (on) whatever their deployment's progress,
// while the edge (Edge) serves them as it goes on; off, reads show the
// progress again. This is what operators see during propagation: a
// resource provisioned and serving whose deploymentStatus still says
// NotStarted. Microsoft's own example of a provisioned route reports it so
// ("Routes - Get", Routes_Get example: provisioningState Succeeded,
// deploymentStatus NotStarted,
// https://learn.microsoft.com/rest/api/frontdoor/azurefrontdoorstandardpremium/routes/get),
// and the REST reference describes deploymentStatus by its values only
// (NotStarted, InProgress, Succeeded, Failed), while the Front Door FAQ
// ("What is the estimated time for deploying an Azure Front Door? Does my
// Front Door remain operational during the update process?",
// https://learn.microsoft.com/azure/frontdoor/front-door-faq) says a
// change propagates within minutes (up to 20, back-to-back changes about
// 40) while the profile keeps serving. A Failed deployment is still
// reported Failed.
func (s *Sim) ReportNotStarted(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notStartedReported = on
}

// deploymentOf is the deployment status the edge goes by for the Front
// Door resource r: the progress, also while reads report NotStarted
// (ReportNotStarted); s.mu held.
func (s *Sim) deploymentOf(r Resource, reported string) string {
	if st, ok := s.deployed[r.ID.Key()]; ok {
		return st
	}
	return reported
}

// ValidateDomain approves the custom domain id's validation, as Front
// Door does once the owner's DNS TXT record is found.
func (s *Sim) ValidateDomain(id ID) bool {
	return s.Edit(id, func(b []byte) []byte {
		return editJSON(b, func(m map[string]any) { props(m)["domainValidationState"] = "Approved" })
	})
}

func props(m map[string]any) map[string]any {
	p, _ := m["properties"].(map[string]any)
	if p == nil {
		p = map[string]any{}
		m["properties"] = p
	}
	return p
}

func editJSON(b []byte, fn func(map[string]any)) []byte {
	m, err := decodeMap(b)
	if err != nil {
		return b
	}
	fn(m)
	out, err := json.Marshal(m)
	if err != nil {
		return b
	}
	return out
}

// afdProps are the properties a Front Door resource may reference others
// by, decoded from any of its kinds.
type afdProps struct {
	Location string `json:"location"`
	SKU      *struct {
		Name string `json:"name"`
	} `json:"sku"`
	Properties struct {
		HostName    string `json:"hostName"`
		OriginGroup *struct {
			ID string `json:"id"`
		} `json:"originGroup"`
		RuleSets []struct {
			ID string `json:"id"`
		} `json:"ruleSets"`
		CustomDomains []struct {
			ID string `json:"id"`
		} `json:"customDomains"`
		PatternsToMatch []string `json:"patternsToMatch"`
		LinkToDefault   string   `json:"linkToDefaultDomain"`
		Weight          *int32   `json:"weight"`
		Priority        *int32   `json:"priority"`
		HTTPPort        *int32   `json:"httpPort"`
		HTTPSPort       *int32   `json:"httpsPort"`
		Order           *int32   `json:"order"`
		SharedPLR       *struct {
			PrivateLink *struct {
				ID string `json:"id"`
			} `json:"privateLink"`
			PrivateLinkLocation string `json:"privateLinkLocation"`
			RequestMessage      string `json:"requestMessage"`
		} `json:"sharedPrivateLinkResource"`
		Parameters *struct {
			Type         string `json:"type"`
			SecretSource *struct {
				ID string `json:"id"`
			} `json:"secretSource"`
			WafPolicy *struct {
				ID string `json:"id"`
			} `json:"wafPolicy"`
			Associations []struct {
				Domains []struct {
					ID string `json:"id"`
				} `json:"domains"`
				PatternsToMatch []string `json:"patternsToMatch"`
			} `json:"associations"`
		} `json:"parameters"`
		TLSSettings *struct {
			CertificateType string `json:"certificateType"`
			Secret          *struct {
				ID string `json:"id"`
			} `json:"secret"`
		} `json:"tlsSettings"`
	} `json:"properties"`
}

// profileOf is the Front Door profile id of id (itself or its ancestor).
func profileOf(id ID) ID {
	p := id
	p.Types, p.Names = id.Types[:1], id.Names[:1]
	return p
}

func profileSKU(v *View, id ID) string {
	r, ok := v.Get(profileOf(id))
	if !ok {
		return ""
	}
	var p afdProps
	_ = json.Unmarshal(r.JSON, &p)
	if p.SKU == nil {
		return ""
	}
	return p.SKU.Name
}

// refInProfile checks that ref is a resource of typ in id's profile.
func refInProfile(v *View, id ID, ref, typ, what string) error {
	rid, err := ParseID(ref)
	if err != nil || !strings.EqualFold(rid.Type(), typ) {
		return badRequest("BadRequest", "%s %s referenced by %s is not a %s.", what, ref, id, typ)
	}
	if profileOf(rid).Key() != profileOf(id).Key() {
		return badRequest("BadRequest", "%s %s referenced by %s is not in the same profile.", what, ref, id) // simulated code
	}
	if _, ok := v.Get(rid); !ok {
		return InvalidResourceReference(ref, id.String())
	}
	return nil
}

func (s *Sim) prepareAFD(v *View, id ID, body, prev []byte) ([]byte, error) {
	var p afdProps
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, badRequest("InvalidRequestFormat", "Cannot parse the request: %v", err)
	}
	typ := strings.ToLower(id.Type())
	name := id.Name()
	switch typ {
	case strings.ToLower(TypeRuleSet), strings.ToLower(TypeRule):
		if !ruleName.MatchString(name) || len(name) > 60 {
			return nil, badRequest("BadRequest", "The name %s is invalid: it must start with a letter and contain only letters and numbers, at most 60 characters.", name)
		}
	default:
		if !afdName.MatchString(name) || len(name) > 260 {
			return nil, badRequest("BadRequest", "The name %s is invalid: it may contain only letters, numbers and hyphens, and must begin and end with a letter or number.", name)
		}
	}
	if prev == nil {
		if err := checkAFDLimits(v, id); err != nil {
			return nil, err
		}
	}
	pp := p.Properties
	switch typ {
	case strings.ToLower(TypeProfile):
		if !strings.EqualFold(p.Location, "global") {
			return nil, badRequest("BadRequest", "The location of an Azure Front Door Standard/Premium profile must be Global, not '%s'.", p.Location) // simulated code
		}
		if p.SKU == nil || (p.SKU.Name != string(armcdn.SKUNameStandardAzureFrontDoor) && p.SKU.Name != string(armcdn.SKUNamePremiumAzureFrontDoor)) {
			return nil, badRequest("BadRequest", "Profile %s: sku must be Standard_AzureFrontDoor or Premium_AzureFrontDoor.", id)
		}
		if prev != nil {
			var old afdProps
			_ = json.Unmarshal(prev, &old)
			if old.SKU != nil && old.SKU.Name != p.SKU.Name {
				return nil, badRequest("BadRequest", "The sku of profile %s cannot be changed from %s to %s; upgrade it instead.", id, old.SKU.Name, p.SKU.Name) // simulated code
			}
		}
	case strings.ToLower(TypeAFDEndpoint):
		if !strings.EqualFold(p.Location, "global") {
			return nil, badRequest("BadRequest", "The location of an Azure Front Door endpoint must be Global, not '%s'.", p.Location) // simulated code
		}
	case strings.ToLower(TypeOrigin):
		if pp.HostName == "" {
			return nil, badRequest("BadRequest", "Origin %s: hostName is required.", id)
		}
		if w := pp.Weight; w != nil && (*w < 1 || *w > 1000) {
			return nil, badRequest("BadRequest", "Origin %s: weight %d must be between 1 and 1000.", id, *w)
		}
		if pr := pp.Priority; pr != nil && (*pr < 1 || *pr > 5) {
			return nil, badRequest("BadRequest", "Origin %s: priority %d must be between 1 and 5.", id, *pr)
		}
		for _, port := range []*int32{pp.HTTPPort, pp.HTTPSPort} {
			if port != nil && (*port < 1 || *port > 65535) {
				return nil, badRequest("BadRequest", "Origin %s: port %d must be between 1 and 65535.", id, *port)
			}
		}
		if pl := pp.SharedPLR; pl != nil {
			// Private Link origins are Premium's ([AFD-PL] in
			// privatelink.go); the code and message are the simulation's.
			if profileSKU(v, id) != string(armcdn.SKUNamePremiumAzureFrontDoor) {
				return nil, badRequest("BadRequest", "Origin %s: Private Link origins are supported only on Premium_AzureFrontDoor profiles.", id) // simulated code
			}
			if pl.PrivateLink == nil {
				return nil, badRequest("BadRequest", "Origin %s: sharedPrivateLinkResource.privateLink is required.", id) // simulated code
			}
			plsID, err := ParseID(pl.PrivateLink.ID)
			if err != nil || !strings.EqualFold(plsID.Type(), TypePrivateLinkService) {
				// Undocumented: Front Door's Private Link origins may name
				// other resource types (web apps, storage, ...); the
				// simulation keeps only Private Link Services.
				return nil, badRequest("BadRequest", "Origin %s: %s is not a Private Link Service.", id, pl.PrivateLink.ID)
			}
			if _, ok := v.Get(plsID); !ok {
				// Undocumented: what Front Door answers for a Private Link
				// resource that does not exist.
				return nil, InvalidResourceReference(pl.PrivateLink.ID, id.String())
			}
			// No rule ties privateLinkLocation to the PLS's region: Front
			// Door's documentation asks for the region "same or closest
			// to your origin" among those Private Link is available in
			// ([AFD-ILB], [AFD-PL] "Region availability").
		}
	case strings.ToLower(TypeRoute):
		if pp.OriginGroup == nil {
			return nil, badRequest("BadRequest", "Route %s: originGroup is required.", id)
		}
		if err := refInProfile(v, id, pp.OriginGroup.ID, TypeOriginGroup, "Origin group"); err != nil {
			return nil, err
		}
		for _, rs := range pp.RuleSets {
			if err := refInProfile(v, id, rs.ID, TypeRuleSet, "Rule set"); err != nil {
				return nil, err
			}
		}
		for _, d := range pp.CustomDomains {
			if err := refInProfile(v, id, d.ID, TypeCustomDomain, "Custom domain"); err != nil {
				return nil, err
			}
		}
		if len(pp.PatternsToMatch) == 0 {
			return nil, badRequest("BadRequest", "Route %s: patternsToMatch is required.", id)
		}
		for _, pat := range pp.PatternsToMatch {
			if !strings.HasPrefix(pat, "/") || strings.Contains(strings.TrimSuffix(pat, "/*"), "*") {
				return nil, badRequest("BadRequest", "Route %s: pattern %q must start with / and may have * only as its last segment (/*).", id, pat)
			}
		}
		if err := routeConflict(v, id, p); err != nil {
			return nil, err
		}
	case strings.ToLower(TypeRule):
		if pp.Order == nil {
			return nil, badRequest("BadRequest", "Rule %s: order is required.", id)
		}
	case strings.ToLower(TypeCustomDomain):
		if pp.HostName == "" {
			return nil, badRequest("BadRequest", "Custom domain %s: hostName is required.", id)
		}
		if t := pp.TLSSettings; t != nil && t.CertificateType != "ManagedCertificate" && t.CertificateType != "CustomerCertificate" && t.CertificateType != "AzureFirstPartyManagedCertificate" {
			return nil, badRequest("BadRequest", "Custom domain %s: certificateType %s is not supported.", id, t.CertificateType)
		}
		if err := customDomainCertificate(v, id, p); err != nil {
			return nil, err
		}
	case strings.ToLower(TypeSecret):
		if err := prepareSecret(id, p); err != nil {
			return nil, err
		}
	case strings.ToLower(TypeSecurityPolicy):
		if pp.Parameters == nil || pp.Parameters.WafPolicy == nil {
			return nil, badRequest("BadRequest", "Security policy %s: parameters.wafPolicy is required.", id)
		}
		wafID, err := ParseID(pp.Parameters.WafPolicy.ID)
		if err != nil || !strings.EqualFold(wafID.Type(), TypeWAFPolicy) {
			return nil, badRequest("BadRequest", "Security policy %s: %s is not a Front Door WAF policy.", id, pp.Parameters.WafPolicy.ID)
		}
		r, ok := v.Get(wafID)
		if !ok {
			return nil, InvalidResourceReference(pp.Parameters.WafPolicy.ID, id.String())
		}
		var waf afdProps
		_ = json.Unmarshal(r.JSON, &waf)
		if sku := profileSKU(v, id); waf.SKU == nil || !strings.EqualFold(waf.SKU.Name, sku) {
			return nil, badRequest("BadRequest", "Security policy %s: the WAF policy %s has sku %v and the profile %s; they must match.", id, wafID, skuName(waf), sku) // simulated code
		}
		for _, a := range pp.Parameters.Associations {
			for _, d := range a.Domains {
				did, err := ParseID(d.ID)
				if err != nil || (!strings.EqualFold(did.Type(), TypeCustomDomain) && !strings.EqualFold(did.Type(), TypeAFDEndpoint)) {
					return nil, badRequest("BadRequest", "Security policy %s: domain %s is neither a custom domain nor an endpoint.", id, d.ID)
				}
				if _, ok := v.Get(did); !ok {
					return nil, InvalidResourceReference(d.ID, id.String())
				}
			}
		}
	}
	// Each write deploys again; a failed deployment is retried by it.
	s.deployReads[id.Key()] = 0
	s.deployed[id.Key()] = DeployNotStarted
	if prev != nil {
		if old, err := decodeMap(prev); err == nil && props(old)["deploymentStatus"] == DeployFailed {
			delete(s.failDeploy, id.Key())
		}
	}
	return editJSON(body, func(m map[string]any) {
		pr := props(m)
		pr["deploymentStatus"] = DeployNotStarted
		if typ == strings.ToLower(TypeOrigin) && prev != nil {
			if old, err := decodeMap(prev); err == nil {
				keepLinkStatus(s, pr, props(old)) // see privatelink.go
			}
		}
		if typ == strings.ToLower(TypeCustomDomain) && prev != nil {
			if old, err := decodeMap(prev); err == nil {
				for _, k := range []string{"domainValidationState", "validationProperties"} {
					if v, ok := props(old)[k]; ok {
						pr[k] = v
					}
				}
			}
		}
	}), nil
}

func skuName(p afdProps) string {
	if p.SKU == nil {
		return "none"
	}
	return p.SKU.Name
}

// routeConflict refuses a route with a pattern another route of the same
// endpoint serves on a domain they share (the default domain included).
func routeConflict(v *View, id ID, p afdProps) error {
	endpoint, _ := id.Parent()
	domains := func(q afdProps) map[string]bool {
		d := map[string]bool{}
		for _, c := range q.Properties.CustomDomains {
			d[strings.ToLower(c.ID)] = true
		}
		// A route serves the endpoint's own domain unless
		// linkToDefaultDomain is Disabled ("Routes - Create",
		// https://learn.microsoft.com/rest/api/frontdoor/azurefrontdoorstandardpremium/routes/create:
		// "whether this route will be linked to the default endpoint
		// domain"; the simulation takes an absent value as Enabled, the
		// stricter reading, as it did before).
		if !strings.EqualFold(q.Properties.LinkToDefault, "Disabled") {
			d["default"] = true
		}
		return d
	}
	mine := domains(p)
	var err error
	v.Each(TypeRoute, func(r Resource) {
		if err != nil || r.ID.Key() == id.Key() {
			return
		}
		if parent, _ := r.ID.Parent(); parent.Key() != endpoint.Key() {
			return
		}
		var other afdProps
		_ = json.Unmarshal(r.JSON, &other)
		for d := range domains(other) {
			if !mine[d] {
				continue
			}
			for _, a := range other.Properties.PatternsToMatch {
				for _, b := range p.Properties.PatternsToMatch {
					if strings.EqualFold(a, b) {
						err = &Error{Status: http.StatusConflict, Code: "Conflict",
							Message: fmt.Sprintf("Route %s: the pattern %s on domain %s is already served by route %s.", id.Name(), b, d, r.ID.Name())} // simulated code
						return
					}
				}
			}
		}
	})
	return err
}

// settleAFD sets what Front Door fills in when a write succeeds.
func settleAFD(v *View, id ID, body []byte) []byte {
	typ := strings.ToLower(id.Type())
	return editJSON(body, func(m map[string]any) {
		pr := props(m)
		switch typ {
		case strings.ToLower(TypeProfile):
			if pr["frontDoorId"] == nil {
				pr["frontDoorId"] = fmt.Sprintf("00000000-0000-4000-8000-%012x", len(id.Key()))
			}
		case strings.ToLower(TypeAFDEndpoint):
			pr["hostName"] = fmt.Sprintf("%s-%s.z01.azurefd.net", strings.ToLower(id.Name()), shortID(id))
		case strings.ToLower(TypeCustomDomain):
			if pr["domainValidationState"] == nil {
				pr["domainValidationState"] = "Pending"
				pr["validationProperties"] = map[string]any{"validationToken": "token-" + shortID(id), "expirationDate": "2027-01-01T00:00:00Z"}
			}
		case strings.ToLower(TypeOrigin):
			requestLink(v, id, pr) // see privatelink.go
		}
	})
}

func shortID(id ID) string { return shortHash(id.Key()) }

// shortHash is 32-bit FNV-1a of s, in hex.
func shortHash(s string) string {
	h := uint32(2166136261)
	for _, c := range []byte(s) {
		h = (h ^ uint32(c)) * 16777619
	}
	return fmt.Sprintf("%08x", h)
}

// observeAFD moves deploymentStatus on with reads once provisioning
// succeeded, and reflects a Private Link origin's connection status
// (undocumented: see MirrorConnectionStatus).
func (s *Sim) observeAFD(v *View, id ID, body []byte) []byte {
	if provisioningState(body) != StateSucceeded {
		return body
	}
	n := s.deployReads[id.Key()] + 1
	s.deployReads[id.Key()] = n
	r := s.opts.DeployReads
	status := DeploySucceeded
	switch {
	case n <= r:
		status = DeployNotStarted
	case n <= 2*r:
		status = DeployInProgress
	case s.failDeploy[id.Key()]:
		status = DeployFailed
	}
	if s.deployed[id.Key()] != DeployFailed {
		s.deployed[id.Key()] = status
	}
	return editJSON(body, func(m map[string]any) {
		pr := props(m)
		switch {
		case pr["deploymentStatus"] == DeployFailed:
		case s.notStartedReported && s.deployed[id.Key()] != DeployFailed:
			pr["deploymentStatus"] = DeployNotStarted
		default:
			pr["deploymentStatus"] = s.deployed[id.Key()]
		}
		mirrorLinkStatus(v, id, pr) // see privatelink.go
	})
}

// keyVaultSecretID is the shape "Secrets - Create" documents for a
// customer certificate's secretSource: "Resource reference to the Azure
// Key Vault certificate. Expected to be in format of
// /subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/Microsoft.KeyVault/vaults/{vaultName}/secrets/{certificateName}"
// (https://learn.microsoft.com/rest/api/frontdoor/azurefrontdoorstandardpremium/secrets/create,
// CustomerCertificateParameters). Vault names: 3 to 24 letters, digits
// and hyphens; secret names: 1 to 127 letters, digits and hyphens
// (https://learn.microsoft.com/azure/templates/microsoft.keyvault/vaults/secrets).
var keyVaultSecretID = regexp.MustCompile(`(?i)^/subscriptions/[^/]+/resourceGroups/[-\w._()]{1,90}/providers/Microsoft\.KeyVault/vaults/[a-z0-9-]{3,24}/secrets/[a-z0-9-]{1,127}$`)

// prepareSecret checks a Front Door secret. The simulation keeps the
// CustomerCertificate type only (the one "Configure HTTPS on an Azure
// Front Door custom domain", "Use your own certificate", creates:
// https://learn.microsoft.com/azure/frontdoor/standard-premium/how-to-configure-https-custom-domain),
// and checks the Key Vault reference for shape, not that the vault
// holds it or lets Front Door read it (Azure checks both, through Front
// Door's own identity; nothing here models Key Vault). Codes are the
// simulation's.
func prepareSecret(id ID, p afdProps) error {
	par := p.Properties.Parameters
	if par == nil || par.Type == "" {
		return badRequest("BadRequest", "Secret %s: parameters.type is required.", id) // simulated code
	}
	if par.Type != "CustomerCertificate" {
		return badRequest("BadRequest", "Secret %s: the simulation keeps secrets of type CustomerCertificate only, not %s.", id, par.Type) // simulated code
	}
	if par.SecretSource == nil || par.SecretSource.ID == "" {
		return badRequest("BadRequest", "Secret %s: parameters.secretSource is required.", id) // simulated code
	}
	if !keyVaultSecretID.MatchString(par.SecretSource.ID) {
		return badRequest("BadRequest", "Secret %s: secretSource %s is not a Key Vault secret: expected /subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/Microsoft.KeyVault/vaults/{vaultName}/secrets/{certificateName}.", id, par.SecretSource.ID) // simulated code
	}
	return nil
}

// customDomainCertificate checks a custom domain's certificate: a
// customer certificate names a secret of the profile ("Secret: Resource
// reference to the secret", AFDDomainHttpsParameters in "AFD Custom
// Domains - Create",
// https://learn.microsoft.com/rest/api/frontdoor/azurefrontdoorstandardpremium/afd-custom-domains/create);
// a wildcard domain cannot use a managed certificate ("Wildcard domains
// in Azure Front Door": Azure Front Door-managed certificates are not
// issued for wildcard domains, which need your own certificate,
// https://learn.microsoft.com/azure/frontdoor/front-door-wildcard-domain?pivots=front-door-standard-premium;
// the code and message are the simulation's).
func customDomainCertificate(v *View, id ID, p afdProps) error {
	t := p.Properties.TLSSettings
	certType := "ManagedCertificate" // the default when tlsSettings says none
	if t != nil && t.CertificateType != "" {
		certType = t.CertificateType
	}
	if strings.HasPrefix(p.Properties.HostName, "*.") && certType != "CustomerCertificate" {
		return badRequest("BadRequest", "Custom domain %s: the wildcard domain %s needs a customer certificate (certificateType CustomerCertificate); %s is not supported for wildcard domains.", id, p.Properties.HostName, certType) // simulated code
	}
	if certType != "CustomerCertificate" {
		return nil
	}
	if t.Secret == nil || t.Secret.ID == "" {
		return badRequest("BadRequest", "Custom domain %s: tlsSettings.secret is required with certificateType CustomerCertificate.", id) // simulated code
	}
	return refInProfile(v, id, t.Secret.ID, TypeSecret, "Secret")
}

// checkDeleteAFD refuses to delete what a route or security policy still
// references, and a secret a custom domain still uses.
func checkDeleteAFD(v *View, id ID) error {
	typ := strings.ToLower(id.Type())
	if typ == strings.ToLower(TypeSecret) {
		return secretInUse(v, id)
	}
	if typ != strings.ToLower(TypeOriginGroup) && typ != strings.ToLower(TypeRuleSet) && typ != strings.ToLower(TypeCustomDomain) {
		return nil
	}
	var err error
	refers := func(ref string) bool { return strings.EqualFold(ref, id.String()) }
	v.Each(TypeRoute, func(r Resource) {
		if err != nil || profileOf(r.ID).Key() != profileOf(id).Key() || r.Operation == "delete" {
			return
		}
		var p afdProps
		_ = json.Unmarshal(r.JSON, &p)
		used := p.Properties.OriginGroup != nil && refers(p.Properties.OriginGroup.ID)
		for _, x := range p.Properties.RuleSets {
			used = used || refers(x.ID)
		}
		for _, x := range p.Properties.CustomDomains {
			used = used || refers(x.ID)
		}
		if used {
			err = &Error{Status: http.StatusConflict, Code: "Conflict",
				Message: fmt.Sprintf("%s %s is in use by route %s and cannot be deleted; remove the reference first.", id.Types[len(id.Types)-1], id.Name(), r.ID)} // simulated code
		}
	})
	if err != nil || typ != strings.ToLower(TypeCustomDomain) {
		return err
	}
	v.Each(TypeSecurityPolicy, func(r Resource) {
		if err != nil || profileOf(r.ID).Key() != profileOf(id).Key() || r.Operation == "delete" {
			return
		}
		var p afdProps
		_ = json.Unmarshal(r.JSON, &p)
		if p.Properties.Parameters == nil {
			return
		}
		for _, a := range p.Properties.Parameters.Associations {
			for _, d := range a.Domains {
				if refers(d.ID) {
					err = &Error{Status: http.StatusConflict, Code: "Conflict",
						Message: fmt.Sprintf("customDomains %s is in use by security policy %s and cannot be deleted; remove the association first.", id.Name(), r.ID)} // simulated code
				}
			}
		}
	})
	return err
}

// secretInUse refuses to delete a secret that a custom domain of its
// profile uses (simulated code, as for the other references).
func secretInUse(v *View, id ID) error {
	var err error
	v.Each(TypeCustomDomain, func(r Resource) {
		if err != nil || profileOf(r.ID).Key() != profileOf(id).Key() || r.Operation == "delete" {
			return
		}
		var p afdProps
		_ = json.Unmarshal(r.JSON, &p)
		if t := p.Properties.TLSSettings; t != nil && t.Secret != nil && strings.EqualFold(t.Secret.ID, id.String()) {
			err = &Error{Status: http.StatusConflict, Code: "Conflict",
				Message: fmt.Sprintf("secrets %s is in use by custom domain %s and cannot be deleted; remove the reference first.", id.Name(), r.ID)} // simulated code
		}
	})
	return err
}

func prepareWAF(_ *View, id ID, body, _ []byte) ([]byte, error) {
	var p afdProps
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, badRequest("InvalidRequestFormat", "Cannot parse the request: %v", err)
	}
	if !ruleName.MatchString(id.Name()) || len(id.Name()) > 128 {
		return nil, badRequest("BadRequest", "The WAF policy name %s is invalid: a letter, then letters and digits.", id.Name())
	}
	if p.SKU == nil || (p.SKU.Name != string(armfrontdoor.SKUNameStandardAzureFrontDoor) && p.SKU.Name != string(armfrontdoor.SKUNamePremiumAzureFrontDoor)) {
		return nil, badRequest("BadRequest", "WAF policy %s: sku must be Standard_AzureFrontDoor or Premium_AzureFrontDoor.", id)
	}
	return body, nil
}

// Fake servers.

func (s *Sim) cdnServers() *cdnfake.ServerFactory {
	return &cdnfake.ServerFactory{
		ProfilesServer: cdnfake.ProfilesServer{
			BeginCreate: func(ctx context.Context, _, _ string, v armcdn.Profile, _ *armcdn.ProfilesClientBeginCreateOptions) (azfake.PollerResponder[armcdn.ProfilesClientCreateResponse], azfake.ErrorResponder) {
				return PutLRO(ctx, s, v, func(v armcdn.Profile) armcdn.ProfilesClientCreateResponse {
					return armcdn.ProfilesClientCreateResponse{Profile: v}
				})
			},
			BeginDelete: func(ctx context.Context, _, _ string, _ *armcdn.ProfilesClientBeginDeleteOptions) (azfake.PollerResponder[armcdn.ProfilesClientDeleteResponse], azfake.ErrorResponder) {
				return DeleteLRO[armcdn.ProfilesClientDeleteResponse](ctx, s)
			},
			Get: func(_ context.Context, _, _ string, _ *armcdn.ProfilesClientGetOptions) (azfake.Responder[armcdn.ProfilesClientGetResponse], azfake.ErrorResponder) {
				return GetResource(s, func(v armcdn.Profile) armcdn.ProfilesClientGetResponse {
					return armcdn.ProfilesClientGetResponse{Profile: v}
				})
			},
			NewListByResourceGroupPager: func(_ string, _ *armcdn.ProfilesClientListByResourceGroupOptions) azfake.PagerResponder[armcdn.ProfilesClientListByResourceGroupResponse] {
				return ListPager(s, func(v []*armcdn.Profile) armcdn.ProfilesClientListByResourceGroupResponse {
					return armcdn.ProfilesClientListByResourceGroupResponse{ProfileListResult: armcdn.ProfileListResult{Value: v}}
				})
			},
		},
		AFDEndpointsServer: cdnfake.AFDEndpointsServer{
			BeginCreate: func(ctx context.Context, _, _, _ string, v armcdn.AFDEndpoint, _ *armcdn.AFDEndpointsClientBeginCreateOptions) (azfake.PollerResponder[armcdn.AFDEndpointsClientCreateResponse], azfake.ErrorResponder) {
				return PutLRO(ctx, s, v, func(v armcdn.AFDEndpoint) armcdn.AFDEndpointsClientCreateResponse {
					return armcdn.AFDEndpointsClientCreateResponse{AFDEndpoint: v}
				})
			},
			BeginDelete: func(ctx context.Context, _, _, _ string, _ *armcdn.AFDEndpointsClientBeginDeleteOptions) (azfake.PollerResponder[armcdn.AFDEndpointsClientDeleteResponse], azfake.ErrorResponder) {
				return DeleteLRO[armcdn.AFDEndpointsClientDeleteResponse](ctx, s)
			},
			Get: func(_ context.Context, _, _, _ string, _ *armcdn.AFDEndpointsClientGetOptions) (azfake.Responder[armcdn.AFDEndpointsClientGetResponse], azfake.ErrorResponder) {
				return GetResource(s, func(v armcdn.AFDEndpoint) armcdn.AFDEndpointsClientGetResponse {
					return armcdn.AFDEndpointsClientGetResponse{AFDEndpoint: v}
				})
			},
			NewListByProfilePager: func(_, _ string, _ *armcdn.AFDEndpointsClientListByProfileOptions) azfake.PagerResponder[armcdn.AFDEndpointsClientListByProfileResponse] {
				return ListPager(s, func(v []*armcdn.AFDEndpoint) armcdn.AFDEndpointsClientListByProfileResponse {
					return armcdn.AFDEndpointsClientListByProfileResponse{AFDEndpointListResult: armcdn.AFDEndpointListResult{Value: v}}
				})
			},
		},
		AFDOriginGroupsServer: cdnfake.AFDOriginGroupsServer{
			BeginCreate: func(ctx context.Context, _, _, _ string, v armcdn.AFDOriginGroup, _ *armcdn.AFDOriginGroupsClientBeginCreateOptions) (azfake.PollerResponder[armcdn.AFDOriginGroupsClientCreateResponse], azfake.ErrorResponder) {
				return PutLRO(ctx, s, v, func(v armcdn.AFDOriginGroup) armcdn.AFDOriginGroupsClientCreateResponse {
					return armcdn.AFDOriginGroupsClientCreateResponse{AFDOriginGroup: v}
				})
			},
			BeginDelete: func(ctx context.Context, _, _, _ string, _ *armcdn.AFDOriginGroupsClientBeginDeleteOptions) (azfake.PollerResponder[armcdn.AFDOriginGroupsClientDeleteResponse], azfake.ErrorResponder) {
				return DeleteLRO[armcdn.AFDOriginGroupsClientDeleteResponse](ctx, s)
			},
			Get: func(_ context.Context, _, _, _ string, _ *armcdn.AFDOriginGroupsClientGetOptions) (azfake.Responder[armcdn.AFDOriginGroupsClientGetResponse], azfake.ErrorResponder) {
				return GetResource(s, func(v armcdn.AFDOriginGroup) armcdn.AFDOriginGroupsClientGetResponse {
					return armcdn.AFDOriginGroupsClientGetResponse{AFDOriginGroup: v}
				})
			},
			NewListByProfilePager: func(_, _ string, _ *armcdn.AFDOriginGroupsClientListByProfileOptions) azfake.PagerResponder[armcdn.AFDOriginGroupsClientListByProfileResponse] {
				return ListPager(s, func(v []*armcdn.AFDOriginGroup) armcdn.AFDOriginGroupsClientListByProfileResponse {
					return armcdn.AFDOriginGroupsClientListByProfileResponse{AFDOriginGroupListResult: armcdn.AFDOriginGroupListResult{Value: v}}
				})
			},
		},
		AFDOriginsServer: cdnfake.AFDOriginsServer{
			BeginCreate: func(ctx context.Context, _, _, _, _ string, v armcdn.AFDOrigin, _ *armcdn.AFDOriginsClientBeginCreateOptions) (azfake.PollerResponder[armcdn.AFDOriginsClientCreateResponse], azfake.ErrorResponder) {
				return PutLRO(ctx, s, v, func(v armcdn.AFDOrigin) armcdn.AFDOriginsClientCreateResponse {
					return armcdn.AFDOriginsClientCreateResponse{AFDOrigin: v}
				})
			},
			BeginDelete: func(ctx context.Context, _, _, _, _ string, _ *armcdn.AFDOriginsClientBeginDeleteOptions) (azfake.PollerResponder[armcdn.AFDOriginsClientDeleteResponse], azfake.ErrorResponder) {
				return DeleteLRO[armcdn.AFDOriginsClientDeleteResponse](ctx, s)
			},
			Get: func(_ context.Context, _, _, _, _ string, _ *armcdn.AFDOriginsClientGetOptions) (azfake.Responder[armcdn.AFDOriginsClientGetResponse], azfake.ErrorResponder) {
				return GetResource(s, func(v armcdn.AFDOrigin) armcdn.AFDOriginsClientGetResponse {
					return armcdn.AFDOriginsClientGetResponse{AFDOrigin: v}
				})
			},
			NewListByOriginGroupPager: func(_, _, _ string, _ *armcdn.AFDOriginsClientListByOriginGroupOptions) azfake.PagerResponder[armcdn.AFDOriginsClientListByOriginGroupResponse] {
				return ListPager(s, func(v []*armcdn.AFDOrigin) armcdn.AFDOriginsClientListByOriginGroupResponse {
					return armcdn.AFDOriginsClientListByOriginGroupResponse{AFDOriginListResult: armcdn.AFDOriginListResult{Value: v}}
				})
			},
		},
		RoutesServer: cdnfake.RoutesServer{
			BeginCreate: func(ctx context.Context, _, _, _, _ string, v armcdn.Route, _ *armcdn.RoutesClientBeginCreateOptions) (azfake.PollerResponder[armcdn.RoutesClientCreateResponse], azfake.ErrorResponder) {
				return PutLRO(ctx, s, v, func(v armcdn.Route) armcdn.RoutesClientCreateResponse {
					return armcdn.RoutesClientCreateResponse{Route: v}
				})
			},
			BeginDelete: func(ctx context.Context, _, _, _, _ string, _ *armcdn.RoutesClientBeginDeleteOptions) (azfake.PollerResponder[armcdn.RoutesClientDeleteResponse], azfake.ErrorResponder) {
				return DeleteLRO[armcdn.RoutesClientDeleteResponse](ctx, s)
			},
			Get: func(_ context.Context, _, _, _, _ string, _ *armcdn.RoutesClientGetOptions) (azfake.Responder[armcdn.RoutesClientGetResponse], azfake.ErrorResponder) {
				return GetResource(s, func(v armcdn.Route) armcdn.RoutesClientGetResponse { return armcdn.RoutesClientGetResponse{Route: v} })
			},
			NewListByEndpointPager: func(_, _, _ string, _ *armcdn.RoutesClientListByEndpointOptions) azfake.PagerResponder[armcdn.RoutesClientListByEndpointResponse] {
				return ListPager(s, func(v []*armcdn.Route) armcdn.RoutesClientListByEndpointResponse {
					return armcdn.RoutesClientListByEndpointResponse{RouteListResult: armcdn.RouteListResult{Value: v}}
				})
			},
		},
		RuleSetsServer: cdnfake.RuleSetsServer{
			Create: func(ctx context.Context, _, _, _ string, _ *armcdn.RuleSetsClientCreateOptions) (resp azfake.Responder[armcdn.RuleSetsClientCreateResponse], errResp azfake.ErrorResponder) {
				b, err := s.PutSync(ctx, s.RequestID(), []byte(`{"properties":{}}`))
				if err != nil {
					errResp.SetError(err)
					return
				}
				var v armcdn.RuleSet
				if err := json.Unmarshal(b, &v); err != nil {
					errResp.SetError(err)
					return
				}
				resp.SetResponse(http.StatusOK, armcdn.RuleSetsClientCreateResponse{RuleSet: v}, nil)
				return
			},
			BeginDelete: func(ctx context.Context, _, _, _ string, _ *armcdn.RuleSetsClientBeginDeleteOptions) (azfake.PollerResponder[armcdn.RuleSetsClientDeleteResponse], azfake.ErrorResponder) {
				return DeleteLRO[armcdn.RuleSetsClientDeleteResponse](ctx, s)
			},
			Get: func(_ context.Context, _, _, _ string, _ *armcdn.RuleSetsClientGetOptions) (azfake.Responder[armcdn.RuleSetsClientGetResponse], azfake.ErrorResponder) {
				return GetResource(s, func(v armcdn.RuleSet) armcdn.RuleSetsClientGetResponse {
					return armcdn.RuleSetsClientGetResponse{RuleSet: v}
				})
			},
			NewListByProfilePager: func(_, _ string, _ *armcdn.RuleSetsClientListByProfileOptions) azfake.PagerResponder[armcdn.RuleSetsClientListByProfileResponse] {
				return ListPager(s, func(v []*armcdn.RuleSet) armcdn.RuleSetsClientListByProfileResponse {
					return armcdn.RuleSetsClientListByProfileResponse{RuleSetListResult: armcdn.RuleSetListResult{Value: v}}
				})
			},
		},
		RulesServer: cdnfake.RulesServer{
			BeginCreate: func(ctx context.Context, _, _, _, _ string, v armcdn.Rule, _ *armcdn.RulesClientBeginCreateOptions) (azfake.PollerResponder[armcdn.RulesClientCreateResponse], azfake.ErrorResponder) {
				return PutLRO(ctx, s, v, func(v armcdn.Rule) armcdn.RulesClientCreateResponse { return armcdn.RulesClientCreateResponse{Rule: v} })
			},
			BeginDelete: func(ctx context.Context, _, _, _, _ string, _ *armcdn.RulesClientBeginDeleteOptions) (azfake.PollerResponder[armcdn.RulesClientDeleteResponse], azfake.ErrorResponder) {
				return DeleteLRO[armcdn.RulesClientDeleteResponse](ctx, s)
			},
			Get: func(_ context.Context, _, _, _, _ string, _ *armcdn.RulesClientGetOptions) (azfake.Responder[armcdn.RulesClientGetResponse], azfake.ErrorResponder) {
				return GetResource(s, func(v armcdn.Rule) armcdn.RulesClientGetResponse { return armcdn.RulesClientGetResponse{Rule: v} })
			},
			NewListByRuleSetPager: func(_, _, _ string, _ *armcdn.RulesClientListByRuleSetOptions) azfake.PagerResponder[armcdn.RulesClientListByRuleSetResponse] {
				return ListPager(s, func(v []*armcdn.Rule) armcdn.RulesClientListByRuleSetResponse {
					return armcdn.RulesClientListByRuleSetResponse{RuleListResult: armcdn.RuleListResult{Value: v}}
				})
			},
		},
		SecurityPoliciesServer: cdnfake.SecurityPoliciesServer{
			BeginCreate: func(ctx context.Context, _, _, _ string, v armcdn.SecurityPolicy, _ *armcdn.SecurityPoliciesClientBeginCreateOptions) (azfake.PollerResponder[armcdn.SecurityPoliciesClientCreateResponse], azfake.ErrorResponder) {
				return PutLRO(ctx, s, v, func(v armcdn.SecurityPolicy) armcdn.SecurityPoliciesClientCreateResponse {
					return armcdn.SecurityPoliciesClientCreateResponse{SecurityPolicy: v}
				})
			},
			BeginDelete: func(ctx context.Context, _, _, _ string, _ *armcdn.SecurityPoliciesClientBeginDeleteOptions) (azfake.PollerResponder[armcdn.SecurityPoliciesClientDeleteResponse], azfake.ErrorResponder) {
				return DeleteLRO[armcdn.SecurityPoliciesClientDeleteResponse](ctx, s)
			},
			Get: func(_ context.Context, _, _, _ string, _ *armcdn.SecurityPoliciesClientGetOptions) (azfake.Responder[armcdn.SecurityPoliciesClientGetResponse], azfake.ErrorResponder) {
				return GetResource(s, func(v armcdn.SecurityPolicy) armcdn.SecurityPoliciesClientGetResponse {
					return armcdn.SecurityPoliciesClientGetResponse{SecurityPolicy: v}
				})
			},
			NewListByProfilePager: func(_, _ string, _ *armcdn.SecurityPoliciesClientListByProfileOptions) azfake.PagerResponder[armcdn.SecurityPoliciesClientListByProfileResponse] {
				return ListPager(s, func(v []*armcdn.SecurityPolicy) armcdn.SecurityPoliciesClientListByProfileResponse {
					return armcdn.SecurityPoliciesClientListByProfileResponse{SecurityPolicyListResult: armcdn.SecurityPolicyListResult{Value: v}}
				})
			},
		},
		SecretsServer: cdnfake.SecretsServer{
			BeginCreate: func(ctx context.Context, _, _, _ string, v armcdn.Secret, _ *armcdn.SecretsClientBeginCreateOptions) (azfake.PollerResponder[armcdn.SecretsClientCreateResponse], azfake.ErrorResponder) {
				return PutLRO(ctx, s, v, func(v armcdn.Secret) armcdn.SecretsClientCreateResponse {
					return armcdn.SecretsClientCreateResponse{Secret: v}
				})
			},
			BeginDelete: func(ctx context.Context, _, _, _ string, _ *armcdn.SecretsClientBeginDeleteOptions) (azfake.PollerResponder[armcdn.SecretsClientDeleteResponse], azfake.ErrorResponder) {
				return DeleteLRO[armcdn.SecretsClientDeleteResponse](ctx, s)
			},
			Get: func(_ context.Context, _, _, _ string, _ *armcdn.SecretsClientGetOptions) (azfake.Responder[armcdn.SecretsClientGetResponse], azfake.ErrorResponder) {
				return GetResource(s, func(v armcdn.Secret) armcdn.SecretsClientGetResponse {
					return armcdn.SecretsClientGetResponse{Secret: v}
				})
			},
			NewListByProfilePager: func(_, _ string, _ *armcdn.SecretsClientListByProfileOptions) azfake.PagerResponder[armcdn.SecretsClientListByProfileResponse] {
				return ListPager(s, func(v []*armcdn.Secret) armcdn.SecretsClientListByProfileResponse {
					return armcdn.SecretsClientListByProfileResponse{SecretListResult: armcdn.SecretListResult{Value: v}}
				})
			},
		},
		AFDCustomDomainsServer: cdnfake.AFDCustomDomainsServer{
			BeginCreate: func(ctx context.Context, _, _, _ string, v armcdn.AFDDomain, _ *armcdn.AFDCustomDomainsClientBeginCreateOptions) (azfake.PollerResponder[armcdn.AFDCustomDomainsClientCreateResponse], azfake.ErrorResponder) {
				return PutLRO(ctx, s, v, func(v armcdn.AFDDomain) armcdn.AFDCustomDomainsClientCreateResponse {
					return armcdn.AFDCustomDomainsClientCreateResponse{AFDDomain: v}
				})
			},
			BeginDelete: func(ctx context.Context, _, _, _ string, _ *armcdn.AFDCustomDomainsClientBeginDeleteOptions) (azfake.PollerResponder[armcdn.AFDCustomDomainsClientDeleteResponse], azfake.ErrorResponder) {
				return DeleteLRO[armcdn.AFDCustomDomainsClientDeleteResponse](ctx, s)
			},
			Get: func(_ context.Context, _, _, _ string, _ *armcdn.AFDCustomDomainsClientGetOptions) (azfake.Responder[armcdn.AFDCustomDomainsClientGetResponse], azfake.ErrorResponder) {
				return GetResource(s, func(v armcdn.AFDDomain) armcdn.AFDCustomDomainsClientGetResponse {
					return armcdn.AFDCustomDomainsClientGetResponse{AFDDomain: v}
				})
			},
			NewListByProfilePager: func(_, _ string, _ *armcdn.AFDCustomDomainsClientListByProfileOptions) azfake.PagerResponder[armcdn.AFDCustomDomainsClientListByProfileResponse] {
				return ListPager(s, func(v []*armcdn.AFDDomain) armcdn.AFDCustomDomainsClientListByProfileResponse {
					return armcdn.AFDCustomDomainsClientListByProfileResponse{AFDDomainListResult: armcdn.AFDDomainListResult{Value: v}}
				})
			},
		},
	}
}

func (s *Sim) wafServers() *fdfake.ServerFactory {
	return &fdfake.ServerFactory{PoliciesServer: fdfake.PoliciesServer{
		BeginCreateOrUpdate: func(ctx context.Context, _, _ string, v armfrontdoor.WebApplicationFirewallPolicy, _ *armfrontdoor.PoliciesClientBeginCreateOrUpdateOptions) (azfake.PollerResponder[armfrontdoor.PoliciesClientCreateOrUpdateResponse], azfake.ErrorResponder) {
			return PutLRO(ctx, s, v, func(v armfrontdoor.WebApplicationFirewallPolicy) armfrontdoor.PoliciesClientCreateOrUpdateResponse {
				return armfrontdoor.PoliciesClientCreateOrUpdateResponse{WebApplicationFirewallPolicy: v}
			})
		},
		BeginDelete: func(ctx context.Context, _, _ string, _ *armfrontdoor.PoliciesClientBeginDeleteOptions) (azfake.PollerResponder[armfrontdoor.PoliciesClientDeleteResponse], azfake.ErrorResponder) {
			return DeleteLRO[armfrontdoor.PoliciesClientDeleteResponse](ctx, s)
		},
		Get: func(_ context.Context, _, _ string, _ *armfrontdoor.PoliciesClientGetOptions) (azfake.Responder[armfrontdoor.PoliciesClientGetResponse], azfake.ErrorResponder) {
			return GetResource(s, func(v armfrontdoor.WebApplicationFirewallPolicy) armfrontdoor.PoliciesClientGetResponse {
				return armfrontdoor.PoliciesClientGetResponse{WebApplicationFirewallPolicy: v}
			})
		},
	}}
}
