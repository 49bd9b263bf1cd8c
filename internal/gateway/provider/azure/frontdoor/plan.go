package frontdoor

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/cdn/armcdn/v2"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/api/keys"

	"github.com/fleetnet/fleetnet/internal/gateway/provider/azure/frontdoor/annotations"
)

// target is where the provider creates resources.
type target struct {
	subscription, resourceGroup, owner string
}

// Origin is where Front Door reaches one cluster's backend: what the
// provider resolved from the cluster's origin reference (originRef: its
// Private Link Service or its regional load balancer frontend).
type Origin struct {
	// Host is the origin's address: the public IP of the frontend (public
	// connectivity) or its private IP (Private Link).
	Host string
	// PrivateLink is the Private Link Service in front of an internal
	// frontend (private-link connectivity), "" for public origins.
	PrivateLink         string
	PrivateLinkLocation string
	// Problem says why the cluster has no origin ("" when it has).
	Problem string
	// Unknown: the Problem is a failed read (not a definite answer), so
	// the cluster's existing origins must not be withdrawn.
	Unknown bool
}

// Refusal is a route match that Front Door cannot serve as written; it is
// not programmed, and its reason names the feature.
type Refusal struct {
	RouteNamespace, RouteName string
	Rule, Match               int
	Reason                    string
}

func (r Refusal) String() string {
	return fmt.Sprintf("HTTPRoute %s/%s rule %d match %d: %s", r.RouteNamespace, r.RouteName, r.Rule, r.Match, r.Reason)
}

// graph is the Front Door resources one Gateway needs, derived purely
// from the model, the Gateway's settings, the resolved origins and the
// target. Slices are in creation order within their kind.
type graph struct {
	key      string // namespace/name
	settings annotations.Settings

	profileName string
	profile     armcdn.Profile
	endpoint    named[armcdn.AFDEndpoint]
	// secrets are the customer certificates (Key Vault secret
	// references) the custom domains use, one per Key Vault secret.
	secrets  []named[armcdn.Secret]
	domains  []named[armcdn.AFDDomain]
	groups   []originGroup
	ruleSets []ruleSet
	routes   []named[armcdn.Route]
	security *named[armcdn.SecurityPolicy]

	refused []Refusal
	notes   []string
	// autoApproved are, by Private Link Service (lower-case id), the
	// exported Services (namespace/name) whose cluster publishes that the
	// Service's owner allows automatic approval.
	autoApproved map[string]map[string]bool
}

type named[T any] struct {
	name string
	// label says what it serves, for messages (e.g. a hostname).
	label string
	v     T
}

type originGroup struct {
	named[armcdn.AFDOriginGroup]
	origins []named[armcdn.AFDOrigin]
}

type ruleSet struct {
	name  string
	rules []named[armcdn.Rule]
}

// Names. Front Door names hold letters, digits and inner hyphens (rule
// sets and rules: a letter, then letters and digits); every name the
// provider gives starts with namePrefix, the mark of what it owns inside
// its profile (child resources carry no tags).
const (
	namePrefix    = "fn-"
	rulePrefix    = "fn"
	endpointLabel = "endpoint"
)

var notNameChar = regexp.MustCompile(`[^a-zA-Z0-9-]+`)

func shortHash(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:])[:10]
}

// readable is s as letters, digits and single inner hyphens, at most n.
func readable(s string, n int) string {
	r := strings.Trim(notNameChar.ReplaceAllString(strings.ToLower(s), "-"), "-")
	for strings.Contains(r, "--") {
		r = strings.ReplaceAll(r, "--", "-")
	}
	if len(r) > n {
		r = strings.Trim(r[:n], "-")
	}
	return r
}

func childName(readablePart string, hashParts ...string) string {
	if r := readable(readablePart, 40); r != "" {
		return namePrefix + r + "-" + shortHash(hashParts...)
	}
	return namePrefix + shortHash(hashParts...)
}

// profileName is unique per owner and Gateway (two fleets may share a
// resource group; a-b/c and a/b-c do not collide).
func profileName(owner, namespace, name string) string {
	return childName(namespace+"-"+name, owner, namespace, name)
}

func (t target) profileID(profile string) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Cdn/profiles/%s", t.subscription, t.resourceGroup, profile)
}

func (t target) tags(gw edgev1.Gateway) map[string]*string {
	tags := map[string]*string{keys.TagAzureOwner: to.Ptr(t.owner), keys.TagAzureGatewayNamespace: to.Ptr(gw.Namespace), keys.TagAzureGatewayName: to.Ptr(gw.Name)}
	if gw.UID != "" {
		tags[keys.TagAzureGatewayUID] = to.Ptr(gw.UID)
	}
	return tags
}

func skuName(s annotations.SKU) armcdn.SKUName {
	if s == annotations.SKUPremium {
		return armcdn.SKUNamePremiumAzureFrontDoor
	}
	return armcdn.SKUNameStandardAzureFrontDoor
}

