package armsim_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/cdn/armcdn/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"

	"github.com/fleetnet/fleetnet/internal/azure/armsim"
)

type cdnClients struct {
	profiles  *armcdn.ProfilesClient
	endpoints *armcdn.AFDEndpointsClient
	groups    *armcdn.AFDOriginGroupsClient
	origins   *armcdn.AFDOriginsClient
	routes    *armcdn.RoutesClient
	ruleSets  *armcdn.RuleSetsClient
	pls       *armnetwork.PrivateLinkServicesClient
}

func newCDNClients(t *testing.T, s *armsim.Sim) cdnClients {
	t.Helper()
	opts := &arm.ClientOptions{ClientOptions: policy.ClientOptions{Transport: s.Transport(),
		Retry: policy.RetryOptions{MaxRetries: 1, RetryDelay: time.Millisecond, MaxRetryDelay: time.Millisecond}}}
	f, err := armcdn.NewClientFactory(sub, &azfake.TokenCredential{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	nf, err := armnetwork.NewClientFactory(sub, &azfake.TokenCredential{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return cdnClients{profiles: f.NewProfilesClient(), endpoints: f.NewAFDEndpointsClient(), groups: f.NewAFDOriginGroupsClient(), origins: f.NewAFDOriginsClient(),
		routes: f.NewRoutesClient(), ruleSets: f.NewRuleSetsClient(), pls: nf.NewPrivateLinkServicesClient()}
}

func profile(sku armcdn.SKUName) armcdn.Profile {
	return armcdn.Profile{Location: to.Ptr("Global"), SKU: &armcdn.SKU{Name: to.Ptr(sku)}}
}

// Front Door's rules as the simulation keeps them: deploymentStatus moves
// on with reads after provisioning; references must resolve and keep
// what they reference from deletion; Private Link origins need Premium
// and open a Pending connection on the Private Link Service, which an
// approval turns Approved on the origin.
func TestFrontDoor(t *testing.T) {
	s := armsim.New(armsim.Options{Polls: 1, DeployReads: 2})
	c := newCDNClients(t, s)
	ctx := context.Background()

	_, err := c.profiles.BeginCreate(ctx, rg, "afd", armcdn.Profile{Location: to.Ptr("westeurope"), SKU: &armcdn.SKU{Name: to.Ptr(armcdn.SKUNameStandardAzureFrontDoor)}}, nil)
	if re := respErr(t, err); re.StatusCode != http.StatusBadRequest {
		t.Fatalf("profile outside Global: %d", re.StatusCode)
	}
	pp, err := c.profiles.BeginCreate(ctx, rg, "afd", profile(armcdn.SKUNameStandardAzureFrontDoor), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pp.PollUntilDone(ctx, poll); err != nil {
		t.Fatal(err)
	}
	ep, err := c.endpoints.BeginCreate(ctx, rg, "afd", "ep", armcdn.AFDEndpoint{Location: to.Ptr("Global")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ep.PollUntilDone(ctx, poll); err != nil {
		t.Fatal(err)
	}
	// NotStarted, NotStarted, InProgress, InProgress, Succeeded.
	var seen []armcdn.DeploymentStatus
	for range 5 {
		g, err := c.endpoints.Get(ctx, rg, "afd", "ep", nil)
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, *g.Properties.DeploymentStatus)
		if *g.Properties.ProvisioningState != armcdn.AfdProvisioningStateSucceeded || g.Properties.HostName == nil {
			t.Fatalf("endpoint %+v", g.Properties)
		}
	}
	if seen[0] != armcdn.DeploymentStatusNotStarted || seen[2] != armcdn.DeploymentStatusInProgress || seen[4] != armcdn.DeploymentStatusSucceeded {
		t.Errorf("deployment statuses over reads: %v", seen)
	}

	ogID := "/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.Cdn/profiles/afd/originGroups/og"
	route := armcdn.Route{Properties: &armcdn.RouteProperties{OriginGroup: &armcdn.ResourceReference{ID: to.Ptr(ogID)}, PatternsToMatch: []*string{to.Ptr("/*")}}}
	_, err = c.routes.BeginCreate(ctx, rg, "afd", "ep", "r", route, nil)
	if re := respErr(t, err); re.StatusCode != http.StatusBadRequest || re.ErrorCode != "InvalidResourceReference" {
		t.Fatalf("route to a missing origin group: %d %s", re.StatusCode, re.ErrorCode)
	}
	og, err := c.groups.BeginCreate(ctx, rg, "afd", "og", armcdn.AFDOriginGroup{Properties: &armcdn.AFDOriginGroupProperties{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := og.PollUntilDone(ctx, poll); err != nil {
		t.Fatal(err)
	}
	rp, err := c.routes.BeginCreate(ctx, rg, "afd", "ep", "r", route, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rp.PollUntilDone(ctx, poll); err != nil {
		t.Fatal(err)
	}
	_, err = c.routes.BeginCreate(ctx, rg, "afd", "ep", "r2", route, nil)
	if re := respErr(t, err); re.StatusCode != http.StatusConflict {
		t.Fatalf("a second route on the same pattern: %d", re.StatusCode)
	}
	_, err = c.groups.BeginDelete(ctx, rg, "afd", "og", nil)
	if re := respErr(t, err); re.StatusCode != http.StatusConflict {
		t.Fatalf("deleting a referenced origin group: %d", re.StatusCode)
	}
	if _, err := c.ruleSets.Create(ctx, rg, "afd", "rules1", nil); err != nil {
		t.Fatalf("rule set create: %v", err)
	}

	// Private Link: refused on Standard; Pending, then Approved on Premium.
	plsID := armsim.ResourceID(sub, rg, armsim.TypePrivateLinkService, "pls")
	if err := s.Seed(plsID, armnetwork.PrivateLinkService{Location: to.Ptr("eastus"), Properties: &armnetwork.PrivateLinkServiceProperties{}}); err != nil {
		t.Fatal(err)
	}
	origin := armcdn.AFDOrigin{Properties: &armcdn.AFDOriginProperties{HostName: to.Ptr("10.0.0.4"), SharedPrivateLinkResource: &armcdn.SharedPrivateLinkResourceProperties{
		PrivateLink: &armcdn.ResourceReference{ID: to.Ptr(plsID.String())}, PrivateLinkLocation: to.Ptr("eastus"), RequestMessage: to.Ptr("please")}}}
	_, err = c.origins.BeginCreate(ctx, rg, "afd", "og", "o", origin, nil)
	if re := respErr(t, err); re.StatusCode != http.StatusBadRequest {
		t.Fatalf("private link origin on Standard: %d", re.StatusCode)
	}
	prem, err := c.profiles.BeginCreate(ctx, rg, "prem", profile(armcdn.SKUNamePremiumAzureFrontDoor), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prem.PollUntilDone(ctx, poll); err != nil {
		t.Fatal(err)
	}
	og2, err := c.groups.BeginCreate(ctx, rg, "prem", "og", armcdn.AFDOriginGroup{Properties: &armcdn.AFDOriginGroupProperties{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := og2.PollUntilDone(ctx, poll); err != nil {
		t.Fatal(err)
	}
	op, err := c.origins.BeginCreate(ctx, rg, "prem", "og", "o", origin, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := op.PollUntilDone(ctx, poll); err != nil {
		t.Fatal(err)
	}
	pls, err := c.pls.Get(ctx, rg, "pls", nil)
	if err != nil {
		t.Fatal(err)
	}
	conns := pls.Properties.PrivateEndpointConnections
	if len(conns) != 1 || *conns[0].Properties.PrivateLinkServiceConnectionState.Status != "Pending" || *conns[0].Properties.PrivateLinkServiceConnectionState.Description != "please" {
		t.Fatalf("connections %+v", conns)
	}
	if _, err := c.pls.UpdatePrivateEndpointConnection(ctx, rg, "pls", *conns[0].Name, armnetwork.PrivateEndpointConnection{Properties: &armnetwork.PrivateEndpointConnectionProperties{
		PrivateLinkServiceConnectionState: &armnetwork.PrivateLinkServiceConnectionState{Status: to.Ptr("Approved")}}}, nil); err != nil {
		t.Fatal(err)
	}
	o, err := c.origins.Get(ctx, rg, "prem", "og", "o", nil)
	if err != nil {
		t.Fatal(err)
	}
	if st := *o.Properties.SharedPrivateLinkResource.Status; st != armcdn.SharedPrivateLinkResourceStatusApproved {
		t.Errorf("origin's connection status %s, want Approved", st)
	}
}

// ReportNotStarted: reads show deploymentStatus NotStarted whatever the
// deployment's progress, as seen in the field; off, they show it.
func TestReportNotStarted(t *testing.T) {
	for _, tc := range []struct {
		name string
		on   bool
		want armcdn.DeploymentStatus
	}{
		{"reported", false, armcdn.DeploymentStatusSucceeded},
		{"stuck at NotStarted", true, armcdn.DeploymentStatusNotStarted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := armsim.New(armsim.Options{Polls: 1, DeployReads: 1})
			s.ReportNotStarted(tc.on)
			c := newCDNClients(t, s)
			ctx := context.Background()
			pp, err := c.profiles.BeginCreate(ctx, rg, "afd", profile(armcdn.SKUNameStandardAzureFrontDoor), nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pp.PollUntilDone(ctx, poll); err != nil {
				t.Fatal(err)
			}
			ep, err := c.endpoints.BeginCreate(ctx, rg, "afd", "ep", armcdn.AFDEndpoint{Location: to.Ptr("Global")}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ep.PollUntilDone(ctx, poll); err != nil {
				t.Fatal(err)
			}
			var last armcdn.DeploymentStatus
			for range 4 {
				g, err := c.endpoints.Get(ctx, rg, "afd", "ep", nil)
				if err != nil {
					t.Fatal(err)
				}
				if g.Properties.DeploymentStatus == nil {
					t.Fatal("no deploymentStatus")
				}
				last = *g.Properties.DeploymentStatus
			}
			if last != tc.want {
				t.Errorf("deploymentStatus after 4 reads %s, want %s", last, tc.want)
			}
		})
	}
}
