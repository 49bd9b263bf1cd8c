package armsim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
	netfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6/fake"

	"github.com/fleetnet/fleetnet/internal/azure/armutil"
)

// Private Link between Front Door Premium origins and Private Link
// Services (Microsoft.Network/privateLinkServices), as the simulation
// keeps it. Every behaviour below names its source; what no
// documentation states is marked "Undocumented:" where it is modelled,
// and code under test must not depend on it (the simulation has it only
// because something has to happen).
//
// Sources:
//
//	[AFD-PL]   Secure your origin with Private Link in Azure Front Door Premium,
//	           https://learn.microsoft.com/azure/frontdoor/private-link
//	[AFD-ILB]  Connect Azure Front Door Premium to an internal load balancer origin with Private Link,
//	           https://learn.microsoft.com/azure/frontdoor/standard-premium/how-to-enable-private-link-internal-load-balancer
//	[ACA-AFD]  Create a private link to an Azure Container App with Azure Front Door,
//	           https://learn.microsoft.com/azure/container-apps/how-to-integrate-with-azure-front-door
//	[PLS]      What is Azure Private Link service?,
//	           https://learn.microsoft.com/azure/private-link/private-link-service-overview
//	[PE-MANAGE] Manage a Private Endpoint connection,
//	           https://learn.microsoft.com/azure/private-link/manage-private-endpoint
//	[PLS-REST] Private Link Services - Update Private Endpoint Connection,
//	           https://learn.microsoft.com/rest/api/virtualnetwork/private-link-services/update-private-endpoint-connection
//	[NET-SDK]  armnetwork/v6 PrivateLinkServiceProperties, PrivateEndpointConnectionProperties,
//	           https://pkg.go.dev/github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6
//	[CDN-SDK]  SharedPrivateLinkResourceProperties,
//	           https://learn.microsoft.com/javascript/api/@azure/arm-cdn/sharedprivatelinkresourceproperties
//
// Documented, and modelled:
//   - an origin with a sharedPrivateLinkResource exists only on Premium
//     [AFD-PL, "Applies to: Front Door Premium"; ACA-AFD, "Private link
//     isn't supported for origins ... on the Standard tier"];
//   - creating it makes Front Door request a private endpoint connection
//     on the Private Link Service, which is listed under the PLS's
//     privateEndpointConnections [PLS, "Manage your connection requests"]
//     in state Pending until its owner acts [AFD-PL, "How Private Link
//     works"; PLS, "Control service access"];
//   - within a profile, origins with the same Private Link resource,
//     group id and region share one private endpoint, so one connection;
//     another profile, region or resource makes another [AFD-PL,
//     "Private endpoint creation"];
//   - the connection's privateLinkServiceConnectionState.description is
//     the origin's requestMessage [ACA-AFD, "List private endpoint
//     connections": the connection "has a
//     properties.privateLinkServiceConnectionState.description value of
//     AFD Private Link Request", the --private-link-request-message given;
//     "approve each private endpoint connection request with the
//     description"]. That page shows it on a Container Apps environment;
//     for a PLS, [AFD-ILB] says only that the request message "is sent
//     to the resource owner to assist them in the connection management
//     process";
//   - the private endpoint is Front Door's, in a subscription of its own
//     ([AFD-PL]: "from an Azure Front Door managed regional private
//     network"); [ACA-AFD] shows its id as
//     /subscriptions/<SUBSCRIPTION_ID>/resourceGroups/eafd-Prod-centralus/...
//     as an example only: nothing in it names the customer's profile;
//   - the owner approves or rejects with UpdatePrivateEndpointConnection,
//     whose privateLinkServiceConnectionState carries the status and the
//     description, "the reason for approval/rejection" [PLS-REST;
//     NET-SDK]; the states are Pending, Approved, Rejected and
//     Disconnected (removed) [PE-MANAGE, the table of provider actions],
//     and the owner may change them later [PE-MANAGE];
//   - privateEndpointConnections is read-only on the PLS [NET-SDK,
//     "READ-ONLY"], so a PUT of the PLS keeps them;
//   - sharedPrivateLinkResource.status is "Pending, Approved, Rejected,
//     Disconnected, or Timeout" [CDN-SDK], and not read-only: a client
//     may write it.
//
// Undocumented, modelled because the simulation must do something (see
// the marks below): connection names; the origin's
// sharedPrivateLinkResource.status following the connection's (turn it
// off with MirrorConnectionStatus); which request message a shared
// connection shows; the refusal of an origin whose PLS does not exist;
// UpdatePrivateEndpointConnection to Pending. Not modelled: Timeout;
// what the PLS shows once the profile is deleted ([AFD-PL, "Private
// endpoint removal"] says only that the profile's private endpoints are
// deleted: the simulation leaves the connection as it was).

