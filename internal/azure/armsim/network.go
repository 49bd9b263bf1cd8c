package armsim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6/fake"

	"github.com/fleetnet/fleetnet/internal/azure/armutil"
)

// Network resource types.
const (
	TypeLoadBalancer    = "Microsoft.Network/loadBalancers"
	TypePublicIPAddress = "Microsoft.Network/publicIPAddresses"
	typeFrontend        = "Microsoft.Network/loadBalancers/frontendIPConfigurations"
)

// HomeRegions are the regions where a Global-tier (cross-region) load
// balancer or public IP address may be deployed, as Azure's documentation
// lists them ("Cross-region (Global) Load Balancer", home regions).
var HomeRegions = []string{"centralus", "eastasia", "eastus2", "northeurope", "southeastasia", "uksouth", "usgovvirginia", "westeurope", "westus"}

// NormalizeLocation is a location as ARM compares it: "West Europe" and
// "westeurope" are the same.
func NormalizeLocation(l string) string {
	return strings.ToLower(strings.ReplaceAll(l, " ", ""))
}

// networkName is the network resource provider's rule for resource and
// child resource names.
var networkName = regexp.MustCompile(`^[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,78}[A-Za-z0-9_])?$`)

// The network rules this simulation enforces. Codes that Azure documents
// or that its error messages show are used as they are; the few rules the
// documentation states without the error the service returns get a code
// of the simulation's (marked "simulated code" below), with the same
// envelope and status.

func (s *Sim) registerNetwork() {
	s.kinds[strings.ToLower(TypeLoadBalancer)] = &Kind{Type: TypeLoadBalancer, Prepare: prepareLoadBalancer}
	s.kinds[strings.ToLower(TypePublicIPAddress)] = &Kind{Type: TypePublicIPAddress, Prepare: preparePublicIP,
		Settle: settlePublicIP, CheckDelete: checkDeletePublicIP}
	s.network = s.networkServers()
	s.mounts["microsoft.network"] = fake.NewServerFactoryTransport(s.network)
}

// NetworkServerFactory is the fake server factory mounted for
// Microsoft.Network, with LoadBalancersServer and PublicIPAddressesServer
// set. Set further servers on it (e.g. PrivateLinkServicesServer, built
// with PutLRO, GetResource...) before the first request of their client:
// the factory's transport takes a client's server when it first serves
// that client.
func (s *Sim) NetworkServerFactory() *fake.ServerFactory { return s.network }

