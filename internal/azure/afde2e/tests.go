package afde2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/cdn/armcdn/v2"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/azure/armutil"
)

// Tests checks what the feature is for (see the package comment); it
// stops at the first check that fails, saying what it saw.
func Tests(ctx context.Context, c Config) error {
	r, err := newRun(c)
	if err != nil {
		return err
	}
	gw, err := r.programmed(ctx)
	if err != nil {
		return err
	}
	host := ""
	if len(gw.Status.Addresses) > 0 {
		host = gw.Status.Addresses[0].Value
	}
	if !strings.HasSuffix(host, ".azurefd.net") {
		return fmt.Errorf("the Gateway's address %q is not a Front Door endpoint host name", host)
	}
	p, err := r.profile(ctx, string(gw.UID))
	if err != nil {
		return err
	}
	name := armutil.Deref(p.Name)
	r.logf("ok: profile %s tagged %s=%s for the Gateway (uid %s)", name, keys.TagAzureOwner, armutil.Deref(p.Tags[keys.TagAzureOwner]), gw.UID)
	endpointID, err := r.endpoint(ctx, name, host)
	if err != nil {
		return err
	}
	if err := r.securityPolicy(ctx, name, endpointID); err != nil {
		return err
	}
	if err := r.origins(ctx, name); err != nil {
		return err
	}
	fdid := ""
	if p.Properties != nil {
		fdid = armutil.Deref(p.Properties.FrontDoorID)
	}
	return r.traffic(ctx, host, fdid)
}

// programmed waits for the Gateway's Programmed=True.
func (r *run) programmed(ctx context.Context) (*gwv1.Gateway, error) {
	r.logf("waiting up to %s for Gateway %s/%s to be Programmed (Front Door deploys to its edge)...", r.Timeout, r.Namespace, r.Gateway)
	gw := &gwv1.Gateway{}
	var last, lastBrief string
	err := r.poll(ctx, r.Timeout, "Gateway Programmed", func(ctx context.Context) (bool, error) {
		if err := r.Kube.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: r.Gateway}, gw); err != nil {
			return false, err
		}
		var parts, brief []string
		for _, c := range gw.Status.Conditions {
			parts = append(parts, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
			brief = append(brief, fmt.Sprintf("%s=%s %s", c.Type, c.Status, c.Reason))
		}
		// Told when a status or reason changes: messages count the
		// seconds waited.
		if s := strings.Join(brief, ", "); s != lastBrief {
			r.logf("  %s", strings.Join(parts, "; "))
			lastBrief = s
		}
		last = strings.Join(parts, "; ")
		cond := meta.FindStatusCondition(gw.Status.Conditions, string(gwv1.GatewayConditionProgrammed))
		return cond != nil && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == gw.Generation, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w (last conditions: %s)", err, last)
	}
	return gw, nil
}

// profile finds the Gateway's profile by its tags and checks them.
func (r *run) profile(ctx context.Context, uid string) (*armcdn.Profile, error) {
	ps, err := r.gatewayProfiles(ctx)
	if err != nil {
		return nil, err
	}
	if len(ps) != 1 {
		return nil, fmt.Errorf("%d profiles in %s are tagged for Gateway %s/%s, want 1", len(ps), r.ResourceGroup, r.Namespace, r.Gateway)
	}
	p := ps[0]
	if armutil.Deref(p.Tags[keys.TagAzureOwner]) == "" {
		return nil, fmt.Errorf("profile %s has no %s tag", armutil.Deref(p.Name), keys.TagAzureOwner)
	}
	if got := armutil.Deref(p.Tags[keys.TagAzureGatewayUID]); got != uid {
		return nil, fmt.Errorf("profile %s is tagged %s=%q, the Gateway's uid is %s", armutil.Deref(p.Name), keys.TagAzureGatewayUID, got, uid)
	}
	if p.SKU == nil || !strings.HasPrefix(string(armutil.Deref(p.SKU.Name)), r.Tier+"_") {
		return nil, fmt.Errorf("profile %s is not of tier %s", armutil.Deref(p.Name), r.Tier)
	}
	return p, nil
}

