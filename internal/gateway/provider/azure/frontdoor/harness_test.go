package frontdoor

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
	testingclock "k8s.io/utils/clock/testing"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/azure/armsim"

	"github.com/fleetnet/fleetnet/internal/gateway/provider/azure/frontdoor/annotations"
)

const (
	sub      = "00000000-0000-0000-0000-0000000000fd"
	rg       = "fleet-frontdoor"
	owner    = "fleet-1"
	memberRG = "mc-members"
)

// harness is a provider on a simulated ARM, with a fake clock, recorded
// events and a token store that outlives providers (a restart).
type harness struct {
	t      *testing.T
	sim    *armsim.Sim
	clock  *testingclock.FakeClock
	tokens *MemoryTokens
	mu     sync.Mutex
	events []string
	// frontends are the seeded regional frontends by cluster.
	frontends map[string]string
	// tryTimeout is the providers' Config.TryTimeout (0: the default).
	tryTimeout time.Duration
}

func newHarness(t *testing.T, opts armsim.Options) *harness {
	t.Helper()
	h := &harness{t: t, sim: armsim.New(opts), clock: testingclock.NewFakeClock(time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)),
		tokens: &MemoryTokens{}, frontends: map[string]string{}}
	for _, c := range []struct{ cluster, region string }{{"east", "eastus"}, {"west", "westus"}} {
		ids, err := h.sim.SeedRegionalLoadBalancer(sub, memberRG+"-"+c.cluster, "kubernetes", c.region, armsim.RegionalFrontend{Name: "web", TCP: []int32{80}})
		if err != nil {
			t.Fatal(err)
		}
		h.frontends[c.cluster] = ids[0]
	}
	return h
}

// seedPrivate adds cluster's internal load balancer frontend and a
// Private Link Service on it (tags as given), and returns the PLS id.
func (h *harness) seedPrivate(cluster, location string, tags map[string]*string) armsim.ID {
	h.t.Helper()
	group := memberRG + "-" + cluster
	lbID := armsim.ResourceID(sub, group, armsim.TypeLoadBalancer, "kubernetes-internal")
	feID := lbID.Child("frontendIPConfigurations", "web")
	lb := armnetwork.LoadBalancer{Location: to.Ptr(location),
		SKU: &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard), Tier: to.Ptr(armnetwork.LoadBalancerSKUTierRegional)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{
			ID: to.Ptr(feID.String()), Name: to.Ptr("web"),
			Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{PrivateIPAddress: to.Ptr("10.1.0.10"),
				Subnet: &armnetwork.Subnet{ID: to.Ptr("/subscriptions/" + sub + "/resourceGroups/" + group + "/providers/Microsoft.Network/virtualNetworks/vnet/subnets/lb")}}}}}}
	if err := h.sim.Seed(lbID, lb); err != nil {
		h.t.Fatal(err)
	}
	plsID := armsim.ResourceID(sub, group, armsim.TypePrivateLinkService, "pls-"+cluster)
	if err := h.sim.Seed(plsID, armnetwork.PrivateLinkService{Location: to.Ptr(location), Tags: tags,
		Properties: &armnetwork.PrivateLinkServiceProperties{LoadBalancerFrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{ID: to.Ptr(feID.String())}}}}); err != nil {
		h.t.Fatal(err)
	}
	h.frontends[cluster+"-internal"] = feID.String()
	return plsID
}

func (h *harness) provider() *Provider {
	h.t.Helper()
	p, err := New(Config{SubscriptionID: sub, ResourceGroup: rg, Owner: owner,
		Classes:    map[string]annotations.SKU{"afd-standard": annotations.SKUStandard, "afd-premium": annotations.SKUPremium},
		Credential: &azfake.TokenCredential{},
		ClientOptions: &arm.ClientOptions{ClientOptions: policy.ClientOptions{Transport: h.sim.Transport(),
			Retry: policy.RetryOptions{MaxRetries: 2, RetryDelay: time.Millisecond, MaxRetryDelay: 5 * time.Millisecond}}},
		PollInterval: time.Millisecond, AbsentFor: time.Minute, Tokens: h.tokens, TryTimeout: h.tryTimeout, Clock: h.clock, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Event: func(gw, reason, msg string) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.events = append(h.events, gw+" "+reason+" "+msg)
		}})
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

