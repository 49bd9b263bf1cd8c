package armsim

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strings"
	"sync"
)

// Edge is Front Door's data plane as the simulation models it: an HTTP
// handler that serves requests for the host names of the simulated
// endpoints (and custom domains) by the simulated routes, WAF policies
// and origins, forwarding to the origins over real connections (Dial).
// It reads the simulation's state on every request, so that what was
// deleted through ARM stops serving at once. Every behaviour names its
// source; what the sources do not say is marked "Undocumented:" and
// code under test must not depend on it.
//
// Sources:
//
//	[AFD-MATCH]   How requests get matched to a route configuration,
//	              https://learn.microsoft.com/azure/frontdoor/front-door-route-matching
//	[AFD-HEADERS] Protocol support for HTTP headers in Azure Front Door,
//	              https://learn.microsoft.com/azure/frontdoor/front-door-http-headers-protocol
//	[WAF-CUSTOM]  Custom rules for Azure Web Application Firewall on Azure Front Door,
//	              https://learn.microsoft.com/azure/web-application-firewall/afds/waf-front-door-custom-rules
//	[WAF-POLICY]  Policy settings for Web Application Firewall in Azure Front Door,
//	              https://learn.microsoft.com/azure/web-application-firewall/afds/waf-front-door-policy-settings
//	[WAF-CODE]    Configure a custom response for Azure Web Application Firewall in Azure Front Door,
//	              https://learn.microsoft.com/azure/web-application-firewall/afds/waf-front-door-configure-custom-response-code
//	[CDN-SDK]     armcdn/v2 AFDOriginProperties.OriginHostHeader,
//	              https://pkg.go.dev/github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/cdn/armcdn/v2
//	[AFD-PL]      Secure your origin with Private Link in Azure Front Door Premium,
//	              https://learn.microsoft.com/azure/frontdoor/private-link
//
// Modelled:
//   - a request's host is looked up among the endpoints' hostName and the
//     custom domains' hostName; no exact match is a 404 [AFD-MATCH,
//     "Frontend host matching"];
//   - among the host's routes (a default-domain host: routes with
//     linkToDefaultDomain Enabled; a custom domain: routes that list it)
//     that are enabled and support the request's protocol, the exact
//     path pattern wins, then the longest wildcard (/x/*) one; none is a
//     404 [AFD-MATCH, "Path matching"];
//   - WAF: the security policies of the profile associated with the host's
//     domain and a matching pattern apply their WAF policy when it is
//     enabled: custom match rules in ascending priority, each a
//     conjunction of match conditions (match variable and selector,
//     operator, negation, transforms, any of the match values); the
//     first Allow, Block or Redirect stops the evaluation, Log goes on
//     [WAF-CUSTOM]; in Prevention mode Block answers 403 "The request is
//     blocked." or the policy's customBlockResponseStatusCode and body,
//     in Detection mode nothing is blocked [WAF-POLICY; WAF-CODE];
//   - origins: the route's origin group's enabled origins of the lowest
//     priority, spread by weight; a Private Link origin is reached only
//     once its connection on the Private Link Service is Approved
//     [AFD-PL, "How Private Link works"]; the request goes to the origin's
//     hostName at httpPort (forwardingProtocol HttpOnly or MatchRequest
//     over HTTP), with Host the originHostHeader, or else the request's
//     host [CDN-SDK], the route's originPath before the path, and Via,
//     X-Forwarded-For, X-Forwarded-Host, X-Forwarded-Proto, X-Azure-Ref
//     and X-Azure-FDID (the profile's frontDoorId) added [AFD-HEADERS].
//
// Undocumented, the simulation's choices: a route or endpoint serves
// once its deployment has Succeeded (Front Door says only that it
// deploys to its edge), also while reads report NotStarted
// (Sim.ReportNotStarted); paths are matched case-sensitively; an origin
// that cannot be reached, or no usable origin, is a 503; weights are
// spread round-robin, not by latency (additionalLatencyInMilliseconds);
// an origin group's health probes are not sent: every enabled origin is
// taken as healthy.
//
// Not modelled: HTTPS to the edge (the handler serves plain HTTP; a
// route that supports HTTPS only matches no request) and to origins,
// httpsRedirect, caching, rule sets (a route's rules are not applied),
// managed WAF rule sets, rate-limit rules, the RequestBody, PostArgs and
// Cookies match variables (a condition on them never matches), geo and
// IP matches.
type Edge struct {
	sim *Sim
	// Dial connects to an origin's address (hostName:port, as Front Door
	// would); tests map simulated public and private addresses to local
	// listeners. nil dials the address itself.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	once  sync.Once
	proxy *httputil.ReverseProxy
	mu    sync.Mutex
	turns map[string]int // per origin group, for the weighted round robin
	refs  int
}