// afdEndpointSubscription holds the simulation's Front Door private
// endpoints (Front Door's own subscription, [ACA-AFD]).
const afdEndpointSubscription = "00000000-0000-0000-0000-0000000afd00"

// linkKey is what Front Door keys a profile's private endpoints by
// [AFD-PL, "Private endpoint creation"]: the Private Link resource, its
// group id and the region, within one profile.
type linkKey struct {
	profile, pls    ID
	location, group string
}

// privateEndpointID is the id of the private endpoint Front Door makes for
// k. Undocumented: its form beyond [ACA-AFD]'s example.
func (k linkKey) privateEndpointID() string {
	name := "afd-pe-" + shortHash(k.profile.Key()+"|"+k.pls.Key()+"|"+k.location+"|"+strings.ToLower(k.group))
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/eafd-Prod-%s/providers/Microsoft.Network/privateEndpoints/%s", afdEndpointSubscription, k.location, name)
}

// linkOf is the linkKey of origin's sharedPrivateLinkResource spl (its
// JSON), if it names a Private Link Service; v.s.mu held.
func linkOf(v *View, origin ID, spl map[string]any) (linkKey, bool) {
	pl, _ := spl["privateLink"].(map[string]any)
	ref, _ := pl["id"].(string)
	plsID, err := ParseID(ref)
	if err != nil || !strings.EqualFold(plsID.Type(), TypePrivateLinkService) {
		return linkKey{}, false
	}
	loc, _ := spl["privateLinkLocation"].(string)
	group, _ := spl["groupId"].(string)
	k := linkKey{profile: profileOf(origin), pls: plsID, location: NormalizeLocation(loc), group: group}
	if k.location == "" {
		// Undocumented: an origin without privateLinkLocation is taken to
		// be in its Private Link Service's region.
		if r, ok := v.Get(plsID); ok {
			var p armnetwork.PrivateLinkService
			_ = json.Unmarshal(r.JSON, &p)
			k.location = NormalizeLocation(armutil.Deref(p.Location))
		}
	}
	return k, true
}

// ConnectionName is the name of the private endpoint connection the
// profile of the Front Door origin with id opens on a Private Link
// Service. Undocumented: Azure's names are its own; the simulation's are
// afd-<hash of the profile>, with -2, -3... for the profile's further
// private endpoints on the same PLS (other regions or group ids).
func ConnectionName(origin ID) string { return "afd-" + shortID(profileOf(origin)) }

// MirrorConnectionStatus turns on (the default) or off the origin's
// sharedPrivateLinkResource.status following the status of its private
// endpoint connection on the Private Link Service. Undocumented: the
// field is documented only as the enum [CDN-SDK]; off, an origin's status
// is whatever its client wrote (nothing, usually), which is all the
// documentation promises.
func (s *Sim) MirrorConnectionStatus(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noLinkStatus = !on
}

// SetConnectionStatus sets the status of the private endpoint connection
// name on the Private Link Service pls, as its owner would in the portal
// [PE-MANAGE].
func (s *Sim) SetConnectionStatus(pls ID, name, status string) bool {
	return s.setConnectionState(pls, name, armnetwork.PrivateLinkServiceConnectionState{Status: to.Ptr(status)})
}

