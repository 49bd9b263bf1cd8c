// Package afde2e is the end-to-end check of the Azure Front Door
// provider (make e2e-setup, e2e-tests, e2e-cleanup; hack/azure-e2e): on
// a hub running fleetnet-gateway with --azure-front-door-classes and a
// fleet exporting a Service, it creates what a user would (a WAF policy
// with a test rule, a GatewayClass, a Gateway, an HTTPRoute), checks what
// the feature is for, through the Azure SDK and the Front Door endpoint
// itself, and withdraws it all, failing when a step does not finish
// within its bound.
//
// Checks (Tests): the Gateway is Programmed; its address is the
// endpoint's host name; the profile carries the ownership tags of the
// Gateway; the security policy attaches the WAF policy to the endpoint;
// the origin groups probe the configured path; with private-link
// connectivity every origin is a Private Link origin on a private address
// whose connection is Approved on its Private Link Service; a GET through
// the endpoint answers 2xx from the backend (which, the Gateway API echo
// server, reflects the X-Azure-FDID header Front Door adds: the
// profile's frontDoorId); a request carrying the test rule's header is
// blocked with 403. Cleanup: after the Gateway's deletion the profile is
// withdrawn, and then no request through the old host name is served
// for a sustained period.
//
// The same program runs against the simulation (internal/azure/armsim)
// served on loopback: Config.ARMEndpoint and CAFile point the SDK there,
// and EdgeAddress sends the endpoint's requests to the simulation's Front
// Door data plane, so that a test runs it and it cannot rot.
package afde2e

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/cdn/armcdn/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/frontdoor/armfrontdoor"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Config is one run's settings (hack/azure-e2e binds them to the
// environment variables make passes).
type Config struct {
	SubscriptionID string
	ResourceGroup  string
	Location       string
	// Tier is Standard or Premium; Connectivity public or private-link
	// (Premium only).
	Tier         string
	Connectivity string
	// Namespace holds the Gateway and HTTPRoute (both named Gateway) and
	// the ServiceImport Service, port 80.
	Namespace string
	Gateway   string
	Service   string
	// ProbePath is the origin groups' health probe path
	// (fleetnet.dev/azure-probe-path); the backend must answer it.
	ProbePath string
	// Timeout bounds each wait: Programmed, traffic served, the
	// withdrawal (Front Door's first deployment commonly takes 10 to 40
	// minutes).
	Timeout time.Duration
	// BlockedFor is how long in a row, within Timeout after the
	// withdrawal, every request through the old host name must go
	// unserved; a request served again restarts the window.
	BlockedFor time.Duration
	// PollEvery is the pause between two looks.
	PollEvery time.Duration
	// DeleteGroup deletes the resource group at cleanup.
	DeleteGroup bool
	// PrincipalID is the object id of the gateway's identity: setup
	// prints the role assignments it needs, and with AssignRoles makes
	// them. MemberResourceGroups are the member clusters' node resource
	// groups (load balancers, public IPs, Private Link Services) as
	// subscription/group or group.
	PrincipalID          string
	AssignRoles          bool
	MemberResourceGroups []string
	// ARMEndpoint and CAFile replace Azure Resource Manager (a
	// simulation); EdgeAddress, when set, is where requests for the
	// Front Door endpoint go (host:port), whatever DNS says.
	ARMEndpoint string
	CAFile      string
	EdgeAddress string
	// CheckEcho: the backend reflects request headers in its body (the
	// Gateway API echo server), so a 2xx must carry the profile's
	// X-Azure-FDID.
	CheckEcho bool

	Credential azcore.TokenCredential
	Kube       client.Client
	// ConfigureGateway, when set, gives fleetnet-gateway the Front Door
	// flags (hack/azure-e2e runs helm); nil leaves it as it is.
	ConfigureGateway func(ctx context.Context, args []string) error
	Out              io.Writer
}

// Class is the GatewayClass of the tier.
func (c Config) Class() string { return "afd-e2e-" + strings.ToLower(c.Tier) }

// WAFPolicyName is the WAF policy setup creates.
const WAFPolicyName = "fleetnete2ewaf"

// BlockHeader and BlockValue are the test rule's: a request with this
// header is blocked by the WAF policy.
const (
	BlockHeader = "X-Fleetnet-E2e"
	BlockValue  = "block"
)

// Validate checks the settings.
func (c Config) Validate() error {
	var errs []error
	for _, f := range []struct{ name, v string }{{"subscription id (AZURE_SUBSCRIPTION_ID)", c.SubscriptionID},
		{"resource group (AZURE_RESOURCE_GROUP)", c.ResourceGroup}, {"location", c.Location}, {"namespace", c.Namespace},
		{"gateway name", c.Gateway}, {"service", c.Service}} {
		if strings.TrimSpace(f.v) == "" {
			errs = append(errs, fmt.Errorf("the %s is required", f.name))
		}
	}
	if c.Tier != "Standard" && c.Tier != "Premium" {
		errs = append(errs, fmt.Errorf("tier %q: want Standard or Premium", c.Tier))
	}
	if c.Connectivity != "public" && c.Connectivity != "private-link" {
		errs = append(errs, fmt.Errorf("connectivity %q: want public or private-link", c.Connectivity))
	}
	if c.Connectivity == "private-link" && c.Tier != "Premium" {
		errs = append(errs, errors.New("private-link connectivity needs the Premium tier"))
	}
	if c.AssignRoles && c.PrincipalID == "" {
		errs = append(errs, errors.New("assigning roles needs the principal id of the gateway's identity"))
	}
	if c.Timeout <= 0 || c.PollEvery <= 0 || c.BlockedFor < 0 {
		errs = append(errs, errors.New("the timeout and poll interval must be positive, the blocked period not negative"))
	}
	if c.Credential == nil || c.Kube == nil {
		errs = append(errs, errors.New("an Azure credential and a hub client are required"))
	}
	return errors.Join(errs...)
}