// Edge is the simulation's Front Door data plane; see Edge.
func (s *Sim) Edge() *Edge { return &Edge{sim: s, turns: map[string]int{}} }

// edgeTarget is where one request goes.
type edgeTarget struct {
	addr, host, path, fdid string
	forwardedHost          string
}

type edgeCtxKey struct{}

func (e *Edge) init() {
	e.once.Do(func() {
		dial := e.Dial
		if dial == nil {
			dial = (&net.Dialer{}).DialContext
		}
		e.proxy = &httputil.ReverseProxy{
			Transport: &http.Transport{DialContext: dial, DisableCompression: true},
			Rewrite: func(pr *httputil.ProxyRequest) {
				t := pr.In.Context().Value(edgeCtxKey{}).(edgeTarget)
				pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.URL.Path, pr.Out.URL.RawPath = "http", t.addr, t.path, ""
				pr.Out.Host = t.host
				pr.SetXForwarded()
				pr.Out.Header.Set("X-Forwarded-Host", t.forwardedHost)
				pr.Out.Header.Set("Via", fmt.Sprintf("%d.%d Azure", pr.In.ProtoMajor, pr.In.ProtoMinor))
				pr.Out.Header.Set("X-Azure-FDID", t.fdid)
				pr.Out.Header.Set("X-Azure-Ref", fmt.Sprintf("armsim-%08d", e.nextRef()))
			},
			ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
				http.Error(w, "origin unreachable: "+err.Error(), http.StatusServiceUnavailable) // undocumented: the status
			},
		}
	})
}

func (e *Edge) nextRef() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.refs++
	return e.refs
}

func (e *Edge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.init()
	host := strings.ToLower(r.Host)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	d, status, msg := e.decide(host, r)
	switch {
	case status != 0:
		if d.blockBody != "" {
			w.WriteHeader(status)
			_, _ = w.Write([]byte(d.blockBody))
			return
		}
		http.Error(w, msg, status)
		return
	}
	ctx := context.WithValue(r.Context(), edgeCtxKey{}, d.target)
	e.proxy.ServeHTTP(w, r.WithContext(ctx))
}

// decision is what decide found: a target, or a status to answer.
type decision struct {
	target    edgeTarget
	blockBody string
}

// decide routes a request for host under the simulation's lock.
func (e *Edge) decide(host string, r *http.Request) (decision, int, string) {
	s := e.sim
	s.mu.Lock()
	defer s.mu.Unlock()
	v := &View{s}
	domain, endpoint, ok := findHost(v, host)
	if !ok {
		return decision{}, http.StatusNotFound, "no Front Door endpoint or custom domain serves " + host
	}
	route, ok := matchRoute(v, domain, endpoint, r.URL.Path, "Http")
	if !ok {
		return decision{}, http.StatusNotFound, "no route of " + host + " matches " + r.URL.Path
	}
	if status, body, blocked := applyWAF(v, domain, r); blocked {
		return decision{blockBody: body}, status, body
	}
	var rp edgeRoute
	_ = json.Unmarshal(route.JSON, &rp)
	origin, ok := e.pickOrigin(v, rp.Properties.OriginGroup.ID)
	if !ok {
		return decision{}, http.StatusServiceUnavailable, "no origin of the route's origin group can serve" // undocumented: the status
	}
	var profile edgeProfile
	if p, ok := v.Get(profileOf(route.ID)); ok {
		_ = json.Unmarshal(p.JSON, &profile)
	}
	op := origin.Properties
	port := int32(80)
	if op.HTTPPort != nil {
		port = *op.HTTPPort
	}
	t := edgeTarget{addr: net.JoinHostPort(op.HostName, fmt.Sprint(port)), host: op.OriginHostHeader,
		path: rp.Properties.OriginPath + r.URL.Path, fdid: profile.Properties.FrontDoorID, forwardedHost: r.Host}
	if t.host == "" {
		t.host = r.Host
	}
	return decision{target: t}, 0, ""
}

