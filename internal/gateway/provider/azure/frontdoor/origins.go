package frontdoor

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/azure/armerr"
	"github.com/fleetnet/fleetnet/internal/azure/armutil"

	"github.com/fleetnet/fleetnet/internal/gateway/provider/azure/frontdoor/annotations"
)

// networkClients are armnetwork client factories by subscription: member
// clusters' load balancers and Private Link Services may live in other
// subscriptions than the Front Door profiles.
type networkClients struct {
	cred azcore.TokenCredential
	opts arm.ClientOptions
	mu   sync.Mutex
	f    map[string]*armnetwork.ClientFactory
}

func (n *networkClients) factory(subscription string) (*armnetwork.ClientFactory, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if f := n.f[strings.ToLower(subscription)]; f != nil {
		return f, nil
	}
	f, err := armnetwork.NewClientFactory(subscription, n.cred, &n.opts)
	if err != nil {
		return nil, fmt.Errorf("creating the network clients of subscription %s: %w", subscription, err)
	}
	if n.f == nil {
		n.f = map[string]*armnetwork.ClientFactory{}
	}
	n.f[strings.ToLower(subscription)] = f
	return f, nil
}

// frontendRef matches a load balancer frontend IP configuration id.
var frontendRef = regexp.MustCompile(`(?i)^/subscriptions/([^/]+)/resourceGroups/([^/]+)/providers/Microsoft\.Network/loadBalancers/([^/]+)/frontendIPConfigurations/([^/]+)$`)

var plsRef = regexp.MustCompile(`(?i)^/subscriptions/([^/]+)/resourceGroups/([^/]+)/providers/Microsoft\.Network/privateLinkServices/([^/]+)$`)

// originRef is what locates cluster c's origin for settings s: its
// published Private Link Service when the Gateway's connectivity is
// private-link and the cluster publishes one, else its regional load
// balancer frontend; "" when it publishes neither.
func originRef(c edgev1.ClusterEndpoints, s annotations.Settings) string {
	if s.Connectivity == annotations.ConnectivityPrivateLink && c.PrivateLinkService != "" {
		return c.PrivateLinkService
	}
	return c.RegionalFrontend
}

// resolveOrigins finds, for every origin reference (originRef) of gw's
// backends' clusters, where Front Door reaches it: a regional frontend's
// public IP address (public connectivity); with private-link, the
// Private Link Service the cluster publishes, or else the one that uses
// the cluster's internal frontend, in the frontend's resource group or
// fleetnet.dev/azure-pls-resource-group. A reference that cannot serve
// says why in Origin.Problem.
func (p *Provider) resolveOrigins(ctx context.Context, gw edgev1.Gateway, s annotations.Settings) map[string]Origin {
	out := map[string]Origin{}
	plsCache := map[string][]*armnetwork.PrivateLinkService{}
	for _, l := range gw.Listeners {
		for _, vh := range l.VirtualHosts {
			for _, r := range vh.Routes {
				for _, b := range r.Backends {
					for _, c := range b.Clusters {
						ref := originRef(c, s)
						if ref == "" {
							continue
						}
						if _, ok := out[ref]; ok {
							continue
						}
						if s.Connectivity != annotations.ConnectivityPrivateLink || ref != c.PrivateLinkService {
							out[ref] = p.resolve(ctx, ref, s, plsCache)
							continue
						}
						o := p.resolvePrivateLinkService(ctx, ref)
						// The published name is derived from cloud-provider-azure's
						// naming, which a PLS made otherwise may not follow: the
						// cluster's internal frontend, when it names one, finds it.
						if o.Problem != "" && !o.Unknown && c.RegionalFrontend != "" {
							if byFrontend := p.resolve(ctx, c.RegionalFrontend, s, plsCache); byFrontend.Problem == "" {
								o = byFrontend
							}
						}
						out[ref] = o
					}
				}
			}
		}
	}
	return out
}