// setConnectionState sets the given fields of connection name's state.
func (s *Sim) setConnectionState(pls ID, name string, st armnetwork.PrivateLinkServiceConnectionState) bool {
	found := false
	s.Edit(pls, func(b []byte) []byte {
		var v armnetwork.PrivateLinkService
		if json.Unmarshal(b, &v) != nil || v.Properties == nil {
			return b
		}
		for _, c := range v.Properties.PrivateEndpointConnections {
			if !strings.EqualFold(armutil.Deref(c.Name), name) || c.Properties == nil {
				continue
			}
			cur := c.Properties.PrivateLinkServiceConnectionState
			if cur == nil {
				cur = &armnetwork.PrivateLinkServiceConnectionState{}
				c.Properties.PrivateLinkServiceConnectionState = cur
			}
			if st.Status != nil {
				cur.Status = st.Status
			}
			if st.Description != nil {
				cur.Description = st.Description
			}
			if st.ActionsRequired != nil {
				cur.ActionsRequired = st.ActionsRequired
			}
			found = true
		}
		out, err := json.Marshal(v)
		if err != nil {
			return b
		}
		return out
	})
	return found
}

// RequestConnection adds to the Private Link Service pls the Pending
// connection name of a private endpoint that is not Front Door's (a
// consumer's own, privateEndpoint its id) with the request message
// message, as a consumer the PLS's visibility admits makes one [PLS,
// "Control service access"]. It is false when pls does not exist or
// already has a connection of that name.
func (s *Sim) RequestConnection(pls ID, name, privateEndpoint, message string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.resources[pls.Key()]
	if r == nil {
		return false
	}
	var v armnetwork.PrivateLinkService
	if json.Unmarshal(r.body, &v) != nil {
		return false
	}
	if v.Properties == nil {
		v.Properties = &armnetwork.PrivateLinkServiceProperties{}
	}
	for _, c := range v.Properties.PrivateEndpointConnections {
		if strings.EqualFold(armutil.Deref(c.Name), name) {
			return false
		}
	}
	v.Properties.PrivateEndpointConnections = append(v.Properties.PrivateEndpointConnections, pendingConnection(pls, name, privateEndpoint, message))
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	r.body = b
	return true
}

func pendingConnection(pls ID, name, privateEndpoint, message string) *armnetwork.PrivateEndpointConnection {
	return &armnetwork.PrivateEndpointConnection{
		ID: to.Ptr(pls.Child("privateEndpointConnections", name).String()), Name: to.Ptr(name),
		Type: to.Ptr(TypePrivateLinkService + "/privateEndpointConnections"),
		Properties: &armnetwork.PrivateEndpointConnectionProperties{
			PrivateEndpoint:                   &armnetwork.PrivateEndpoint{ID: to.Ptr(privateEndpoint)},
			PrivateLinkServiceConnectionState: &armnetwork.PrivateLinkServiceConnectionState{Status: to.Ptr("Pending"), Description: to.Ptr(message), ActionsRequired: to.Ptr("None")},
			ProvisioningState:                 to.Ptr(armnetwork.ProvisioningStateSucceeded),
		}}
}

// connectionOf is the connection of Front Door's private endpoint for k
// on the decoded PLS v, if any.
func connectionOf(v *armnetwork.PrivateLinkService, k linkKey) *armnetwork.PrivateEndpointConnection {
	if v.Properties == nil {
		return nil
	}
	pe := k.privateEndpointID()
	for _, c := range v.Properties.PrivateEndpointConnections {
		if c.Properties != nil && c.Properties.PrivateEndpoint != nil && strings.EqualFold(armutil.Deref(c.Properties.PrivateEndpoint.ID), pe) {
			return c
		}
	}
	return nil
}

