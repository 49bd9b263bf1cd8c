package crossregion

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/azure/armutil"
)

// Tags on every resource the provider creates. Azure tag names cannot
// contain '/', and a tag value holds at most 256 characters (a
// namespace/name can be longer), so namespace and name have a tag each.
const (
	// TagOwner is Config.Owner: the provider changes and deletes only
	// resources carrying its owner id.
	TagOwner = "fleetnet-owner"
	// TagNamespace and TagName are the MultiClusterLoadBalancer's.
	TagNamespace = "fleetnet-namespace"
	TagName      = "fleetnet-name"
)

// Names of the load balancer's child resources.
const (
	frontendName = "frontend"
	poolName     = "regional-frontends"
)

// target is where the provider creates resources.
type target struct {
	subscription, resourceGroup, location, owner string
}

// plan is what one model load balancer needs in Azure, derived purely
// from the model and the target.
type plan struct {
	key string // namespace/name
	// name is the load balancer's and its public IP's.
	name string
	pip  armnetwork.PublicIPAddress
	lb   armnetwork.LoadBalancer
	// backends are the clusters in the pool, in name order.
	backends []backend
	// refused are ports the load balancer does not serve, with the reason.
	refused []string
	// notes are what the model asks and Azure cannot express; the rest is
	// served.
	notes []string
}

type backend struct {
	cluster, region, frontend, address string
}

// azureName is the network resource provider's rule for names.
var azureName = regexp.MustCompile(`^[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,78}[A-Za-z0-9_])?$`)

var notNameChar = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

func shortHash(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:])[:10]
}

// resourceName is the name of the public IP and load balancer of
// namespace/name for owner: readable, at most 80 characters, and unique
// per owner and load balancer through a hash of both (so that two fleets
// can share a resource group, and a-b/c and a/b-c do not collide).
func resourceName(owner, namespace, name string) string {
	const prefix = "fleetnet-"
	h := shortHash(owner, namespace, name)
	readable := notNameChar.ReplaceAllString(namespace+"-"+name, "-")
	if n := 80 - len(prefix) - 1 - len(h); len(readable) > n {
		readable = readable[:n]
	}
	return prefix + readable + "-" + h
}

// childName is a valid child resource name for s: s itself when valid,
// else a readable prefix and a hash.
func childName(s string) string {
	if azureName.MatchString(s) {
		return s
	}
	readable := strings.Trim(notNameChar.ReplaceAllString(s, "-"), ".-")
	if len(readable) > 60 {
		readable = readable[:60]
	}
	if readable = strings.Trim(readable, ".-"); readable == "" {
		readable = "cluster"
	}
	return readable + "-" + shortHash(s)
}

func (t target) loadBalancerID(name string) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/loadBalancers/%s", t.subscription, t.resourceGroup, name)
}

func (t target) publicIPID(name string) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/publicIPAddresses/%s", t.subscription, t.resourceGroup, name)
}

func (t target) tags(lb edgev1.LoadBalancer) map[string]*string {
	return map[string]*string{TagOwner: to.Ptr(t.owner), TagNamespace: to.Ptr(lb.Namespace), TagName: to.Ptr(lb.Name)}
}

// frontendID matches the id of a load balancer's frontend IP
// configuration, what a member cluster publishes as its regional frontend.
var frontendID = regexp.MustCompile(`(?i)^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Network/loadBalancers/[^/]+/frontendIPConfigurations/[^/]+$`)