func (s *Sim) networkServers() *fake.ServerFactory {
	return &fake.ServerFactory{
		LoadBalancersServer: fake.LoadBalancersServer{
			BeginCreateOrUpdate: func(ctx context.Context, _, _ string, lb armnetwork.LoadBalancer, _ *armnetwork.LoadBalancersClientBeginCreateOrUpdateOptions) (azfake.PollerResponder[armnetwork.LoadBalancersClientCreateOrUpdateResponse], azfake.ErrorResponder) {
				return PutLRO(ctx, s, lb, func(v armnetwork.LoadBalancer) armnetwork.LoadBalancersClientCreateOrUpdateResponse {
					return armnetwork.LoadBalancersClientCreateOrUpdateResponse{LoadBalancer: v}
				})
			},
			BeginDelete: func(ctx context.Context, _, _ string, _ *armnetwork.LoadBalancersClientBeginDeleteOptions) (azfake.PollerResponder[armnetwork.LoadBalancersClientDeleteResponse], azfake.ErrorResponder) {
				return DeleteLRO[armnetwork.LoadBalancersClientDeleteResponse](ctx, s)
			},
			Get: func(_ context.Context, _, _ string, _ *armnetwork.LoadBalancersClientGetOptions) (azfake.Responder[armnetwork.LoadBalancersClientGetResponse], azfake.ErrorResponder) {
				return GetResource(s, func(v armnetwork.LoadBalancer) armnetwork.LoadBalancersClientGetResponse {
					return armnetwork.LoadBalancersClientGetResponse{LoadBalancer: v}
				})
			},
			NewListPager: func(_ string, _ *armnetwork.LoadBalancersClientListOptions) azfake.PagerResponder[armnetwork.LoadBalancersClientListResponse] {
				return ListPager(s, func(v []*armnetwork.LoadBalancer) armnetwork.LoadBalancersClientListResponse {
					return armnetwork.LoadBalancersClientListResponse{LoadBalancerListResult: armnetwork.LoadBalancerListResult{Value: v}}
				})
			},
		},
		PublicIPAddressesServer: fake.PublicIPAddressesServer{
			BeginCreateOrUpdate: func(ctx context.Context, _, _ string, ip armnetwork.PublicIPAddress, _ *armnetwork.PublicIPAddressesClientBeginCreateOrUpdateOptions) (azfake.PollerResponder[armnetwork.PublicIPAddressesClientCreateOrUpdateResponse], azfake.ErrorResponder) {
				return PutLRO(ctx, s, ip, func(v armnetwork.PublicIPAddress) armnetwork.PublicIPAddressesClientCreateOrUpdateResponse {
					return armnetwork.PublicIPAddressesClientCreateOrUpdateResponse{PublicIPAddress: v}
				})
			},
			BeginDelete: func(ctx context.Context, _, _ string, _ *armnetwork.PublicIPAddressesClientBeginDeleteOptions) (azfake.PollerResponder[armnetwork.PublicIPAddressesClientDeleteResponse], azfake.ErrorResponder) {
				return DeleteLRO[armnetwork.PublicIPAddressesClientDeleteResponse](ctx, s)
			},
			Get: func(_ context.Context, _, _ string, _ *armnetwork.PublicIPAddressesClientGetOptions) (azfake.Responder[armnetwork.PublicIPAddressesClientGetResponse], azfake.ErrorResponder) {
				return GetResource(s, func(v armnetwork.PublicIPAddress) armnetwork.PublicIPAddressesClientGetResponse {
					return armnetwork.PublicIPAddressesClientGetResponse{PublicIPAddress: v}
				})
			},
			NewListPager: func(_ string, _ *armnetwork.PublicIPAddressesClientListOptions) azfake.PagerResponder[armnetwork.PublicIPAddressesClientListResponse] {
				return ListPager(s, func(v []*armnetwork.PublicIPAddress) armnetwork.PublicIPAddressesClientListResponse {
					return armnetwork.PublicIPAddressesClientListResponse{PublicIPAddressListResult: armnetwork.PublicIPAddressListResult{Value: v}}
				})
			},
		},
	}
}

func badRequest(code, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: code, Message: fmt.Sprintf(format, args...)}
}

func isGlobal(sku *armnetwork.LoadBalancerSKU) bool {
	return sku != nil && sku.Tier != nil && *sku.Tier == armnetwork.LoadBalancerSKUTierGlobal
}

func checkHomeRegion(location, what string) error {
	if !slices.Contains(HomeRegions, NormalizeLocation(location)) {
		// simulated code: the documentation says a Global-tier resource
		// may only be deployed in a home region.
		return badRequest("GlobalTierNotSupportedInLocation",
			"%s of tier Global cannot be deployed in location '%s'. A cross-region load balancer and a Global tier public IP address can only be deployed in a home region: %s.",
			what, location, strings.Join(HomeRegions, ", "))
	}
	return nil
}