// connect makes (or keeps) the connection of Front Door's private
// endpoint for k on its Private Link Service, Pending with the request
// message msg, and returns its status; s.mu held.
func (s *Sim) connect(k linkKey, msg string) string {
	r := s.resources[k.pls.Key()]
	if r == nil {
		return "Disconnected" // Undocumented: what an origin shows without its PLS.
	}
	var v armnetwork.PrivateLinkService
	if json.Unmarshal(r.body, &v) != nil {
		return ""
	}
	if c := connectionOf(&v, k); c != nil {
		// Documented: origins sharing the private endpoint share the
		// connection [AFD-PL]. Undocumented: that it keeps the first
		// origin's request message.
		return connectionStatus(c)
	}
	if v.Properties == nil {
		v.Properties = &armnetwork.PrivateLinkServiceProperties{}
	}
	taken := map[string]bool{}
	for _, c := range v.Properties.PrivateEndpointConnections {
		taken[strings.ToLower(armutil.Deref(c.Name))] = true
	}
	base := "afd-" + shortID(k.profile)
	name := base
	for n := 2; taken[strings.ToLower(name)]; n++ {
		name = fmt.Sprintf("%s-%d", base, n)
	}
	v.Properties.PrivateEndpointConnections = append(v.Properties.PrivateEndpointConnections, pendingConnection(k.pls, name, k.privateEndpointID(), msg))
	if b, err := json.Marshal(v); err == nil {
		r.body = b
	}
	return "Pending"
}

func connectionStatus(c *armnetwork.PrivateEndpointConnection) string {
	if c.Properties == nil || c.Properties.PrivateLinkServiceConnectionState == nil {
		return ""
	}
	return armutil.Deref(c.Properties.PrivateLinkServiceConnectionState.Status)
}

// linkStatus is the status of the connection for k, "" when it cannot
// tell; s.mu held.
func (s *Sim) linkStatus(k linkKey) string {
	r := s.resources[k.pls.Key()]
	if r == nil {
		return "Disconnected" // Undocumented, as in connect.
	}
	var v armnetwork.PrivateLinkService
	if json.Unmarshal(r.body, &v) != nil {
		return ""
	}
	if c := connectionOf(&v, k); c != nil {
		return connectionStatus(c)
	}
	// Undocumented: a connection removed by the owner ([PE-MANAGE]:
	// Disconnected on the consumer's side) leaves the origin Disconnected.
	return "Disconnected"
}

// requestLink is what Front Door does when a Private Link origin's write
// succeeds: its profile's private endpoint requests a connection on the
// PLS. pr is the origin's properties; v.s.mu held.
func requestLink(v *View, origin ID, pr map[string]any) {
	spl, ok := pr["sharedPrivateLinkResource"].(map[string]any)
	if !ok {
		return
	}
	k, ok := linkOf(v, origin, spl)
	if !ok {
		return
	}
	msg, _ := spl["requestMessage"].(string)
	status := v.s.connect(k, msg)
	if !v.s.noLinkStatus && status != "" {
		spl["status"] = status // Undocumented: see MirrorConnectionStatus.
	}
}

// mirrorLinkStatus sets a read origin's sharedPrivateLinkResource.status
// to its connection's (pr its properties). Undocumented: see
// MirrorConnectionStatus. v.s.mu held.
func mirrorLinkStatus(v *View, origin ID, pr map[string]any) {
	spl, ok := pr["sharedPrivateLinkResource"].(map[string]any)
	if !ok || v.s.noLinkStatus {
		return
	}
	if k, ok := linkOf(v, origin, spl); ok {
		if st := v.s.linkStatus(k); st != "" {
			spl["status"] = st
		}
	}
}

// keepLinkStatus keeps, across a PUT of an origin, the
// sharedPrivateLinkResource.status the simulation set (pr the request's
// properties, old the stored ones). Undocumented: the field is writable
// [CDN-SDK]; while the simulation mirrors the connection's status, that
// is what it shows.
func keepLinkStatus(s *Sim, pr, old map[string]any) {
	if s.noLinkStatus {
		return
	}
	op, ok := old["sharedPrivateLinkResource"].(map[string]any)
	if !ok || op["status"] == nil {
		return
	}
	if np, ok := pr["sharedPrivateLinkResource"].(map[string]any); ok {
		np["status"] = op["status"]
	}
}

// keepConnections keeps a Private Link Service's connections across a
// PUT: they are read-only [NET-SDK].
func keepConnections(body, prev []byte) ([]byte, error) {
	if prev == nil {
		return body, nil
	}
	old, err := decodeMap(prev)
	if err != nil {
		return body, nil
	}
	return editJSON(body, func(m map[string]any) {
		if c, ok := props(old)["privateEndpointConnections"]; ok {
			props(m)["privateEndpointConnections"] = c
		} else {
			delete(props(m), "privateEndpointConnections")
		}
	}), nil
}