func (h *harness) eventList() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.events...)
}

// writes are the simulation's write requests from index from on, as
// "METHOD type name".
func (h *harness) writes(from int) []string {
	var out []string
	for _, c := range h.sim.Writes()[from:] {
		id, err := armsim.ParseID(c.ID)
		if err != nil {
			continue
		}
		out = append(out, c.Method+" "+id.Types[len(id.Types)-1]+" "+id.Name())
	}
	return out
}

func backend(name string, weight int32, clusters ...edgev1.ClusterEndpoints) edgev1.Backend {
	return edgev1.Backend{Kind: edgev1.KindServiceImport, Namespace: "web", Name: name, Port: 80, Weight: weight, Clusters: clusters,
		Policy: edgev1.DefaultBackendPolicy()}
}

func (h *harness) cluster(name string, weight int32) edgev1.ClusterEndpoints {
	return edgev1.ClusterEndpoints{Cluster: name, Weight: weight, EffectiveWeight: int64(weight) * 2, RegionalFrontend: h.frontends[name],
		Endpoints: []edgev1.Endpoint{{Address: "10.0.0.1", Port: 8080, Ready: true, Serving: true}}}
}

func route(name string, rule int, path string, backends ...edgev1.Backend) edgev1.Route {
	return edgev1.Route{RouteNamespace: "web", RouteName: name, Rule: rule, Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: path}, Backends: backends}
}

// gateway is an HTTP and HTTPS Gateway for app.example.com: HTTP
// redirects to HTTPS, which serves /api from api (east and west, 1:3) and
// / from site (east) with a request header set.
func (h *harness) gateway(class string, ann map[string]string) edgev1.Gateway {
	site := route("site", 0, "/", backend("site", 1, h.cluster("east", 1)))
	site.Filters = []edgev1.Filter{{Type: edgev1.FilterRequestHeaderModifier, RequestHeaderModifier: &edgev1.HeaderModifier{Set: []edgev1.Header{{Name: "x-via", Value: "afd"}}}}}
	redirect := route("redirect", 0, "/")
	redirect.Filters = []edgev1.Filter{{Type: edgev1.FilterRequestRedirect, RequestRedirect: &edgev1.Redirect{Scheme: "https", StatusCode: 301}}}
	return edgev1.Gateway{Namespace: "web", Name: "public", Generation: 1, Class: class, UID: "uid-1", Annotations: ann, Listeners: []edgev1.Listener{
		{Name: "http", Port: 80, Protocol: edgev1.ProtocolHTTP, VirtualHosts: []edgev1.VirtualHost{{Hostname: "app.example.com", Routes: []edgev1.Route{redirect}}}},
		{Name: "https", Port: 443, Protocol: edgev1.ProtocolHTTPS, VirtualHosts: []edgev1.VirtualHost{{Hostname: "app.example.com", Routes: []edgev1.Route{
			route("api", 0, "/api", backend("api", 1, h.cluster("east", 1), h.cluster("west", 3))), site}}}},
	}}
}

func modelOf(version string, gws ...edgev1.Gateway) *edgev1.Model {
	return &edgev1.Model{Version: version, Gateways: gws}
}

// settle refreshes until cond holds for key's progress (each refresh a
// poll of Azure), stepping the clock by step each time; it returns the
// distinct messages seen.
func (h *harness) until(p *Provider, key string, step time.Duration, cond func(GatewayProgress) bool) []string {
	h.t.Helper()
	var msgs []string
	for i := 0; i < 50; i++ {
		g := p.Gateways()[key]
		if len(msgs) == 0 || msgs[len(msgs)-1] != g.Message {
			msgs = append(msgs, g.Message)
		}
		if cond(g) {
			return msgs
		}
		h.clock.Step(step)
		if err := p.Refresh(context.Background()); err != nil {
			h.t.Fatalf("refresh: %v", err)
		}
	}
	h.t.Fatalf("condition not reached for %s; messages:\n%s", key, strings.Join(msgs, "\n"))
	return nil
}

func validateDomains(h *harness) {
	for _, r := range h.sim.Resources(armsim.TypeCustomDomain) {
		h.sim.ValidateDomain(r.ID)
	}
}

var _ = keys.TagAzureOwner