func prepareLoadBalancer(v *View, id ID, body, _ []byte) ([]byte, error) {
	var lb armnetwork.LoadBalancer
	if err := json.Unmarshal(body, &lb); err != nil {
		return nil, badRequest("InvalidRequestFormat", "Cannot parse the request: %v", err)
	}
	if !networkName.MatchString(id.Name()) {
		return nil, InvalidResourceName(id.Name())
	}
	if lb.Location == nil || *lb.Location == "" {
		return nil, badRequest("LocationRequired", "The location property is required for this definition.")
	}
	if lb.Properties == nil {
		lb.Properties = &armnetwork.LoadBalancerPropertiesFormat{}
	}
	p := lb.Properties
	names := map[string]bool{}
	checkName := func(kind, name string) error {
		if !networkName.MatchString(name) {
			return InvalidResourceName(name)
		}
		if names[kind+"/"+strings.ToLower(name)] {
			return badRequest("DuplicateResourceName", "Resource %s has two child resources with the same name (%s).", id, name)
		}
		names[kind+"/"+strings.ToLower(name)] = true
		return nil
	}
	frontends := map[string]bool{}
	for _, fe := range p.FrontendIPConfigurations {
		if err := checkName("frontendIPConfigurations", armutil.Deref(fe.Name)); err != nil {
			return nil, err
		}
		frontends[id.Child("frontendIPConfigurations", *fe.Name).Key()] = true
	}
	pools := map[string]*armnetwork.BackendAddressPool{}
	for _, bp := range p.BackendAddressPools {
		if err := checkName("backendAddressPools", armutil.Deref(bp.Name)); err != nil {
			return nil, err
		}
		pools[id.Child("backendAddressPools", *bp.Name).Key()] = bp
		if bp.Properties != nil {
			for _, a := range bp.Properties.LoadBalancerBackendAddresses {
				if err := checkName("backendAddressPools/"+*bp.Name+"/addresses", armutil.Deref(a.Name)); err != nil {
					return nil, err
				}
			}
		}
	}
	for _, r := range p.LoadBalancingRules {
		if err := checkName("loadBalancingRules", armutil.Deref(r.Name)); err != nil {
			return nil, err
		}
	}
	for _, pr := range p.Probes {
		if err := checkName("probes", armutil.Deref(pr.Name)); err != nil {
			return nil, err
		}
	}
	if isGlobal(lb.SKU) {
		if err := checkGlobalLoadBalancer(v, id, &lb, frontends, pools); err != nil {
			return nil, err
		}
	} else {
		for _, fe := range p.FrontendIPConfigurations {
			if fe.Properties != nil && fe.Properties.PublicIPAddress != nil {
				if err := checkFrontendPublicIP(v, id, fe, lb.SKU); err != nil {
					return nil, err
				}
			}
		}
	}
	fillLoadBalancer(id, &lb)
	return json.Marshal(lb)
}

// checkFrontendPublicIP: the public IP exists, has the load balancer's SKU
// and tier, is provisioned, and no other load balancer uses it.
func checkFrontendPublicIP(v *View, id ID, fe *armnetwork.FrontendIPConfiguration, sku *armnetwork.LoadBalancerSKU) error {
	ref := armutil.Deref(fe.Properties.PublicIPAddress.ID)
	feID := id.Child("frontendIPConfigurations", armutil.Deref(fe.Name))
	pipID, err := ParseID(ref)
	if err != nil || !strings.EqualFold(pipID.Type(), TypePublicIPAddress) {
		return badRequest("InvalidResourceReference", "Resource %s referenced by resource %s is not a public IP address.", ref, feID)
	}
	r, ok := v.Get(pipID)
	if !ok {
		return InvalidResourceReference(ref, feID.String())
	}
	var pip armnetwork.PublicIPAddress
	_ = json.Unmarshal(r.JSON, &pip)
	lbName, lbTier := armnetwork.LoadBalancerSKUNameBasic, armnetwork.LoadBalancerSKUTierRegional
	if sku != nil && sku.Name != nil {
		lbName = *sku.Name
	}
	if sku != nil && sku.Tier != nil {
		lbTier = *sku.Tier
	}
	pipName, pipTier := armnetwork.PublicIPAddressSKUNameBasic, armnetwork.PublicIPAddressSKUTierRegional
	if pip.SKU != nil && pip.SKU.Name != nil {
		pipName = *pip.SKU.Name
	}
	if pip.SKU != nil && pip.SKU.Tier != nil {
		pipTier = *pip.SKU.Tier
	}
	if string(lbName) != string(pipName) || string(lbTier) != string(pipTier) {
		return badRequest("DifferentSkuLoadBalancersAndPublicIPAddressNotAllowed",
			"Standard sku load balancer and public IP address must match: load balancer %s has sku %s tier %s, its frontend %s uses public IP address %s of sku %s tier %s.",
			id, lbName, lbTier, feID, pipID, pipName, pipTier)
	}
	if r.State != StateSucceeded {
		return ReferencedResourceNotProvisioned(pipID, r.State, id)
	}
	var inUse error
	v.Each(TypeLoadBalancer, func(o Resource) {
		if o.ID.Key() == id.Key() || inUse != nil {
			return
		}
		var other armnetwork.LoadBalancer
		_ = json.Unmarshal(o.JSON, &other)
		if other.Properties == nil {
			return
		}
		for _, ofe := range other.Properties.FrontendIPConfigurations {
			if ofe.Properties != nil && ofe.Properties.PublicIPAddress != nil && strings.EqualFold(armutil.Deref(ofe.Properties.PublicIPAddress.ID), ref) {
				inUse = badRequest("PublicIPAddressInUse", "Resource %s is referenced by resource %s, and cannot be used by %s.", pipID, armutil.Deref(ofe.ID), feID)
			}
		}
	})
	return inUse
}

