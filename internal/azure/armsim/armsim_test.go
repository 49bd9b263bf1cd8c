package armsim_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6/fake"

	"github.com/fleetnet/fleetnet/internal/azure/armsim"
)

const (
	sub = "00000000-0000-0000-0000-000000000001"
	rg  = "fleet"
)

type clients struct {
	lbs  *armnetwork.LoadBalancersClient
	pips *armnetwork.PublicIPAddressesClient
}

func newClients(t *testing.T, s *armsim.Sim) clients {
	t.Helper()
	opts := &arm.ClientOptions{ClientOptions: policy.ClientOptions{Transport: s.Transport(),
		Retry: policy.RetryOptions{MaxRetries: 2, RetryDelay: time.Millisecond, MaxRetryDelay: 2 * time.Second}}}
	f, err := armnetwork.NewClientFactory(sub, &azfake.TokenCredential{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return clients{lbs: f.NewLoadBalancersClient(), pips: f.NewPublicIPAddressesClient()}
}

var poll = &runtime.PollUntilDoneOptions{Frequency: time.Millisecond}

func globalIP() armnetwork.PublicIPAddress {
	return armnetwork.PublicIPAddress{Location: to.Ptr("westeurope"),
		SKU:        &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard), Tier: to.Ptr(armnetwork.PublicIPAddressSKUTierGlobal)},
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic)},
		Tags:       map[string]*string{"owner": to.Ptr("test")}}
}

func createIP(t *testing.T, c clients, name string) armnetwork.PublicIPAddress {
	t.Helper()
	p, err := c.pips.BeginCreateOrUpdate(context.Background(), rg, name, globalIP(), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.PollUntilDone(context.Background(), poll)
	if err != nil {
		t.Fatal(err)
	}
	return res.PublicIPAddress
}

// globalLB is a cross-region load balancer on public IP ip with backends
// (regional frontend ids) and one rule per port.
func globalLB(ip string, backends []string, ports ...int32) armnetwork.LoadBalancer {
	id := "/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.Network/loadBalancers/global"
	lb := armnetwork.LoadBalancer{Location: to.Ptr("westeurope"),
		SKU: &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard), Tier: to.Ptr(armnetwork.LoadBalancerSKUTierGlobal)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{
			FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{Name: to.Ptr("frontend"),
				Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{PublicIPAddress: &armnetwork.PublicIPAddress{ID: to.Ptr(ip)}}}},
			BackendAddressPools: []*armnetwork.BackendAddressPool{{Name: to.Ptr("regions"), Properties: &armnetwork.BackendAddressPoolPropertiesFormat{}}},
		}}
	for i, b := range backends {
		lb.Properties.BackendAddressPools[0].Properties.LoadBalancerBackendAddresses = append(lb.Properties.BackendAddressPools[0].Properties.LoadBalancerBackendAddresses,
			&armnetwork.LoadBalancerBackendAddress{Name: to.Ptr("r" + string(rune('0'+i))),
				Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{LoadBalancerFrontendIPConfiguration: &armnetwork.SubResource{ID: to.Ptr(b)}}})
	}
	for _, port := range ports {
		lb.Properties.LoadBalancingRules = append(lb.Properties.LoadBalancingRules, &armnetwork.LoadBalancingRule{Name: to.Ptr("tcp-" + itoa(port)),
			Properties: &armnetwork.LoadBalancingRulePropertiesFormat{Protocol: to.Ptr(armnetwork.TransportProtocolTCP), FrontendPort: to.Ptr(port), BackendPort: to.Ptr(port),
				FrontendIPConfiguration: &armnetwork.SubResource{ID: to.Ptr(id + "/frontendIPConfigurations/frontend")},
				BackendAddressPool:      &armnetwork.SubResource{ID: to.Ptr(id + "/backendAddressPools/regions")}}})
	}
	return lb
}

func itoa(p int32) string {
	if p == 0 {
		return "0"
	}
	var b []byte
	for ; p > 0; p /= 10 {
		b = append([]byte{byte('0' + p%10)}, b...)
	}
	return string(b)
}

func seedRegions(t *testing.T, s *armsim.Sim) []string {
	t.Helper()
	east, err := s.SeedRegionalLoadBalancer(sub, "MC_east", "kubernetes", "eastus", armsim.RegionalFrontend{Name: "a1", TCP: []int32{5432}})
	if err != nil {
		t.Fatal(err)
	}
	west, err := s.SeedRegionalLoadBalancer(sub, "MC_west", "kubernetes", "westus", armsim.RegionalFrontend{Name: "b2", TCP: []int32{5432}})
	if err != nil {
		t.Fatal(err)
	}
	return append(east, west...)
}

