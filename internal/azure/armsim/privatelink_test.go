package armsim_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/cdn/armcdn/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"

	"github.com/fleetnet/fleetnet/internal/azure/armsim"
	"github.com/fleetnet/fleetnet/internal/azure/armutil"
)

// privateLinkFixture is a simulation with a Private Link Service pls in
// eastus and Premium profiles prem and prem2, each with origin group og.
type privateLinkFixture struct {
	t   *testing.T
	s   *armsim.Sim
	c   cdnClients
	pls armsim.ID
}

func newPrivateLinkFixture(t *testing.T) *privateLinkFixture {
	t.Helper()
	s := armsim.New(armsim.Options{Polls: 1})
	f := &privateLinkFixture{t: t, s: s, c: newCDNClients(t, s), pls: armsim.ResourceID(sub, rg, armsim.TypePrivateLinkService, "pls")}
	if err := s.Seed(f.pls, armnetwork.PrivateLinkService{Location: to.Ptr("eastus"), Properties: &armnetwork.PrivateLinkServiceProperties{}}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, name := range []string{"prem", "prem2"} {
		pp, err := f.c.profiles.BeginCreate(ctx, rg, name, profile(armcdn.SKUNamePremiumAzureFrontDoor), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pp.PollUntilDone(ctx, poll); err != nil {
			t.Fatal(err)
		}
		op, err := f.c.groups.BeginCreate(ctx, rg, name, "og", armcdn.AFDOriginGroup{Properties: &armcdn.AFDOriginGroupProperties{}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := op.PollUntilDone(ctx, poll); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// origin creates origin name in profile's og on the PLS, with the request
// message msg, in the Private Link location location, and returns its id
// and the status the create answered with.
func (f *privateLinkFixture) origin(profile, name, msg, location string, status *armcdn.SharedPrivateLinkResourceStatus) (armsim.ID, *armcdn.SharedPrivateLinkResourceStatus) {
	f.t.Helper()
	ctx := context.Background()
	o := armcdn.AFDOrigin{Properties: &armcdn.AFDOriginProperties{HostName: to.Ptr("10.0.0.4"), SharedPrivateLinkResource: &armcdn.SharedPrivateLinkResourceProperties{
		PrivateLink: &armcdn.ResourceReference{ID: to.Ptr(f.pls.String())}, PrivateLinkLocation: to.Ptr(location), RequestMessage: to.Ptr(msg), Status: status}}}
	p, err := f.c.origins.BeginCreate(ctx, rg, profile, "og", name, o, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	res, err := p.PollUntilDone(ctx, poll)
	if err != nil {
		f.t.Fatal(err)
	}
	id, err := armsim.ParseID("/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.Cdn/profiles/" + profile + "/originGroups/og/origins/" + name)
	if err != nil {
		f.t.Fatal(err)
	}
	return id, res.Properties.SharedPrivateLinkResource.Status
}

// originStatus is the origin's sharedPrivateLinkResource.status as a GET
// answers it ("" for none).
func (f *privateLinkFixture) originStatus(profile, name string) string {
	f.t.Helper()
	o, err := f.c.origins.Get(context.Background(), rg, profile, "og", name, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	if st := o.Properties.SharedPrivateLinkResource.Status; st != nil {
		return string(*st)
	}
	return ""
}

func (f *privateLinkFixture) connections() []*armnetwork.PrivateEndpointConnection {
	f.t.Helper()
	pls, err := f.c.pls.Get(context.Background(), rg, "pls", nil)
	if err != nil {
		f.t.Fatal(err)
	}
	return pls.Properties.PrivateEndpointConnections
}

func (f *privateLinkFixture) connection(name string) *armnetwork.PrivateEndpointConnection {
	f.t.Helper()
	for _, c := range f.connections() {
		if armutil.Deref(c.Name) == name {
			return c
		}
	}
	f.t.Fatalf("no connection %s", name)
	return nil
}

func (f *privateLinkFixture) update(name, status, description string) error {
	_, err := f.c.pls.UpdatePrivateEndpointConnection(context.Background(), rg, "pls", name, armnetwork.PrivateEndpointConnection{Properties: &armnetwork.PrivateEndpointConnectionProperties{
		PrivateLinkServiceConnectionState: &armnetwork.PrivateLinkServiceConnectionState{Status: to.Ptr(status), Description: to.Ptr(description)}}}, nil)
	return err
}

func state(c *armnetwork.PrivateEndpointConnection) (string, string) {
	st := c.Properties.PrivateLinkServiceConnectionState
	return armutil.Deref(st.Status), armutil.Deref(st.Description)
}

// The documented Private Link behaviours (privatelink.go cites them): a
// Private Link origin requests a Pending connection on the PLS, with its
// request message as the description and a private endpoint of Front
// Door's own; origins of one profile on the same PLS and region share it,
// another region or profile makes another; the owner's update sets the
// status and the description; a PUT of the PLS keeps its connections.
func TestPrivateLinkConnections(t *testing.T) {
	f := newPrivateLinkFixture(t)
	ctx := context.Background()

	o1, st := f.origin("prem", "o1", "fleetnet web/public", "eastus", nil)
	conns := f.connections()
	if len(conns) != 1 {
		t.Fatalf("%d connections, want 1", len(conns))
	}
	ours := armutil.Deref(conns[0].Name)
	if ours != armsim.ConnectionName(o1) {
		t.Errorf("connection %s, ConnectionName says %s", ours, armsim.ConnectionName(o1))
	}
	if s, d := state(conns[0]); s != "Pending" || d != "fleetnet web/public" {
		t.Errorf("connection %s %q, want Pending with the request message", s, d)
	}
	pe := armutil.Deref(conns[0].Properties.PrivateEndpoint.ID)
	if !strings.Contains(pe, "/resourceGroups/eafd-Prod-eastus/") || strings.Contains(pe, sub) {
		t.Errorf("private endpoint %s: want one in Front Door's subscription", pe)
	}
	if st == nil || *st != armcdn.SharedPrivateLinkResourceStatusPending || f.originStatus("prem", "o1") != "Pending" {
		t.Errorf("origin status %v (mirrored by default)", st)
	}

	// Same profile, PLS and region: the same private endpoint.
	f.origin("prem", "o2", "another message", "eastus", nil)
	if n := len(f.connections()); n != 1 {
		t.Fatalf("%d connections after a second origin of the profile, want 1", n)
	}
	// Another region of the same profile, and another profile: others.
	f.origin("prem", "o3", "fleetnet web/public", "westus", nil)
	f.origin("prem2", "o4", "fleetnet web/public", "eastus", nil)
	if n := len(f.connections()); n != 3 {
		t.Fatalf("%d connections, want 3", n)
	}
	if s, _ := state(f.connection(ours + "-2")); s != "Pending" {
		t.Errorf("the profile's westus connection is %s", s)
	}

	if err := f.update(ours, "Approved", "approved by the owner"); err != nil {
		t.Fatal(err)
	}
	if s, d := state(f.connection(ours)); s != "Approved" || d != "approved by the owner" {
		t.Errorf("approved connection %s %q", s, d)
	}
	for name, want := range map[string]string{"o1": "Approved", "o2": "Approved", "o3": "Pending"} {
		if got := f.originStatus("prem", name); got != want {
			t.Errorf("origin %s status %s, want %s", name, got, want)
		}
	}
	if got := f.originStatus("prem2", "o4"); got != "Pending" {
		t.Errorf("origin o4 of the other profile is %s", got)
	}

	if re := respErr(t, f.update(ours, "Bogus", "")); re.StatusCode != http.StatusBadRequest {
		t.Errorf("status Bogus: %d", re.StatusCode)
	}
	if re := respErr(t, f.update("nope", "Approved", "")); re.StatusCode != http.StatusNotFound {
		t.Errorf("unknown connection: %d", re.StatusCode)
	}

	// The PLS's connections are read-only: its owner's PUT keeps them.
	pp, err := f.c.pls.BeginCreateOrUpdate(ctx, rg, "pls", armnetwork.PrivateLinkService{Location: to.Ptr("eastus"), Tags: map[string]*string{"owner": to.Ptr("me")},
		Properties: &armnetwork.PrivateLinkServiceProperties{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pp.PollUntilDone(ctx, poll); err != nil {
		t.Fatal(err)
	}
	if n := len(f.connections()); n != 3 {
		t.Errorf("%d connections after a PUT of the PLS, want 3", n)
	}

	// A consumer's own private endpoint asks with its message.
	if !f.s.RequestConnection(f.pls, "consumer.1", "/subscriptions/"+sub+"/resourceGroups/c/providers/Microsoft.Network/privateEndpoints/pe", "let me in") {
		t.Fatal("RequestConnection")
	}
	if f.s.RequestConnection(f.pls, "consumer.1", "x", "again") || f.s.RequestConnection(armsim.ResourceID(sub, rg, armsim.TypePrivateLinkService, "none"), "c", "x", "m") {
		t.Error("RequestConnection on a taken name or a missing PLS")
	}
	if s, d := state(f.connection("consumer.1")); s != "Pending" || d != "let me in" {
		t.Errorf("consumer's connection %s %q", s, d)
	}
}

// Off, the undocumented mirroring leaves an origin's
// sharedPrivateLinkResource.status as its client wrote it (the field is
// writable), whatever the connection's status.
func TestPrivateLinkStatusNotMirrored(t *testing.T) {
	f := newPrivateLinkFixture(t)
	f.s.MirrorConnectionStatus(false)
	o1, st := f.origin("prem", "o1", "m", "eastus", nil)
	if st != nil || f.originStatus("prem", "o1") != "" {
		t.Errorf("origin status %v, want none", st)
	}
	if err := f.update(armsim.ConnectionName(o1), "Approved", "ok"); err != nil {
		t.Fatal(err)
	}
	if got := f.originStatus("prem", "o1"); got != "" {
		t.Errorf("origin status %s after approval, want none", got)
	}
	f.origin("prem2", "o2", "m", "eastus", to.Ptr(armcdn.SharedPrivateLinkResourceStatusApproved))
	if got := f.originStatus("prem2", "o2"); got != "Approved" {
		t.Errorf("origin status %q, want the client's Approved", got)
	}
	for _, c := range f.connections() {
		if strings.HasPrefix(armutil.Deref(c.Name), armsim.ConnectionName(o1)) {
			continue
		}
		if s, _ := state(c); s != "Pending" {
			t.Errorf("prem2's connection %s, want Pending whatever its origin says", s)
		}
	}
}