func checkGlobalLoadBalancer(v *View, id ID, lb *armnetwork.LoadBalancer, frontends map[string]bool, pools map[string]*armnetwork.BackendAddressPool) error {
	p := lb.Properties
	if lb.SKU.Name == nil || *lb.SKU.Name != armnetwork.LoadBalancerSKUNameStandard {
		return badRequest("InvalidLoadBalancerSkuForGlobalTier", "Load balancer %s: the Global tier requires sku Standard.", id) // simulated code
	}
	if err := checkHomeRegion(*lb.Location, "Load balancer "+id.Name()); err != nil {
		return err
	}
	if len(p.Probes) > 0 {
		// simulated code: the documentation says a cross-region load
		// balancer's health probe cannot be configured (it uses the
		// regional load balancers' health).
		return badRequest("GlobalLoadBalancerProbesNotSupported", "Load balancer %s of tier Global cannot have probes: a cross-region load balancer gathers the availability of its regional load balancers itself.", id)
	}
	if len(p.OutboundRules) > 0 {
		return badRequest("GlobalLoadBalancerOutboundRulesNotSupported", "Load balancer %s of tier Global cannot have outbound rules.", id) // simulated code
	}
	for _, fe := range p.FrontendIPConfigurations {
		if fe.Properties == nil || fe.Properties.PublicIPAddress == nil || fe.Properties.Subnet != nil || fe.Properties.PrivateIPAddress != nil {
			return badRequest("GlobalLoadBalancerFrontendMustBePublic", "Frontend IP configuration %s of load balancer %s of tier Global must use a public IP address: cross-region frontends are public only.", armutil.Deref(fe.Name), id) // simulated code
		}
		if err := checkFrontendPublicIP(v, id, fe, lb.SKU); err != nil {
			return err
		}
	}
	// frontend ports per referenced regional frontend, by protocol
	regionalPorts := map[string]map[string][]int32{}
	for poolKey, bp := range pools {
		if bp.Properties == nil {
			continue
		}
		if len(bp.Properties.BackendIPConfigurations) > 0 || bp.Properties.VirtualNetwork != nil {
			return badRequest("GlobalLoadBalancerBackendMustBeRegionalFrontend", "Backend address pool %s of a load balancer of tier Global can only hold frontend IP configurations of regional load balancers.", poolKey) // simulated code
		}
		for _, a := range bp.Properties.LoadBalancerBackendAddresses {
			if a.Properties == nil || a.Properties.LoadBalancerFrontendIPConfiguration == nil || a.Properties.IPAddress != nil ||
				a.Properties.Subnet != nil || a.Properties.VirtualNetwork != nil {
				return badRequest("GlobalLoadBalancerBackendMustBeRegionalFrontend", "Backend address %s of load balancer %s of tier Global must reference the frontend IP configuration of a regional load balancer, and nothing else.", armutil.Deref(a.Name), id) // simulated code
			}
			ref := armutil.Deref(a.Properties.LoadBalancerFrontendIPConfiguration.ID)
			ports, err := regionalFrontend(v, id, ref)
			if err != nil {
				return err
			}
			regionalPorts[strings.ToLower(ref)] = ports
		}
	}
	type ruleKey struct {
		proto string
		port  int32
		ref   string
	}
	seenFront, seenBack := map[ruleKey]string{}, map[ruleKey]string{}
	for _, r := range p.LoadBalancingRules {
		rp := r.Properties
		if rp == nil || rp.Protocol == nil || rp.FrontendPort == nil || rp.BackendPort == nil || rp.FrontendIPConfiguration == nil {
			return badRequest("InvalidRequestFormat", "Load balancing rule %s of %s needs protocol, frontendPort, backendPort and frontendIPConfiguration.", armutil.Deref(r.Name), id)
		}
		if !frontends[strings.ToLower(armutil.Deref(rp.FrontendIPConfiguration.ID))] {
			return InvalidResourceReference(armutil.Deref(rp.FrontendIPConfiguration.ID), id.Child("loadBalancingRules", *r.Name).String())
		}
		if rp.Probe != nil {
			return badRequest("GlobalLoadBalancerProbesNotSupported", "Load balancing rule %s of load balancer %s of tier Global cannot reference a probe.", *r.Name, id) // simulated code
		}
		if *rp.FrontendPort < 1 || *rp.FrontendPort > 65534 || *rp.BackendPort < 1 || *rp.BackendPort > 65535 {
			return badRequest("InvalidLoadBalancingRulePort", "Load balancing rule %s: frontendPort must be 1 to 65534 and backendPort 1 to 65535 on a load balancer of tier Global.", *r.Name) // simulated code
		}
		if *rp.Protocol == armnetwork.TransportProtocolUDP && *rp.FrontendPort == 3 {
			return badRequest("GlobalLoadBalancerUdpPort3NotSupported", "Load balancing rule %s: UDP on port 3 is not supported on a cross-region load balancer.", *r.Name) // simulated code
		}
		fk := ruleKey{string(*rp.Protocol), *rp.FrontendPort, strings.ToLower(armutil.Deref(rp.FrontendIPConfiguration.ID))}
		if other, ok := seenFront[fk]; ok {
			return badRequest("LoadBalancingRulesUseSameFrontendPortAndProtocol", "Load balancing rules %s and %s use the same frontend IP configuration, protocol and frontend port.", other, *r.Name)
		}
		seenFront[fk] = *r.Name
		var poolRefs []string
		if rp.BackendAddressPool != nil {
			poolRefs = append(poolRefs, armutil.Deref(rp.BackendAddressPool.ID))
		}
		for _, bp := range rp.BackendAddressPools {
			poolRefs = append(poolRefs, armutil.Deref(bp.ID))
		}
		for _, ref := range poolRefs {
			bp, ok := pools[strings.ToLower(ref)]
			if !ok {
				return InvalidResourceReference(ref, id.Child("loadBalancingRules", *r.Name).String())
			}
			bk := ruleKey{string(*rp.Protocol), *rp.BackendPort, strings.ToLower(ref)}
			if other, ok := seenBack[bk]; ok {
				return badRequest("RulesUseSameBackendPortProtocolAndPool",
					"Load balancing rules %s and %s with floating IP disabled use the same protocol %s and backend port %d, and must not be used with the same backend address pool %s.",
					other, *r.Name, *rp.Protocol, *rp.BackendPort, armutil.Deref(bp.Name))
			}
			seenBack[bk] = *r.Name
			if bp.Properties == nil {
				continue
			}
			for _, a := range bp.Properties.LoadBalancerBackendAddresses {
				feRef := armutil.Deref(a.Properties.LoadBalancerFrontendIPConfiguration.ID)
				ports := regionalPorts[strings.ToLower(feRef)]
				if !slices.Contains(ports[strings.ToLower(string(*rp.Protocol))], *rp.BackendPort) && !slices.Contains(ports["all"], *rp.BackendPort) {
					// simulated code: the documentation says the backend
					// port of a cross-region rule must match the frontend
					// port of a rule (or inbound NAT rule) of the regional
					// load balancer.
					return badRequest("GlobalLoadBalancerRuleBackendPortMismatch",
						"Load balancing rule %s of load balancer %s of tier Global has backend port %d/%s, but regional frontend %s has no load balancing or inbound NAT rule on frontend port %d/%s (it has %v). The backend port of a cross-region rule must match the frontend port of the regional load balancer's rule.",
						*r.Name, id, *rp.BackendPort, *rp.Protocol, feRef, *rp.BackendPort, *rp.Protocol, ports)
				}
			}
		}
	}
	return nil
}