// gatewayProfiles are the profiles of the resource group tagged for the
// Gateway.
func (r *run) gatewayProfiles(ctx context.Context) ([]*armcdn.Profile, error) {
	var out []*armcdn.Profile
	pager := r.cdn.NewProfilesClient().NewListByResourceGroupPager(r.ResourceGroup, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing the profiles of %s: %w", r.ResourceGroup, err)
		}
		for _, p := range page.Value {
			if armutil.Deref(p.Tags[keys.TagAzureGatewayNamespace]) == r.Namespace && armutil.Deref(p.Tags[keys.TagAzureGatewayName]) == r.Gateway {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// endpoint finds the profile's endpoint serving host.
func (r *run) endpoint(ctx context.Context, profile, host string) (string, error) {
	pager := r.cdn.NewAFDEndpointsClient().NewListByProfilePager(r.ResourceGroup, profile, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return "", fmt.Errorf("listing the endpoints of %s: %w", profile, err)
		}
		for _, e := range page.Value {
			if e.Properties != nil && strings.EqualFold(armutil.Deref(e.Properties.HostName), host) {
				return armutil.Deref(e.ID), nil
			}
		}
	}
	return "", fmt.Errorf("no endpoint of profile %s has the host name %s", profile, host)
}

// securityPolicy checks that a security policy attaches the WAF policy
// to the endpoint.
func (r *run) securityPolicy(ctx context.Context, profile, endpointID string) error {
	pager := r.cdn.NewSecurityPoliciesClient().NewListByProfilePager(r.ResourceGroup, profile, nil)
	var seen []string
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("listing the security policies of %s: %w", profile, err)
		}
		for _, sp := range page.Value {
			if sp.Properties == nil {
				continue
			}
			waf, ok := sp.Properties.Parameters.(*armcdn.SecurityPolicyWebApplicationFirewallParameters)
			if !ok || waf.WafPolicy == nil {
				continue
			}
			seen = append(seen, armutil.Deref(waf.WafPolicy.ID))
			if !strings.EqualFold(armutil.Deref(waf.WafPolicy.ID), r.wafID()) {
				continue
			}
			for _, a := range waf.Associations {
				for _, d := range a.Domains {
					if strings.EqualFold(armutil.Deref(d.ID), endpointID) {
						r.logf("ok: security policy %s attaches WAF policy %s to the endpoint", armutil.Deref(sp.Name), WAFPolicyName)
						return nil
					}
				}
			}
		}
	}
	return fmt.Errorf("no security policy of profile %s attaches %s to the endpoint (WAF policies seen: %v)", profile, r.wafID(), seen)
}

// origins checks the origin groups' probe path and, with private-link
// connectivity, that every origin is a Private Link origin on a private
// address whose connection its Private Link Service approved.
func (r *run) origins(ctx context.Context, profile string) error {
	groups := r.cdn.NewAFDOriginGroupsClient().NewListByProfilePager(r.ResourceGroup, profile, nil)
	n := 0
	for groups.More() {
		page, err := groups.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("listing the origin groups of %s: %w", profile, err)
		}
		for _, g := range page.Value {
			gname := armutil.Deref(g.Name)
			var probe string
			if g.Properties != nil && g.Properties.HealthProbeSettings != nil {
				probe = armutil.Deref(g.Properties.HealthProbeSettings.ProbePath)
			}
			if probe != r.ProbePath {
				return fmt.Errorf("origin group %s probes %q, want %q (%s)", gname, probe, r.ProbePath, keys.AnnotationAzureProbePath)
			}
			origins := r.cdn.NewAFDOriginsClient().NewListByOriginGroupPager(r.ResourceGroup, profile, gname, nil)
			for origins.More() {
				op, err := origins.NextPage(ctx)
				if err != nil {
					return fmt.Errorf("listing the origins of %s: %w", gname, err)
				}
				for _, o := range op.Value {
					n++
					if err := r.checkOrigin(ctx, o); err != nil {
						return err
					}
				}
			}
		}
	}
	if n == 0 {
		return fmt.Errorf("profile %s has no origin", profile)
	}
	r.logf("ok: %d origins, health probe path %s, connectivity %s", n, r.ProbePath, r.Connectivity)
	return nil
}

