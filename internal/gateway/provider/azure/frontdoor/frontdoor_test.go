package frontdoor

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/cdn/armcdn/v2"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/azure/armerr"
	"github.com/fleetnet/fleetnet/internal/azure/armsim"
	"github.com/fleetnet/fleetnet/internal/azure/armutil"
)

const gwKey = "web/public"

func profileID(name string) armsim.ID { return armsim.ResourceID(sub, rg, armsim.TypeProfile, name) }

// The whole graph is created in dependency order, tagged, and reported
// programmed once provisioned and its custom domain validated; Front
// Door's deploymentStatus (NotStarted, then InProgress, with how long)
// is told as propagation until it reaches Succeeded, without holding it.
func TestDeployGraphAndProgress(t *testing.T) {
	h := newHarness(t, armsim.Options{Polls: 2, DeployReads: 3})
	p := h.provider()
	ctx := context.Background()
	if err := p.Deploy(ctx, modelOf("v1", h.gateway("afd-standard", nil))); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, w := range h.writes(0) {
		f := strings.Fields(w)
		if len(kinds) == 0 || kinds[len(kinds)-1] != f[1] {
			kinds = append(kinds, f[1])
		}
	}
	want := []string{"profiles", "afdEndpoints", "customDomains", "originGroups", "origins", "originGroups", "origins", "ruleSets", "rules", "routes"}
	if !slices.Equal(kinds, want) {
		t.Errorf("creation order %v, want %v", kinds, want)
	}
	name := profileName(owner, "web", "public")
	prof, ok := armsim.Lookup[armcdn.Profile](h.sim, profileID(name))
	if !ok {
		t.Fatalf("no profile %s", name)
	}
	if armutil.Deref(prof.SKU.Name) != armcdn.SKUNameStandardAzureFrontDoor || armutil.Deref(prof.Tags[keys.TagAzureOwner]) != owner ||
		armutil.Deref(prof.Tags[keys.TagAzureGatewayName]) != "public" || armutil.Deref(prof.Tags[keys.TagAzureGatewayUID]) != "uid-1" {
		t.Errorf("profile sku %v tags %v", armutil.Deref(prof.SKU.Name), prof.Tags)
	}
	// Origins: api's east and west weighted 1:3, one group each backend.
	origins := h.sim.Resources(armsim.TypeOrigin)
	if len(origins) != 3 {
		t.Fatalf("origins: %d, want 3", len(origins))
	}
	weights := map[string]int32{}
	for _, r := range origins {
		o, _ := armsim.Lookup[armcdn.AFDOrigin](h.sim, r.ID)
		weights[r.ID.Names[1][:len("fn-api")]+"/"+armutil.Deref(o.Properties.HostName)] = armutil.Deref(o.Properties.Weight)
	}
	if len(weights) != 3 {
		t.Errorf("origin weights %v", weights)
	}
	routes := h.sim.Resources(armsim.TypeRoute)
	if len(routes) != 2 {
		t.Fatalf("routes: %v", routes)
	}
	for _, r := range routes {
		rt, _ := armsim.Lookup[armcdn.Route](h.sim, r.ID)
		pr := rt.Properties
		if armutil.Deref(pr.HTTPSRedirect) != armcdn.HTTPSRedirectEnabled || len(pr.SupportedProtocols) != 2 || len(pr.CustomDomains) != 1 {
			t.Errorf("route %s: redirect %v protocols %d domains %d", r.ID.Name(), armutil.Deref(pr.HTTPSRedirect), len(pr.SupportedProtocols), len(pr.CustomDomains))
		}
	}

	g := p.Gateways()[gwKey]
	if g.Served || !strings.Contains(g.Message, "deploymentStatus NotStarted") || !strings.Contains(g.Message, "domain validation Pending") {
		t.Fatalf("right after deploy: served %v, message %q", g.Served, g.Message)
	}
	msgs := h.until(p, gwKey, time.Minute, func(g GatewayProgress) bool {
		return strings.Contains(g.Message, "validation Pending") && !strings.Contains(g.Message, "deploymentStatus")
	})
	var sawInProgress bool
	for _, m := range msgs {
		if strings.Contains(m, "provisioned, deploymentStatus InProgress for 1m0s (propagating") || strings.Contains(m, "provisioned, deploymentStatus InProgress for 2m0s (propagating") {
			sawInProgress = true
		}
	}
	if !sawInProgress {
		t.Errorf("never told a deployment InProgress with its duration:\n%s", strings.Join(msgs, "\n"))
	}
	last := msgs[len(msgs)-1]
	if !strings.Contains(last, "create the DNS TXT record _dnsauth.app.example.com with value token-") {
		t.Errorf("domain validation not explained: %q", last)
	}
	validateDomains(h)
	h.until(p, gwKey, time.Minute, func(g GatewayProgress) bool { return g.Served })
	g = p.Gateways()[gwKey]
	if !strings.Contains(g.Message, "all 12 resources deployed") || len(g.Addresses) != 2 || !strings.HasSuffix(g.Addresses[0], ".azurefd.net") {
		t.Errorf("served: %q addresses %v", g.Message, g.Addresses)
	}
	if pr := p.Progress(); !pr.Served || pr.Version != "v1" {
		t.Errorf("progress %+v", pr)
	}

	// Nothing differs: a second deploy writes nothing.
	n := len(h.sim.Writes())
	if err := p.Deploy(ctx, modelOf("v1", h.gateway("afd-standard", nil))); err != nil {
		t.Fatal(err)
	}
	if w := h.writes(n); len(w) != 0 {
		t.Errorf("a deploy without change wrote %v", w)
	}
}