// regionalFrontend checks that ref is the public frontend of a regional
// Standard load balancer and returns the frontend ports of its rules and
// inbound NAT rules on that frontend, by lowercase protocol.
func regionalFrontend(v *View, by ID, ref string) (map[string][]int32, error) {
	feID, err := ParseID(ref)
	if err != nil || !strings.EqualFold(feID.Type(), typeFrontend) {
		return nil, badRequest("InvalidResourceReference", "Resource %s referenced by load balancer %s is not a load balancer frontend IP configuration.", ref, by)
	}
	lbID, _ := feID.Parent()
	r, ok := v.Get(lbID)
	if !ok {
		return nil, InvalidResourceReference(ref, by.String())
	}
	var lb armnetwork.LoadBalancer
	_ = json.Unmarshal(r.JSON, &lb)
	if lb.SKU == nil || lb.SKU.Name == nil || *lb.SKU.Name != armnetwork.LoadBalancerSKUNameStandard || isGlobal(lb.SKU) {
		return nil, badRequest("GlobalLoadBalancerBackendMustBeRegionalFrontend", "Load balancer %s referenced by %s is not a regional Standard load balancer: a cross-region load balancer's backends are regional Standard load balancers.", lbID, by) // simulated code
	}
	var fe *armnetwork.FrontendIPConfiguration
	if lb.Properties != nil {
		for _, f := range lb.Properties.FrontendIPConfigurations {
			if strings.EqualFold(armutil.Deref(f.Name), feID.Name()) {
				fe = f
			}
		}
	}
	if fe == nil {
		return nil, InvalidResourceReference(ref, by.String())
	}
	if fe.Properties == nil || fe.Properties.PublicIPAddress == nil {
		return nil, badRequest("GlobalLoadBalancerBackendMustBeRegionalFrontend", "Frontend %s referenced by %s is internal: a private or internal load balancer cannot be a backend of a cross-region load balancer.", ref, by) // simulated code
	}
	ports := map[string][]int32{}
	for _, rule := range lb.Properties.LoadBalancingRules {
		if rp := rule.Properties; rp != nil && rp.FrontendIPConfiguration != nil && strings.EqualFold(armutil.Deref(rp.FrontendIPConfiguration.ID), ref) && rp.FrontendPort != nil && rp.Protocol != nil {
			ports[strings.ToLower(string(*rp.Protocol))] = append(ports[strings.ToLower(string(*rp.Protocol))], *rp.FrontendPort)
		}
	}
	for _, rule := range lb.Properties.InboundNatRules {
		if rp := rule.Properties; rp != nil && rp.FrontendIPConfiguration != nil && strings.EqualFold(armutil.Deref(rp.FrontendIPConfiguration.ID), ref) && rp.FrontendPort != nil && rp.Protocol != nil {
			ports[strings.ToLower(string(*rp.Protocol))] = append(ports[strings.ToLower(string(*rp.Protocol))], *rp.FrontendPort)
		}
	}
	return ports, nil
}

