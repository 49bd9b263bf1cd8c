package crossregion

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/azure/armerr"
	"github.com/fleetnet/fleetnet/internal/azure/armsim"
	"github.com/fleetnet/fleetnet/internal/azure/armutil"
	"github.com/fleetnet/fleetnet/internal/testkit"

	"github.com/fleetnet/fleetnet/internal/gateway/provider"
)

const (
	testSub   = "00000000-0000-0000-0000-0000000000aa"
	testRG    = "fleetnet-global"
	testOwner = "fleet-1"
)

// env is a simulated ARM with the regional load balancers of two member
// clusters, east and west, each serving TCP 5432 and 6432 and UDP 53.
type env struct {
	sim       *armsim.Sim
	frontends map[string]string // cluster -> regional frontend id
}

func newEnv(t *testing.T, opts armsim.Options) *env {
	t.Helper()
	e := &env{sim: armsim.New(opts), frontends: map[string]string{}}
	for _, c := range []struct{ cluster, region, fe string }{{"east", "eastus", "a1b2"}, {"west", "westus", "c3d4"}} {
		ids, err := e.sim.SeedRegionalLoadBalancer(testSub, "MC_"+c.cluster, "kubernetes", c.region,
			armsim.RegionalFrontend{Name: c.fe, TCP: []int32{5432, 6432}, UDP: []int32{53}})
		if err != nil {
			t.Fatal(err)
		}
		e.frontends[c.cluster] = ids[0]
	}
	return e
}