// Decoded parts of the resources the edge reads.
type (
	edgeRoute struct {
		Properties struct {
			CustomDomains []struct {
				ID string `json:"id"`
			} `json:"customDomains"`
			OriginGroup struct {
				ID string `json:"id"`
			} `json:"originGroup"`
			OriginPath          string   `json:"originPath"`
			PatternsToMatch     []string `json:"patternsToMatch"`
			SupportedProtocols  []string `json:"supportedProtocols"`
			LinkToDefaultDomain string   `json:"linkToDefaultDomain"`
			EnabledState        string   `json:"enabledState"`
			DeploymentStatus    string   `json:"deploymentStatus"`
		} `json:"properties"`
	}
	edgeOrigin struct {
		Properties struct {
			HostName         string `json:"hostName"`
			HTTPPort         *int32 `json:"httpPort"`
			OriginHostHeader string `json:"originHostHeader"`
			Priority         *int32 `json:"priority"`
			Weight           *int32 `json:"weight"`
			EnabledState     string `json:"enabledState"`
		} `json:"properties"`
	}
	edgeProfile struct {
		Properties struct {
			FrontDoorID string `json:"frontDoorId"`
		} `json:"properties"`
	}
	edgeHost struct {
		Properties struct {
			HostName         string `json:"hostName"`
			EnabledState     string `json:"enabledState"`
			DeploymentStatus string `json:"deploymentStatus"`
		} `json:"properties"`
	}
)

// findHost finds the endpoint (domain the endpoint itself) or custom
// domain whose hostName is host; endpoint is the default domain's.
func findHost(v *View, host string) (domain, endpoint Resource, ok bool) {
	v.Each(TypeAFDEndpoint, func(r Resource) {
		var h edgeHost
		_ = json.Unmarshal(r.JSON, &h)
		if !ok && strings.EqualFold(h.Properties.HostName, host) && h.Properties.EnabledState != "Disabled" && v.s.deploymentOf(r, h.Properties.DeploymentStatus) == DeploySucceeded {
			domain, endpoint, ok = r, r, true
		}
	})
	if ok {
		return domain, endpoint, true
	}
	v.Each(TypeCustomDomain, func(r Resource) {
		var h edgeHost
		_ = json.Unmarshal(r.JSON, &h)
		if !ok && strings.EqualFold(h.Properties.HostName, host) && v.s.deploymentOf(r, h.Properties.DeploymentStatus) == DeploySucceeded {
			domain, ok = r, true
		}
	})
	return domain, Resource{}, ok
}

// matchRoute picks the route for path on domain [AFD-MATCH].
func matchRoute(v *View, domain, endpoint Resource, path, proto string) (Resource, bool) {
	var best Resource
	bestLen, found := -1, false
	v.Each(TypeRoute, func(r Resource) {
		if profileOf(r.ID).Key() != profileOf(domain.ID).Key() {
			return
		}
		var rt edgeRoute
		_ = json.Unmarshal(r.JSON, &rt)
		p := rt.Properties
		if p.EnabledState == "Disabled" || v.s.deploymentOf(r, p.DeploymentStatus) != DeploySucceeded || !slices.Contains(p.SupportedProtocols, proto) {
			return
		}
		serves := false
		if endpoint.JSON != nil {
			parent, _ := r.ID.Parent()
			serves = parent.Key() == endpoint.ID.Key() && p.LinkToDefaultDomain == "Enabled"
		} else {
			for _, d := range p.CustomDomains {
				serves = serves || strings.EqualFold(d.ID, domain.ID.String())
			}
		}
		if !serves {
			return
		}
		for _, pat := range p.PatternsToMatch {
			// An exact match outranks every wildcard one: give it a
			// length past any path.
			score := -1
			switch {
			case pat == path:
				score = 1 << 20
			case strings.HasSuffix(pat, "*") && strings.HasPrefix(path, strings.TrimSuffix(pat, "*")):
				score = len(pat)
			case strings.HasSuffix(pat, "/*") && path == strings.TrimSuffix(pat, "/*"):
				// Undocumented: /x/* taken to match /x too.
				score = len(pat) - 1
			}
			if score > bestLen {
				best, bestLen, found = r, score, true
			}
		}
	})
	return best, found
}

