package frontdoor

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/cdn/armcdn/v2"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/azure/armsim"
	"github.com/fleetnet/fleetnet/internal/azure/armutil"
	"github.com/fleetnet/fleetnet/internal/gateway/provider/azure/deployloop"
	"github.com/fleetnet/fleetnet/internal/testkit"
)

// A controller stopped while a route's creation runs leaves its resume
// token; the next process resumes that operation (polls it) instead of
// sending the PUT again.
func TestRestartResumesOperation(t *testing.T) {
	h := newHarness(t, armsim.Options{Polls: 1})
	h.sim.Hold(armsim.TypeRoute)
	first := h.provider()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- first.Deploy(ctx, modelOf("v1", h.gateway("afd-standard", nil))) }()
	var key string
	testkit.Until(t, 10*time.Second, "a resume token kept while the route's creation runs", func() bool {
		tokens, _ := h.tokens.Load(context.Background(), gwKey)
		for k := range tokens {
			if strings.HasPrefix(k, "put|route|") {
				key = k
			}
		}
		return key != ""
	})
	cancel() // the controller stops,
	<-done
	first.lanes.Stop() // and its jobs with it
	putsBefore := countWrites(h, "PUT", "routes")

	h.sim.Release(armsim.TypeRoute)
	second := h.provider()
	if err := second.Deploy(context.Background(), modelOf("v1", h.gateway("afd-standard", nil))); err != nil {
		t.Fatal(err)
	}
	// The held route was resumed, not written again; the other route,
	// never started, was written once.
	if got := countWrites(h, "PUT", "routes") - putsBefore; got != 1 {
		t.Errorf("route PUTs after the restart: %d, want 1 (the route never started; the resumed one is polled)", got)
	}
	var resumedPolls int
	for _, c := range h.sim.Calls() {
		if c.Poll && c.API == "RoutesClient.BeginCreate" {
			resumedPolls++
		}
	}
	if resumedPolls == 0 {
		t.Error("the resumed operation was never polled")
	}
	if left, _ := h.tokens.Load(context.Background(), gwKey); len(left) != 0 {
		t.Errorf("tokens left: %v", left)
	}
	if n := len(h.sim.Resources(armsim.TypeRoute)); n != 2 {
		t.Errorf("routes: %d, want 2", n)
	}
}

func countWrites(h *harness, method, typ string) int {
	n := 0
	for _, w := range h.writes(0) {
		if strings.HasPrefix(w, method+" "+typ+" ") {
			n++
		}
	}
	return n
}

// Private Link origins on Premium: the connection the origin opens on
// the cluster's Private Link Service is approved by fleetnet only where
// the PLS is tagged for it; elsewhere the Gateway says it waits for the
// owner, until the owner approves (or rejects).
func TestPrivateLinkApproval(t *testing.T) {
	h := newHarness(t, armsim.Options{Polls: 1})
	autoPLS := h.seedPrivate("east", "eastus", map[string]*string{keys.TagAzurePLSApproval: to.Ptr("auto")})
	manualPLS := h.seedPrivate("west", "westus", nil)
	p := h.provider()
	gw := edgev1.Gateway{Namespace: "web", Name: "public", Class: "afd-premium", Annotations: map[string]string{keys.AnnotationAzureConnectivity: "private-link"},
		Listeners: []edgev1.Listener{{Name: "http", Port: 80, Protocol: edgev1.ProtocolHTTP, VirtualHosts: []edgev1.VirtualHost{{Hostname: "*", Routes: []edgev1.Route{
			route("api", 0, "/", backend("api", 1, h.cluster("east-internal", 1), h.cluster("west-internal", 1)))}}}}}}
	gw.Listeners[0].VirtualHosts[0].Routes[0].Backends[0].Clusters[0].Cluster = "east"
	gw.Listeners[0].VirtualHosts[0].Routes[0].Backends[0].Clusters[1].Cluster = "west"
	if err := p.Deploy(context.Background(), modelOf("v1", gw)); err != nil {
		t.Fatal(err)
	}
	status := func(pls armsim.ID) string {
		v, _ := armsim.Lookup[struct {
			Properties struct {
				PrivateEndpointConnections []struct {
					Properties struct {
						State struct{ Status string } `json:"privateLinkServiceConnectionState"`
					} `json:"properties"`
				} `json:"privateEndpointConnections"`
			} `json:"properties"`
		}](h.sim, pls)
		var out []string
		for _, c := range v.Properties.PrivateEndpointConnections {
			out = append(out, c.Properties.State.Status)
		}
		return strings.Join(out, ",")
	}
	if got := status(autoPLS); got != "Approved" {
		t.Errorf("auto PLS connections: %q, want Approved", got)
	}
	if got := status(manualPLS); got != "Pending" {
		t.Errorf("manual PLS connections: %q, want Pending", got)
	}
	for _, r := range h.sim.Resources(armsim.TypeOrigin) {
		o, _ := armsim.Lookup[armcdn.AFDOrigin](h.sim, r.ID)
		if spl := o.Properties.SharedPrivateLinkResource; spl == nil || armutil.Deref(spl.PrivateLink.ID) == "" || armutil.Deref(o.Properties.HostName) != "10.1.0.10" {
			t.Errorf("origin %s: host %s, private link %+v", r.ID.Name(), armutil.Deref(o.Properties.HostName), spl)
		}
	}
	msgs := h.until(p, gwKey, time.Second, func(g GatewayProgress) bool { return !strings.Contains(g.Message, "deployment") })
	last := msgs[len(msgs)-1]
	if !strings.Contains(last, "origin cluster west for web/api: provisioned, deployed, Private Link connection Pending: waiting for the owner of "+manualPLS.String()) ||
		strings.Contains(last, "cluster east for web/api: provisioned, deployed, Private Link") {
		t.Fatalf("message %q", last)
	}
	if p.Gateways()[gwKey].Served {
		t.Fatal("served with a Pending connection")
	}
	conn := ""
	for _, r := range h.sim.Resources(armsim.TypeOrigin) {
		if o, _ := armsim.Lookup[armcdn.AFDOrigin](h.sim, r.ID); strings.Contains(armutil.Deref(o.Properties.SharedPrivateLinkResource.PrivateLink.ID), "pls-west") {
			conn = armsim.ConnectionName(r.ID)
		}
	}
	h.sim.SetConnectionStatus(manualPLS, conn, "Rejected")
	h.until(p, gwKey, time.Second, func(g GatewayProgress) bool {
		return strings.Contains(g.Message, "Private Link connection Rejected by the owner of "+manualPLS.String())
	})
	h.sim.SetConnectionStatus(manualPLS, conn, "Approved")
	h.until(p, gwKey, time.Second, func(g GatewayProgress) bool { return g.Served })
}