// provider is a new provider instance on the simulation: a restart is a
// second call.
func (e *env) provider(t *testing.T) *Provider {
	t.Helper()
	p, err := New(Config{SubscriptionID: testSub, ResourceGroup: testRG, Location: "westeurope", Owner: testOwner,
		Credential: &azfake.TokenCredential{},
		ClientOptions: &arm.ClientOptions{ClientOptions: policy.ClientOptions{Transport: e.sim.Transport(),
			Retry: policy.RetryOptions{MaxRetries: 2, RetryDelay: time.Millisecond, MaxRetryDelay: time.Second}}},
		PollInterval: time.Millisecond, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// cluster is a model cluster with its regional frontend.
func (e *env) cluster(name string, weight int32, draining bool) edgev1.ClusterEndpoints {
	region := map[string]string{"east": "eastus", "west": "westus"}[name]
	return edgev1.ClusterEndpoints{Cluster: name, Region: region, Weight: weight, EffectiveWeight: int64(weight) * 2, Draining: draining,
		RegionalFrontend: e.frontends[name], Endpoints: []edgev1.Endpoint{{Address: "10.0.0.1", Port: 5432, Ready: true, Serving: true}}}
}

type portSpec struct {
	port, target int32
	proto        string
}

func tcp(p int32) portSpec { return portSpec{p, p, edgev1.ProtocolTCP} }

// mdl is a model of one load balancer demo/db (none when ports is nil)
// over clusters.
func mdl(version string, ports []portSpec, clusters ...edgev1.ClusterEndpoints) *edgev1.Model {
	m := &edgev1.Model{Version: version}
	if ports == nil {
		return m
	}
	lb := edgev1.LoadBalancer{Namespace: "demo", Name: "db", Generation: 1, Class: Class}
	for _, p := range ports {
		lb.Ports = append(lb.Ports, edgev1.LoadBalancerPort{Port: p.port, TargetPort: p.target, Protocol: p.proto, Clusters: clusters})
	}
	m.LoadBalancers = []edgev1.LoadBalancer{lb}
	return m
}

var (
	lbName = resourceName(testOwner, "demo", "db")
	lbID   = armsim.ResourceID(testSub, testRG, armsim.TypeLoadBalancer, lbName)
	ipID   = armsim.ResourceID(testSub, testRG, armsim.TypePublicIPAddress, lbName)
)

func deploy(t *testing.T, p *Provider, m *edgev1.Model) {
	t.Helper()
	if err := p.Deploy(context.Background(), m); err != nil {
		t.Fatalf("Deploy(%s): %v", m.Version, err)
	}
}

func entry(t *testing.T, p *Provider) provider.LoadBalancerProgress {
	t.Helper()
	e, ok := p.Progress().LoadBalancers["demo/db"]
	if !ok {
		t.Fatalf("no progress for demo/db: %+v", p.Progress())
	}
	return e
}

// writes are the write calls since from, as "METHOD type/name".
func writes(s *armsim.Sim, from int) []string {
	var out []string
	for _, c := range s.Writes()[from:] {
		id := armsim.MustParseID(c.ID)
		out = append(out, c.Method+" "+id.Types[0]+"/"+id.Name())
	}
	return out
}

func lbOf(t *testing.T, s *armsim.Sim) armnetwork.LoadBalancer {
	t.Helper()
	lb, ok := armsim.Lookup[armnetwork.LoadBalancer](s, lbID)
	if !ok {
		t.Fatal("no load balancer")
	}
	return lb
}

func backends(lb armnetwork.LoadBalancer) map[string]string {
	out := map[string]string{}
	for _, a := range lb.Properties.BackendAddressPools[0].Properties.LoadBalancerBackendAddresses {
		out[*a.Name] = *a.Properties.LoadBalancerFrontendIPConfiguration.ID
	}
	return out
}

func rules(lb armnetwork.LoadBalancer) []string {
	var out []string
	for _, r := range lb.Properties.LoadBalancingRules {
		out = append(out, fmt.Sprintf("%s %s %d->%d", *r.Name, *r.Properties.Protocol, *r.Properties.FrontendPort, *r.Properties.BackendPort))
	}
	slices.Sort(out)
	return out
}

// A model with two clusters becomes a Global-tier public IP and a
// cross-region load balancer with both regional frontends as backends.
func TestCreate(t *testing.T) {
	e := newEnv(t, armsim.Options{Polls: 2})
	p := e.provider(t)
	deploy(t, p, mdl("v1", []portSpec{tcp(5432), {53, 53, edgev1.ProtocolUDP}}, e.cluster("east", 1, false), e.cluster("west", 1, false)))

	ip, ok := armsim.Lookup[armnetwork.PublicIPAddress](e.sim, ipID)
	if !ok {
		t.Fatal("no public IP")
	}
	if *ip.SKU.Name != armnetwork.PublicIPAddressSKUNameStandard || *ip.SKU.Tier != armnetwork.PublicIPAddressSKUTierGlobal ||
		*ip.Properties.PublicIPAllocationMethod != armnetwork.IPAllocationMethodStatic || *ip.Location != "westeurope" ||
		*ip.Properties.ProvisioningState != armnetwork.ProvisioningStateSucceeded {
		t.Errorf("public IP %s %s %s %s %s", *ip.SKU.Name, *ip.SKU.Tier, *ip.Properties.PublicIPAllocationMethod, *ip.Location, *ip.Properties.ProvisioningState)
	}
	lb := lbOf(t, e.sim)
	if *lb.SKU.Name != armnetwork.LoadBalancerSKUNameStandard || *lb.SKU.Tier != armnetwork.LoadBalancerSKUTierGlobal || *lb.Location != "westeurope" {
		t.Errorf("load balancer sku %s %s in %s", *lb.SKU.Name, *lb.SKU.Tier, *lb.Location)
	}
	for _, tags := range []map[string]*string{ip.Tags, lb.Tags} {
		if *tags[TagOwner] != testOwner || *tags[TagNamespace] != "demo" || *tags[TagName] != "db" {
			t.Errorf("tags %v", tags)
		}
	}
	fe := lb.Properties.FrontendIPConfigurations
	if len(fe) != 1 || !strings.EqualFold(*fe[0].Properties.PublicIPAddress.ID, ipID.String()) {
		t.Errorf("frontends %+v", fe)
	}
	if got := backends(lb); len(got) != 2 || got["east"] != e.frontends["east"] || got["west"] != e.frontends["west"] {
		t.Errorf("backends %v", got)
	}
	if got := rules(lb); !slices.Equal(got, []string{"tcp-5432 Tcp 5432->5432", "udp-53 Udp 53->53"}) {
		t.Errorf("rules %v", got)
	}
	if len(lb.Properties.Probes) != 0 {
		t.Errorf("probes %v: a cross-region load balancer has none", lb.Properties.Probes)
	}

	pr := p.Progress()
	got := entry(t, p)
	if !got.Served || len(got.Addresses) != 1 || got.Addresses[0] != *ip.Properties.IPAddress || pr.ClassVersions[Class] != "v1" || !pr.Served {
		t.Errorf("progress %+v", pr)
	}
	if !strings.Contains(got.Message, "east (eastus), west (westus)") {
		t.Errorf("message %q", got.Message)
	}
	if w := writes(e.sim, 0); !slices.Equal(w, []string{"PUT publicIPAddresses/" + lbName, "PUT loadBalancers/" + lbName}) {
		t.Errorf("writes %v", w)
	}
}

// Updates write only the load balancer, and only what changed; an
// unchanged model, even from a new provider instance, writes nothing.
func TestUpdate(t *testing.T) {
	e := newEnv(t, armsim.Options{Polls: 1})
	p := e.provider(t)
	deploy(t, p, mdl("v1", []portSpec{tcp(5432)}, e.cluster("east", 1, false), e.cluster("west", 1, false)))
	for _, step := range []struct {
		name     string
		m        *edgev1.Model
		writes   []string
		backends []string
		rules    []string
	}{
		{name: "west drained", m: mdl("v2", []portSpec{tcp(5432)}, e.cluster("east", 1, false), e.cluster("west", 1, true)),
			writes: []string{"PUT loadBalancers/" + lbName}, backends: []string{"east"}, rules: []string{"tcp-5432 Tcp 5432->5432"}},
		{name: "port added", m: mdl("v3", []portSpec{tcp(5432), tcp(6432)}, e.cluster("east", 1, false), e.cluster("west", 1, true)),
			writes: []string{"PUT loadBalancers/" + lbName}, backends: []string{"east"}, rules: []string{"tcp-5432 Tcp 5432->5432", "tcp-6432 Tcp 6432->6432"}},
		{name: "unchanged content, new version", m: mdl("v4", []portSpec{tcp(5432), tcp(6432)}, e.cluster("east", 1, false), e.cluster("west", 1, true)),
			backends: []string{"east"}, rules: []string{"tcp-5432 Tcp 5432->5432", "tcp-6432 Tcp 6432->6432"}},
		{name: "west back with weight 0 (left out, no write)", m: mdl("v5", []portSpec{tcp(5432), tcp(6432)}, e.cluster("east", 1, false), e.cluster("west", 0, false)),
			backends: []string{"east"}, rules: []string{"tcp-5432 Tcp 5432->5432", "tcp-6432 Tcp 6432->6432"}},
	} {
		t.Run(step.name, func(t *testing.T) {
			before := len(e.sim.Writes())
			deploy(t, p, step.m)
			if w := writes(e.sim, before); !slices.Equal(w, step.writes) {
				t.Errorf("writes %v, want %v", w, step.writes)
			}
			lb := lbOf(t, e.sim)
			var bs []string
			for n := range backends(lb) {
				bs = append(bs, n)
			}
			slices.Sort(bs)
			if !slices.Equal(bs, step.backends) {
				t.Errorf("backends %v, want %v", bs, step.backends)
			}
			if got := rules(lb); !slices.Equal(got, step.rules) {
				t.Errorf("rules %v, want %v", got, step.rules)
			}
			if got := entry(t, p); !got.Served || p.Progress().ClassVersions[Class] != step.m.Version {
				t.Errorf("progress %+v", p.Progress())
			}
		})
	}
	before := len(e.sim.Writes())
	deploy(t, e.provider(t), mdl("v6", []portSpec{tcp(5432), tcp(6432)}, e.cluster("east", 1, false)))
	if w := writes(e.sim, before); len(w) != 0 {
		t.Errorf("a restarted provider wrote %v for an unchanged model", w)
	}
}

// A load balancer that leaves the model is withdrawn: its load balancer
// deleted, then its public IP; resources without the owner tag, or with
// another owner's, are never touched.
func TestWithdraw(t *testing.T) {
	e := newEnv(t, armsim.Options{Polls: 2})
	foreignIP := armsim.ResourceID(testSub, testRG, armsim.TypePublicIPAddress, "someone-elses-ip")
	otherFleet := armsim.ResourceID(testSub, testRG, armsim.TypePublicIPAddress, resourceName("fleet-2", "demo", "db"))
	for _, f := range []struct {
		id   armsim.ID
		tags map[string]*string
	}{
		{foreignIP, map[string]*string{"team": to.Ptr("payments"), TagNamespace: to.Ptr("demo"), TagName: to.Ptr("db")}},
		{otherFleet, map[string]*string{TagOwner: to.Ptr("fleet-2"), TagNamespace: to.Ptr("demo"), TagName: to.Ptr("db")}},
	} {
		if err := e.sim.Seed(f.id, armnetwork.PublicIPAddress{Location: to.Ptr("westeurope"), Tags: f.tags,
			SKU:        &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard), Tier: to.Ptr(armnetwork.PublicIPAddressSKUTierGlobal)},
			Properties: &armnetwork.PublicIPAddressPropertiesFormat{PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic)}}); err != nil {
			t.Fatal(err)
		}
	}
	foreignLB := armsim.ResourceID(testSub, testRG, armsim.TypeLoadBalancer, "someone-elses-lb")
	if err := e.sim.Seed(foreignLB, armnetwork.LoadBalancer{Location: to.Ptr("westeurope"),
		SKU: &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard), Tier: to.Ptr(armnetwork.LoadBalancerSKUTierGlobal)}}); err != nil {
		t.Fatal(err)
	}
	p := e.provider(t)
	deploy(t, p, mdl("v1", []portSpec{tcp(5432)}, e.cluster("east", 1, false)))
	before := len(e.sim.Writes())

	// While the load balancer is deleted, its entry stays and says so.
	e.sim.Hold(armsim.TypeLoadBalancer)
	done := make(chan error, 1)
	go func() { done <- p.Deploy(context.Background(), mdl("v2", nil)) }()
	testkit.Until(t, 10*time.Second, "the deletion to show", func() bool {
		e, ok := p.Progress().LoadBalancers["demo/db"]
		return ok && strings.Contains(e.Message, "deleting load balancer "+lbName)
	})
	if got := entry(t, p); got.Served {
		t.Errorf("served while withdrawing: %+v", got)
	}
	e.sim.Release(armsim.TypeLoadBalancer)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	if w := writes(e.sim, before); !slices.Equal(w, []string{"DELETE loadBalancers/" + lbName, "DELETE publicIPAddresses/" + lbName}) {
		t.Errorf("writes %v, want the load balancer's deletion, then the public IP's", w)
	}
	for _, c := range e.sim.Calls() {
		if c.Status == http.StatusBadRequest {
			t.Errorf("refused call %v: the public IP was deleted while in use", c)
		}
	}
	for _, id := range []armsim.ID{foreignIP, otherFleet, foreignLB} {
		if _, ok := e.sim.Get(id); !ok {
			t.Errorf("%s was deleted", id)
		}
	}
	for _, id := range []armsim.ID{lbID, ipID} {
		if _, ok := e.sim.Get(id); ok {
			t.Errorf("%s is still there", id)
		}
	}
	pr := p.Progress()
	if _, ok := pr.LoadBalancers["demo/db"]; ok || pr.ClassVersions[Class] != "v2" {
		t.Errorf("progress after withdrawal %+v", pr)
	}
}