// pickOrigin chooses an origin of group groupID; s.mu held.
func (e *Edge) pickOrigin(v *View, groupID string) (edgeOrigin, bool) {
	gid, err := ParseID(groupID)
	if err != nil {
		return edgeOrigin{}, false
	}
	type cand struct {
		o      edgeOrigin
		weight int
	}
	var cands []cand
	best := int32(1 << 30)
	v.Each(TypeOrigin, func(r Resource) {
		if parent, _ := r.ID.Parent(); parent.Key() != gid.Key() {
			return
		}
		var o edgeOrigin
		_ = json.Unmarshal(r.JSON, &o)
		m, _ := decodeMap(r.JSON)
		spl, _ := props(m)["sharedPrivateLinkResource"].(map[string]any)
		if o.Properties.EnabledState == "Disabled" || o.Properties.HostName == "" {
			return
		}
		if spl != nil {
			k, ok := linkOf(v, r.ID, spl)
			if !ok || !strings.EqualFold(v.s.linkStatus(k), "Approved") {
				return // [AFD-PL]: traffic flows once the connection is approved
			}
		}
		prio := int32(1)
		if o.Properties.Priority != nil {
			prio = *o.Properties.Priority
		}
		w := 1
		if o.Properties.Weight != nil {
			w = int(*o.Properties.Weight)
		}
		switch {
		case prio < best:
			best, cands = prio, []cand{{o, w}}
		case prio == best:
			cands = append(cands, cand{o, w})
		}
	})
	if len(cands) == 0 {
		return edgeOrigin{}, false
	}
	total := 0
	for _, c := range cands {
		total += c.weight
	}
	e.mu.Lock()
	turn := e.turns[gid.Key()] % total
	e.turns[gid.Key()]++
	e.mu.Unlock()
	for _, c := range cands {
		if turn < c.weight {
			return c.o, true
		}
		turn -= c.weight
	}
	return cands[0].o, true
}

// wafPolicy is the part of a Front Door WAF policy the edge applies.
type wafPolicy struct {
	Properties struct {
		PolicySettings struct {
			EnabledState                  string `json:"enabledState"`
			Mode                          string `json:"mode"`
			CustomBlockResponseStatusCode *int   `json:"customBlockResponseStatusCode"`
			CustomBlockResponseBody       string `json:"customBlockResponseBody"`
		} `json:"policySettings"`
		CustomRules struct {
			Rules []wafRule `json:"rules"`
		} `json:"customRules"`
	} `json:"properties"`
}

type wafRule struct {
	Name            string         `json:"name"`
	Priority        int            `json:"priority"`
	EnabledState    string         `json:"enabledState"`
	RuleType        string         `json:"ruleType"`
	Action          string         `json:"action"`
	MatchConditions []wafCondition `json:"matchConditions"`
}

type wafCondition struct {
	MatchVariable   string   `json:"matchVariable"`
	Selector        string   `json:"selector"`
	Operator        string   `json:"operator"`
	NegateCondition bool     `json:"negateCondition"`
	MatchValue      []string `json:"matchValue"`
	Transforms      []string `json:"transforms"`
}