// Private Link Services the clusters publish with their exports
// (fleetnet.dev/private-link-service on the imported slices) are the
// origins, without a regional frontend to match. The export's
// fleetnet.dev/pls-approval=auto lets fleetnet approve a PLS that
// cloud-provider-azure made for that Service (its owner tag names it):
// east's is approved; south's names another Service and waits for its
// owner. West publishes a name that does not exist, and its internal
// frontend finds its PLS, which the export's consent does not cover.
// North's does not exist and it has no frontend: said on the Gateway.
func TestPublishedPrivateLinkService(t *testing.T) {
	h := newHarness(t, armsim.Options{Polls: 1})
	eastPLS := h.seedPrivate("east", "eastus", map[string]*string{keys.TagAzureOwnerService: to.Ptr("web/api")})
	westPLS := h.seedPrivate("west", "westus", map[string]*string{keys.TagAzureOwnerService: to.Ptr("web/api")})
	southPLS := h.seedPrivate("south", "southcentralus", map[string]*string{keys.TagAzureOwnerService: to.Ptr("web/other")})
	p := h.provider()
	published := func(cluster string, pls armsim.ID, frontend string) edgev1.ClusterEndpoints {
		return edgev1.ClusterEndpoints{Cluster: cluster, Weight: 1, EffectiveWeight: 1, PrivateLinkService: pls.String(), PrivateLinkAutoApproval: true,
			RegionalFrontend: frontend, Endpoints: []edgev1.Endpoint{{Address: "10.0.0.1", Port: 8080, Ready: true, Serving: true}}}
	}
	missing := func(cluster string) armsim.ID {
		return armsim.ResourceID(sub, memberRG+"-"+cluster, armsim.TypePrivateLinkService, "pls-guessed-"+cluster)
	}
	gw := edgev1.Gateway{Namespace: "web", Name: "public", Class: "afd-premium", Annotations: map[string]string{keys.AnnotationAzureConnectivity: "private-link"},
		Listeners: []edgev1.Listener{{Name: "http", Port: 80, Protocol: edgev1.ProtocolHTTP, VirtualHosts: []edgev1.VirtualHost{{Hostname: "*", Routes: []edgev1.Route{
			route("api", 0, "/", backend("api", 1, published("east", eastPLS, ""), published("north", missing("north"), ""),
				published("south", southPLS, ""), published("west", missing("west"), h.frontends["west-internal"])))}}}}}}
	if err := p.Deploy(context.Background(), modelOf("v1", gw)); err != nil {
		t.Fatal(err)
	}
	var origins []string
	for _, r := range h.sim.Resources(armsim.TypeOrigin) {
		o, _ := armsim.Lookup[armcdn.AFDOrigin](h.sim, r.ID)
		spl := o.Properties.SharedPrivateLinkResource
		if spl == nil || armutil.Deref(o.Properties.HostName) != "10.1.0.10" {
			t.Fatalf("origin %s: host %s, private link %+v", r.ID.Name(), armutil.Deref(o.Properties.HostName), spl)
		}
		origins = append(origins, armutil.Deref(spl.PrivateLink.ID)+" in "+armutil.Deref(spl.PrivateLinkLocation))
	}
	slices.Sort(origins)
	if want := []string{eastPLS.String() + " in eastus", southPLS.String() + " in southcentralus", westPLS.String() + " in westus"}; !slices.Equal(origins, want) {
		t.Fatalf("origins' private links %q, want %q", origins, want)
	}
	msgs := h.until(p, gwKey, time.Second, func(g GatewayProgress) bool { return !strings.Contains(g.Message, "deployment") })
	last := msgs[len(msgs)-1]
	for _, want := range []string{
		"cluster north: Private Link Service pls-guessed-north does not exist (yet)",
		"origin cluster south for web/api: provisioned, deployed, Private Link connection Pending: waiting for the owner of " + southPLS.String(),
		"origin cluster west for web/api: provisioned, deployed, Private Link connection Pending: waiting for the owner of " + westPLS.String(),
	} {
		if !strings.Contains(last, want) {
			t.Errorf("message %q lacks %q", last, want)
		}
	}
	if strings.Contains(last, "cluster east for web/api: provisioned, deployed, Private Link") {
		t.Errorf("east's connection is not approved: %q", last)
	}
}