// A port whose Port is not its TargetPort gets no rule, and the load
// balancer says why and is not Served; the other ports are served.
// Unequal weights are reported, and the clusters served.
func TestNotExpressible(t *testing.T) {
	e := newEnv(t, armsim.Options{Polls: 1})
	p := e.provider(t)
	deploy(t, p, mdl("v1", []portSpec{tcp(5432), {8080, 6432, edgev1.ProtocolTCP}}, e.cluster("east", 1, false), e.cluster("west", 1, false)))
	if got := rules(lbOf(t, e.sim)); !slices.Equal(got, []string{"tcp-5432 Tcp 5432->5432"}) {
		t.Errorf("rules %v", got)
	}
	got := entry(t, p)
	if got.Served || !strings.Contains(got.Message, "port 8080/TCP is not served") || !strings.Contains(got.Message, "is 6432") || len(got.Addresses) != 1 {
		t.Errorf("progress %+v", got)
	}

	deploy(t, p, mdl("v2", []portSpec{tcp(5432)}, e.cluster("east", 100, false), e.cluster("west", 50, false)))
	got = entry(t, p)
	if !got.Served || !strings.Contains(got.Message, "weights are not expressible (east 100, west 50)") {
		t.Errorf("progress %+v", got)
	}
	if bs := backends(lbOf(t, e.sim)); len(bs) != 2 {
		t.Errorf("backends %v", bs)
	}
}