// fillLoadBalancer sets what the service fills in: child ids, types,
// etags and provisioning states.
func fillLoadBalancer(id ID, lb *armnetwork.LoadBalancer) {
	p := lb.Properties
	state := to.Ptr(armnetwork.ProvisioningStateSucceeded)
	for _, fe := range p.FrontendIPConfigurations {
		fe.ID = to.Ptr(id.Child("frontendIPConfigurations", *fe.Name).String())
		fe.Type = to.Ptr(typeFrontend)
		if fe.Properties == nil {
			fe.Properties = &armnetwork.FrontendIPConfigurationPropertiesFormat{}
		}
		fe.Properties.ProvisioningState = state
	}
	for _, bp := range p.BackendAddressPools {
		bp.ID = to.Ptr(id.Child("backendAddressPools", *bp.Name).String())
		bp.Type = to.Ptr(TypeLoadBalancer + "/backendAddressPools")
		if bp.Properties == nil {
			bp.Properties = &armnetwork.BackendAddressPoolPropertiesFormat{}
		}
		bp.Properties.ProvisioningState = state
	}
	for _, r := range p.LoadBalancingRules {
		r.ID = to.Ptr(id.Child("loadBalancingRules", *r.Name).String())
		r.Type = to.Ptr(TypeLoadBalancer + "/loadBalancingRules")
		if r.Properties != nil {
			r.Properties.ProvisioningState = state
		}
	}
	for _, pr := range p.Probes {
		pr.ID = to.Ptr(id.Child("probes", *pr.Name).String())
		pr.Type = to.Ptr(TypeLoadBalancer + "/probes")
	}
	if p.ResourceGUID == nil {
		p.ResourceGUID = to.Ptr(fmt.Sprintf("00000000-0000-4000-8000-%012x", len(id.Key())))
	}
}