// resolvePrivateLinkService reads a Private Link Service a cluster
// publishes: Front Door's origin is its location, and the private address
// of the internal frontend it serves is the origin's host name.
func (p *Provider) resolvePrivateLinkService(ctx context.Context, id string) Origin {
	m := plsRef.FindStringSubmatch(id)
	if m == nil {
		return Origin{Problem: fmt.Sprintf("published Private Link Service %s is not a Private Link Service id", id)}
	}
	f, err := p.net.factory(m[1])
	if err != nil {
		return Origin{Problem: err.Error()}
	}
	pls, err := f.NewPrivateLinkServicesClient().Get(ctx, m[2], m[3], nil)
	if err != nil {
		if armerr.IsNotFound(err) {
			return Origin{Problem: fmt.Sprintf("Private Link Service %s does not exist (yet)", m[3])}
		}
		return Origin{Problem: fmt.Sprintf("reading Private Link Service %s: %v", m[3], armerr.Describe(err)), Unknown: true}
	}
	if pls.Properties == nil || len(pls.Properties.LoadBalancerFrontendIPConfigurations) == 0 {
		return Origin{Problem: fmt.Sprintf("Private Link Service %s serves no load balancer frontend", m[3])}
	}
	if st := armutil.Deref(pls.Properties.ProvisioningState); st != "" && st != armnetwork.ProvisioningStateSucceeded {
		return Origin{Problem: fmt.Sprintf("Private Link Service %s is %s", m[3], st), Unknown: st != armnetwork.ProvisioningStateFailed}
	}
	feID := armutil.Deref(pls.Properties.LoadBalancerFrontendIPConfigurations[0].ID)
	fm := frontendRef.FindStringSubmatch(feID)
	if fm == nil {
		return Origin{Problem: fmt.Sprintf("Private Link Service %s serves %s, which is not a load balancer frontend IP configuration id", m[3], feID)}
	}
	ff, err := p.net.factory(fm[1])
	if err != nil {
		return Origin{Problem: err.Error()}
	}
	lb, err := ff.NewLoadBalancersClient().Get(ctx, fm[2], fm[3], nil)
	if err != nil {
		return Origin{Problem: fmt.Sprintf("reading load balancer %s of Private Link Service %s: %v", fm[3], m[3], armerr.Describe(err)), Unknown: !armerr.IsNotFound(err)}
	}
	if lb.Properties != nil {
		for _, fe := range lb.Properties.FrontendIPConfigurations {
			if strings.EqualFold(armutil.Deref(fe.Name), fm[4]) && fe.Properties != nil && armutil.Deref(fe.Properties.PrivateIPAddress) != "" {
				return Origin{Host: armutil.Deref(fe.Properties.PrivateIPAddress), PrivateLink: armutil.Deref(pls.ID), PrivateLinkLocation: armutil.Deref(pls.Location)}
			}
		}
	}
	return Origin{Problem: fmt.Sprintf("frontend %s of load balancer %s, served by Private Link Service %s, has no private address", fm[4], fm[3], m[3])}
}