// Throttling and conflicts are waited for; a 403 fails the Gateway with
// the ARM code and message, in an event, and nothing is removed.
func TestTransientAndForbidden(t *testing.T) {
	h := newHarness(t, armsim.Options{Polls: 1})
	p := h.provider()
	ctx := context.Background()
	th := h.sim.Inject(armsim.Fault{API: "AFDOriginGroupsClient.BeginCreate", Method: http.MethodPut, Times: 4, Err: armsim.Throttled(time.Millisecond)})
	cf := h.sim.Inject(armsim.Fault{API: "RoutesClient.BeginCreate", Method: http.MethodPut, Times: 2, Err: armsim.AnotherOperationInProgress(profileID("x"))})
	if err := p.Deploy(ctx, modelOf("v1", h.gateway("afd-standard", nil))); err != nil {
		t.Fatalf("transient errors not waited for: %v", err)
	}
	if th.Fired() != 4 || cf.Fired() != 2 {
		t.Errorf("throttled %d (want 4), conflicts %d (want 2)", th.Fired(), cf.Fired())
	}
	if len(h.eventList()) != 0 {
		t.Errorf("events for transient errors: %v", h.eventList())
	}

	before := len(h.sim.Resources(armsim.TypeRoute))
	h.sim.Inject(armsim.Fault{API: "RoutesClient.BeginCreate", Method: http.MethodPut, Err: &armsim.Error{Status: http.StatusForbidden, Code: "AuthorizationFailed",
		Message: "The client 'fleetnet' does not have authorization to perform action 'Microsoft.Cdn/profiles/afdEndpoints/routes/write'."}})
	gw := h.gateway("afd-standard", nil)
	gw.Listeners[1].VirtualHosts[0].Routes = append(gw.Listeners[1].VirtualHosts[0].Routes, route("docs", 0, "/docs", backend("site", 1, h.cluster("east", 1))))
	err := p.Deploy(ctx, modelOf("v2", gw))
	var ae *armerr.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusForbidden || ae.Code != "AuthorizationFailed" {
		t.Fatalf("deploy error %v, want the 403 as an ARMError", err)
	}
	want := "403 AuthorizationFailed: The client 'fleetnet' does not have authorization"
	g := p.Gateways()[gwKey]
	if g.Served || !strings.Contains(g.Message, want) {
		t.Errorf("message %q lacks %q", g.Message, want)
	}
	ev := h.eventList()
	if len(ev) != 1 || !strings.Contains(ev[0], keys.ReasonAzureAuthorizationFailed) || !strings.Contains(ev[0], want) {
		t.Errorf("events %v", ev)
	}
	if err := p.Deploy(ctx, modelOf("v2", gw)); err == nil || len(h.eventList()) != 1 {
		t.Errorf("the same failure told again: %v", h.eventList())
	}
	if after := len(h.sim.Resources(armsim.TypeRoute)); after != before {
		t.Errorf("routes %d -> %d after a failed deploy", before, after)
	}
	if pr := p.Progress(); pr.Version != "v1" {
		t.Errorf("version %s after a failed deploy, want v1", pr.Version)
	}
}