var plsID = regexp.MustCompile(`(?i)^/subscriptions/([^/]+)/resourceGroups/([^/]+)/providers/Microsoft\.Network/privateLinkServices/([^/]+)$`)

func (r *run) checkOrigin(ctx context.Context, o *armcdn.AFDOrigin) error {
	name := armutil.Deref(o.Name)
	if o.Properties == nil {
		return fmt.Errorf("origin %s has no properties", name)
	}
	spl := o.Properties.SharedPrivateLinkResource
	if r.Connectivity != "private-link" {
		if spl != nil {
			return fmt.Errorf("origin %s is a Private Link origin with public connectivity", name)
		}
		return nil
	}
	if spl == nil || spl.PrivateLink == nil {
		return fmt.Errorf("origin %s is not a Private Link origin: it would be reached over the internet", name)
	}
	if ip := net.ParseIP(armutil.Deref(o.Properties.HostName)); ip == nil || !ip.IsPrivate() {
		return fmt.Errorf("origin %s's host %s is not a private address", name, armutil.Deref(o.Properties.HostName))
	}
	m := plsID.FindStringSubmatch(armutil.Deref(spl.PrivateLink.ID))
	if m == nil {
		return fmt.Errorf("origin %s's Private Link resource %s is not a Private Link Service", name, armutil.Deref(spl.PrivateLink.ID))
	}
	f, err := r.network(m[1])
	if err != nil {
		return err
	}
	pls, err := f.NewPrivateLinkServicesClient().Get(ctx, m[2], m[3], nil)
	if err != nil {
		return fmt.Errorf("reading Private Link Service %s: %w", m[3], err)
	}
	// The connection Front Door opened shows the origin's request message
	// in its description (the provider keeps it there when it approves).
	msg := armutil.Deref(spl.RequestMessage)
	var states []string
	if pls.Properties != nil {
		for _, pc := range pls.Properties.PrivateEndpointConnections {
			if pc.Properties == nil || pc.Properties.PrivateLinkServiceConnectionState == nil {
				continue
			}
			st := pc.Properties.PrivateLinkServiceConnectionState
			states = append(states, armutil.Deref(pc.Name)+"="+armutil.Deref(st.Status))
			if msg != "" && strings.Contains(armutil.Deref(st.Description), msg) && armutil.Deref(st.Status) == "Approved" {
				return nil
			}
		}
	}
	return fmt.Errorf("no connection for origin %s (request message %q) is Approved on Private Link Service %s: %v", name, msg, m[3], states)
}

// traffic checks that the endpoint serves the backend, and that the WAF
// policy blocks the test rule's requests (both retried until Timeout:
// Front Door propagates configuration and DNS for minutes).
func (r *run) traffic(ctx context.Context, host, fdid string) error {
	url := "http://" + host + "/"
	var code int
	err := r.poll(ctx, r.Timeout, "GET "+url+" answered by the backend", func(ctx context.Context) (bool, error) {
		status, body, err := r.get(ctx, url, nil)
		if err != nil {
			return false, err
		}
		code = status
		if status < 200 || status > 299 {
			return false, fmt.Errorf("status %d: %.200s", status, body)
		}
		if r.CheckEcho && fdid != "" && !strings.Contains(body, fdid) {
			return false, fmt.Errorf("status %d without the profile's X-Azure-FDID %s in the echoed request: %.300s", status, fdid, body)
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	r.logf("ok: GET %s answered %d from the backend", url, code)
	err = r.poll(ctx, r.Timeout, "the WAF test rule blocking", func(ctx context.Context) (bool, error) {
		status, body, err := r.get(ctx, url, http.Header{BlockHeader: {BlockValue}})
		if err != nil {
			return false, err
		}
		if status != http.StatusForbidden {
			return false, fmt.Errorf("a request with %s: %s answered %d: %.200s", BlockHeader, BlockValue, status, body)
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	r.logf("ok: a request with %s: %s is blocked (403)", BlockHeader, BlockValue)
	return nil
}

// get is one GET: status and body, or the transport's error.
func (r *run) get(ctx context.Context, url string, h http.Header) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil && !errors.Is(err, io.EOF) {
		return resp.StatusCode, string(b), err
	}
	return resp.StatusCode, string(b), nil
}