func respErr(t *testing.T, err error) *azcore.ResponseError {
	t.Helper()
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("error %v is not an *azcore.ResponseError", err)
	}
	return re
}

// An operation takes Options.Polls polls, passes through Updating, and
// ends on the poller's polls or on GETs of the resource alike.
func TestOperationsAdvanceOnPollsAndGets(t *testing.T) {
	s := armsim.New(armsim.Options{Polls: 3})
	c := newClients(t, s)
	ctx := context.Background()
	p, err := c.pips.BeginCreateOrUpdate(ctx, rg, "ip1", globalIP(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Done() {
		t.Fatal("the operation ended at once")
	}
	id := armsim.ResourceID(sub, rg, armsim.TypePublicIPAddress, "ip1")
	if r, _ := s.Get(id); r.State != armsim.StateUpdating || r.Operation != "put" {
		t.Fatalf("state %q operation %q, want Updating put", r.State, r.Operation)
	}
	res, err := p.PollUntilDone(ctx, poll)
	if err != nil {
		t.Fatal(err)
	}
	if *res.Properties.ProvisioningState != armnetwork.ProvisioningStateSucceeded || res.Properties.IPAddress == nil {
		t.Fatalf("result %+v", res.Properties)
	}
	polls := 0
	for _, call := range s.Calls() {
		if call.Poll {
			polls++
		}
	}
	if polls != 3 {
		t.Errorf("%d polls, want 3", polls)
	}

	// A forgotten poller: GETs see the operation end.
	if _, err := c.pips.BeginCreateOrUpdate(ctx, rg, "ip2", globalIP(), nil); err != nil {
		t.Fatal(err)
	}
	var states []string
	for i := 0; i < 3; i++ {
		g, err := c.pips.Get(ctx, rg, "ip2", nil)
		if err != nil {
			t.Fatal(err)
		}
		states = append(states, string(*g.Properties.ProvisioningState))
	}
	if strings.Join(states, ",") != "Updating,Updating,Succeeded" {
		t.Errorf("states %v", states)
	}

	// Held operations stay in progress whatever is polled.
	s.Hold(armsim.TypePublicIPAddress)
	p, err = c.pips.BeginCreateOrUpdate(ctx, rg, "ip3", globalIP(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, err := p.Poll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if p.Done() {
		t.Fatal("a held operation ended")
	}
	// A write during the operation is a conflict.
	_, err = c.pips.BeginCreateOrUpdate(ctx, rg, "ip3", globalIP(), nil)
	if re := respErr(t, err); re.StatusCode != http.StatusConflict || re.ErrorCode != "AnotherOperationInProgress" {
		t.Errorf("write during an operation: %d %s", re.StatusCode, re.ErrorCode)
	}
	s.Release(armsim.TypePublicIPAddress)
	if _, err := p.PollUntilDone(ctx, poll); err != nil {
		t.Fatal(err)
	}
}

// The cross-region load balancer's rules, answered with ARM's envelope.
func TestGlobalLoadBalancerValidation(t *testing.T) {
	s := armsim.New(armsim.Options{})
	c := newClients(t, s)
	regions := seedRegions(t, s)
	ip := *createIP(t, c, "global-ip").ID
	internal := armsim.ResourceID(sub, "MC_x", armsim.TypeLoadBalancer, "kubernetes-internal")
	if err := s.Seed(internal, armnetwork.LoadBalancer{Location: to.Ptr("eastus"),
		SKU: &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard), Tier: to.Ptr(armnetwork.LoadBalancerSKUTierRegional)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{Name: to.Ptr("i1"),
			Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{PrivateIPAddress: to.Ptr("10.0.0.4")}}}}}); err != nil {
		t.Fatal(err)
	}
	regionalIP := armsim.ResourceID(sub, "MC_east", armsim.TypePublicIPAddress, "kubernetes-a1").String()
	for _, tc := range []struct {
		name   string
		lbName string
		edit   func(*armnetwork.LoadBalancer)
		code   string
	}{
		{name: "valid", edit: func(*armnetwork.LoadBalancer) {}},
		{name: "backend port is not the regional frontend's", edit: func(lb *armnetwork.LoadBalancer) {
			lb.Properties.LoadBalancingRules[0].Properties.BackendPort = to.Ptr[int32](6432)
		}, code: "GlobalLoadBalancerRuleBackendPortMismatch"},
		{name: "backend is an internal frontend", edit: func(lb *armnetwork.LoadBalancer) {
			lb.Properties.BackendAddressPools[0].Properties.LoadBalancerBackendAddresses[0].Properties.LoadBalancerFrontendIPConfiguration.ID = to.Ptr(internal.String() + "/frontendIPConfigurations/i1")
		}, code: "GlobalLoadBalancerBackendMustBeRegionalFrontend"},
		{name: "backend does not exist", edit: func(lb *armnetwork.LoadBalancer) {
			lb.Properties.BackendAddressPools[0].Properties.LoadBalancerBackendAddresses[0].Properties.LoadBalancerFrontendIPConfiguration.ID = to.Ptr(regions[0] + "x")
		}, code: "InvalidResourceReference"},
		{name: "probe", edit: func(lb *armnetwork.LoadBalancer) {
			lb.Properties.Probes = []*armnetwork.Probe{{Name: to.Ptr("tcp"), Properties: &armnetwork.ProbePropertiesFormat{Port: to.Ptr[int32](5432), Protocol: to.Ptr(armnetwork.ProbeProtocolTCP)}}}
		}, code: "GlobalLoadBalancerProbesNotSupported"},
		{name: "UDP port 3", edit: func(lb *armnetwork.LoadBalancer) {
			r := lb.Properties.LoadBalancingRules[0].Properties
			r.Protocol, r.FrontendPort, r.BackendPort = to.Ptr(armnetwork.TransportProtocolUDP), to.Ptr[int32](3), to.Ptr[int32](3)
		}, code: "GlobalLoadBalancerUdpPort3NotSupported"},
		{name: "not a home region", edit: func(lb *armnetwork.LoadBalancer) { lb.Location = to.Ptr("eastus") }, code: "GlobalTierNotSupportedInLocation"},
		{name: "regional public IP", edit: func(lb *armnetwork.LoadBalancer) {
			lb.Properties.FrontendIPConfigurations[0].Properties.PublicIPAddress.ID = to.Ptr(regionalIP)
		}, code: "DifferentSkuLoadBalancersAndPublicIPAddressNotAllowed"},
		{name: "name too long", lbName: strings.Repeat("a", 81), edit: func(*armnetwork.LoadBalancer) {}, code: "InvalidResourceName"},
		{name: "name ends with a dot", lbName: "global.", edit: func(*armnetwork.LoadBalancer) {}, code: "InvalidResourceName"},
		{name: "tag name with a slash", edit: func(lb *armnetwork.LoadBalancer) { lb.Tags = map[string]*string{"fleetnet.dev/owner": to.Ptr("x")} }, code: "InvalidTagNameCharacters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lb := globalLB(ip, regions, 5432)
			tc.edit(&lb)
			name := tc.lbName
			if name == "" {
				name = "global"
			}
			p, err := c.lbs.BeginCreateOrUpdate(context.Background(), rg, name, lb, nil)
			if tc.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				if _, err := p.PollUntilDone(context.Background(), poll); err != nil {
					t.Fatal(err)
				}
				return
			}
			re := respErr(t, err)
			if re.ErrorCode != tc.code || re.StatusCode != http.StatusBadRequest {
				t.Fatalf("got %d %s, want 400 %s", re.StatusCode, re.ErrorCode, tc.code)
			}
			if !strings.Contains(re.Error(), `"message"`) {
				t.Errorf("no ARM error envelope in %v", re)
			}
		})
	}
}