// run is one step's clients.
type run struct {
	Config
	cdn   *armcdn.ClientFactory
	waf   *armfrontdoor.PoliciesClient
	arm   *arm.Client
	http  *http.Client
	armOp *arm.ClientOptions
}

func newRun(c Config) (*run, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Out == nil {
		c.Out = os.Stdout
	}
	opts := &arm.ClientOptions{}
	var pool *x509.CertPool
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading the CA file: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("no certificate in %s", c.CAFile)
		}
		opts.Transport = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	}
	if c.ARMEndpoint != "" {
		// The same audience as Azure's public cloud: the simulation takes
		// any token.
		opts.Cloud = cloud.Configuration{ActiveDirectoryAuthorityHost: cloud.AzurePublic.ActiveDirectoryAuthorityHost,
			Services: map[cloud.ServiceName]cloud.ServiceConfiguration{cloud.ResourceManager: {
				Endpoint: c.ARMEndpoint, Audience: cloud.AzurePublic.Services[cloud.ResourceManager].Audience}}}
	}
	r := &run{Config: c, armOp: opts}
	var err error
	if r.cdn, err = armcdn.NewClientFactory(c.SubscriptionID, c.Credential, opts); err != nil {
		return nil, fmt.Errorf("creating the Front Door clients: %w", err)
	}
	if r.waf, err = armfrontdoor.NewPoliciesClient(c.SubscriptionID, c.Credential, opts); err != nil {
		return nil, fmt.Errorf("creating the WAF policy client: %w", err)
	}
	if r.arm, err = arm.NewClient("fleetnet-afde2e", "v1.0.0", c.Credential, opts); err != nil {
		return nil, fmt.Errorf("creating the ARM client: %w", err)
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	tr := &http.Transport{DisableKeepAlives: true, DialContext: dialer.DialContext}
	if c.EdgeAddress != "" {
		tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, c.EdgeAddress)
		}
	}
	r.http = &http.Client{Transport: tr, Timeout: 15 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return r, nil
}

func (r *run) network(subscription string) (*armnetwork.ClientFactory, error) {
	f, err := armnetwork.NewClientFactory(subscription, r.Credential, r.armOp)
	if err != nil {
		return nil, fmt.Errorf("creating the network clients: %w", err)
	}
	return f, nil
}

func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(r.Out, "azure-e2e: "+format+"\n", args...)
}

func (r *run) groupID() string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s", r.SubscriptionID, r.ResourceGroup)
}

func (r *run) wafID() string {
	return r.groupID() + "/providers/Microsoft.Network/FrontDoorWebApplicationFirewallPolicies/" + WAFPolicyName
}

// armDo sends one request to ARM at path (below the endpoint) and
// decodes a 2xx answer into out (unless nil); codes are the answers that
// count as success.
func (r *run) armDo(ctx context.Context, method, path, apiVersion string, body, out any, codes ...int) (int, error) {
	req, err := runtime.NewRequest(ctx, method, runtime.JoinPaths(r.arm.Endpoint(), path))
	if err != nil {
		return 0, err
	}
	q := req.Raw().URL.Query()
	q.Set("api-version", apiVersion)
	req.Raw().URL.RawQuery = q.Encode()
	req.Raw().Header.Set("Accept", "application/json")
	if body != nil {
		if err := runtime.MarshalAsJSON(req, body); err != nil {
			return 0, err
		}
	}
	resp, err := r.arm.Pipeline().Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	if !runtime.HasStatusCode(resp, codes...) {
		return resp.StatusCode, runtime.NewResponseError(resp)
	}
	if out != nil && resp.StatusCode != http.StatusNoContent {
		if err := runtime.UnmarshalAsJSON(resp, out); err != nil {
			return resp.StatusCode, err
		}
	}
	return resp.StatusCode, nil
}

// poll calls look every PollEvery until it says done or fails for good,
// for at most within; it returns look's last error on timeout.
func (r *run) poll(ctx context.Context, within time.Duration, what string, look func(ctx context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	var last error
	for {
		done, err := look(ctx)
		if done && err == nil {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("%s: not done within %s: %w", what, within, last)
			}
			return fmt.Errorf("%s: not done within %s", what, within)
		case <-time.After(r.PollEvery):
		}
	}
}

// deterministicUUID is a UUID (version 8, RFC 9562) derived from parts,
// so that a role assignment made again has the same name.
func deterministicUUID(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "|")))
	h[6] = (h[6] & 0x0f) | 0x80
	h[8] = (h[8] & 0x3f) | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// SimulationCredential is the credential for a simulated ARM, which
// takes any token: a fixed one, valid for a day.
type SimulationCredential struct{}

// GetToken implements azcore.TokenCredential.
func (SimulationCredential) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: "armsim", ExpiresOn: time.Now().Add(24 * time.Hour)}, nil
}