func preparePublicIP(_ *View, id ID, body, prev []byte) ([]byte, error) {
	var pip armnetwork.PublicIPAddress
	if err := json.Unmarshal(body, &pip); err != nil {
		return nil, badRequest("InvalidRequestFormat", "Cannot parse the request: %v", err)
	}
	if !networkName.MatchString(id.Name()) {
		return nil, InvalidResourceName(id.Name())
	}
	if pip.Location == nil || *pip.Location == "" {
		return nil, badRequest("LocationRequired", "The location property is required for this definition.")
	}
	if pip.Properties == nil {
		pip.Properties = &armnetwork.PublicIPAddressPropertiesFormat{}
	}
	name, tier := armnetwork.PublicIPAddressSKUNameBasic, armnetwork.PublicIPAddressSKUTierRegional
	if pip.SKU != nil && pip.SKU.Name != nil {
		name = *pip.SKU.Name
	}
	if pip.SKU != nil && pip.SKU.Tier != nil {
		tier = *pip.SKU.Tier
	}
	static := pip.Properties.PublicIPAllocationMethod != nil && *pip.Properties.PublicIPAllocationMethod == armnetwork.IPAllocationMethodStatic
	if name == armnetwork.PublicIPAddressSKUNameStandard && !static {
		return nil, badRequest("StandardSkuPublicIPAddressesMustBeStatic", "Standard sku publicIp %s must have AllocationMethod set to Static.", id) // simulated code
	}
	if tier == armnetwork.PublicIPAddressSKUTierGlobal {
		if name != armnetwork.PublicIPAddressSKUNameStandard {
			return nil, badRequest("GlobalTierRequiresStandardSku", "Public IP address %s: the Global tier requires sku Standard.", id) // simulated code
		}
		if err := checkHomeRegion(*pip.Location, "Public IP address "+id.Name()); err != nil {
			return nil, err
		}
	}
	if prev != nil {
		var old armnetwork.PublicIPAddress
		_ = json.Unmarshal(prev, &old)
		oldName, oldTier := armnetwork.PublicIPAddressSKUNameBasic, armnetwork.PublicIPAddressSKUTierRegional
		if old.SKU != nil && old.SKU.Name != nil {
			oldName = *old.SKU.Name
		}
		if old.SKU != nil && old.SKU.Tier != nil {
			oldTier = *old.SKU.Tier
		}
		if oldName != name || oldTier != tier {
			return nil, badRequest("PublicIPAddressSkuCannotBeChanged", "The sku of public IP address %s cannot be changed from %s %s to %s %s.", id, oldName, oldTier, name, tier) // simulated code
		}
		if old.Properties != nil {
			pip.Properties.IPAddress = old.Properties.IPAddress
			pip.Properties.IPConfiguration = old.Properties.IPConfiguration
		}
	} else {
		pip.Properties.IPAddress = nil
	}
	pip.SKU = &armnetwork.PublicIPAddressSKU{Name: &name, Tier: &tier}
	if pip.Properties.PublicIPAddressVersion == nil {
		pip.Properties.PublicIPAddressVersion = to.Ptr(armnetwork.IPVersionIPv4)
	}
	return json.Marshal(pip)
}

// settlePublicIP allocates an address (from 203.0.113.0/24, TEST-NET-3,
// which routes nowhere) when the public IP has none.
func settlePublicIP(v *View, _ ID, body []byte) []byte {
	var pip armnetwork.PublicIPAddress
	if err := json.Unmarshal(body, &pip); err != nil {
		return body
	}
	if pip.Properties == nil {
		pip.Properties = &armnetwork.PublicIPAddressPropertiesFormat{}
	}
	if pip.Properties.IPAddress == nil {
		v.s.addresses++
		pip.Properties.IPAddress = to.Ptr(fmt.Sprintf("203.0.113.%d", v.s.addresses%254+1))
	}
	b, err := json.Marshal(pip)
	if err != nil {
		return body
	}
	return b
}