// A public IP a load balancer uses cannot be deleted; it can once the load
// balancer is gone.
func TestPublicIPInUse(t *testing.T) {
	s := armsim.New(armsim.Options{Polls: 1})
	c := newClients(t, s)
	ctx := context.Background()
	regions := seedRegions(t, s)
	ip := createIP(t, c, "global-ip")
	p, err := c.lbs.BeginCreateOrUpdate(ctx, rg, "global", globalLB(*ip.ID, regions, 5432), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PollUntilDone(ctx, poll); err != nil {
		t.Fatal(err)
	}
	_, err = c.pips.BeginDelete(ctx, rg, "global-ip", nil)
	if re := respErr(t, err); re.ErrorCode != "PublicIPAddressCannotBeDeleted" {
		t.Fatalf("got %s", re.ErrorCode)
	}
	d, err := c.lbs.BeginDelete(ctx, rg, "global", nil)
	if err != nil {
		t.Fatal(err)
	}
	// While the load balancer is being deleted, its IP is still in use.
	if _, err := c.pips.BeginDelete(ctx, rg, "global-ip", nil); err == nil {
		t.Fatal("deleted a public IP of a load balancer being deleted")
	}
	if _, err := d.PollUntilDone(ctx, poll); err != nil {
		t.Fatal(err)
	}
	dp, err := c.pips.BeginDelete(ctx, rg, "global-ip", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dp.PollUntilDone(ctx, poll); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Get(armsim.MustParseID(*ip.ID)); ok {
		t.Fatal("public IP still there")
	}
	_, err = c.pips.Get(ctx, rg, "global-ip", nil)
	if re := respErr(t, err); re.StatusCode != http.StatusNotFound || re.ErrorCode != "ResourceNotFound" {
		t.Fatalf("got %d %s", re.StatusCode, re.ErrorCode)
	}
}

// Faults: throttling and 500s are retried by azcore's policy (Retry-After
// honoured) and surface when they persist; an operation can end Failed.
func TestFaults(t *testing.T) {
	s := armsim.New(armsim.Options{Polls: 1})
	c := newClients(t, s)
	ctx := context.Background()

	th := s.Inject(armsim.Fault{API: "PublicIPAddressesClient.BeginCreateOrUpdate", Method: http.MethodPut, Times: 2, Err: armsim.Throttled(5 * time.Millisecond)})
	createIP(t, c, "ip1")
	if th.Fired() != 2 {
		t.Errorf("throttled %d times, want 2", th.Fired())
	}

	in := s.Inject(armsim.Fault{API: "PublicIPAddressesClient.Get", Err: armsim.InternalServerError()})
	_, err := c.pips.Get(ctx, rg, "ip1", nil)
	if re := respErr(t, err); re.StatusCode != 500 || re.ErrorCode != "InternalServerError" {
		t.Fatalf("got %d %s", re.StatusCode, re.ErrorCode)
	}
	if in.Fired() != 3 {
		t.Errorf("500 answered %d tries, want 3 (MaxRetries 2)", in.Fired())
	}
	in.Remove()

	s.Inject(armsim.Fault{API: "PublicIPAddressesClient.BeginCreateOrUpdate", FailOperation: true,
		Err: &armsim.Error{Code: "InternalServerError", Message: "An error occurred during provisioning."}})
	p, err := c.pips.BeginCreateOrUpdate(ctx, rg, "ip2", globalIP(), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.PollUntilDone(ctx, poll)
	if re := respErr(t, err); re.ErrorCode != "InternalServerError" || !strings.Contains(re.Error(), "during provisioning") {
		t.Fatalf("got %v", err)
	}
	if r, _ := s.Get(armsim.ResourceID(sub, rg, armsim.TypePublicIPAddress, "ip2")); r.State != armsim.StateFailed {
		t.Errorf("state %s, want Failed", r.State)
	}
}

// Lists follow next links over pages of Options.PageSize.
func TestListPages(t *testing.T) {
	s := armsim.New(armsim.Options{PageSize: 2})
	c := newClients(t, s)
	for _, n := range []string{"c", "a", "b"} {
		createIP(t, c, n)
	}
	var names []string
	pager := c.pips.NewListPager(rg, nil)
	pages := 0
	for pager.More() {
		page, err := pager.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, v := range page.Value {
			names = append(names, *v.Name)
		}
	}
	if strings.Join(names, ",") != "a,b,c" || pages != 2 {
		t.Errorf("names %v in %d pages", names, pages)
	}
}

// How another provider extends the simulation: a Kind for a child type
// (here the load balancers' backendAddressPools, as separate resources),
// its fake server set on the mounted factory, a state that moves on each
// read (Observed), parents required and children deleted with them.
func TestExtension(t *testing.T) {
	s := armsim.New(armsim.Options{})
	const poolType = "Microsoft.Network/loadBalancers/backendAddressPools"
	s.Register(armsim.Kind{Type: poolType,
		Prepare: func(_ *armsim.View, _ armsim.ID, body, _ []byte) ([]byte, error) { return body, nil },
		Observed: func(_ *armsim.View, _ armsim.ID, body []byte) []byte {
			var bp armnetwork.BackendAddressPool
			_ = json.Unmarshal(body, &bp)
			bp.Properties.DrainPeriodInSeconds = to.Ptr(*bp.Properties.DrainPeriodInSeconds + 1) // counts reads
			out, _ := json.Marshal(bp)
			return out
		}})
	s.NetworkServerFactory().LoadBalancerBackendAddressPoolsServer = fake.LoadBalancerBackendAddressPoolsServer{
		BeginCreateOrUpdate: func(ctx context.Context, _, _, _ string, bp armnetwork.BackendAddressPool, _ *armnetwork.LoadBalancerBackendAddressPoolsClientBeginCreateOrUpdateOptions) (azfake.PollerResponder[armnetwork.LoadBalancerBackendAddressPoolsClientCreateOrUpdateResponse], azfake.ErrorResponder) {
			return armsim.PutLRO(ctx, s, bp, func(v armnetwork.BackendAddressPool) armnetwork.LoadBalancerBackendAddressPoolsClientCreateOrUpdateResponse {
				return armnetwork.LoadBalancerBackendAddressPoolsClientCreateOrUpdateResponse{BackendAddressPool: v}
			})
		},
		Get: func(_ context.Context, _, _, _ string, _ *armnetwork.LoadBalancerBackendAddressPoolsClientGetOptions) (azfake.Responder[armnetwork.LoadBalancerBackendAddressPoolsClientGetResponse], azfake.ErrorResponder) {
			return armsim.GetResource(s, func(v armnetwork.BackendAddressPool) armnetwork.LoadBalancerBackendAddressPoolsClientGetResponse {
				return armnetwork.LoadBalancerBackendAddressPoolsClientGetResponse{BackendAddressPool: v}
			})
		},
		NewListPager: func(_, _ string, _ *armnetwork.LoadBalancerBackendAddressPoolsClientListOptions) azfake.PagerResponder[armnetwork.LoadBalancerBackendAddressPoolsClientListResponse] {
			return armsim.ListPager(s, func(v []*armnetwork.BackendAddressPool) armnetwork.LoadBalancerBackendAddressPoolsClientListResponse {
				return armnetwork.LoadBalancerBackendAddressPoolsClientListResponse{LoadBalancerBackendAddressPoolListResult: armnetwork.LoadBalancerBackendAddressPoolListResult{Value: v}}
			})
		},
	}
	opts := &arm.ClientOptions{ClientOptions: policy.ClientOptions{Transport: s.Transport()}}
	f, err := armnetwork.NewClientFactory(sub, &azfake.TokenCredential{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	pools, c := f.NewLoadBalancerBackendAddressPoolsClient(), newClients(t, s)
	ctx := context.Background()
	pool := armnetwork.BackendAddressPool{Properties: &armnetwork.BackendAddressPoolPropertiesFormat{DrainPeriodInSeconds: to.Ptr[int32](0)}}

	_, err = pools.BeginCreateOrUpdate(ctx, rg, "global", "extra", pool, nil)
	if re := respErr(t, err); re.StatusCode != http.StatusNotFound || re.ErrorCode != "ParentResourceNotFound" {
		t.Fatalf("child without parent: %d %s", re.StatusCode, re.ErrorCode)
	}
	regions := seedRegions(t, s)
	ip := createIP(t, c, "global-ip")
	p, err := c.lbs.BeginCreateOrUpdate(ctx, rg, "global", globalLB(*ip.ID, regions, 5432), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PollUntilDone(ctx, poll); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"extra", "more"} {
		pp, err := pools.BeginCreateOrUpdate(ctx, rg, "global", name, pool, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pp.PollUntilDone(ctx, poll); err != nil {
			t.Fatal(err)
		}
	}
	for want := int32(1); want <= 2; want++ {
		g, err := pools.Get(ctx, rg, "global", "extra", nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := *g.Properties.DrainPeriodInSeconds; got != want {
			t.Errorf("read %d: Observed ran %d times", want, got)
		}
	}
	pager := pools.NewListPager(rg, "global", nil)
	page, err := pager.NextPage(ctx)
	if err != nil || len(page.Value) != 2 {
		t.Fatalf("list of children: %v, %v", page.Value, err)
	}
	d, err := c.lbs.BeginDelete(ctx, rg, "global", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.PollUntilDone(ctx, poll); err != nil {
		t.Fatal(err)
	}
	if left := s.Resources(poolType); len(left) != 0 {
		t.Errorf("children left after their parent's deletion: %v", left)
	}
}