// During a long-running operation the load balancer is not served and
// its message names the operation; after it, it is served.
func TestProgressDuringOperation(t *testing.T) {
	e := newEnv(t, armsim.Options{Polls: 3})
	p := e.provider(t)
	changed := make(chan struct{}, 1000)
	p.SetOnProgress(func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	e.sim.Hold(armsim.TypeLoadBalancer)
	done := make(chan error, 1)
	go func() {
		done <- p.Deploy(context.Background(), mdl("v1", []portSpec{tcp(5432)}, e.cluster("east", 1, false), e.cluster("west", 1, false)))
	}()
	testkit.Until(t, 10*time.Second, "the load balancer's creation", func() bool {
		pe, ok := p.Progress().LoadBalancers["demo/db"]
		r, _ := e.sim.Get(lbID)
		return ok && strings.Contains(pe.Message, "creating load balancer "+lbName+" (provisioningState Updating)") && r.Operation == "put"
	})
	pr := p.Progress()
	// The entry stands for v1 (its job started), not served yet.
	if pr.LoadBalancers["demo/db"].Served || pr.ClassVersions[Class] != "v1" || pr.Served {
		t.Errorf("progress mid-operation %+v", pr)
	}
	if len(pr.LoadBalancers["demo/db"].Addresses) != 1 {
		t.Errorf("the public IP is provisioned, its address is known: %+v", pr.LoadBalancers["demo/db"])
	}
	if len(changed) == 0 {
		t.Error("OnProgress was not called")
	}
	if r, _ := e.sim.Get(lbID); r.State != armsim.StateUpdating {
		t.Errorf("simulated state %s", r.State)
	}
	e.sim.Release(armsim.TypeLoadBalancer)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := entry(t, p); !got.Served || p.Progress().ClassVersions[Class] != "v1" {
		t.Errorf("progress after %+v", p.Progress())
	}
}

// A new provider instance finds the operation the previous one started
// (from the provisioningState alone), waits for it instead of writing
// again, and serves.
func TestResumeAfterRestart(t *testing.T) {
	for _, tc := range []struct {
		name      string
		hold      string
		first     *edgev1.Model
		second    *edgev1.Model
		wantWrite []string // all writes over both instances
	}{
		{name: "creating", hold: armsim.TypeLoadBalancer,
			first:     mdl("v1", []portSpec{tcp(5432)}, nil...),
			wantWrite: []string{"PUT publicIPAddresses/" + lbName, "PUT loadBalancers/" + lbName}},
		{name: "withdrawing", hold: armsim.TypeLoadBalancer,
			first:     mdl("v2", nil),
			wantWrite: []string{"PUT publicIPAddresses/" + lbName, "PUT loadBalancers/" + lbName, "DELETE loadBalancers/" + lbName, "DELETE publicIPAddresses/" + lbName}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, armsim.Options{Polls: 3})
			withClusters := mdl("v1", []portSpec{tcp(5432)}, e.cluster("east", 1, false), e.cluster("west", 1, false))
			if tc.name == "withdrawing" {
				deploy(t, e.provider(t), withClusters)
			} else {
				tc.first = withClusters
			}
			first := e.provider(t)
			e.sim.Hold(tc.hold)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- first.Deploy(ctx, tc.first) }()
			testkit.Until(t, 10*time.Second, "an operation on the load balancer", func() bool {
				r, ok := e.sim.Get(lbID)
				return ok && r.Operation != ""
			})
			cancel() // the process dies mid-operation
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("Deploy after cancel: %v", err)
			}
			first.lanes.Stop() // and its jobs with it
			e.sim.Release(tc.hold)

			second := e.provider(t)
			deploy(t, second, tc.first)
			if w := writes(e.sim, 0); !slices.Equal(w, tc.wantWrite) {
				t.Errorf("writes %v, want %v", w, tc.wantWrite)
			}
			pr := second.Progress()
			if pr.ClassVersions[Class] != tc.first.Version {
				t.Errorf("class version %q", pr.ClassVersions[Class])
			}
			if tc.name == "creating" && !entry(t, second).Served {
				t.Errorf("not served after resuming: %+v", pr)
			}
			if _, ok := pr.LoadBalancers["demo/db"]; tc.name == "withdrawing" && ok {
				t.Errorf("entry after withdrawal: %+v", pr)
			}
		})
	}
}