// connectionStatuses are the statuses UpdatePrivateEndpointConnection
// takes: Approved and Rejected [PLS-REST; PE-MANAGE]. Undocumented:
// Pending (a connection set back to Pending); other values get a code of
// the simulation's.
var connectionStatuses = map[string]bool{"Approved": true, "Rejected": true, "Pending": true}

func (s *Sim) plsServer() netfake.PrivateLinkServicesServer {
	return netfake.PrivateLinkServicesServer{
		BeginCreateOrUpdate: func(ctx context.Context, _, _ string, v armnetwork.PrivateLinkService, _ *armnetwork.PrivateLinkServicesClientBeginCreateOrUpdateOptions) (azfake.PollerResponder[armnetwork.PrivateLinkServicesClientCreateOrUpdateResponse], azfake.ErrorResponder) {
			return PutLRO(ctx, s, v, func(v armnetwork.PrivateLinkService) armnetwork.PrivateLinkServicesClientCreateOrUpdateResponse {
				return armnetwork.PrivateLinkServicesClientCreateOrUpdateResponse{PrivateLinkService: v}
			})
		},
		Get: func(_ context.Context, _, _ string, _ *armnetwork.PrivateLinkServicesClientGetOptions) (azfake.Responder[armnetwork.PrivateLinkServicesClientGetResponse], azfake.ErrorResponder) {
			return GetResource(s, func(v armnetwork.PrivateLinkService) armnetwork.PrivateLinkServicesClientGetResponse {
				return armnetwork.PrivateLinkServicesClientGetResponse{PrivateLinkService: v}
			})
		},
		NewListPager: func(_ string, _ *armnetwork.PrivateLinkServicesClientListOptions) azfake.PagerResponder[armnetwork.PrivateLinkServicesClientListResponse] {
			return ListPager(s, func(v []*armnetwork.PrivateLinkService) armnetwork.PrivateLinkServicesClientListResponse {
				return armnetwork.PrivateLinkServicesClientListResponse{PrivateLinkServiceListResult: armnetwork.PrivateLinkServiceListResult{Value: v}}
			})
		},
		UpdatePrivateEndpointConnection: func(_ context.Context, _, _, name string, c armnetwork.PrivateEndpointConnection, _ *armnetwork.PrivateLinkServicesClientUpdatePrivateEndpointConnectionOptions) (resp azfake.Responder[armnetwork.PrivateLinkServicesClientUpdatePrivateEndpointConnectionResponse], errResp azfake.ErrorResponder) {
			connID := s.RequestID()
			pls, _ := connID.Parent()
			if c.Properties == nil || c.Properties.PrivateLinkServiceConnectionState == nil || c.Properties.PrivateLinkServiceConnectionState.Status == nil {
				errResp.SetError(badRequest("InvalidRequestFormat", "privateLinkServiceConnectionState.status is required."))
				return
			}
			st := *c.Properties.PrivateLinkServiceConnectionState
			if !connectionStatuses[*st.Status] {
				errResp.SetError(badRequest("InvalidPrivateEndpointConnectionStatus", "Private endpoint connection status %s is not one of Approved, Rejected, Pending.", *st.Status)) // simulated code
				return
			}
			if _, ok := s.Get(pls); !ok {
				errResp.SetError(NotFound(pls))
				return
			}
			if !s.setConnectionState(pls, name, st) {
				errResp.SetError(NotFound(connID))
				return
			}
			v, _ := Lookup[armnetwork.PrivateLinkService](s, pls)
			for _, pc := range v.Properties.PrivateEndpointConnections {
				if strings.EqualFold(armutil.Deref(pc.Name), name) {
					resp.SetResponse(http.StatusOK, armnetwork.PrivateLinkServicesClientUpdatePrivateEndpointConnectionResponse{PrivateEndpointConnection: *pc}, nil)
				}
			}
			return
		},
	}
}
