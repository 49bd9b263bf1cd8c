package model

import (
	"cmp"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
)

// entry is a route with what its precedence needs beyond the model.
type entry struct {
	route   edgev1.Route
	created time.Time
}

// compareEntries orders routes by Gateway API match precedence
// (apis/v1/httproute_types.go, HTTPRouteRule.Matches): an Exact path, then
// the longest PathPrefix, then a method, then the most header matches, then
// the most query parameter matches; on ties the oldest HTTPRoute, then
// "namespace/name" alphabetically, then rule and match order in the route.
func compareEntries(x, y entry) int {
	a, b := &x.route, &y.route
	exact := func(r *edgev1.Route) int {
		if r.Path.Type == edgev1.PathExact {
			return 0
		}
		return 1
	}
	method := func(r *edgev1.Route) int {
		if r.Method != "" {
			return 0
		}
		return 1
	}
	return cmp.Or(
		cmp.Compare(exact(a), exact(b)),
		-cmp.Compare(len(a.Path.Value), len(b.Path.Value)),
		cmp.Compare(method(a), method(b)),
		-cmp.Compare(len(a.Headers), len(b.Headers)),
		-cmp.Compare(len(a.QueryParams), len(b.QueryParams)),
		x.created.Compare(y.created),
		cmp.Compare(a.RouteNamespace, b.RouteNamespace),
		cmp.Compare(a.RouteName, b.RouteName),
		cmp.Compare(a.Rule, b.Rule),
		cmp.Compare(a.Match, b.Match),
	)
}

// problem is why a rule cannot be served as written.
type problem struct {
	reason, message string
}

// translated is an HTTPRoute turned into routes, before attachment.
type translated struct {
	entries  []entry
	rules    int       // rules in the route
	problems []problem // one per rule that has one
	resolved metav1.Condition
}

func (b *builder) buildRoutes() []HTTPRouteStatus {
	routes := make([]*gwv1.HTTPRoute, 0, len(b.in.HTTPRoutes))
	for i := range b.in.HTTPRoutes {
		routes = append(routes, &b.in.HTTPRoutes[i])
	}
	slices.SortFunc(routes, func(x, y *gwv1.HTTPRoute) int {
		return cmp.Or(cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Name, y.Name))
	})
	var out []HTTPRouteStatus
	for _, r := range routes {
		var tr *translated // only for routes with a parent of ours
		st := HTTPRouteStatus{Namespace: r.Namespace, Name: r.Name}
		var seen []gwv1.ParentReference
		for _, ref := range r.Spec.ParentRefs {
			gs := b.parentGateway(r, ref)
			if gs == nil || slices.ContainsFunc(seen, func(p gwv1.ParentReference) bool { return parentRefEqual(p, ref) }) {
				continue
			}
			seen = append(seen, ref)
			if tr == nil {
				tr = b.translate(r)
			}
			st.Parents = append(st.Parents, gwv1.RouteParentStatus{
				ParentRef:      ref,
				ControllerName: gwv1.GatewayController(b.in.ControllerName),
				Conditions:     b.attach(r, ref, gs, tr),
			})
		}
		if len(st.Parents) > 0 {
			out = append(out, st)
		}
	}
	return out
}

// parentGateway is the Gateway of ours that ref names, or nil.
func (b *builder) parentGateway(r *gwv1.HTTPRoute, ref gwv1.ParentReference) *gatewayState {
	if ref.Group != nil && string(*ref.Group) != gatewayGroup {
		return nil
	}
	if ref.Kind != nil && *ref.Kind != "Gateway" {
		return nil
	}
	ns := r.Namespace
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	return b.gateways[key(ns, string(ref.Name))]
}