// Throttling and 5xx are retried by azcore's policy (with the Retry-After
// ARM sends); when they persist, Deploy fails with the ARM error and the
// load balancer's message says it.
func TestTransientErrors(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fault     armsim.Fault
		wantErr   string // "" for success
		wantFired int
	}{
		{name: "429 retried", fault: armsim.Fault{API: "LoadBalancersClient.BeginCreateOrUpdate", Method: http.MethodPut, Times: 2, Err: armsim.Throttled(10 * time.Millisecond)}, wantFired: 2},
		{name: "429 with Retry-After 1s retried", fault: armsim.Fault{API: "PublicIPAddressesClient.BeginCreateOrUpdate", Method: http.MethodPut, Times: 1, Err: armsim.Throttled(time.Second)}, wantFired: 1},
		{name: "500 on a poll retried", fault: armsim.Fault{API: "LoadBalancersClient.BeginCreateOrUpdate", Polls: true, Times: 2, Err: armsim.InternalServerError()}, wantFired: 2},
		{name: "429 persistent", fault: armsim.Fault{API: "LoadBalancersClient.BeginCreateOrUpdate", Method: http.MethodPut, Err: armsim.Throttled(10 * time.Millisecond)},
			wantErr: "creating load balancer " + lbName + ": 429 TooManyRequests: The request is being throttled", wantFired: 3},
		{name: "500 persistent", fault: armsim.Fault{API: "PublicIPAddressesClient.BeginCreateOrUpdate", Method: http.MethodPut, Err: armsim.InternalServerError()},
			wantErr: "creating public IP address " + lbName + ": 500 InternalServerError: An error occurred.", wantFired: 3},
		{name: "409 waits for the other operation, then writes", fault: armsim.Fault{API: "LoadBalancersClient.BeginCreateOrUpdate", Method: http.MethodPut, Times: 1,
			Err: armsim.AnotherOperationInProgress(lbID)}, wantFired: 1},
		{name: "409 persistent", fault: armsim.Fault{API: "LoadBalancersClient.BeginCreateOrUpdate", Method: http.MethodPut, Err: armsim.AnotherOperationInProgress(lbID)},
			wantErr: "409 AnotherOperationInProgress", wantFired: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, armsim.Options{Polls: 2})
			p := e.provider(t)
			in := e.sim.Inject(tc.fault)
			m := mdl("v1", []portSpec{tcp(5432)}, e.cluster("east", 1, false))
			err := p.Deploy(context.Background(), m)
			if in.Fired() != tc.wantFired {
				t.Errorf("fault fired %d times, want %d", in.Fired(), tc.wantFired)
			}
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !entry(t, p).Served {
					t.Errorf("progress %+v", p.Progress())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "load balancer demo/db") {
				t.Fatalf("error %v, want it to contain %q", err, tc.wantErr)
			}
			var ae *armerr.Error
			if !errors.As(err, &ae) {
				t.Errorf("error %v does not wrap an *armerr.Error", err)
			}
			got := entry(t, p)
			if got.Served || !strings.Contains(got.Message, tc.wantErr) {
				t.Errorf("progress %+v", got)
			}
			if v := p.Progress().ClassVersions[Class]; v != m.Version {
				t.Errorf("class version %q after a failed deploy, want %s: the entry, not served, stands for it", v, m.Version)
			}
			in.Remove()
			deploy(t, p, m)
			if !entry(t, p).Served {
				t.Errorf("not served once the fault is gone: %+v", p.Progress())
			}
		})
	}
}

