package frontdoor

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/cdn/armcdn/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/azure/armsim"
	"github.com/fleetnet/fleetnet/internal/azure/armutil"
)

// Which of a Private Link Service's connections are Front Door's requests
// for the Gateway: Pending on the PLS, with the Gateway's request message
// as their description; nothing else, whatever the origin says.
func TestFrontDoorConnections(t *testing.T) {
	conn := func(name, status, description string) *armnetwork.PrivateEndpointConnection {
		return &armnetwork.PrivateEndpointConnection{Name: to.Ptr(name), Properties: &armnetwork.PrivateEndpointConnectionProperties{
			PrivateLinkServiceConnectionState: &armnetwork.PrivateLinkServiceConnectionState{Status: to.Ptr(status), Description: to.Ptr(description)}}}
	}
	ours := map[string]bool{"fleetnet web/public": true}
	for _, tc := range []struct {
		name     string
		conns    []*armnetwork.PrivateEndpointConnection
		messages map[string]bool
		want     []string
	}{
		{name: "Front Door's pending request", conns: []*armnetwork.PrivateEndpointConnection{conn("a", "Pending", "fleetnet web/public")}, messages: ours, want: []string{"a"}},
		{name: "several requests with the message (Front Door may open more than one)",
			conns: []*armnetwork.PrivateEndpointConnection{conn("a", "Pending", "fleetnet web/public"), conn("b", "Pending", "fleetnet web/public")}, messages: ours, want: []string{"a", "b"}},
		{name: "another requester's", conns: []*armnetwork.PrivateEndpointConnection{conn("x", "Pending", "let me in")}, messages: ours},
		{name: "another Gateway's", conns: []*armnetwork.PrivateEndpointConnection{conn("x", "Pending", "fleetnet web/other")}, messages: ours},
		{name: "a prefix of the message is not it", conns: []*armnetwork.PrivateEndpointConnection{conn("x", "Pending", "fleetnet web/public2")}, messages: ours},
		{name: "already approved", conns: []*armnetwork.PrivateEndpointConnection{conn("a", "Approved", "fleetnet web/public")}, messages: ours},
		{name: "rejected by the owner", conns: []*armnetwork.PrivateEndpointConnection{conn("a", "Rejected", "fleetnet web/public")}, messages: ours},
		{name: "removed by the owner", conns: []*armnetwork.PrivateEndpointConnection{conn("a", "Disconnected", "fleetnet web/public")}, messages: ours},
		{name: "no message matches nothing", conns: []*armnetwork.PrivateEndpointConnection{conn("x", "Pending", "")}, messages: map[string]bool{"": true}},
		{name: "no state", conns: []*armnetwork.PrivateEndpointConnection{{Name: to.Ptr("x"), Properties: &armnetwork.PrivateEndpointConnectionProperties{}}, nil}, messages: ours},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := frontDoorConnections(tc.conns, tc.messages); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// privateGateway serves / from api on the clusters' internal frontends,
// through their Private Link Services.
func (h *harness) privateGateway(clusters ...string) edgev1.Gateway {
	var eps []edgev1.ClusterEndpoints
	for _, c := range clusters {
		ep := h.cluster(c+"-internal", 1)
		ep.Cluster = c
		eps = append(eps, ep)
	}
	return edgev1.Gateway{Namespace: "web", Name: "public", Class: "afd-premium", Annotations: map[string]string{keys.AnnotationAzureConnectivity: "private-link"},
		Listeners: []edgev1.Listener{{Name: "http", Port: 80, Protocol: edgev1.ProtocolHTTP, VirtualHosts: []edgev1.VirtualHost{{Hostname: "*", Routes: []edgev1.Route{
			route("api", 0, "/", backend("api", 1, eps...))}}}}}}
}

// connections are the PLS's connections as "name status description".
func (h *harness) connections(pls armsim.ID) []string {
	v, _ := armsim.Lookup[armnetwork.PrivateLinkService](h.sim, pls)
	var out []string
	if v.Properties == nil {
		return nil
	}
	for _, c := range v.Properties.PrivateEndpointConnections {
		st := c.Properties.PrivateLinkServiceConnectionState
		out = append(out, armutil.Deref(c.Name)+" "+armutil.Deref(st.Status)+" "+armutil.Deref(st.Description))
	}
	slices.Sort(out)
	return out
}

// approvals counts the UpdatePrivateEndpointConnection requests sent.
func (h *harness) approvals() int {
	n := 0
	for _, c := range h.sim.Calls() {
		if c.API == "PrivateLinkServicesClient.UpdatePrivateEndpointConnection" {
			n++
		}
	}
	return n
}

// On a PLS whose owner allows fleetnet to approve, only Front Door's
// request for this Gateway is approved: another consumer's request and
// another Gateway's stay Pending for the owner. An approved connection is
// not written again, and one the owner rejects afterwards stays rejected.
func TestPrivateLinkApprovesOnlyTheGatewaysConnection(t *testing.T) {
	h := newHarness(t, armsim.Options{Polls: 1})
	pls := h.seedPrivate("east", "eastus", map[string]*string{keys.TagAzurePLSApproval: to.Ptr(keys.PLSApprovalAuto)})
	if !h.sim.RequestConnection(pls, "consumer.1", "/subscriptions/"+sub+"/resourceGroups/consumer/providers/Microsoft.Network/privateEndpoints/pe1", "please approve") ||
		!h.sim.RequestConnection(pls, "other.1", "/subscriptions/"+sub+"/resourceGroups/other/providers/Microsoft.Network/privateEndpoints/pe2", "fleetnet web/other") ||
		// another fleet's Gateway of the same namespace and name
		!h.sim.RequestConnection(pls, "fleet2.1", "/subscriptions/"+sub+"/resourceGroups/other/providers/Microsoft.Network/privateEndpoints/pe3",
			"fleetnet web/public "+profileName("fleet-2", "web", "public")) {
		t.Fatal("seeding the other requests")
	}
	p := h.provider()
	ctx := context.Background()
	if err := p.Deploy(ctx, modelOf("v1", h.privateGateway("east"))); err != nil {
		t.Fatal(err)
	}
	ours := ""
	for _, r := range h.sim.Resources(armsim.TypeOrigin) {
		ours = armsim.ConnectionName(r.ID)
	}
	want := []string{
		ours + " Approved " + approvedPrefix + publicMessage,
		"consumer.1 Pending please approve",
		"other.1 Pending fleetnet web/other",
		"fleet2.1 Pending fleetnet web/public " + profileName("fleet-2", "web", "public"),
	}
	slices.Sort(want)
	if got := h.connections(pls); !slices.Equal(got, want) {
		t.Fatalf("connections %q, want %q", got, want)
	}
	if n := h.approvals(); n != 1 {
		t.Fatalf("%d approvals, want 1", n)
	}

	// A second deployment finds the connection Approved and leaves it.
	gw := h.privateGateway("east")
	gw.Generation = 2
	if err := p.Deploy(ctx, modelOf("v2", gw)); err != nil {
		t.Fatal(err)
	}
	if n := h.approvals(); n != 1 {
		t.Errorf("an approved connection was written again: %d approvals", n)
	}

	// The owner's rejection is the owner's decision.
	h.sim.SetConnectionStatus(pls, ours, "Rejected")
	gw.Generation = 3
	if err := p.Deploy(ctx, modelOf("v3", gw)); err != nil {
		t.Fatal(err)
	}
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if n := h.approvals(); n != 1 {
		t.Errorf("a rejected connection was approved: %d approvals", n)
	}
	if got := h.connections(pls); !slices.Contains(got, ours+" Rejected "+approvedPrefix+publicMessage) {
		t.Errorf("connections %q", got)
	}
}

// Nothing documents that an origin's sharedPrivateLinkResource.status
// follows its connection: with a Front Door whose origins never say
// Pending (nor anything), the connection is approved all the same, from
// the PLS's own state; and only once.
func TestPrivateLinkApprovalWithoutOriginStatus(t *testing.T) {
	h := newHarness(t, armsim.Options{Polls: 1})
	h.sim.MirrorConnectionStatus(false)
	pls := h.seedPrivate("east", "eastus", map[string]*string{keys.TagAzurePLSApproval: to.Ptr(keys.PLSApprovalAuto)})
	p := h.provider()
	ctx := context.Background()
	if err := p.Deploy(ctx, modelOf("v1", h.privateGateway("east"))); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := p.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	origins := h.sim.Resources(armsim.TypeOrigin)
	if len(origins) != 1 {
		t.Fatalf("%d origins", len(origins))
	}
	o, _ := armsim.Lookup[armcdn.AFDOrigin](h.sim, origins[0].ID)
	if st := o.Properties.SharedPrivateLinkResource.Status; st != nil {
		t.Fatalf("the origin's status is %s: the simulation should not say it", *st)
	}
	want := []string{armsim.ConnectionName(origins[0].ID) + " Approved " + approvedPrefix + publicMessage}
	if got := h.connections(pls); !slices.Equal(got, want) {
		t.Fatalf("connections %q, want %q", got, want)
	}
	if n := h.approvals(); n != 1 {
		t.Errorf("%d approvals, want 1", n)
	}
	// Programmed reads the connection's state at the PLS too, not the
	// origin's status.
	validateDomains(h)
	h.until(p, gwKey, time.Second, func(g GatewayProgress) bool { return g.Served })
}

// Without the owner's consent nothing is approved, whatever the
// connection says.
func TestPrivateLinkWithoutConsent(t *testing.T) {
	h := newHarness(t, armsim.Options{Polls: 1})
	pls := h.seedPrivate("east", "eastus", nil)
	p := h.provider()
	if err := p.Deploy(context.Background(), modelOf("v1", h.privateGateway("east"))); err != nil {
		t.Fatal(err)
	}
	if n := h.approvals(); n != 0 {
		t.Errorf("%d approvals without consent", n)
	}
	for _, c := range h.connections(pls) {
		if c != armsim.ConnectionName(h.sim.Resources(armsim.TypeOrigin)[0].ID)+" Pending "+publicMessage {
			t.Errorf("connection %q", c)
		}
	}
}

// publicMessage is the request message of web/public's origins.
var publicMessage = "fleetnet web/public " + profileName(owner, "web", "public")