func (p *Provider) resolve(ctx context.Context, ref string, s annotations.Settings, plsCache map[string][]*armnetwork.PrivateLinkService) Origin {
	m := frontendRef.FindStringSubmatch(ref)
	if m == nil {
		return Origin{Problem: fmt.Sprintf("regional frontend %s is not a load balancer frontend IP configuration id", ref)}
	}
	sub, rg, lbName, feName := m[1], m[2], m[3], m[4]
	f, err := p.net.factory(sub)
	if err != nil {
		return Origin{Problem: err.Error()}
	}
	lb, err := f.NewLoadBalancersClient().Get(ctx, rg, lbName, nil)
	if err != nil {
		return Origin{Problem: fmt.Sprintf("reading load balancer %s: %v", lbName, armerr.Describe(err)), Unknown: !armerr.IsNotFound(err)}
	}
	var fe *armnetwork.FrontendIPConfiguration
	if lb.Properties != nil {
		for _, x := range lb.Properties.FrontendIPConfigurations {
			if strings.EqualFold(armutil.Deref(x.Name), feName) {
				fe = x
			}
		}
	}
	if fe == nil || fe.Properties == nil {
		return Origin{Problem: fmt.Sprintf("load balancer %s has no frontend %s", lbName, feName)}
	}
	if fe.Properties.PublicIPAddress != nil {
		if s.Connectivity == annotations.ConnectivityPrivateLink {
			return Origin{Problem: fmt.Sprintf("frontend %s of load balancer %s is public: %s=private-link needs an internal load balancer with a Private Link Service", feName, lbName, keys.AnnotationAzureConnectivity)}
		}
		pipID := armutil.Deref(fe.Properties.PublicIPAddress.ID)
		pm := regexp.MustCompile(`(?i)^/subscriptions/([^/]+)/resourceGroups/([^/]+)/providers/Microsoft\.Network/publicIPAddresses/([^/]+)$`).FindStringSubmatch(pipID)
		if pm == nil {
			return Origin{Problem: fmt.Sprintf("frontend %s uses %s, which is not a public IP address id", feName, pipID)}
		}
		pf, err := p.net.factory(pm[1])
		if err != nil {
			return Origin{Problem: err.Error()}
		}
		pip, err := pf.NewPublicIPAddressesClient().Get(ctx, pm[2], pm[3], nil)
		if err != nil {
			return Origin{Problem: fmt.Sprintf("reading public IP address %s: %v", pm[3], armerr.Describe(err)), Unknown: !armerr.IsNotFound(err)}
		}
		addr := ""
		if pip.Properties != nil {
			addr = armutil.Deref(pip.Properties.IPAddress)
		}
		if addr == "" {
			return Origin{Problem: fmt.Sprintf("public IP address %s of frontend %s has no address yet", pm[3], feName)}
		}
		return Origin{Host: addr}
	}
	if s.Connectivity != annotations.ConnectivityPrivateLink {
		return Origin{Problem: fmt.Sprintf("frontend %s of load balancer %s is internal, which Front Door cannot reach over the internet: set %s=private-link (Premium) with a Private Link Service on it",
			feName, lbName, keys.AnnotationAzureConnectivity)}
	}
	plsRG := rg
	if s.PLSResourceGroup != "" {
		plsRG = s.PLSResourceGroup
	}
	cacheKey := strings.ToLower(sub + "/" + plsRG)
	list, ok := plsCache[cacheKey]
	if !ok {
		pager := f.NewPrivateLinkServicesClient().NewListPager(plsRG, nil)
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				return Origin{Problem: fmt.Sprintf("listing the Private Link Services of resource group %s: %v", plsRG, armerr.Describe(err)), Unknown: !armerr.IsNotFound(err)}
			}
			list = append(list, page.Value...)
		}
		plsCache[cacheKey] = list
	}
	for _, pls := range list {
		if pls.Properties == nil {
			continue
		}
		for _, x := range pls.Properties.LoadBalancerFrontendIPConfigurations {
			if strings.EqualFold(armutil.Deref(x.ID), ref) {
				return Origin{Host: armutil.Deref(fe.Properties.PrivateIPAddress), PrivateLink: armutil.Deref(pls.ID), PrivateLinkLocation: armutil.Deref(pls.Location)}
			}
		}
	}
	return Origin{Problem: fmt.Sprintf("no Private Link Service in resource group %s uses internal frontend %s of load balancer %s (create one, or set %s)", plsRG, feName, lbName, keys.AnnotationAzurePLSResourceGroup)}
}