// An operation that ends Failed is reported with ARM's code and message;
// the next deploy writes the resource again.
func TestFailedOperation(t *testing.T) {
	e := newEnv(t, armsim.Options{Polls: 2})
	p := e.provider(t)
	in := e.sim.Inject(armsim.Fault{API: "LoadBalancersClient.BeginCreateOrUpdate", FailOperation: true, Times: 1,
		Err: &armsim.Error{Code: "InternalServerError", Message: "An error occurred while provisioning the load balancer."}})
	m := mdl("v1", []portSpec{tcp(5432)}, e.cluster("east", 1, false))
	err := p.Deploy(context.Background(), m)
	want := "creating load balancer " + lbName + ": the operation ended Failed: InternalServerError: An error occurred while provisioning"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want %q", err, want)
	}
	if got := entry(t, p); got.Served || !strings.Contains(got.Message, want) {
		t.Errorf("progress %+v", got)
	}
	if r, _ := e.sim.Get(lbID); r.State != armsim.StateFailed {
		t.Errorf("simulated state %s", r.State)
	}
	if in.Fired() != 1 {
		t.Fatalf("fired %d", in.Fired())
	}
	before := len(e.sim.Writes())
	deploy(t, p, m)
	if w := writes(e.sim, before); !slices.Equal(w, []string{"PUT loadBalancers/" + lbName}) {
		t.Errorf("writes %v", w)
	}
	if !entry(t, p).Served {
		t.Errorf("progress %+v", p.Progress())
	}
}