// applyWAF applies the WAF policies of the security policies covering
// domain and the request's path; blocked says whether one blocked it,
// with the status and body to answer [WAF-CUSTOM; WAF-POLICY; WAF-CODE].
func applyWAF(v *View, domain Resource, r *http.Request) (status int, body string, blocked bool) {
	var policies []ID
	v.Each(TypeSecurityPolicy, func(sp Resource) {
		if profileOf(sp.ID).Key() != profileOf(domain.ID).Key() {
			return
		}
		var p afdProps
		_ = json.Unmarshal(sp.JSON, &p)
		if p.Properties.Parameters == nil || p.Properties.Parameters.WafPolicy == nil {
			return
		}
		for _, a := range p.Properties.Parameters.Associations {
			covers := false
			for _, d := range a.Domains {
				covers = covers || strings.EqualFold(d.ID, domain.ID.String())
			}
			for _, pat := range a.PatternsToMatch {
				if covers && (pat == r.URL.Path || (strings.HasSuffix(pat, "*") && strings.HasPrefix(r.URL.Path, strings.TrimSuffix(pat, "*")))) {
					if id, err := ParseID(p.Properties.Parameters.WafPolicy.ID); err == nil {
						policies = append(policies, id)
					}
					return
				}
			}
		}
	})
	for _, id := range policies {
		res, ok := v.Get(id)
		if !ok {
			continue
		}
		var wp wafPolicy
		_ = json.Unmarshal(res.JSON, &wp)
		ps := wp.Properties.PolicySettings
		if ps.EnabledState == "Disabled" {
			continue
		}
		rules := slices.Clone(wp.Properties.CustomRules.Rules)
		slices.SortStableFunc(rules, func(a, b wafRule) int { return a.Priority - b.Priority })
		for _, rule := range rules {
			if rule.EnabledState == "Disabled" || (rule.RuleType != "" && rule.RuleType != "MatchRule") || !ruleMatches(rule, r) {
				continue
			}
			switch rule.Action {
			case "Log":
				continue
			case "Block":
				if ps.Mode != "Prevention" {
					return 0, "", false // Detection logs only
				}
				status, body = http.StatusForbidden, "The request is blocked."
				if ps.CustomBlockResponseStatusCode != nil {
					status = *ps.CustomBlockResponseStatusCode
				}
				if ps.CustomBlockResponseBody != "" {
					if b, err := base64.StdEncoding.DecodeString(ps.CustomBlockResponseBody); err == nil {
						body = string(b)
					}
				}
				return status, body, true
			}
			return 0, "", false // Allow (and Redirect, not modelled) end the evaluation
		}
	}
	return 0, "", false
}

// ruleMatches: every condition holds [WAF-CUSTOM].
func ruleMatches(rule wafRule, r *http.Request) bool {
	for _, c := range rule.MatchConditions {
		if conditionHolds(c, r) == c.NegateCondition {
			return false
		}
	}
	return len(rule.MatchConditions) > 0
}

func conditionHolds(c wafCondition, r *http.Request) bool {
	var values []string
	switch c.MatchVariable {
	case "RequestHeader":
		values = r.Header.Values(c.Selector)
	case "RequestUri":
		values = []string{r.URL.RequestURI()}
	case "RequestMethod":
		values = []string{r.Method}
	case "QueryString":
		values = []string{r.URL.RawQuery}
	default:
		return false // not modelled
	}
	if c.Operator == "Any" {
		return true
	}
	for _, val := range values {
		for _, t := range c.Transforms {
			switch t {
			case "Lowercase":
				val = strings.ToLower(val)
			case "Uppercase":
				val = strings.ToUpper(val)
			case "Trim":
				val = strings.TrimSpace(val)
			}
		}
		for _, want := range c.MatchValue {
			var hit bool
			switch c.Operator {
			case "Equal":
				hit = val == want
			case "Contains":
				hit = strings.Contains(val, want)
			case "BeginsWith":
				hit = strings.HasPrefix(val, want)
			case "EndsWith":
				hit = strings.HasSuffix(val, want)
			}
			if hit {
				return true
			}
		}
	}
	return false
}