// planFor derives what lb needs: a Global-tier Standard static public IP
// and a cross-region load balancer with one frontend on it, one backend
// pool of the serving clusters' regional frontends, and a rule per port
// that Azure can serve.
//
// What Azure cannot express is said, never dropped silently:
//   - A port whose Port differs from its TargetPort gets no rule: a
//     cross-region rule forwards to the regional frontend on its backend
//     port, which must be the regional frontend's port, i.e. the imported
//     service's port (TargetPort); a rule with Port as backend port would
//     reach nothing. The other ports are still served (refusing them all
//     would take down what works because of one port), and the load
//     balancer is not Served, so Programmed says which port is refused.
//   - UDP on port 3 is not supported by cross-region load balancers.
//   - A cross-region load balancer sends each client to the nearest
//     healthy region and has no per-backend weight: unequal weights are
//     reported in the message; the clusters are served.
//   - A draining cluster or one of weight 0 is left out of the pool; one
//     without a regional frontend cannot be in it, which is reported.
//   - Health checks are the regional load balancers' (Azure's
//     cross-region load balancer has no configurable probe); the model's
//     HealthCheck, timeouts and DrainMillis have no Azure counterpart.
func planFor(t target, lb edgev1.LoadBalancer) plan {
	p := plan{key: lb.Namespace + "/" + lb.Name, name: resourceName(t.owner, lb.Namespace, lb.Name)}
	lbID := t.loadBalancerID(p.name)
	pipID := t.publicIPID(p.name)
	p.pip = armnetwork.PublicIPAddress{
		Location: to.Ptr(t.location),
		SKU:      &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard), Tier: to.Ptr(armnetwork.PublicIPAddressSKUTierGlobal)},
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{
			PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic),
			PublicIPAddressVersion:   to.Ptr(armnetwork.IPVersionIPv4),
		},
		Tags: t.tags(lb),
	}

	// Backends: every cluster of any port, once per regional frontend.
	type clusterInfo struct {
		region, frontend string
		weight           int32
		draining         bool
	}
	clusters := map[string]clusterInfo{}
	var order []string
	for _, port := range lb.Ports {
		for _, c := range port.Clusters {
			if _, ok := clusters[c.Cluster]; !ok {
				order = append(order, c.Cluster)
			}
			clusters[c.Cluster] = clusterInfo{region: c.Region, frontend: c.RegionalFrontend, weight: c.Weight, draining: c.Draining}
		}
	}
	slices.Sort(order)
	var noFrontend, invalid []string
	weights := map[int32]bool{}
	var weighted []string
	for _, name := range order {
		c := clusters[name]
		switch {
		case c.draining || c.weight == 0:
			continue
		case c.frontend == "":
			noFrontend = append(noFrontend, name)
			continue
		case !frontendID.MatchString(c.frontend):
			invalid = append(invalid, name)
			continue
		}
		weights[c.weight] = true
		weighted = append(weighted, fmt.Sprintf("%s %d", name, c.weight))
		p.backends = append(p.backends, backend{cluster: name, region: c.region, frontend: c.frontend, address: childName(name)})
	}
	if len(noFrontend) > 0 {
		p.notes = append(p.notes, fmt.Sprintf("cluster %s has no regional load balancer frontend (a Service of type LoadBalancer in Azure), so it is not a backend", strings.Join(noFrontend, ", ")))
	}
	if len(invalid) > 0 {
		p.notes = append(p.notes, fmt.Sprintf("cluster %s publishes a regional frontend that is not a load balancer frontend IP configuration id, so it is not a backend", strings.Join(invalid, ", ")))
	}
	if len(weights) > 1 {
		p.notes = append(p.notes, fmt.Sprintf("cluster weights are not expressible (%s): a cross-region load balancer sends each client to the nearest healthy region and has no weights", strings.Join(weighted, ", ")))
	}

	addresses := make([]*armnetwork.LoadBalancerBackendAddress, 0, len(p.backends))
	for _, b := range p.backends {
		addresses = append(addresses, &armnetwork.LoadBalancerBackendAddress{Name: to.Ptr(b.address),
			Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{LoadBalancerFrontendIPConfiguration: &armnetwork.SubResource{ID: to.Ptr(b.frontend)}}})
	}
	rules := []*armnetwork.LoadBalancingRule{}
	for _, port := range lb.Ports {
		proto := armnetwork.TransportProtocolTCP
		if port.Protocol == edgev1.ProtocolUDP {
			proto = armnetwork.TransportProtocolUDP
		}
		switch {
		case port.Port != port.TargetPort:
			p.refused = append(p.refused, fmt.Sprintf("port %d/%s is not served: a cross-region load balancer forwards to the regional frontend on the same port, and the imported service's port (targetPort) is %d",
				port.Port, port.Protocol, port.TargetPort))
			continue
		case proto == armnetwork.TransportProtocolUDP && port.Port == 3:
			p.refused = append(p.refused, "port 3/UDP is not served: Azure's cross-region load balancer does not support UDP on port 3")
			continue
		}
		rules = append(rules, &armnetwork.LoadBalancingRule{
			Name: to.Ptr(fmt.Sprintf("%s-%d", strings.ToLower(port.Protocol), port.Port)),
			Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
				Protocol:                to.Ptr(proto),
				FrontendPort:            to.Ptr(port.Port),
				BackendPort:             to.Ptr(port.Port),
				EnableFloatingIP:        to.Ptr(false),
				FrontendIPConfiguration: &armnetwork.SubResource{ID: to.Ptr(lbID + "/frontendIPConfigurations/" + frontendName)},
				BackendAddressPool:      &armnetwork.SubResource{ID: to.Ptr(lbID + "/backendAddressPools/" + poolName)},
			},
		})
	}
	p.lb = armnetwork.LoadBalancer{
		Location: to.Ptr(t.location),
		SKU:      &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard), Tier: to.Ptr(armnetwork.LoadBalancerSKUTierGlobal)},
		Tags:     t.tags(lb),
		Properties: &armnetwork.LoadBalancerPropertiesFormat{
			FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{Name: to.Ptr(frontendName),
				Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{PublicIPAddress: &armnetwork.PublicIPAddress{ID: to.Ptr(pipID)}}}},
			BackendAddressPools: []*armnetwork.BackendAddressPool{{Name: to.Ptr(poolName),
				Properties: &armnetwork.BackendAddressPoolPropertiesFormat{LoadBalancerBackendAddresses: addresses}}},
			LoadBalancingRules: rules,
		},
	}
	return p
}