func parentRefEqual(x, y gwv1.ParentReference) bool {
	s := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	str := func(v any) string { return fmt.Sprint(v) }
	return x.Name == y.Name &&
		s((*string)(x.Namespace)) == s((*string)(y.Namespace)) &&
		s((*string)(x.SectionName)) == s((*string)(y.SectionName)) &&
		str(deref(x.Port)) == str(deref(y.Port))
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// attach decides whether r attaches to gs through ref, attaches its routes
// to the listeners it may use, and returns the parent's conditions.
func (b *builder) attach(r *gwv1.HTTPRoute, ref gwv1.ParentReference, gs *gatewayState, tr *translated) []metav1.Condition {
	gen := r.Generation
	typ := string(gwv1.RouteConditionAccepted)
	notAccepted := func(reason gwv1.RouteConditionReason, msg string) []metav1.Condition {
		return []metav1.Condition{cond(typ, false, string(reason), msg, gen), tr.resolved}
	}
	where := "Gateway " + key(gs.gw.Namespace, gs.gw.Name)
	if ref.SectionName != nil {
		where += " listener " + string(*ref.SectionName)
	}
	if ref.Port != nil {
		where += fmt.Sprintf(" port %d", *ref.Port)
	}
	b.count(r, ref, gs)
	if !gs.accepted {
		return notAccepted(gwv1.RouteReasonNoMatchingParent, where+" is not accepted")
	}
	var candidates []*listenerState
	for _, ls := range gs.listeners {
		if (ref.SectionName == nil || *ref.SectionName == ls.l.Name) && (ref.Port == nil || *ref.Port == ls.l.Port) {
			candidates = append(candidates, ls)
		}
	}
	if len(candidates) == 0 {
		return notAccepted(gwv1.RouteReasonNoMatchingParent, where+": no such listener")
	}
	candidates = slices.DeleteFunc(candidates, func(ls *listenerState) bool { return !ls.valid() })
	if len(candidates) == 0 {
		return notAccepted(gwv1.RouteReasonNoMatchingParent, where+": no valid listener")
	}
	candidates = slices.DeleteFunc(candidates, func(ls *listenerState) bool { return !b.allows(gs.gw, ls, r.Namespace) })
	if len(candidates) == 0 {
		return notAccepted(gwv1.RouteReasonNotAllowedByListeners, where+": no listener allows HTTPRoutes of namespace "+r.Namespace)
	}
	type target struct {
		ls    *listenerState
		hosts []string
	}
	var targets []target
	for _, ls := range candidates {
		if hs := intersectHostnames(ls.l.Hostname, r.Spec.Hostnames); len(hs) > 0 {
			targets = append(targets, target{ls, hs})
		}
	}
	if len(targets) == 0 {
		return notAccepted(gwv1.RouteReasonNoMatchingListenerHostname, where+": no listener hostname intersects the route's hostnames")
	}
	conds := []metav1.Condition{cond(typ, true, string(gwv1.RouteReasonAccepted), "accepted", gen), tr.resolved}
	if len(tr.problems) > 0 {
		var msgs []string
		for _, p := range tr.problems {
			msgs = append(msgs, p.message)
		}
		msg := strings.Join(msgs, "; ")
		if len(tr.problems) == tr.rules {
			// Nothing is left to serve.
			return notAccepted(gwv1.RouteConditionReason(tr.problems[0].reason), msg)
		}
		conds = append(conds, cond(string(gwv1.RouteConditionPartiallyInvalid), true, tr.problems[0].reason, msg, gen))
	}
	for _, t := range targets {
		rk := key(r.Namespace, r.Name)
		if t.ls.attached[rk] {
			continue // already attached through another parentRef
		}
		t.ls.attached[rk] = true
		for _, h := range t.hosts {
			t.ls.vhosts[h] = append(t.ls.vhosts[h], tr.entries...)
		}
	}
	return conds
}

// allows says whether listener ls of gw admits HTTPRoutes of namespace ns.
// count records r as attached to the listeners ref selects that allow it
// and whose hostname intersects its hostnames. A listener's
// status.attachedRoutes counts those whatever the listener's, the
// Gateway's or the route's own conditions (the field's documentation; the
// conformance test GatewayWithAttachedRoutes counts a route on an HTTPS
// listener whose certificate does not resolve), while only valid listeners
// of accepted Gateways serve routes.
func (b *builder) count(r *gwv1.HTTPRoute, ref gwv1.ParentReference, gs *gatewayState) {
	for _, ls := range gs.listeners {
		if (ref.SectionName == nil || *ref.SectionName == ls.l.Name) && (ref.Port == nil || *ref.Port == ls.l.Port) &&
			b.allows(gs.gw, ls, r.Namespace) && len(intersectHostnames(ls.l.Hostname, r.Spec.Hostnames)) > 0 {
			ls.counted[key(r.Namespace, r.Name)] = true
		}
	}
}

func (b *builder) allows(gw *gwv1.Gateway, ls *listenerState, ns string) bool {
	if len(ls.kinds) == 0 {
		return false
	}
	from := gwv1.NamespacesFromSame
	var sel *metav1.LabelSelector
	if ar := ls.l.AllowedRoutes; ar != nil && ar.Namespaces != nil {
		if ar.Namespaces.From != nil {
			from = *ar.Namespaces.From
		}
		sel = ar.Namespaces.Selector
	}
	switch from {
	case gwv1.NamespacesFromAll:
		return true
	case gwv1.NamespacesFromSame:
		return ns == gw.Namespace
	case gwv1.NamespacesFromSelector:
		n := b.namespaces[ns]
		if sel == nil || n == nil {
			return false
		}
		s, err := metav1.LabelSelectorAsSelector(sel)
		return err == nil && s.Matches(labels.Set(n.Labels))
	}
	return false
}

// intersectHostnames returns the hostnames a route serves on a listener:
// the route's hostnames that the listener's admits (or the listener's,
// where a route's wildcard is wider), "*" when neither sets any.
func intersectHostnames(listener *gwv1.Hostname, route []gwv1.Hostname) []string {
	l := ""
	if listener != nil {
		l = string(*listener)
	}
	if len(route) == 0 {
		if l == "" {
			return []string{"*"}
		}
		return []string{l}
	}
	var out []string
	for _, rh := range route {
		r := string(rh)
		switch {
		case l == "" || r == l:
			out = append(out, r)
		case wildcardMatches(l, r):
			out = append(out, r)
		case wildcardMatches(r, l):
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// wildcardMatches says whether pattern "*.suffix" covers h, which may be a
// narrower wildcard; the wildcard stands for one or more labels.
func wildcardMatches(pattern, h string) bool {
	suffix, ok := strings.CutPrefix(pattern, "*")
	if !ok {
		return false
	}
	return strings.HasSuffix(h, suffix) && len(strings.TrimPrefix(h, "*")) > len(suffix)
}

// translate turns r's rules into routes and resolves its backends.
func (b *builder) translate(r *gwv1.HTTPRoute) *translated {
	tr := &translated{rules: len(r.Spec.Rules)}
	var invalid []*edgev1.Invalid
	for ri, rule := range r.Spec.Rules {
		base := edgev1.Route{RouteNamespace: r.Namespace, RouteName: r.Name, Rule: ri}
		var probs []problem
		filters, p, mirrorInvalid := b.convertFilters(r, rule.Filters, true)
		probs = append(probs, p...)
		invalid = append(invalid, mirrorInvalid...)
		base.Filters = filters
		t, p := convertTimeouts(rule.Timeouts)
		probs = append(probs, p...)
		base.Timeouts = t
		redirect := slices.ContainsFunc(filters, func(f edgev1.Filter) bool { return f.Type == edgev1.FilterRequestRedirect })
		for _, ref := range rule.BackendRefs {
			be := b.backend(r, ref.BackendRef)
			bf, p, _ := b.convertFilters(r, ref.Filters, false)
			be.Filters = bf
			probs = append(probs, p...)
			if be.Invalid != nil {
				invalid = append(invalid, be.Invalid)
			}
			base.Backends = append(base.Backends, be)
		}
		switch {
		case len(probs) > 0:
			// An unsupported filter must not be skipped: its requests get
			// 500 rather than being served without it.
			base.DirectResponse = &edgev1.DirectResponse{Status: http.StatusInternalServerError, Reason: probs[0].message}
			base.Backends = nil
		case len(rule.BackendRefs) == 0 && !redirect:
			base.DirectResponse = &edgev1.DirectResponse{Status: http.StatusInternalServerError, Reason: "rule has no backendRefs"}
		case len(rule.BackendRefs) > 0 && !slices.ContainsFunc(base.Backends, func(b edgev1.Backend) bool { return b.Weight > 0 }):
			// No backend may take any traffic: the spec's answer is 500,
			// said here so that no provider has to divide by zero.
			base.DirectResponse = &edgev1.DirectResponse{Status: http.StatusInternalServerError, Reason: "every backendRef has weight 0"}
		}
		matches := rule.Matches
		if len(matches) == 0 {
			matches = []gwv1.HTTPRouteMatch{{}}
		}
		for mi, m := range matches {
			rt := base
			rt.Match = mi
			if p := convertMatch(m, &rt); p != nil {
				probs = append(probs, *p)
				continue // a match fleetnet cannot evaluate is not served
			}
			tr.entries = append(tr.entries, entry{route: rt, created: r.CreationTimestamp.Time})
		}
		if len(probs) > 0 {
			p := probs[0]
			if len(probs) > 1 {
				var msgs []string
				for _, q := range probs {
					msgs = append(msgs, q.message)
				}
				p.message = strings.Join(msgs, "; ")
			}
			p.message = fmt.Sprintf("rule %d: %s", ri, p.message)
			tr.problems = append(tr.problems, p)
		}
	}
	typ := string(gwv1.RouteConditionResolvedRefs)
	if len(invalid) == 0 {
		tr.resolved = cond(typ, true, string(gwv1.RouteReasonResolvedRefs), "resolved", r.Generation)
	} else {
		var msgs []string
		for _, i := range invalid {
			msgs = append(msgs, i.Message)
		}
		tr.resolved = cond(typ, false, invalid[0].Reason, strings.Join(msgs, "; "), r.Generation)
	}
	return tr
}

// convertMatch fills rt's match fields from m, or says why it cannot.
func convertMatch(m gwv1.HTTPRouteMatch, rt *edgev1.Route) *problem {
	rt.Path = edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/"}
	if m.Path != nil {
		if m.Path.Type != nil {
			rt.Path.Type = string(*m.Path.Type)
		}
		if m.Path.Value != nil {
			rt.Path.Value = *m.Path.Value
		}
	}
	if rt.Path.Type != edgev1.PathExact && rt.Path.Type != edgev1.PathPrefix {
		return &problem{string(gwv1.RouteReasonUnsupportedValue), fmt.Sprintf("path match type %s is not supported", rt.Path.Type)}
	}
	if rt.Path.Type == edgev1.PathPrefix && len(rt.Path.Value) > 1 {
		// "/foo/" and "/foo" match the same paths (element-wise prefix):
		// one form keeps precedence by length and the model canonical.
		rt.Path.Value = strings.TrimSuffix(rt.Path.Value, "/")
	}
	if m.Method != nil {
		rt.Method = string(*m.Method)
	}
	var seen []string
	for _, h := range m.Headers {
		name := strings.ToLower(string(h.Name))
		if slices.Contains(seen, name) {
			continue // the spec says the first of equal names wins
		}
		seen = append(seen, name)
		typ := edgev1.MatchExact
		if h.Type != nil {
			typ = string(*h.Type)
		}
		if p := checkValueMatch("header", name, typ, h.Value); p != nil {
			return p
		}
		rt.Headers = append(rt.Headers, edgev1.ValueMatch{Type: typ, Name: name, Value: h.Value})
	}
	seen = nil
	for _, q := range m.QueryParams {
		name := string(q.Name)
		if slices.Contains(seen, name) {
			continue
		}
		seen = append(seen, name)
		typ := edgev1.MatchExact
		if q.Type != nil {
			typ = string(*q.Type)
		}
		if p := checkValueMatch("query parameter", name, typ, q.Value); p != nil {
			return p
		}
		rt.QueryParams = append(rt.QueryParams, edgev1.ValueMatch{Type: typ, Name: name, Value: q.Value})
	}
	// All header and query matches must hold: their order says nothing.
	byName := func(x, y edgev1.ValueMatch) int { return cmp.Compare(x.Name, y.Name) }
	slices.SortFunc(rt.Headers, byName)
	slices.SortFunc(rt.QueryParams, byName)
	return nil
}

func checkValueMatch(what, name, typ, value string) *problem {
	switch typ {
	case edgev1.MatchExact:
		return nil
	case edgev1.MatchRegularExpression:
		// RE2, as the data plane will evaluate it; a pattern it cannot
		// compile is reported here rather than refused by every edge.
		if _, err := regexp.Compile(value); err != nil {
			return &problem{string(gwv1.RouteReasonUnsupportedValue), fmt.Sprintf("%s %s: %v", what, name, err)}
		}
		return nil
	}
	return &problem{string(gwv1.RouteReasonUnsupportedValue), fmt.Sprintf("%s %s: match type %s is not supported", what, name, typ)}
}

func convertTimeouts(t *gwv1.HTTPRouteTimeouts) (edgev1.Timeouts, []problem) {
	var out edgev1.Timeouts
	if t == nil {
		return out, nil
	}
	var probs []problem
	parse := func(field string, d *gwv1.Duration) int64 {
		if d == nil {
			return 0
		}
		v, err := time.ParseDuration(string(*d))
		if err != nil || v < 0 {
			probs = append(probs, problem{string(gwv1.RouteReasonUnsupportedValue), fmt.Sprintf("timeouts.%s %q is not a duration", field, *d)})
			return 0
		}
		return v.Milliseconds()
	}
	out.RequestMillis = parse("request", t.Request)
	out.BackendRequestMillis = parse("backendRequest", t.BackendRequest)
	if out.RequestMillis > 0 && out.BackendRequestMillis > out.RequestMillis {
		probs = append(probs, problem{string(gwv1.RouteReasonUnsupportedValue), "timeouts.backendRequest is longer than timeouts.request"})
	}
	return out, probs
}

// convertFilters converts a rule's filters (rule) or a backendRef's. A
// mirror whose backend does not resolve is left out and returned as
// invalid: the rule serves on, the route says its reference is broken.
func (b *builder) convertFilters(r *gwv1.HTTPRoute, fs []gwv1.HTTPRouteFilter, rule bool) ([]edgev1.Filter, []problem, []*edgev1.Invalid) {
	var out []edgev1.Filter
	var probs []problem
	var invalid []*edgev1.Invalid
	var redirect, rewrite bool
	for _, f := range fs {
		switch f.Type {
		case gwv1.HTTPRouteFilterRequestHeaderModifier:
			out = append(out, edgev1.Filter{Type: edgev1.FilterRequestHeaderModifier, RequestHeaderModifier: headerModifier(f.RequestHeaderModifier)})
		case gwv1.HTTPRouteFilterResponseHeaderModifier:
			out = append(out, edgev1.Filter{Type: edgev1.FilterResponseHeaderModifier, ResponseHeaderModifier: headerModifier(f.ResponseHeaderModifier)})
		case gwv1.HTTPRouteFilterRequestRedirect:
			redirect = true
			rr := f.RequestRedirect
			if rr == nil {
				rr = &gwv1.HTTPRequestRedirectFilter{}
			}
			rd := &edgev1.Redirect{StatusCode: http.StatusFound, Path: pathModifier(rr.Path)}
			if rr.Scheme != nil {
				rd.Scheme = *rr.Scheme
			}
			if rr.Hostname != nil {
				rd.Hostname = string(*rr.Hostname)
			}
			if rr.Port != nil {
				rd.Port = int32(*rr.Port)
			}
			if rr.StatusCode != nil {
				rd.StatusCode = *rr.StatusCode
			}
			out = append(out, edgev1.Filter{Type: edgev1.FilterRequestRedirect, RequestRedirect: rd})
		case gwv1.HTTPRouteFilterURLRewrite:
			rewrite = true
			uw := f.URLRewrite
			if uw == nil {
				uw = &gwv1.HTTPURLRewriteFilter{}
			}
			rw := &edgev1.Rewrite{Path: pathModifier(uw.Path)}
			if uw.Hostname != nil {
				rw.Hostname = string(*uw.Hostname)
			}
			out = append(out, edgev1.Filter{Type: edgev1.FilterURLRewrite, URLRewrite: rw})
		case gwv1.HTTPRouteFilterRequestMirror:
			if !rule || f.RequestMirror == nil {
				probs = append(probs, problem{string(gwv1.RouteReasonUnsupportedValue), "RequestMirror is supported in a rule's filters, not a backendRef's"})
				continue
			}
			m, bad := b.mirror(r, f.RequestMirror)
			if bad != nil {
				invalid = append(invalid, bad)
				continue
			}
			out = append(out, edgev1.Filter{Type: edgev1.FilterRequestMirror, RequestMirror: m})
		default:
			probs = append(probs, problem{string(gwv1.RouteReasonUnsupportedValue), fmt.Sprintf("filter %s is not supported", f.Type)})
		}
	}
	if redirect && rewrite {
		probs = append(probs, problem{string(gwv1.RouteReasonIncompatibleFilters), "RequestRedirect and URLRewrite cannot be used together"})
	}
	return out, probs, invalid
}

// mirror resolves a RequestMirror filter: its backend as a backendRef of
// r, and its share of requests (percent, or a fraction; all when neither).
func (b *builder) mirror(r *gwv1.HTTPRoute, f *gwv1.HTTPRequestMirrorFilter) (*edgev1.Mirror, *edgev1.Invalid) {
	be := b.backend(r, gwv1.BackendRef{BackendObjectReference: f.BackendRef})
	if be.Invalid != nil {
		return nil, be.Invalid
	}
	m := &edgev1.Mirror{Backend: be, Numerator: 100, Denominator: 100}
	switch {
	case f.Percent != nil:
		m.Numerator = *f.Percent
	case f.Fraction != nil:
		m.Numerator, m.Denominator = f.Fraction.Numerator, 100
		if f.Fraction.Denominator != nil {
			m.Denominator = *f.Fraction.Denominator
		}
	}
	return m, nil
}

func headerModifier(h *gwv1.HTTPHeaderFilter) *edgev1.HeaderModifier {
	out := &edgev1.HeaderModifier{}
	if h == nil {
		return out
	}
	for _, s := range h.Set {
		out.Set = append(out.Set, edgev1.Header{Name: string(s.Name), Value: s.Value})
	}
	for _, a := range h.Add {
		out.Add = append(out.Add, edgev1.Header{Name: string(a.Name), Value: a.Value})
	}
	out.Remove = append(out.Remove, h.Remove...)
	return out
}

func pathModifier(p *gwv1.HTTPPathModifier) *edgev1.PathModifier {
	if p == nil {
		return nil
	}
	switch p.Type {
	case gwv1.FullPathHTTPPathModifier:
		if p.ReplaceFullPath != nil {
			return &edgev1.PathModifier{Type: edgev1.PathReplaceFull, Value: *p.ReplaceFullPath}
		}
	case gwv1.PrefixMatchHTTPPathModifier:
		if p.ReplacePrefixMatch != nil {
			return &edgev1.PathModifier{Type: edgev1.PathReplacePrefix, Value: *p.ReplacePrefixMatch}
		}
	}
	return nil
}