// Nothing is written or deleted when listing the resource group fails,
// even in part; a name taken by a resource without our tags is refused.
func TestFailStatic(t *testing.T) {
	e := newEnv(t, armsim.Options{Polls: 1})
	p := e.provider(t)
	m := mdl("v1", []portSpec{tcp(5432)}, e.cluster("east", 1, false))
	deploy(t, p, m)
	before := len(e.sim.Writes())
	in := e.sim.Inject(armsim.Fault{API: "PublicIPAddressesClient.NewListPager", Err: armsim.InternalServerError()})
	err := p.Deploy(context.Background(), mdl("v2", nil))
	if err == nil || !strings.Contains(err.Error(), "nothing changed: listing the public IP addresses of resource group "+testRG+": 500 InternalServerError") {
		t.Fatalf("error %v", err)
	}
	if w := writes(e.sim, before); len(w) != 0 {
		t.Errorf("writes on a failed list: %v", w)
	}
	if pr := p.Progress(); pr.ClassVersions[Class] != "v1" || !pr.LoadBalancers["demo/db"].Served {
		t.Errorf("progress %+v", pr)
	}
	in.Remove()

	// A resource without our tags where ours would be: refused, untouched.
	e2 := newEnv(t, armsim.Options{Polls: 1})
	if err := e2.sim.Seed(ipID, armnetwork.PublicIPAddress{Location: to.Ptr("westeurope"),
		SKU:        &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard), Tier: to.Ptr(armnetwork.PublicIPAddressSKUTierGlobal)},
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic)}}); err != nil {
		t.Fatal(err)
	}
	p2 := e2.provider(t)
	err = p2.Deploy(context.Background(), m)
	if err == nil || !strings.Contains(err.Error(), "exists without fleetnet's tags") {
		t.Fatalf("error %v", err)
	}
	if w := e2.sim.Writes(); len(w) != 0 {
		t.Errorf("writes %v", w)
	}
	if got := entry(t, p2); got.Served || !strings.Contains(got.Message, "it is not touched") {
		t.Errorf("progress %+v", got)
	}
}

// A change made outside fleetnet to an owned load balancer is repaired by
// the next resync.
func TestDriftRepaired(t *testing.T) {
	e := newEnv(t, armsim.Options{Polls: 1})
	p := e.provider(t)
	deploy(t, p, mdl("v1", []portSpec{tcp(5432)}, e.cluster("east", 1, false), e.cluster("west", 1, false)))
	e.sim.Edit(lbID, func(b []byte) []byte {
		var lb armnetwork.LoadBalancer
		if err := json.Unmarshal(b, &lb); err != nil {
			t.Fatal(err)
		}
		lb.Properties.LoadBalancingRules = nil
		lb.Tags["cost-center"] = to.Ptr("42")
		out, _ := json.Marshal(lb)
		return out
	})
	before := len(e.sim.Writes())
	p.loop.Resync(context.Background())
	if w := writes(e.sim, before); !slices.Equal(w, []string{"PUT loadBalancers/" + lbName}) {
		t.Errorf("writes %v", w)
	}
	lb := lbOf(t, e.sim)
	if got := rules(lb); !slices.Equal(got, []string{"tcp-5432 Tcp 5432->5432"}) {
		t.Errorf("rules %v", got)
	}
	if armutil.Deref(lb.Tags["cost-center"]) != "42" {
		t.Errorf("a tag someone added was dropped: %v", lb.Tags)
	}
}