// approve approves, on the Private Link Services whose owner allows it,
// the private endpoint connections Front Door opened for g's Private Link
// origins, and reads those origins again. The owner allows it when the
// PLS is tagged keys.TagAzurePLSApproval=auto, or when the export of the
// Service cloud-provider-azure made the PLS for (its
// keys.TagAzureOwnerService tag) says keys.AnnotationPLSApproval=auto
// (g.autoApproved).
//
// Which connections are Front Door's for g is frontDoorConnections' rule,
// on documented fields only (docs/azure-front-door.md, Private Link,
// gives the sources): the PLS's own connection state decides, so the
// origins' sharedPrivateLinkResource.status is not read (nothing
// documents that it follows the connection), and the PLS of every origin
// Azure has is read, once per PLS.
func (p *Provider) approve(ctx context.Context, key string, g graph, obs *observed) error {
	type link struct {
		m        []string // plsRef's match
		messages map[string]bool
		origins  [][]string // paths of the origins that use it
	}
	links := map[string]*link{}
	var order []string
	for _, og := range g.groups {
		for _, o := range og.origins {
			spl := o.v.Properties.SharedPrivateLinkResource
			if spl == nil || spl.PrivateLink == nil {
				continue
			}
			path := []string{g.profileName, og.name, o.name}
			if obs.get(kindOrigin, path) == nil {
				continue // not created: Front Door has asked for nothing yet
			}
			id := armutil.Deref(spl.PrivateLink.ID)
			m := plsRef.FindStringSubmatch(id)
			if m == nil {
				continue
			}
			k := strings.ToLower(id)
			l := links[k]
			if l == nil {
				l = &link{m: m, messages: map[string]bool{}}
				links[k] = l
				order = append(order, k)
			}
			if msg := armutil.Deref(spl.RequestMessage); msg != "" {
				l.messages[msg] = true
			}
			l.origins = append(l.origins, path)
		}
	}
	statuses := map[string]string{}
	defer func() {
		p.mu.Lock()
		p.state(key).links = statuses
		p.reportLinks()
		p.mu.Unlock()
	}()
	for _, k := range order {
		l := links[k]
		if len(l.messages) == 0 {
			continue // nothing would match
		}
		approved, status, err := p.approveOn(ctx, key, l.m, l.messages, g.autoApproved[k])
		if err != nil {
			return err
		}
		statuses[k] = status
		if !approved {
			continue
		}
		for _, path := range l.origins {
			v, err := p.kinds[kindOrigin].get(ctx, path)
			if err != nil {
				return fmt.Errorf("reading origin %s: %w", path[len(path)-1], armerr.Describe(err))
			}
			obs.add(kindOrigin, path, v)
		}
	}
	return nil
}

// reportLinks counts the Gateways' Private Link connections by state, as
// last read, for the metrics; p.mu held.
func (p *Provider) reportLinks() {
	by := map[string]int{}
	for _, st := range p.gateways {
		for _, s := range st.links {
			if s != "" {
				by[s]++
			}
		}
	}
	p.metrics.Load().SetPrivateLinkConnections(Class, by)
}

// approveOn reads the Private Link Service of plsRef's match m and, when
// its owner allows (its tag, or services: the exported Services whose
// consent covers it, by namespace/name), approves frontDoorConnections
// for messages; it says whether it approved any, and the state of the
// Gateway's connection there (connectionState), which Programmed reads.
func (p *Provider) approveOn(ctx context.Context, key string, m []string, messages map[string]bool, services map[string]bool) (bool, string, error) {
	f, err := p.net.factory(m[1])
	if err != nil {
		return false, "", err
	}
	c := f.NewPrivateLinkServicesClient()
	pls, err := c.Get(ctx, m[2], m[3], nil)
	if err != nil {
		return false, "", fmt.Errorf("reading Private Link Service %s: %w", m[3], armerr.Describe(err))
	}
	if pls.Properties == nil {
		return false, "", nil
	}
	status := connectionState(pls.Properties.PrivateEndpointConnections, messages)
	// Consent: the PLS's own tag, or the export of the Service that
	// cloud-provider-azure made the PLS for (its owner tag names it).
	consent := armutil.Deref(pls.Tags[keys.TagAzurePLSApproval]) == keys.PLSApprovalAuto ||
		services[armutil.Deref(pls.Tags[keys.TagAzureOwnerService])]
	if !consent {
		return false, status, nil // the owner approves
	}
	approved := false
	descs := map[string]string{} // connection name -> its request message
	for _, pc := range pls.Properties.PrivateEndpointConnections {
		if pc != nil && pc.Properties != nil && pc.Properties.PrivateLinkServiceConnectionState != nil {
			descs[armutil.Deref(pc.Name)] = armutil.Deref(pc.Properties.PrivateLinkServiceConnectionState.Description)
		}
	}
	for _, name := range frontDoorConnections(pls.Properties.PrivateEndpointConnections, messages) {
		p.log.Info("approving Front Door's Private Link connection", "gateway", key, "privateLinkService", m[3], "connection", name)
		_, err := c.UpdatePrivateEndpointConnection(ctx, m[2], m[3], name, armnetwork.PrivateEndpointConnection{
			Name: to.Ptr(name), Properties: &armnetwork.PrivateEndpointConnectionProperties{PrivateLinkServiceConnectionState: &armnetwork.PrivateLinkServiceConnectionState{
				Status: to.Ptr(connectionApproved), Description: to.Ptr(approvedPrefix + descs[name])}}}, nil)
		if err != nil {
			return approved, status, fmt.Errorf("approving connection %s on Private Link Service %s: %w", name, m[3], armerr.Describe(err))
		}
		approved, status = true, connectionApproved
	}
	return approved, status, nil
}