// checkDeletePublicIP refuses to delete a public IP address that a load
// balancer's frontend (one being deleted included) still uses.
func checkDeletePublicIP(v *View, id ID) error {
	var err error
	v.Each(TypeLoadBalancer, func(r Resource) {
		var lb armnetwork.LoadBalancer
		if json.Unmarshal(r.JSON, &lb) != nil || lb.Properties == nil || err != nil {
			return
		}
		for _, fe := range lb.Properties.FrontendIPConfigurations {
			if fe.Properties != nil && fe.Properties.PublicIPAddress != nil && strings.EqualFold(armutil.Deref(fe.Properties.PublicIPAddress.ID), id.String()) {
				err = badRequest("PublicIPAddressCannotBeDeleted",
					"Public IP address %s can not be deleted since it is still allocated to resource %s. In order to delete the public IP, disassociate/detach the Public IP address from the resource.  To learn how to do this, see aka.ms/deletepublicip.",
					id, armutil.Deref(fe.ID))
				return
			}
		}
	})
	return err
}

// RegionalFrontend describes one public frontend of a seeded regional
// load balancer: the ports its load-balancing rules serve (what a
// Kubernetes Service of type LoadBalancer gets from the cloud provider).
type RegionalFrontend struct {
	Name     string
	TCP, UDP []int32
}

// SeedRegionalLoadBalancer stores a regional Standard public load balancer
// (as AKS's cloud provider makes, named kubernetes in the MC_ resource
// group) with a Standard public IP and rules per frontend, and returns its
// frontends' ids: what member clusters publish as their regional
// frontends.
func (s *Sim) SeedRegionalLoadBalancer(subscription, resourceGroup, name, location string, frontends ...RegionalFrontend) ([]string, error) {
	lbID := ResourceID(subscription, resourceGroup, TypeLoadBalancer, name)
	lb := armnetwork.LoadBalancer{Location: to.Ptr(location),
		SKU:        &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard), Tier: to.Ptr(armnetwork.LoadBalancerSKUTierRegional)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{BackendAddressPools: []*armnetwork.BackendAddressPool{{Name: to.Ptr(name)}}}}
	var ids []string
	for _, f := range frontends {
		pipID := ResourceID(subscription, resourceGroup, TypePublicIPAddress, name+"-"+f.Name)
		err := s.Seed(pipID, armnetwork.PublicIPAddress{Location: to.Ptr(location),
			SKU:        &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard), Tier: to.Ptr(armnetwork.PublicIPAddressSKUTierRegional)},
			Properties: &armnetwork.PublicIPAddressPropertiesFormat{PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic)}})
		if err != nil {
			return nil, err
		}
		feID := lbID.Child("frontendIPConfigurations", f.Name).String()
		ids = append(ids, feID)
		lb.Properties.FrontendIPConfigurations = append(lb.Properties.FrontendIPConfigurations, &armnetwork.FrontendIPConfiguration{Name: to.Ptr(f.Name),
			Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{PublicIPAddress: &armnetwork.PublicIPAddress{ID: to.Ptr(pipID.String())}}})
		for _, r := range []struct {
			proto armnetwork.TransportProtocol
			ports []int32
		}{{armnetwork.TransportProtocolTCP, f.TCP}, {armnetwork.TransportProtocolUDP, f.UDP}} {
			for _, port := range r.ports {
				lb.Properties.LoadBalancingRules = append(lb.Properties.LoadBalancingRules, &armnetwork.LoadBalancingRule{
					Name: to.Ptr(fmt.Sprintf("%s-%s-%d", f.Name, strings.ToLower(string(r.proto)), port)),
					Properties: &armnetwork.LoadBalancingRulePropertiesFormat{Protocol: to.Ptr(r.proto), FrontendPort: to.Ptr(port), BackendPort: to.Ptr(port),
						FrontendIPConfiguration: &armnetwork.SubResource{ID: to.Ptr(feID)},
						BackendAddressPool:      &armnetwork.SubResource{ID: to.Ptr(lbID.Child("backendAddressPools", name).String())}}})
			}
		}
	}
	fillLoadBalancer(lbID, &lb)
	return ids, s.Seed(lbID, lb)
}