// servedMessage is the load balancer's message once its resources are
// provisioned.
func (p plan) servedMessage(address string) string {
	var parts []string
	if len(p.backends) == 0 {
		parts = append(parts, fmt.Sprintf("cross-region load balancer %s at %s has no backend: no serving cluster has a regional frontend", p.name, address))
	} else {
		var bs []string
		for _, b := range p.backends {
			if b.region != "" {
				bs = append(bs, fmt.Sprintf("%s (%s)", b.cluster, b.region))
			} else {
				bs = append(bs, b.cluster)
			}
		}
		parts = append(parts, fmt.Sprintf("served at %s by cross-region load balancer %s to %s", address, p.name, strings.Join(bs, ", ")))
	}
	parts = append(parts, p.refused...)
	parts = append(parts, p.notes...)
	return strings.Join(parts, "; ")
}

// Comparison of what is wanted with what Azure has. Ids compare as ARM
// compares them, ignoring case; only what the provider sets is compared,
// so that fields Azure fills in never cause a write.

func sameID(a, b *string) bool { return strings.EqualFold(armutil.Deref(a), armutil.Deref(b)) }

func sameLocation(a, b *string) bool {
	norm := func(s *string) string { return strings.ToLower(strings.ReplaceAll(armutil.Deref(s), " ", "")) }
	return norm(a) == norm(b)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// publicIPDiff lists how got differs from want; none means no write.
func publicIPDiff(want armnetwork.PublicIPAddress, got *armnetwork.PublicIPAddress) []string {
	var d []string
	if !sameLocation(want.Location, got.Location) {
		d = append(d, "location")
	}
	if got.SKU == nil || armutil.Deref(got.SKU.Name) != armutil.Deref(want.SKU.Name) || armutil.Deref(got.SKU.Tier) != armutil.Deref(want.SKU.Tier) {
		d = append(d, "sku")
	}
	gp := armutil.Deref(got.Properties)
	if armutil.Deref(gp.PublicIPAllocationMethod) != armutil.Deref(want.Properties.PublicIPAllocationMethod) {
		d = append(d, "allocation method")
	}
	if v := armutil.Deref(gp.PublicIPAddressVersion); v != "" && v != armutil.Deref(want.Properties.PublicIPAddressVersion) {
		d = append(d, "IP version")
	}
	return append(d, armutil.TagDiff(want.Tags, got.Tags)...)
}

// loadBalancerDiff lists how got differs from want; none means no write.
func loadBalancerDiff(want armnetwork.LoadBalancer, got *armnetwork.LoadBalancer) []string {
	var d []string
	if !sameLocation(want.Location, got.Location) {
		d = append(d, "location")
	}
	if got.SKU == nil || armutil.Deref(got.SKU.Name) != armutil.Deref(want.SKU.Name) || armutil.Deref(got.SKU.Tier) != armutil.Deref(want.SKU.Tier) {
		d = append(d, "sku")
	}
	d = append(d, armutil.TagDiff(want.Tags, got.Tags)...)
	wp, gp := want.Properties, armutil.Deref(got.Properties)

	wf, gf := wp.FrontendIPConfigurations[0], gp.FrontendIPConfigurations
	if len(gf) != 1 || !strings.EqualFold(armutil.Deref(gf[0].Name), frontendName) || gf[0].Properties == nil || gf[0].Properties.PublicIPAddress == nil ||
		!sameID(gf[0].Properties.PublicIPAddress.ID, wf.Properties.PublicIPAddress.ID) {
		d = append(d, "frontend")
	}

	if len(gp.BackendAddressPools) != 1 || !strings.EqualFold(armutil.Deref(gp.BackendAddressPools[0].Name), poolName) {
		d = append(d, "backend pool")
	} else {
		want := map[string]string{}
		for _, a := range wp.BackendAddressPools[0].Properties.LoadBalancerBackendAddresses {
			want[strings.ToLower(*a.Name)] = *a.Properties.LoadBalancerFrontendIPConfiguration.ID
		}
		got := map[string]string{}
		if p := gp.BackendAddressPools[0].Properties; p != nil {
			for _, a := range p.LoadBalancerBackendAddresses {
				ref := ""
				if a.Properties != nil && a.Properties.LoadBalancerFrontendIPConfiguration != nil {
					ref = armutil.Deref(a.Properties.LoadBalancerFrontendIPConfiguration.ID)
				}
				if a.Properties != nil && (a.Properties.IPAddress != nil || a.Properties.VirtualNetwork != nil || a.Properties.Subnet != nil) {
					ref = "other:" + ref
				}
				got[strings.ToLower(armutil.Deref(a.Name))] = ref
			}
		}
		for _, n := range sortedKeys(want) {
			if g, ok := got[n]; !ok {
				d = append(d, "backend "+n+" added")
			} else if !strings.EqualFold(g, want[n]) {
				d = append(d, "backend "+n+" changed")
			}
		}
		for _, n := range sortedKeys(got) {
			if _, ok := want[n]; !ok {
				d = append(d, "backend "+n+" removed")
			}
		}
	}

	wantRules := map[string]*armnetwork.LoadBalancingRule{}
	for _, r := range wp.LoadBalancingRules {
		wantRules[strings.ToLower(*r.Name)] = r
	}
	gotRules := map[string]*armnetwork.LoadBalancingRule{}
	for _, r := range gp.LoadBalancingRules {
		gotRules[strings.ToLower(armutil.Deref(r.Name))] = r
	}
	for _, n := range sortedKeys(wantRules) {
		g, ok := gotRules[n]
		if !ok {
			d = append(d, "rule "+n+" added")
		} else if !sameRule(wantRules[n], g) {
			d = append(d, "rule "+n+" changed")
		}
	}
	for _, n := range sortedKeys(gotRules) {
		if _, ok := wantRules[n]; !ok {
			d = append(d, "rule "+n+" removed")
		}
	}
	if len(gp.Probes) > 0 || len(gp.InboundNatRules) > 0 || len(gp.InboundNatPools) > 0 || len(gp.OutboundRules) > 0 {
		d = append(d, "probes, NAT or outbound rules removed")
	}
	return d
}

func sameRule(w, g *armnetwork.LoadBalancingRule) bool {
	wp, gp := w.Properties, g.Properties
	if gp == nil {
		return false
	}
	pool := gp.BackendAddressPool
	if pool == nil && len(gp.BackendAddressPools) == 1 {
		pool = gp.BackendAddressPools[0]
	}
	return armutil.Deref(gp.Protocol) == armutil.Deref(wp.Protocol) && armutil.Deref(gp.FrontendPort) == armutil.Deref(wp.FrontendPort) &&
		armutil.Deref(gp.BackendPort) == armutil.Deref(wp.BackendPort) && !armutil.Deref(gp.EnableFloatingIP) && gp.Probe == nil &&
		gp.FrontendIPConfiguration != nil && sameID(gp.FrontendIPConfiguration.ID, wp.FrontendIPConfiguration.ID) &&
		pool != nil && sameID(pool.ID, wp.BackendAddressPool.ID) && len(gp.BackendAddressPools) <= 1
}