// A regional frontend that names a Private Link Service, on a public
// Gateway, is not taken for one: the cluster gets no origin and the
// Gateway says why; the others are served.
func TestPublicGatewayIgnoresPrivateLinkServices(t *testing.T) {
	h := newHarness(t, armsim.Options{Polls: 1})
	pls := h.seedPrivate("east", "eastus", nil)
	p := h.provider()
	odd := h.cluster("east", 1)
	odd.Cluster, odd.RegionalFrontend, odd.PrivateLinkService = "odd", pls.String(), pls.String()
	gw := edgev1.Gateway{Namespace: "web", Name: "public", Class: "afd-premium",
		Listeners: []edgev1.Listener{{Name: "http", Port: 80, Protocol: edgev1.ProtocolHTTP, VirtualHosts: []edgev1.VirtualHost{{Hostname: "*", Routes: []edgev1.Route{
			route("api", 0, "/", backend("api", 1, h.cluster("east", 1), odd))}}}}}}
	if err := p.Deploy(context.Background(), modelOf("v1", gw)); err != nil {
		t.Fatal(err)
	}
	for _, r := range h.sim.Resources(armsim.TypeOrigin) {
		if o, _ := armsim.Lookup[armcdn.AFDOrigin](h.sim, r.ID); o.Properties.SharedPrivateLinkResource != nil {
			t.Errorf("origin %s of a public Gateway has a private link: %+v", r.ID.Name(), o.Properties.SharedPrivateLinkResource)
		}
	}
	if n := len(h.sim.Resources(armsim.TypeOrigin)); n != 1 {
		t.Errorf("%d origins, want east's only", n)
	}
	if msg := p.Gateways()[gwKey].Message; !strings.Contains(msg, "cluster odd: regional frontend "+pls.String()+" is not a load balancer frontend IP configuration id") {
		t.Errorf("message %q does not say why cluster odd has no origin", msg)
	}
}