// vhostRoute is one model route on one hostname, with the protocols of
// the listeners it is served on.
type vhostRoute struct {
	host      string
	r         edgev1.Route
	protocols map[string]bool
}

// hostRoutes are the model routes on one hostname, in the model's
// precedence order.
type hostRoutes struct {
	host   string
	routes []*vhostRoute
}

// planFor derives the graph of gw. origins are by regional frontend id.
//
// What Front Door cannot express is refused per route match (Refusal),
// never dropped: matches on headers, query parameters or methods (a Front
// Door route matches paths only); direct responses; redirects to another
// port or replacing a path prefix; hostname rewrites (the origin host
// header is per origin); per-backend filters; timeouts (Front Door has one
// origin response timeout per profile); a pattern that a route of higher
// precedence already serves on the same domain. Listeners on ports other
// than 80 and 443, wildcard hostnames without a customer certificate
// (AFD-managed certificates do not cover them), listeners whose customer
// certificate reference (keys.AnnotationAzureListenerCertificates) is
// malformed and clusters without an origin are noted on the Gateway.
func planFor(t target, gw edgev1.Gateway, s annotations.Settings, origins map[string]Origin) graph {
	g := graph{key: gw.Namespace + "/" + gw.Name, settings: s, profileName: profileName(t.owner, gw.Namespace, gw.Name)}
	pid := t.profileID(g.profileName)
	g.profile = armcdn.Profile{Location: to.Ptr("Global"), SKU: &armcdn.SKU{Name: to.Ptr(skuName(s.SKU))}, Tags: t.tags(gw),
		Properties: &armcdn.ProfileProperties{}}
	g.endpoint = named[armcdn.AFDEndpoint]{name: namePrefix + shortHash(t.owner, gw.Namespace, gw.Name), label: endpointLabel, v: armcdn.AFDEndpoint{
		Location: to.Ptr("Global"), Tags: t.tags(gw),
		Properties: &armcdn.AFDEndpointProperties{EnabledState: to.Ptr(armcdn.EnabledStateEnabled),
			AutoGeneratedDomainNameLabelScope: to.Ptr(armcdn.AutoGeneratedDomainNameLabelScopeTenantReuse)}}}

	certs, notes := certificatesByHost(gw, s)
	hosts, more := routesByHost(gw, s.ListenerCertificates, certs)
	g.notes = append(notes, more...)
	rp := &routePlanner{g: &g, pid: pid, settings: s, origins: origins, domainIDs: planDomains(&g, pid, hosts, certs),
		groupIDs: map[string]string{}, taken: map[string]string{}}
	for _, h := range hosts {
		rp.host(h)
	}
	if s.WAFPolicyID != "" {
		g.security = wafPolicy(g, pid, s.WAFPolicyID)
	}
	return g
}

// customerCert is the Key Vault secret a hostname's custom domain
// presents, and the HTTPS listener that names it.
type customerCert struct {
	ref, listener string
}

// servable says why Front Door does not serve listener l ("" when it
// does).
func servable(l edgev1.Listener) string {
	if l.Port != 80 && l.Port != 443 {
		return fmt.Sprintf("listener %s on port %d is not served: Front Door serves HTTP on 80 and HTTPS on 443 only", l.Name, l.Port)
	}
	if (l.Port == 80) != (l.Protocol == edgev1.ProtocolHTTP) {
		return fmt.Sprintf("listener %s is not served: Front Door serves %s on port %d only as %s", l.Name, l.Protocol, l.Port, map[int32]string{80: "HTTP", 443: "HTTPS"}[l.Port])
	}
	return ""
}