func TestConfigValidate(t *testing.T) {
	err := Config{Owner: strings.Repeat("o", 257)}.Validate()
	for _, want := range []string{"subscription id is required", "resource group is required", "location is required", "longer than an Azure tag value", "credential is required"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to say %q", err, want)
		}
	}
	if _, err := NewCredential("password", ""); err == nil {
		t.Error("NewCredential accepted an unknown kind")
	}
}

// A refused load balancer whose last accepted configuration the controller
// does not know (Hold) keeps its resources untouched, across a restart of
// the provider; deleting it from the model withdraws them.
func TestHeldLoadBalancerKeepsServing(t *testing.T) {
	e := newEnv(t, armsim.Options{})
	deploy(t, e.provider(t), mdl("v1", []portSpec{tcp(5432)}, e.cluster("east", 1, false)))
	held := &edgev1.Model{Version: "v2", LoadBalancers: []edgev1.LoadBalancer{{Namespace: "demo", Name: "db", Generation: 2, Class: Class,
		Ports: []edgev1.LoadBalancerPort{}, Refused: "ports[0].protocol: SCTP", Hold: true}}}
	p := e.provider(t) // restarted: it knows nothing of demo/db but what Azure has
	before := len(e.sim.Writes())
	deploy(t, p, held)
	if w := writes(e.sim, before); len(w) != 0 {
		t.Errorf("writes for a held load balancer: %v", w)
	}
	if _, ok := e.sim.Get(lbID); !ok {
		t.Fatal("the held load balancer was deleted")
	}
	if en := entry(t, p); !strings.Contains(en.Message, "refused") {
		t.Errorf("entry %+v does not say it is held", en)
	}
	deploy(t, p, mdl("v3", nil))
	if _, ok := e.sim.Get(lbID); ok {
		t.Error("the load balancer was not withdrawn once it left the model")
	}
}

// An operation that runs past WaitBound is told on its load balancer
// (reason AzureTimeout, what and how long), still polled; another load
// balancer deploys meanwhile; past four times the bound the deployment
// stops waiting with AzureTimeout, and the next one ends the operation.
func TestBoundedWaits(t *testing.T) {
	e := newEnv(t, armsim.Options{Polls: 1})
	p := e.provider(t)
	p.cfg.WaitBound = 50 * time.Millisecond
	e.sim.HoldResource(lbID)
	m := mdl("v1", []portSpec{tcp(5432)}, e.cluster("east", 1, false))
	other := m.LoadBalancers[0]
	other.Name = "cache"
	other.Ports = []edgev1.LoadBalancerPort{{Port: 6432, TargetPort: 6432, Protocol: edgev1.ProtocolTCP, Clusters: other.Ports[0].Clusters}}
	m.LoadBalancers = append(m.LoadBalancers, other)

	done := make(chan error, 1)
	go func() { done <- p.Deploy(context.Background(), m) }()
	testkit.Until(t, 10*time.Second, "demo/db past its bound while demo/cache is served", func() bool {
		pr := p.Progress()
		db := pr.LoadBalancers["demo/db"]
		return pr.LoadBalancers["demo/cache"].Served && db.Reason == keys.ReasonAzureTimeout &&
			strings.Contains(db.Message, "creating load balancer "+lbName) && strings.Contains(db.Message, "still polling")
	})
	err := <-done
	if err == nil || armerr.Reason(err) != keys.ReasonAzureTimeout || !strings.Contains(err.Error(), "load balancer demo/db") {
		t.Fatalf("Deploy = %v, want demo/db's AzureTimeout", err)
	}
	e.sim.ReleaseResource(lbID)
	deploy(t, p, m)
	if en := entry(t, p); !en.Served || en.Reason != "" {
		t.Errorf("demo/db after the operation ended: %+v", en)
	}
}