// Private Link on a Standard class is refused before anything is
// written, naming the annotation; so is any invalid annotation.
func TestAnnotationErrors(t *testing.T) {
	tests := []struct {
		name  string
		class string
		ann   map[string]string
		want  string
	}{
		{"private link on Standard", "afd-standard", map[string]string{keys.AnnotationAzureConnectivity: "private-link"},
			`annotation fleetnet.dev/azure-connectivity="private-link": Private Link origins need Front Door Premium, and the tier is Standard`},
		{"unknown", "afd-premium", map[string]string{"fleetnet.dev/azure-cache": "on"}, `annotation fleetnet.dev/azure-cache="on": unknown annotation`},
		{"malformed", "afd-premium", map[string]string{keys.AnnotationAzureSampleSize: "-1"}, `annotation fleetnet.dev/azure-sample-size="-1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, armsim.Options{})
			p := h.provider()
			err := p.Deploy(context.Background(), modelOf("v1", h.gateway(tt.class, tt.ann)))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
			if g := p.Gateways()[gwKey]; g.Served || !strings.Contains(g.Message, tt.want) {
				t.Errorf("progress %+v", g)
			}
			if w := h.writes(0); len(w) != 0 {
				t.Errorf("writes: %v", w)
			}
		})
	}
}

// Removing a route withdraws it before what it referenced (its rule set,
// its origin group after that group's origins), and the withdrawal is
// reported until its absence has been observed twice over AbsentFor.
// Removing the Gateway withdraws everything in dependency order, and the
// Gateway's entry stays until the profile's absence is sustained.
func TestWithdrawal(t *testing.T) {
	h := newHarness(t, armsim.Options{Polls: 1})
	p := h.provider()
	ctx := context.Background()
	if err := p.Deploy(ctx, modelOf("v1", h.gateway("afd-standard", nil))); err != nil {
		t.Fatal(err)
	}
	validateDomains(h)
	h.until(p, gwKey, time.Second, func(g GatewayProgress) bool { return g.Served })

	// Drop the site route (with its rule set and origin group).
	gw := h.gateway("afd-standard", nil)
	gw.Listeners[1].VirtualHosts[0].Routes = gw.Listeners[1].VirtualHosts[0].Routes[:1]
	n := len(h.sim.Writes())
	if err := p.Deploy(ctx, modelOf("v2", gw)); err != nil {
		t.Fatal(err)
	}
	var deletes []string
	for _, w := range h.writes(n) {
		f := strings.Fields(w)
		if f[0] == "DELETE" {
			deletes = append(deletes, f[1])
		}
	}
	if want := []string{"routes", "rules", "ruleSets", "origins", "originGroups"}; !slices.Equal(deletes, want) {
		t.Errorf("deletions %v, want %v", deletes, want)
	}
	g := p.Gateways()[gwKey]
	if !slices.ContainsFunc(g.Withdrawing, func(s string) bool { return strings.HasPrefix(s, "route fn-site-") }) ||
		!strings.Contains(g.Message, "withdrawn, confirming its absence") {
		t.Fatalf("withdrawal not reported as unconfirmed: %+v", g)
	}
	h.clock.Step(30 * time.Second)
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if g := p.Gateways()[gwKey]; len(g.Withdrawing) == 0 {
		t.Fatal("withdrawal confirmed before AbsentFor")
	}
	h.clock.Step(31 * time.Second)
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if g := p.Gateways()[gwKey]; len(g.Withdrawing) != 0 || !g.Served {
		t.Fatalf("withdrawal not confirmed after a sustained absence: %+v", g)
	}

	// Drop the Gateway.
	n = len(h.sim.Writes())
	if err := p.Deploy(ctx, modelOf("v3")); err != nil {
		t.Fatal(err)
	}
	deletes = nil
	for _, w := range h.writes(n) {
		f := strings.Fields(w)
		if f[0] == "DELETE" && (len(deletes) == 0 || deletes[len(deletes)-1] != f[1]) {
			deletes = append(deletes, f[1])
		}
	}
	// (the site route's rule set went with v2)
	if want := []string{"routes", "origins", "originGroups", "customDomains", "afdEndpoints", "profiles"}; !slices.Equal(deletes, want) {
		t.Errorf("deletions %v, want %v", deletes, want)
	}
	if len(h.sim.Resources(armsim.TypeProfile)) != 0 {
		t.Fatal("profile left")
	}
	if _, ok := p.Gateways()[gwKey]; !ok {
		t.Fatal("withdrawal complete after one observation")
	}
	for i := 0; i < 3; i++ {
		h.clock.Step(30 * time.Second)
		if err := p.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if g, ok := p.Gateways()[gwKey]; ok {
		t.Fatalf("withdrawal never complete: %+v", g)
	}
}

// A profile of the provider's name without its tags is not touched; a
// child without fleetnet's name prefix in its profile is left alone, and
// keeps the profile when the Gateway goes.
func TestUnownedLeftAlone(t *testing.T) {
	h := newHarness(t, armsim.Options{})
	name := profileName(owner, "web", "public")
	foreign := armcdn.Profile{Location: to.Ptr("Global"), SKU: &armcdn.SKU{Name: to.Ptr(armcdn.SKUNameStandardAzureFrontDoor)},
		Tags: map[string]*string{keys.TagAzureOwner: to.Ptr("another-fleet")}}
	if err := h.sim.Seed(profileID(name), foreign); err != nil {
		t.Fatal(err)
	}
	p := h.provider()
	err := p.Deploy(context.Background(), modelOf("v1", h.gateway("afd-standard", nil)))
	if err == nil || !strings.Contains(err.Error(), "exists without fleetnet's tags for this Gateway") {
		t.Fatalf("error %v", err)
	}
	if w := h.writes(0); len(w) != 0 {
		t.Fatalf("writes to an unowned profile: %v", w)
	}

	h2 := newHarness(t, armsim.Options{})
	p2 := h2.provider()
	if err := p2.Deploy(context.Background(), modelOf("v1", h2.gateway("afd-standard", nil))); err != nil {
		t.Fatal(err)
	}
	og := profileID(name).Child("originGroups", "portal-group")
	if err := h2.sim.Seed(og, armcdn.AFDOriginGroup{Properties: &armcdn.AFDOriginGroupProperties{}}); err != nil {
		t.Fatal(err)
	}
	if err := p2.Deploy(context.Background(), modelOf("v2", h2.gateway("afd-standard", nil))); err != nil {
		t.Fatal(err)
	}
	if _, ok := h2.sim.Get(og); !ok {
		t.Fatal("an origin group fleetnet did not create was deleted")
	}
	if g := p2.Gateways()[gwKey]; !strings.Contains(g.Message, "origin group portal-group left alone: fleetnet did not create it") {
		t.Errorf("message %q", g.Message)
	}
	if err := p2.Deploy(context.Background(), modelOf("v3")); err != nil {
		t.Fatal(err)
	}
	if _, ok := h2.sim.Get(og); !ok {
		t.Fatal("an origin group fleetnet did not create was deleted with the Gateway")
	}
	if _, ok := h2.sim.Get(profileID(name)); !ok {
		t.Fatal("the profile was deleted with someone else's origin group in it")
	}
	if n := len(h2.sim.Resources(armsim.TypeRoute)); n != 0 {
		t.Errorf("routes left: %d", n)
	}
}

// An owned resource edited in the portal is written back at the next
// deploy; only it.
func TestDriftRepaired(t *testing.T) {
	h := newHarness(t, armsim.Options{Polls: 1})
	p := h.provider()
	ctx := context.Background()
	if err := p.Deploy(ctx, modelOf("v1", h.gateway("afd-standard", nil))); err != nil {
		t.Fatal(err)
	}
	origin := h.sim.Resources(armsim.TypeOrigin)[0].ID
	var before armcdn.AFDOrigin
	before, _ = armsim.Lookup[armcdn.AFDOrigin](h.sim, origin)
	h.sim.Edit(origin, func(b []byte) []byte {
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		m["properties"].(map[string]any)["weight"] = 999
		m["properties"].(map[string]any)["enabledState"] = "Disabled"
		out, _ := json.Marshal(m)
		return out
	})
	prof := profileID(profileName(owner, "web", "public"))
	h.sim.Edit(prof, func(b []byte) []byte {
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		m["tags"].(map[string]any)["cost-center"] = "42"
		out, _ := json.Marshal(m)
		return out
	})
	n := len(h.sim.Writes())
	if err := p.Deploy(ctx, modelOf("v1", h.gateway("afd-standard", nil))); err != nil {
		t.Fatal(err)
	}
	if w := h.writes(n); len(w) != 1 || w[0] != "PUT origins "+origin.Name() {
		t.Errorf("repair writes %v, want the origin only (a tag someone added is no drift)", w)
	}
	after, _ := armsim.Lookup[armcdn.AFDOrigin](h.sim, origin)
	if armutil.Deref(after.Properties.Weight) != armutil.Deref(before.Properties.Weight) || armutil.Deref(after.Properties.EnabledState) != armcdn.EnabledStateEnabled {
		t.Errorf("origin after repair: weight %d state %s", armutil.Deref(after.Properties.Weight), armutil.Deref(after.Properties.EnabledState))
	}
}

// A cluster whose load balancer cannot be read (500) is not a reason to
// withdraw its origins: nothing is deleted, and the Gateway says why.
func TestUnreadableOriginRemovesNothing(t *testing.T) {
	h := newHarness(t, armsim.Options{Polls: 1})
	p := h.provider()
	ctx := context.Background()
	if err := p.Deploy(ctx, modelOf("v1", h.gateway("afd-standard", nil))); err != nil {
		t.Fatal(err)
	}
	before := len(h.sim.Resources(armsim.TypeOrigin))
	in := h.sim.Inject(armsim.Fault{API: "LoadBalancersClient.Get", ID: memberRG + "-west", Err: armsim.InternalServerError()})
	n := len(h.sim.Writes())
	if err := p.Deploy(ctx, modelOf("v2", h.gateway("afd-standard", nil))); err != nil {
		t.Fatal(err)
	}
	if w := h.writes(n); len(w) != 0 {
		t.Errorf("writes while an origin is unreadable: %v", w)
	}
	if after := len(h.sim.Resources(armsim.TypeOrigin)); after != before {
		t.Errorf("origins %d -> %d", before, after)
	}
	if g := p.Gateways()[gwKey]; !strings.Contains(g.Message, "cluster west: reading load balancer kubernetes: 500 InternalServerError") {
		t.Errorf("message %q", g.Message)
	}
	in.Remove()
}

// A deployment that ends Failed is told, and the resource is written
// again at the next deploy, which deploys it again.
func TestFailedDeploymentWrittenAgain(t *testing.T) {
	h := newHarness(t, armsim.Options{Polls: 1})
	p := h.provider()
	ctx := context.Background()
	if err := p.Deploy(ctx, modelOf("v1", h.gateway("afd-standard", nil))); err != nil {
		t.Fatal(err)
	}
	validateDomains(h)
	route := h.sim.Resources(armsim.TypeRoute)[0].ID
	h.sim.FailDeployment(route)
	h.until(p, gwKey, time.Second, func(g GatewayProgress) bool { return strings.Contains(g.Message, "provisioned, deployment Failed") })
	n := len(h.sim.Writes())
	if err := p.Deploy(ctx, modelOf("v1", h.gateway("afd-standard", nil))); err != nil {
		t.Fatal(err)
	}
	if w := h.writes(n); len(w) != 1 || w[0] != "PUT routes "+route.Name() {
		t.Errorf("writes %v, want the failed route again", w)
	}
	h.until(p, gwKey, time.Second, func(g GatewayProgress) bool { return g.Served })
}

// A leaving route whose pattern a new route takes goes first (Front Door
// refuses two routes on one domain and pattern); a leaving route nothing
// takes goes only after the new routes are written.
func TestRouteReplacementOrder(t *testing.T) {
	h := newHarness(t, armsim.Options{Polls: 1})
	p := h.provider()
	ctx := context.Background()
	if err := p.Deploy(ctx, modelOf("v1", h.gateway("afd-standard", nil))); err != nil {
		t.Fatal(err)
	}
	gw := h.gateway("afd-standard", nil)
	vh := &gw.Listeners[1].VirtualHosts[0]
	vh.Routes[0].RouteName = "api2" // the same path under another HTTPRoute
	vh.Routes = []edgev1.Route{vh.Routes[0], route("docs", 0, "/docs", backend("api", 1, h.cluster("east", 1), h.cluster("west", 3)))}
	n := len(h.sim.Writes())
	if err := p.Deploy(ctx, modelOf("v2", gw)); err != nil {
		t.Fatal(err)
	}
	var routeWrites []string
	for _, w := range h.writes(n) {
		if f := strings.Fields(w); f[1] == "routes" {
			routeWrites = append(routeWrites, f[0]+" "+f[2][:strings.LastIndex(f[2], "-")])
		}
	}
	want := []string{"DELETE fn-api", "PUT fn-api2", "PUT fn-docs", "DELETE fn-site"}
	if !slices.Equal(routeWrites, want) {
		t.Errorf("route writes %v, want %v", routeWrites, want)
	}
}

// A Gateway moved to a class of another tier is not rewritten into its
// profile (Azure refuses a tier change): it is told, nothing is written.
func TestTierChangeRefused(t *testing.T) {
	h := newHarness(t, armsim.Options{})
	p := h.provider()
	ctx := context.Background()
	if err := p.Deploy(ctx, modelOf("v1", h.gateway("afd-standard", nil))); err != nil {
		t.Fatal(err)
	}
	n := len(h.sim.Writes())
	err := p.Deploy(ctx, modelOf("v2", h.gateway("afd-premium", nil)))
	if err == nil || !strings.Contains(err.Error(), "is Standard_AzureFrontDoor and the Gateway asks for Premium_AzureFrontDoor") {
		t.Fatalf("error %v", err)
	}
	if w := h.writes(n); len(w) != 0 {
		t.Errorf("writes %v", w)
	}
}

// A newer model cancels a resync in progress rather than waiting for it:
// the resync's cancelled write is no failure of Azure's (no Warning
// event), its resume token stays, and the newer model's deployment
// resumes it.
func TestDeployCancelsResync(t *testing.T) {
	h := newHarness(t, armsim.Options{Polls: 1})
	p := h.provider()
	ctx := context.Background()
	if err := p.Deploy(ctx, modelOf("v1", h.gateway("afd-standard", nil))); err != nil {
		t.Fatal(err)
	}
	// Drift: a route deleted outside fleetnet, which the resync creates
	// again and the simulation holds in progress.
	h.sim.Delete(h.sim.Resources(armsim.TypeRoute)[0].ID)
	h.sim.Hold(armsim.TypeRoute)
	resynced := make(chan struct{})
	go func() {
		p.loop.Resync(ctx)
		close(resynced)
	}()
	// The resume token is saved after the PUT's response arrives, a moment
	// after the simulation shows the operation: wait for both, or the
	// newer model may cancel the resync between the two (a write whose
	// token is lost, which TestRunningOperationWaitedFor covers).
	testkit.Until(t, 10*time.Second, "the resync writing the route and saving its resume token", func() bool {
		rs := h.sim.Resources(armsim.TypeRoute)
		tokens, _ := h.tokens.Load(ctx, gwKey)
		return len(rs) == 2 && slices.ContainsFunc(rs, func(r armsim.Resource) bool { return r.Operation == "put" }) &&
			len(tokens) == 1
	})
	deployed := make(chan error, 1)
	go func() { deployed <- p.Deploy(ctx, modelOf("v2", h.gateway("afd-standard", nil))) }()
	select {
	case <-resynced:
	case <-time.After(time.Minute):
		t.Fatal("the resync was not cancelled by a newer model")
	}
	if tokens, _ := h.tokens.Load(ctx, gwKey); len(tokens) != 1 {
		t.Errorf("resume tokens after the cancelled resync: %v, want the route's", tokens)
	}
	h.sim.Release(armsim.TypeRoute)
	if err := <-deployed; err != nil {
		t.Fatal(err)
	}
	if ev := h.eventList(); len(ev) != 0 {
		t.Errorf("events for a cancelled resync: %v", ev)
	}
	if pr := p.Progress(); pr.Version != "v2" {
		t.Errorf("version %s, want v2", pr.Version)
	}
}

// Without a resume token (lost, or an operation someone else started),
// a resource whose provisioningState says an operation runs is waited
// for, then compared: no second write when it ends as wanted.
func TestRunningOperationWaitedFor(t *testing.T) {
	h := newHarness(t, armsim.Options{Polls: 1})
	h.sim.Hold(armsim.TypeRoute)
	first := h.provider()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- first.Deploy(ctx, modelOf("v1", h.gateway("afd-standard", nil))) }()
	testkit.Until(t, 10*time.Second, "the route's creation to start", func() bool {
		rs := h.sim.Resources(armsim.TypeRoute)
		return len(rs) > 0 && rs[0].Operation == "put"
	})
	cancel()
	<-done
	first.lanes.Stop() // the process dies: its jobs end
	puts := countWrites(h, "PUT", "routes")

	h.tokens = &MemoryTokens{} // the tokens are lost
	second := h.provider()
	var msgs []string
	second.SetOnProgress(func() {
		if g, ok := second.Gateways()[gwKey]; ok && (len(msgs) == 0 || msgs[len(msgs)-1] != g.Message) {
			msgs = append(msgs, g.Message)
		}
	})
	h.sim.Release(armsim.TypeRoute)
	if err := second.Deploy(context.Background(), modelOf("v1", h.gateway("afd-standard", nil))); err != nil {
		t.Fatal(err)
	}
	if got := countWrites(h, "PUT", "routes") - puts; got != 1 {
		t.Errorf("route PUTs: %d, want 1 (the other route; the running one waited for)", got)
	}
	if !slices.ContainsFunc(msgs, func(m string) bool {
		return strings.Contains(m, "provisioningState Creating (an operation already running)") ||
			strings.Contains(m, "provisioningState Updating (an operation already running)")
	}) {
		t.Errorf("never told it waits for the running operation: %q", msgs)
	}
}

// One Gateway's failure leaves another Gateway's progress its own.
func TestGatewaysCurrentOnTheirOwn(t *testing.T) {
	h := newHarness(t, armsim.Options{})
	p := h.provider()
	ctx := context.Background()
	ok := h.gateway("afd-standard", nil)
	bad := h.gateway("afd-standard", map[string]string{keys.AnnotationAzureConnectivity: "private-link"})
	bad.Name = "private"
	if err := p.Deploy(ctx, modelOf("v1", ok, bad)); err == nil {
		t.Fatal("no error for the Standard Gateway asking for Private Link")
	}
	validateDomains(h)
	h.until(p, gwKey, time.Second, func(g GatewayProgress) bool { return g.Served })
	pr := p.Progress()
	if g := pr.Gateways[gwKey]; !g.Served {
		t.Errorf("web/public not served because of web/private: %+v", g)
	}
	if g := pr.Gateways["web/private"]; g.Served || !strings.Contains(g.Message, "Private Link origins need Front Door Premium") {
		t.Errorf("web/private: %+v", g)
	}
	if pr.Served {
		t.Error("the provider as a whole served with a Gateway failing")
	}
}

// A refresh does not paper over a failed deploy: the failure stays told.
func TestRefreshKeepsFailure(t *testing.T) {
	h := newHarness(t, armsim.Options{})
	p := h.provider()
	ctx := context.Background()
	if err := p.Deploy(ctx, modelOf("v1", h.gateway("afd-standard", nil))); err != nil {
		t.Fatal(err)
	}
	if err := p.Deploy(ctx, modelOf("v2", h.gateway("afd-premium", nil))); err == nil {
		t.Fatal("tier change not refused")
	}
	validateDomains(h)
	for range 3 {
		if err := p.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if g := p.Progress().Gateways[gwKey]; g.Served || !strings.Contains(g.Message, "cannot be changed by writing it") {
		t.Errorf("after refreshes: %+v", g)
	}
}

// A refused Gateway whose last accepted configuration the controller does
// not know (Hold) keeps its profile untouched, across a restart of the
// provider; leaving the model withdraws it.
func TestHeldGatewayKeepsServing(t *testing.T) {
	h := newHarness(t, armsim.Options{})
	ctx := context.Background()
	if err := h.provider().Deploy(ctx, modelOf("v1", h.gateway("afd-standard", nil))); err != nil {
		t.Fatal(err)
	}
	profiles := len(h.sim.Resources(armsim.TypeProfile))
	p := h.provider() // restarted
	before := len(h.sim.Writes())
	held := edgev1.Gateway{Namespace: "web", Name: "public", Generation: 2, Class: "afd-standard", UID: "uid-1", Listeners: []edgev1.Listener{},
		Refused: `annotation fleetnet.dev/azure-probe-pth="/healthz": unknown annotation`, Hold: true}
	if err := p.Deploy(ctx, modelOf("v2", held)); err != nil {
		t.Fatal(err)
	}
	if w := h.writes(before); len(w) != 0 {
		t.Errorf("writes for a held Gateway: %v", w)
	}
	if n := len(h.sim.Resources(armsim.TypeProfile)); n != profiles || n == 0 {
		t.Fatalf("profiles %d, want the %d that served", n, profiles)
	}
	if g := p.Gateways()[gwKey]; !strings.Contains(g.Message, "refused") {
		t.Errorf("progress %+v does not say it is held", g)
	}
	if err := p.Deploy(ctx, modelOf("v3")); err != nil {
		t.Fatal(err)
	}
	if n := len(h.sim.Resources(armsim.TypeProfile)); n != 0 {
		t.Errorf("%d profiles left after the Gateway left the model", n)
	}
}

// One Gateway whose operation hangs holds only itself: a newer model's
// other Gateway deploys and is served meanwhile, and past WaitBound the
// hanging one says what it waits for and for how long (reason
// AzureTimeout), still polling, until the operation ends.
func TestHangingGatewayHoldsOnlyItself(t *testing.T) {
	h := newHarness(t, armsim.Options{Polls: 1})
	p := h.provider()
	p.cfg.WaitBound = time.Minute
	stuck := h.gateway("afd-standard", nil)
	other := h.gateway("afd-standard", nil)
	other.Name, other.UID = "other", "uid-2"
	for i := range other.Listeners {
		other.Listeners[i].VirtualHosts[0].Hostname = "other.example.com"
	}
	profile := armsim.ResourceID(sub, rg, armsim.TypeProfile, profileName(owner, stuck.Namespace, stuck.Name))
	h.sim.HoldResource(profile)

	// v1: the stuck Gateway only; its deploy waits on the held profile
	// until the queue, given v2, stops waiting.
	ctx1, cancel1 := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { first <- p.Deploy(ctx1, modelOf("v1", stuck)) }()
	testkit.Until(t, 10*time.Second, "the held profile's creation", func() bool {
		r, ok := h.sim.Get(profile)
		return ok && r.Operation == "put"
	})
	cancel1()
	var still *deployloop.StillRunning
	if err := <-first; !errors.As(err, &still) {
		t.Fatalf("v1's deploy ended with %v, want StillRunning", err)
	}

	second := make(chan error, 1)
	go func() { second <- p.Deploy(context.Background(), modelOf("v2", stuck, other)) }()
	testkit.Until(t, 10*time.Second, "web/other served while web/public hangs", func() bool {
		validateDomains(h)
		_ = p.Refresh(context.Background())
		h.clock.Step(time.Second)
		return p.Progress().Gateways["web/other"].Served
	})
	if g := p.Progress().Gateways[gwKey]; g.Served {
		t.Fatalf("web/public served with its profile held: %+v", g)
	}

	h.clock.Step(2 * time.Minute)
	testkit.Until(t, 10*time.Second, "web/public past its bound", func() bool {
		g := p.Progress().Gateways[gwKey]
		return g.Reason == keys.ReasonAzureTimeout && strings.Contains(g.Message, "profile") && strings.Contains(g.Message, "more than the 1m0s bound; still polling")
	})
	h.sim.ReleaseResource(profile)
	if err := <-second; err != nil {
		t.Fatalf("v2: %v", err)
	}
	validateDomains(h)
	h.until(p, gwKey, time.Second, func(g GatewayProgress) bool { return g.Served })
}