// certificatesByHost are the customer certificates of gw's hostnames:
// those of the HTTPS listeners named in
// keys.AnnotationAzureListenerCertificates, for each hostname they
// serve (a listener whose hostname is the vhost's first, then in
// listener order). A malformed reference leaves its listener unserved
// (refusedCertificate), and a name that is no HTTPS listener
// of gw is noted; both notes name the listener, the annotation and the
// value.
func certificatesByHost(gw edgev1.Gateway, s annotations.Settings) (map[string]customerCert, []string) {
	var notes []string
	certs := map[string]customerCert{}
	https := map[string]bool{}
	for _, exact := range []bool{true, false} {
		for _, l := range gw.Listeners {
			ref, ok := s.ListenerCertificates[l.Name]
			if !ok || l.Protocol != edgev1.ProtocolHTTPS || servable(l) != "" {
				continue
			}
			https[l.Name] = true
			if err := annotations.KeyVaultSecret(ref); err != nil {
				if exact {
					notes = append(notes, fmt.Sprintf("listener %s is not served: annotation %s, listener %s: value %q: %v",
						l.Name, keys.AnnotationAzureListenerCertificates, l.Name, ref, err))
				}
				continue
			}
			for _, vh := range l.VirtualHosts {
				if _, taken := certs[vh.Hostname]; !taken && (vh.Hostname == l.Hostname) == exact {
					certs[vh.Hostname] = customerCert{ref: ref, listener: l.Name}
				}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.ListenerCertificates)) {
		if !https[name] {
			notes = append(notes, fmt.Sprintf("annotation %s, listener %s: value %q is not used: the Gateway has no HTTPS listener %s on port 443",
				keys.AnnotationAzureListenerCertificates, name, s.ListenerCertificates[name], name))
		}
	}
	return certs, notes
}

// refusedCertificate says whether listener l is not served for its
// malformed customer certificate reference in refs.
func refusedCertificate(l edgev1.Listener, refs map[string]string) bool {
	ref, ok := refs[l.Name]
	return ok && l.Protocol == edgev1.ProtocolHTTPS && annotations.KeyVaultSecret(ref) != nil
}

// wildcardNote says why wildcard hostname h of listener l is not served:
// it has no customer certificate, and what to do.
func wildcardNote(h string, l edgev1.Listener) string {
	secret := ""
	if len(l.Certificates) > 0 {
		c := l.Certificates[0]
		secret = fmt.Sprintf(", and the listener's TLS Secret %s/%s cannot be used: Front Door takes certificates from Key Vault only, and fleetnet does not upload Secrets there. Import the Secret's certificate and key into a Key Vault (az keyvault certificate import)", c.Namespace, c.Name)
	} else {
		secret = ". Import the certificate and key into a Key Vault (az keyvault certificate import)"
	}
	return fmt.Sprintf("hostname %s of listener %s is not served: a wildcard custom domain needs a customer certificate (Front Door's managed certificates do not cover wildcard domains)%s and name it in annotation %s: %s=/subscriptions/{id}/resourceGroups/{group}/providers/Microsoft.KeyVault/vaults/{vault}/secrets/{name}",
		h, l.Name, secret, keys.AnnotationAzureListenerCertificates, httpsListenerFor(l))
}

// httpsListenerFor names the listener a wildcard's certificate goes on:
// l itself when HTTPS, else a placeholder.
func httpsListenerFor(l edgev1.Listener) string {
	if l.Protocol == edgev1.ProtocolHTTPS {
		return l.Name
	}
	return "<HTTPS listener>"
}

// routesByHost are gw's routes by hostname (sorted), each in the model's
// precedence order and with the protocols of the listeners that serve
// it; notes say which listeners and hostnames Front Door does not serve.
// certs are the hostnames' customer certificates (certificatesByHost):
// a wildcard hostname is served only with one.
func routesByHost(gw edgev1.Gateway, refs map[string]string, certs map[string]customerCert) (hosts []hostRoutes, notes []string) {
	var order []string
	byHost := map[string][]*vhostRoute{}
	index := map[string]*vhostRoute{}
	for _, l := range gw.Listeners {
		if n := servable(l); n != "" {
			notes = append(notes, n)
			continue
		}
		if refusedCertificate(l, refs) {
			continue // noted by certificatesByHost
		}
		for _, vh := range l.VirtualHosts {
			if _, ok := certs[vh.Hostname]; strings.HasPrefix(vh.Hostname, "*.") && !ok {
				notes = append(notes, wildcardNote(vh.Hostname, l))
				continue
			}
			if _, ok := byHost[vh.Hostname]; !ok {
				order = append(order, vh.Hostname)
				byHost[vh.Hostname] = nil
			}
			for _, r := range vh.Routes {
				k := fmt.Sprintf("%s\x00%s/%s\x00%d\x00%d", vh.Hostname, r.RouteNamespace, r.RouteName, r.Rule, r.Match)
				if v := index[k]; v != nil {
					v.protocols[l.Protocol] = true
					continue
				}
				v := &vhostRoute{host: vh.Hostname, r: r, protocols: map[string]bool{l.Protocol: true}}
				index[k] = v
				byHost[vh.Hostname] = append(byHost[vh.Hostname], v)
			}
		}
	}
	slices.Sort(order)
	for _, h := range order {
		hosts = append(hosts, hostRoutes{host: h, routes: byHost[h]})
	}
	return hosts, notes
}

// planDomains adds to g a custom domain for every concrete hostname of
// hosts (wildcards included), with an AFD-managed certificate or, for a
// hostname of certs, a customer certificate: a secret referencing the
// Key Vault secret (one per Key Vault secret, Front Door following its
// latest version). It returns the domains' ids by hostname.
func planDomains(g *graph, pid string, hosts []hostRoutes, certs map[string]customerCert) map[string]string {
	ids := map[string]string{}
	secrets := map[string]string{} // secret ids by Key Vault secret (lower-case)
	for _, hr := range hosts {
		h := hr.host
		if h == "*" || h == "" {
			continue
		}
		tls := &armcdn.AFDDomainHTTPSParameters{CertificateType: to.Ptr(armcdn.AfdCertificateTypeManagedCertificate),
			MinimumTLSVersion: to.Ptr(armcdn.AfdMinimumTLSVersionTLS12)}
		if c, ok := certs[h]; ok {
			k := strings.ToLower(c.ref)
			if _, ok := secrets[k]; !ok {
				kvName := c.ref[strings.LastIndex(c.ref, "/")+1:]
				sc := named[armcdn.Secret]{name: childName(kvName, k), label: fmt.Sprintf("Key Vault secret %s of listener %s", kvName, c.listener),
					v: armcdn.Secret{Properties: &armcdn.SecretProperties{Parameters: &armcdn.CustomerCertificateParameters{
						Type: to.Ptr(armcdn.SecretTypeCustomerCertificate), SecretSource: &armcdn.ResourceReference{ID: to.Ptr(c.ref)},
						UseLatestVersion: to.Ptr(true)}}}}
				g.secrets = append(g.secrets, sc)
				secrets[k] = pid + "/secrets/" + sc.name
			}
			tls.CertificateType = to.Ptr(armcdn.AfdCertificateTypeCustomerCertificate)
			tls.Secret = &armcdn.ResourceReference{ID: to.Ptr(secrets[k])}
		}
		d := named[armcdn.AFDDomain]{name: childName(strings.ReplaceAll(strings.Replace(h, "*", "wildcard", 1), ".", "-"), h), label: h, v: armcdn.AFDDomain{Properties: &armcdn.AFDDomainProperties{
			HostName: to.Ptr(h), TLSSettings: tls}}}
		g.domains = append(g.domains, d)
		ids[h] = pid + "/customDomains/" + d.name
	}
	return ids
}

// routePlanner plans a Gateway's routes host by host into g: each route
// match becomes a Front Door route, or a Refusal saying why it cannot.
type routePlanner struct {
	g        *graph
	pid      string // the profile's id
	settings annotations.Settings
	origins  map[string]Origin
	// domainIDs are the custom domains' ids by hostname.
	domainIDs map[string]string
	// groupIDs are the origin groups' ids by backend set (backendKey):
	// routes with the same backends share one.
	groupIDs map[string]string
	// taken are the Front Door routes' names by domain and pattern: the
	// first route (of highest precedence) to claim them serves them.
	taken map[string]string
}

// host plans the routes of one hostname. A pure redirect to https of
// every path of the host (the usual HTTP listener rule) becomes the
// host's routes' HTTPS redirect.
func (rp *routePlanner) host(hr hostRoutes) {
	httpsRedirect := slices.ContainsFunc(hr.routes, func(v *vhostRoute) bool { return isHTTPSRedirectAll(v.r) })
	for _, v := range hr.routes {
		r := v.r
		if httpsRedirect && isHTTPSRedirectAll(r) {
			continue
		}
		if reason := rp.route(hr.host, v, httpsRedirect); reason != "" {
			rp.g.refused = append(rp.g.refused, Refusal{RouteNamespace: r.RouteNamespace, RouteName: r.RouteName, Rule: r.Rule, Match: r.Match, Reason: reason})
		}
	}
}

// route plans v's Front Door route on host h, with its origin group and
// rule set, or returns why Front Door cannot serve it.
func (rp *routePlanner) route(h string, v *vhostRoute, httpsRedirect bool) (refusal string) {
	r := v.r
	if reason := inexpressible(r); reason != "" {
		return reason
	}
	free, shadow := rp.freePatterns(h, patternsOf(r.Path))
	if len(free) == 0 {
		return fmt.Sprintf("its path %s on %s is already served by Front Door route %s of higher precedence (Front Door matches paths only)", r.Path.Value, hostLabel(h), shadow)
	}
	// Rules for the route's filters.
	rules, reason := rulesFor(r)
	if reason != "" {
		return reason
	}
	ogID, reason := rp.originGroup(r)
	if reason != "" {
		return reason
	}
	rname := childName(r.RouteName, h, r.RouteNamespace, r.RouteName, fmt.Sprint(r.Rule), fmt.Sprint(r.Match))
	for _, p := range free {
		rp.taken[h+"\x00"+p] = rname
	}
	route := rp.afdRoute(h, v, free, ogID, httpsRedirect)
	if len(rules) > 0 {
		route.Properties.RuleSets = []*armcdn.ResourceReference{{ID: to.Ptr(rp.ruleSet(rname, rules))}}
	}
	rp.g.routes = append(rp.g.routes, named[armcdn.Route]{name: rname, label: fmt.Sprintf("%s/%s rule %d on %s", r.RouteNamespace, r.RouteName, r.Rule, hostLabel(h)), v: route})
	return ""
}

// freePatterns are those of patterns no route serves yet on domain h;
// shadow names a route that serves one of the others.
func (rp *routePlanner) freePatterns(h string, patterns []string) (free []string, shadow string) {
	for _, p := range patterns {
		if other, ok := rp.taken[h+"\x00"+p]; ok {
			shadow = other
			continue
		}
		free = append(free, p)
	}
	return free, shadow
}

// originGroup is the id of the origin group of r's backends, planned for
// the first route with those backends, or why there is none.
func (rp *routePlanner) originGroup(r edgev1.Route) (id, refusal string) {
	bkey, valid := backendKey(r.Backends)
	if len(r.Backends) > 0 && len(valid) == 0 {
		return "", "none of its backends resolves to a cluster with endpoints: Front Door cannot answer 500 or 503 itself"
	}
	if len(valid) == 0 {
		// A redirect without backends: Front Door's route still needs an
		// origin group; any of the Gateway's does, as the redirect
		// answers before forwarding.
		for _, gid := range rp.groupIDs {
			if id == "" || gid < id {
				id = gid
			}
		}
		if id == "" {
			return "", "a redirect without backends needs another route of the Gateway with an origin: a Front Door route always names an origin group"
		}
		return id, ""
	}
	if id, ok := rp.groupIDs[bkey]; ok {
		return id, ""
	}
	og := planGroup(valid, rp.settings, rp.origins, rp.g)
	if len(og.origins) == 0 {
		return "", "no cluster of its backends has a Front Door origin: " + strings.Join(originProblems(valid, rp.settings, rp.origins), "; ")
	}
	rp.g.groups = append(rp.g.groups, og)
	id = rp.pid + "/originGroups/" + og.name
	rp.groupIDs[bkey] = id
	return id, ""
}

// afdRoute is the Front Door route of v on host h: its patterns, origin
// group, protocols (HTTP redirected to HTTPS when httpsRedirect) and
// domain (h's custom domain, or the endpoint's own).
func (rp *routePlanner) afdRoute(h string, v *vhostRoute, patterns []string, ogID string, httpsRedirect bool) armcdn.Route {
	route := armcdn.Route{Properties: &armcdn.RouteProperties{
		OriginGroup:         &armcdn.ResourceReference{ID: to.Ptr(ogID)},
		PatternsToMatch:     toPtrs(patterns),
		ForwardingProtocol:  to.Ptr(forwarding(v.r)),
		HTTPSRedirect:       to.Ptr(armcdn.HTTPSRedirectDisabled),
		LinkToDefaultDomain: to.Ptr(armcdn.LinkToDefaultDomainDisabled),
		EnabledState:        to.Ptr(armcdn.EnabledStateEnabled),
	}}
	protos := []*armcdn.AFDEndpointProtocols{}
	if v.protocols[edgev1.ProtocolHTTP] || httpsRedirect {
		protos = append(protos, to.Ptr(armcdn.AFDEndpointProtocolsHTTP))
	}
	if v.protocols[edgev1.ProtocolHTTPS] {
		protos = append(protos, to.Ptr(armcdn.AFDEndpointProtocolsHTTPS))
	}
	route.Properties.SupportedProtocols = protos
	if httpsRedirect && v.protocols[edgev1.ProtocolHTTPS] {
		route.Properties.HTTPSRedirect = to.Ptr(armcdn.HTTPSRedirectEnabled)
	}
	if id, ok := rp.domainIDs[h]; ok {
		route.Properties.CustomDomains = []*armcdn.ActivatedResourceReference{{ID: to.Ptr(id)}}
	} else {
		route.Properties.LinkToDefaultDomain = to.Ptr(armcdn.LinkToDefaultDomainEnabled)
	}
	return route
}

// ruleSet adds to g the rule set of route rname (its rules in order) and
// returns its id.
func (rp *routePlanner) ruleSet(rname string, rules []armcdn.Rule) string {
	rs := ruleSet{name: rulePrefix + shortHash("rules", rname)}
	for i, rule := range rules {
		rule.Properties.Order = to.Ptr(int32(i + 1))
		rs.rules = append(rs.rules, named[armcdn.Rule]{name: fmt.Sprintf("%sr%d", rulePrefix, i+1), label: rname, v: rule})
	}
	rp.g.ruleSets = append(rp.g.ruleSets, rs)
	return rp.pid + "/ruleSets/" + rs.name
}

// wafPolicy is the security policy applying the WAF policy waf to every
// custom domain of g and its endpoint's domain.
func wafPolicy(g graph, pid, waf string) *named[armcdn.SecurityPolicy] {
	var doms []*armcdn.ActivatedResourceReference
	for _, d := range g.domains {
		doms = append(doms, &armcdn.ActivatedResourceReference{ID: to.Ptr(pid + "/customDomains/" + d.name)})
	}
	doms = append(doms, &armcdn.ActivatedResourceReference{ID: to.Ptr(pid + "/afdEndpoints/" + g.endpoint.name)})
	return &named[armcdn.SecurityPolicy]{name: namePrefix + "waf", label: "WAF policy", v: armcdn.SecurityPolicy{Properties: &armcdn.SecurityPolicyProperties{
		Parameters: &armcdn.SecurityPolicyWebApplicationFirewallParameters{Type: to.Ptr(armcdn.SecurityPolicyTypeWebApplicationFirewall),
			WafPolicy:    &armcdn.ResourceReference{ID: to.Ptr(waf)},
			Associations: []*armcdn.SecurityPolicyWebApplicationFirewallAssociation{{Domains: doms, PatternsToMatch: []*string{to.Ptr("/*")}}}}}}}
}

func hostLabel(h string) string {
	if h == "*" || h == "" {
		return "the endpoint's domain"
	}
	return h
}

func toPtrs(ss []string) []*string {
	out := make([]*string, len(ss))
	for i := range ss {
		out[i] = to.Ptr(ss[i])
	}
	return out
}

// patternsOf is the Front Door patterns of a path match: an exact path as
// itself, a prefix as itself and everything below it.
func patternsOf(p edgev1.PathMatch) []string {
	if p.Type == edgev1.PathExact {
		return []string{p.Value}
	}
	v := strings.TrimSuffix(p.Value, "/")
	if v == "" {
		return []string{"/*"}
	}
	return []string{v, v + "/*"}
}

func isHTTPSRedirectAll(r edgev1.Route) bool {
	if len(r.Filters) != 1 || r.Filters[0].Type != edgev1.FilterRequestRedirect || len(r.Backends) > 0 {
		return false
	}
	rd := r.Filters[0].RequestRedirect
	return rd.Scheme == "https" && rd.Hostname == "" && (rd.Port == 0 || rd.Port == 443) && rd.Path == nil &&
		r.Path.Type == edgev1.PathPrefix && r.Path.Value == "/" && len(r.Headers)+len(r.QueryParams) == 0 && r.Method == ""
}

// inexpressible names the first feature of r that Front Door cannot
// express, "" when it can.
func inexpressible(r edgev1.Route) string {
	switch {
	case len(r.Headers) > 0:
		return fmt.Sprintf("header matches (%s) are not expressible: a Front Door route matches paths only", r.Headers[0].Name)
	case len(r.QueryParams) > 0:
		return fmt.Sprintf("query parameter matches (%s) are not expressible: a Front Door route matches paths only", r.QueryParams[0].Name)
	case r.Method != "":
		return fmt.Sprintf("the method match %s is not expressible: a Front Door route matches paths only", r.Method)
	case r.DirectResponse != nil:
		return fmt.Sprintf("a direct response (%d, %s) is not expressible: Front Door forwards or redirects", r.DirectResponse.Status, r.DirectResponse.Reason)
	case r.Timeouts.RequestMillis > 0 || r.Timeouts.BackendRequestMillis > 0:
		return "timeouts are not expressible per route: Front Door has one origin response timeout per profile"
	}
	for _, b := range r.Backends {
		if len(b.Filters) > 0 {
			return fmt.Sprintf("filters of backendRef %s/%s are not expressible: Front Door's rules apply per route", b.Namespace, b.Name)
		}
	}
	return ""
}

// rulesFor turns r's filters into rule set rules (no conditions: the rule
// set is the route's own), or names the filter it cannot express.
func rulesFor(r edgev1.Route) ([]armcdn.Rule, string) {
	var actions []armcdn.DeliveryRuleActionAutoGeneratedClassification
	header := func(name armcdn.DeliveryRuleAction, hm *edgev1.HeaderModifier) {
		add := func(action armcdn.HeaderAction, h, v string) {
			p := &armcdn.HeaderActionParameters{TypeName: to.Ptr(armcdn.HeaderActionParametersTypeNameDeliveryRuleHeaderActionParameters),
				HeaderAction: to.Ptr(action), HeaderName: to.Ptr(h)}
			if action != armcdn.HeaderActionDelete {
				p.Value = to.Ptr(v)
			}
			if name == armcdn.DeliveryRuleActionModifyRequestHeader {
				actions = append(actions, &armcdn.DeliveryRuleRequestHeaderAction{Name: to.Ptr(name), Parameters: p})
			} else {
				actions = append(actions, &armcdn.DeliveryRuleResponseHeaderAction{Name: to.Ptr(name), Parameters: p})
			}
		}
		for _, h := range hm.Set {
			add(armcdn.HeaderActionOverwrite, h.Name, h.Value)
		}
		for _, h := range hm.Add {
			add(armcdn.HeaderActionAppend, h.Name, h.Value)
		}
		for _, h := range hm.Remove {
			add(armcdn.HeaderActionDelete, h, "")
		}
	}
	for _, f := range r.Filters {
		switch f.Type {
		case edgev1.FilterRequestHeaderModifier:
			header(armcdn.DeliveryRuleActionModifyRequestHeader, f.RequestHeaderModifier)
		case edgev1.FilterResponseHeaderModifier:
			header(armcdn.DeliveryRuleActionModifyResponseHeader, f.ResponseHeaderModifier)
		case edgev1.FilterRequestRedirect:
			rd := f.RequestRedirect
			if rd.Port != 0 && !(rd.Port == 443 && rd.Scheme == "https") && !(rd.Port == 80 && rd.Scheme == "http") {
				return nil, fmt.Sprintf("a redirect to port %d is not expressible: Front Door redirects to its own ports 80 and 443", rd.Port)
			}
			if rd.Path != nil && rd.Path.Type == edgev1.PathReplacePrefix {
				return nil, "a redirect replacing the path prefix is not expressible: Front Door's redirect sets the whole path"
			}
			p := &armcdn.URLRedirectActionParameters{TypeName: to.Ptr(armcdn.URLRedirectActionParametersTypeNameDeliveryRuleURLRedirectActionParameters),
				RedirectType: to.Ptr(redirectType(rd.StatusCode)), DestinationProtocol: to.Ptr(armcdn.DestinationProtocolMatchRequest)}
			switch rd.Scheme {
			case "https":
				p.DestinationProtocol = to.Ptr(armcdn.DestinationProtocolHTTPS)
			case "http":
				p.DestinationProtocol = to.Ptr(armcdn.DestinationProtocolHTTP)
			}
			if rd.Hostname != "" {
				p.CustomHostname = to.Ptr(rd.Hostname)
			}
			if rd.Path != nil {
				p.CustomPath = to.Ptr(rd.Path.Value)
			}
			actions = append(actions, &armcdn.URLRedirectAction{Name: to.Ptr(armcdn.DeliveryRuleActionURLRedirect), Parameters: p})
		case edgev1.FilterURLRewrite:
			rw := f.URLRewrite
			if rw.Hostname != "" {
				return nil, fmt.Sprintf("a hostname rewrite (%s) is not expressible per route: Front Door sets the origin host header per origin (use %s)", rw.Hostname, keys.AnnotationAzureOriginHostHeader)
			}
			if rw.Path == nil {
				continue
			}
			source := r.Path.Value
			p := &armcdn.URLRewriteActionParameters{TypeName: to.Ptr(armcdn.URLRewriteActionParametersTypeNameDeliveryRuleURLRewriteActionParameters),
				SourcePattern: to.Ptr(source), Destination: to.Ptr(rw.Path.Value), PreserveUnmatchedPath: to.Ptr(rw.Path.Type == edgev1.PathReplacePrefix)}
			actions = append(actions, &armcdn.URLRewriteAction{Name: to.Ptr(armcdn.DeliveryRuleActionURLRewrite), Parameters: p})
		default:
			return nil, fmt.Sprintf("the filter %s is not expressible in Front Door", f.Type)
		}
	}
	if len(actions) == 0 {
		return nil, ""
	}
	// Front Door allows at most five actions per rule.
	var rules []armcdn.Rule
	for len(actions) > 0 {
		n := min(5, len(actions))
		rules = append(rules, armcdn.Rule{Properties: &armcdn.RuleProperties{Actions: actions[:n],
			Conditions: []armcdn.DeliveryRuleConditionClassification{}, MatchProcessingBehavior: to.Ptr(armcdn.MatchProcessingBehaviorContinue)}})
		actions = actions[n:]
	}
	return rules, ""
}

func redirectType(code int) armcdn.RedirectType {
	switch code {
	case 301:
		return armcdn.RedirectTypeMoved
	case 307:
		return armcdn.RedirectTypeTemporaryRedirect
	case 308:
		return armcdn.RedirectTypePermanentRedirect
	}
	return armcdn.RedirectTypeFound
}

func forwarding(r edgev1.Route) armcdn.ForwardingProtocol {
	for _, b := range r.Backends {
		if b.AppProtocol == "https" {
			return armcdn.ForwardingProtocolHTTPSOnly
		}
	}
	return armcdn.ForwardingProtocolHTTPOnly
}

// backendKey identifies a route's valid backends (those with clusters),
// and returns them.
func backendKey(bs []edgev1.Backend) (string, []edgev1.Backend) {
	var valid []edgev1.Backend
	var parts []string
	for _, b := range bs {
		if b.Invalid != nil || len(b.Clusters) == 0 {
			continue
		}
		valid = append(valid, b)
		parts = append(parts, fmt.Sprintf("%s/%s/%s/%d/%d", b.Kind, b.Namespace, b.Name, b.Port, b.Weight))
	}
	return strings.Join(parts, ","), valid
}

func originProblems(bs []edgev1.Backend, s annotations.Settings, origins map[string]Origin) []string {
	var out []string
	for _, b := range bs {
		for _, c := range b.Clusters {
			if ref := originRef(c, s); ref == "" {
				what := "regional load balancer frontend"
				if s.Connectivity == annotations.ConnectivityPrivateLink {
					what = "Private Link Service or internal load balancer frontend"
				}
				out = append(out, fmt.Sprintf("cluster %s publishes no %s for %s/%s", c.Cluster, what, b.Namespace, b.Name))
			} else if o := origins[ref]; o.Problem != "" {
				out = append(out, fmt.Sprintf("cluster %s: %s", c.Cluster, o.Problem))
			}
		}
	}
	return out
}

// planGroup is the origin group of a route's valid backends: an origin
// per backend and cluster, weighted by the backendRef's weight times the
// cluster's fleetnet.dev/weight (scaled into Front Door's 1 to 1000), and
// disabled for a cluster of weight 0 or a backend of weight 0 (a Front
// Door origin weighs at least 1). Front Door cannot weigh by endpoints:
// each cluster's load balancer spreads over its own.
func planGroup(bs []edgev1.Backend, s annotations.Settings, origins map[string]Origin, g *graph) originGroup {
	var names []string
	for _, b := range bs {
		names = append(names, fmt.Sprintf("%s/%s:%d", b.Namespace, b.Name, b.Port))
	}
	key, _ := backendKey(bs)
	label := strings.Join(names, "+")
	first := bs[0]
	og := originGroup{named: named[armcdn.AFDOriginGroup]{name: childName(first.Name, key), label: label}}
	probeProtocol, probePath := armcdn.ProbeProtocol(s.ProbeProtocol), s.ProbePath
	if probePath == "/" && first.Policy.HealthCheck.Type == edgev1.HealthCheckHTTP && first.Policy.HealthCheck.Path != "" {
		probePath = first.Policy.HealthCheck.Path // the backend's own check, unless annotated
	}
	og.v = armcdn.AFDOriginGroup{Properties: &armcdn.AFDOriginGroupProperties{
		HealthProbeSettings: &armcdn.HealthProbeParameters{ProbePath: to.Ptr(probePath), ProbeProtocol: to.Ptr(probeProtocol),
			ProbeRequestType: to.Ptr(armcdn.HealthProbeRequestType(s.ProbeMethod)), ProbeIntervalInSeconds: to.Ptr(s.ProbeIntervalSecs)},
		LoadBalancingSettings: &armcdn.LoadBalancingSettingsParameters{SampleSize: to.Ptr(s.SampleSize),
			SuccessfulSamplesRequired: to.Ptr(s.SuccessfulSamples), AdditionalLatencyInMilliseconds: to.Ptr[int32](50)},
		SessionAffinityState: to.Ptr(armcdn.EnabledStateDisabled),
	}}
	type raw struct {
		b      edgev1.Backend
		c      edgev1.ClusterEndpoints
		o      Origin
		weight int64
	}
	var rs []raw
	maxW := int64(0)
	for _, b := range bs {
		for _, c := range b.Clusters {
			ref := originRef(c, s)
			o, ok := origins[ref]
			if ref == "" || !ok || o.Problem != "" || o.Host == "" {
				continue
			}
			w := int64(b.Weight) * int64(c.Weight)
			maxW = max(maxW, w)
			rs = append(rs, raw{b: b, c: c, o: o, weight: w})
		}
	}
	g.notes = append(g.notes, originProblems(bs, s, origins)...)
	for _, r := range rs {
		w := r.weight
		if maxW > 1000 {
			w = max(1, (w*1000+maxW/2)/maxW)
		}
		enabled := armcdn.EnabledStateEnabled
		if r.weight == 0 {
			enabled, w = armcdn.EnabledStateDisabled, 1
		}
		port := r.b.Port
		if port == 0 {
			port = 80
		}
		// The backend's port carries its protocol (https by appProtocol);
		// the other port keeps Front Door's default.
		httpPort, httpsPort := port, int32(443)
		if r.b.AppProtocol == "https" {
			httpPort, httpsPort = 80, port
		}
		o := armcdn.AFDOrigin{Properties: &armcdn.AFDOriginProperties{
			HostName: to.Ptr(r.o.Host), HTTPPort: to.Ptr(httpPort), HTTPSPort: to.Ptr(httpsPort),
			Priority: to.Ptr[int32](1), Weight: to.Ptr(int32(w)), EnabledState: to.Ptr(enabled),
			EnforceCertificateNameCheck: to.Ptr(true),
		}}
		if s.OriginHostHeader != "" {
			o.Properties.OriginHostHeader = to.Ptr(s.OriginHostHeader)
		}
		if r.o.PrivateLink != "" {
			o.Properties.SharedPrivateLinkResource = &armcdn.SharedPrivateLinkResourceProperties{
				PrivateLink: &armcdn.ResourceReference{ID: to.Ptr(r.o.PrivateLink)}, PrivateLinkLocation: to.Ptr(r.o.PrivateLinkLocation),
				// The profile's name is unique per fleet (owner) and
				// Gateway: another fleet's Gateway of the same name on the
				// same service sends another message, which fleetnet does
				// not approve (frontDoorConnections).
				RequestMessage: to.Ptr("fleetnet " + g.key + " " + g.profileName)}
			// The export's consent covers the PLS it published, not one
			// found by its frontend instead.
			if r.c.PrivateLinkAutoApproval && strings.EqualFold(r.o.PrivateLink, r.c.PrivateLinkService) {
				pls := strings.ToLower(r.o.PrivateLink)
				if g.autoApproved == nil {
					g.autoApproved = map[string]map[string]bool{}
				}
				if g.autoApproved[pls] == nil {
					g.autoApproved[pls] = map[string]bool{}
				}
				g.autoApproved[pls][r.b.Namespace+"/"+r.b.Name] = true
			}
		}
		og.origins = append(og.origins, named[armcdn.AFDOrigin]{name: childName(r.c.Cluster, r.b.Namespace, r.b.Name, fmt.Sprint(r.b.Port), r.c.Cluster),
			label: fmt.Sprintf("cluster %s for %s/%s", r.c.Cluster, r.b.Namespace, r.b.Name), v: o})
	}
	return og
}