// connectionState is the state, on a Private Link Service with
// connections conns, of the connections whose description is one of
// messages (the Gateway's: see frontDoorConnections): Approved when one
// is, else Pending, Rejected or Disconnected in that order; "" when Front
// Door has requested none yet.
func connectionState(conns []*armnetwork.PrivateEndpointConnection, messages map[string]bool) string {
	seen := map[string]bool{}
	for _, pc := range conns {
		if pc == nil || pc.Properties == nil || pc.Properties.PrivateLinkServiceConnectionState == nil {
			continue
		}
		st := pc.Properties.PrivateLinkServiceConnectionState
		// fleetnet's approval keeps the request message in the
		// description, after approvedPrefix
		if d := strings.TrimPrefix(armutil.Deref(st.Description), approvedPrefix); d != "" && messages[d] {
			seen[strings.ToLower(armutil.Deref(st.Status))] = true
		}
	}
	for _, s := range []string{connectionApproved, connectionPending, "Rejected", "Disconnected"} {
		if seen[strings.ToLower(s)] {
			return s
		}
	}
	return ""
}

// approvedPrefix starts the description fleetnet gives a connection it
// approves, followed by the request message, so that the connection stays
// recognisable as the Gateway's (connectionState).
const approvedPrefix = "approved by fleetnet: "

// Private endpoint connection states a Private Link Service reports
// (https://learn.microsoft.com/azure/private-link/manage-private-endpoint).
const (
	connectionPending  = "Pending"
	connectionApproved = "Approved"
)

// frontDoorConnections are the names of the connections, among conns (a
// Private Link Service's), that are Front Door's requests for a Gateway
// whose origins send the request messages messages, and wait for
// approval:
//   - the connection's privateLinkServiceConnectionState.status is
//     Pending: the PLS's own state, set by its owner
//     (https://learn.microsoft.com/azure/private-link/manage-private-endpoint).
//     Approved, Rejected and Disconnected connections are left as they
//     are: approving one that is approved would change nothing, and the
//     others are the owner's decision;
//   - its description is one of messages: Front Door shows an origin's
//     request message as the description of the connection it requests
//     (https://learn.microsoft.com/azure/container-apps/how-to-integrate-with-azure-front-door,
//     "approve each private endpoint connection request with the
//     description"). Nothing else on the connection names the requester:
//     its private endpoint is in Front Door's own subscription. The
//     messages are the Gateway's, the same on all its origins, as one
//     profile's origins on one PLS (and region) share one connection
//     (https://learn.microsoft.com/azure/frontdoor/private-link, "Private
//     endpoint creation"), and Front Door may open more than one
//     (the Container Apps page: "a known issue"): each is approved.
//
// An empty message matches nothing, since any requester may send none.
func frontDoorConnections(conns []*armnetwork.PrivateEndpointConnection, messages map[string]bool) []string {
	var out []string
	for _, pc := range conns {
		if pc == nil || pc.Properties == nil || pc.Properties.PrivateLinkServiceConnectionState == nil {
			continue
		}
		st := pc.Properties.PrivateLinkServiceConnectionState
		desc, name := armutil.Deref(st.Description), armutil.Deref(pc.Name)
		if !strings.EqualFold(armutil.Deref(st.Status), connectionPending) || desc == "" || !messages[desc] || name == "" {
			continue
		}
		out = append(out, name)
	}
	return out
}
