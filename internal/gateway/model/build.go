package model

import (
	"cmp"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/api/keys"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/consts"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// SupportedBundleVersion is the Gateway API release whose CRDs fleetnet
// serves; SupportedVersion is True only when every CRD says so.
const SupportedBundleVersion = consts.BundleVersion

// builder holds the indexed input and what Build has decided so far.
type builder struct {
	in           Input
	classes      map[string]*gwv1.GatewayClass
	services     map[string]*corev1.Service
	imports      map[string]*mcsv1beta1.ServiceImport
	secrets      map[string]*corev1.Secret
	namespaces   map[string]*corev1.Namespace
	slices       []*discoveryv1.EndpointSlice // sorted by namespace/name
	gateways     map[string]*gatewayState
	gatewayOrder []*gatewayState
	// policies are sorted oldest first; policyByTarget holds the one that
	// applies to each backend.
	policies       []*policyState
	policyByTarget map[policyTarget]*policyState
	// shared holds the claims on the edge's shared sockets (sockets.go).
	shared *sharedPorts
}

type gatewayState struct {
	gw        *gwv1.Gateway
	accepted  bool
	listeners []*listenerState // spec order
	// refusal is why the Gateway itself is not accepted, whatever its
	// listeners (Reason "" when it is not refused as a whole).
	refusal refusal
	// held is the entry a Gateway that is not accepted keeps serving (its
	// last accepted one, less what older Gateways hold); nil: none, its
	// provider is told to hold what it serves (heldGateway).
	held *edgev1.Gateway
}

// refusal is a reason and message why an object is not accepted.
type refusal struct{ Reason, Message string }

type listenerState struct {
	l          gwv1.Listener
	accepted   metav1.Condition
	resolved   metav1.Condition
	conflicted metav1.Condition
	kinds      []gwv1.RouteGroupKind
	certs      []edgev1.ListenerCertificate
	attached   map[string]bool // routes served here, by namespace/name
	// counted are the routes attached in the sense of the listener's
	// status.attachedRoutes (see count), by namespace/name.
	counted map[string]bool
	vhosts  map[string][]entry
}

// valid says whether the listener is served: accepted, resolved and
// without conflict.
func (l *listenerState) valid() bool {
	return l.accepted.Status == metav1.ConditionTrue && l.resolved.Status == metav1.ConditionTrue &&
		l.conflicted.Status == metav1.ConditionFalse
}

func key(ns, name string) string { return ns + "/" + name }

// Build computes the model and the status of every object of in that
// belongs to in.ControllerName's GatewayClasses. A refused object that
// in.Previous does not hold but in.LastAccepted does is served as its
// last accepted spec describes (restoreLastAccepted), then frozen as
// in.Previous would have held it.
func Build(in Input) Result {
	res := build(in)
	if previous, ok := restoreLastAccepted(in, res); ok {
		in.Previous, in.LastAccepted = previous, nil
		res = build(in)
	}
	return res
}

func build(in Input) Result {
	b := &builder{
		in:         in,
		classes:    map[string]*gwv1.GatewayClass{},
		services:   map[string]*corev1.Service{},
		imports:    map[string]*mcsv1beta1.ServiceImport{},
		secrets:    map[string]*corev1.Secret{},
		namespaces: map[string]*corev1.Namespace{},
		gateways:   map[string]*gatewayState{},
	}
	for i := range in.Services {
		s := &in.Services[i]
		b.services[key(s.Namespace, s.Name)] = s
	}
	for i := range in.ServiceImports {
		s := &in.ServiceImports[i]
		b.imports[key(s.Namespace, s.Name)] = s
	}
	for i := range in.Secrets {
		s := &in.Secrets[i]
		b.secrets[key(s.Namespace, s.Name)] = s
	}
	for i := range in.Namespaces {
		b.namespaces[in.Namespaces[i].Name] = &in.Namespaces[i]
	}
	for i := range in.EndpointSlices {
		b.slices = append(b.slices, &in.EndpointSlices[i])
	}
	slices.SortFunc(b.slices, func(x, y *discoveryv1.EndpointSlice) int {
		return cmp.Or(cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Name, y.Name))
	})

	b.resolvePolicies()

	var res Result
	res.Status.GatewayClasses = b.buildClasses()
	res.Status.Gateways = b.buildGateways()
	res.Status.HTTPRoutes = b.buildRoutes()
	res.Model = b.assemble(res.Status.Gateways)
	b.assignAddresses(&res.Model.Gateways, res.Status.Gateways)
	res.Model.LoadBalancers, res.Status.LoadBalancers = b.loadBalancers(res.Model.Gateways)
	res.Model.Version = edgev1.VersionOf(res.Model)
	res.Status.BackendTrafficPolicies = b.policyStatuses(res.Model)
	// Attached routes are known only once every route was seen.
	for i, gs := range b.gatewayOrder {
		for j, ls := range gs.listeners {
			res.Status.Gateways[i].Listeners[j].AttachedRoutes = int32(len(ls.counted))
		}
	}
	if res.Status.GatewayClasses == nil {
		res.Status.GatewayClasses = []GatewayClassStatus{}
	}
	if res.Status.Gateways == nil {
		res.Status.Gateways = []GatewayStatus{}
	}
	if res.Status.HTTPRoutes == nil {
		res.Status.HTTPRoutes = []HTTPRouteStatus{}
	}
	return res
}

func cond(typ string, ok bool, reason, msg string, gen int64) metav1.Condition {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen}
}

func (b *builder) buildClasses() []GatewayClassStatus {
	var out []GatewayClassStatus
	for i := range b.in.GatewayClasses {
		gc := &b.in.GatewayClasses[i]
		if string(gc.Spec.ControllerName) != b.in.ControllerName {
			continue
		}
		b.classes[gc.Name] = gc
		g := gc.Generation
		accepted := cond(string(gwv1.GatewayClassConditionStatusAccepted), true,
			string(gwv1.GatewayClassReasonAccepted), "accepted by "+b.in.ControllerName, g)
		if gc.Spec.ParametersRef != nil {
			// fleetnet has no parameters resource: a class that names one
			// asks for something fleetnet would silently ignore.
			accepted = cond(string(gwv1.GatewayClassConditionStatusAccepted), false,
				string(gwv1.GatewayClassReasonInvalidParameters), "parametersRef is not supported by "+b.in.ControllerName, g)
		}
		st := GatewayClassStatus{Name: gc.Name, Conditions: []metav1.Condition{accepted, b.supportedVersion(g)}}
		if b.in.Features != nil {
			st.SupportedFeatures = slices.Sorted(slices.Values(b.in.Features(gc.Name)))
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(x, y GatewayClassStatus) int { return cmp.Compare(x.Name, y.Name) })
	return out
}

// supportedVersion is True when every Gateway API CRD is of the release
// fleetnet was built with. Other versions are served on a best-effort
// basis (Accepted stays True), as the spec allows.
func (b *builder) supportedVersion(gen int64) metav1.Condition {
	typ := string(gwv1.GatewayClassConditionStatusSupportedVersion)
	if len(b.in.CRDBundleVersions) == 0 {
		return cond(typ, false, string(gwv1.GatewayClassReasonUnsupportedVersion),
			"no Gateway API CRD found; supported: "+SupportedBundleVersion, gen)
	}
	var bad []string
	for _, v := range b.in.CRDBundleVersions {
		if v != SupportedBundleVersion {
			if v == "" {
				v = "(none)"
			}
			bad = append(bad, v)
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		bad = slices.Compact(bad)
		return cond(typ, false, string(gwv1.GatewayClassReasonUnsupportedVersion),
			fmt.Sprintf("Gateway API CRD bundle versions %s found; supported: %s", strings.Join(bad, ", "), SupportedBundleVersion), gen)
	}
	return cond(typ, true, string(gwv1.GatewayClassReasonSupportedVersion), "Gateway API "+SupportedBundleVersion, gen)
}

func (b *builder) buildGateways() []GatewayStatus {
	var gws []*gwv1.Gateway
	for i := range b.in.Gateways {
		gw := &b.in.Gateways[i]
		if b.classes[string(gw.Spec.GatewayClassName)] != nil {
			gws = append(gws, gw)
		}
	}
	slices.SortFunc(gws, func(x, y *gwv1.Gateway) int {
		return cmp.Or(cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Name, y.Name))
	})
	for _, gw := range gws {
		gs := &gatewayState{gw: gw, refusal: b.gatewayRefusal(gw)}
		b.gateways[key(gw.Namespace, gw.Name)] = gs
		b.gatewayOrder = append(b.gatewayOrder, gs)
		for _, l := range gw.Spec.Listeners {
			gs.listeners = append(gs.listeners, b.listener(gw, l))
		}
		markConflicts(gw, gs.listeners)
	}
	// Between Gateways, once every Gateway's own listeners are known.
	b.claimSharedPorts()

	var out []GatewayStatus
	for _, gs := range b.gatewayOrder {
		gw := gs.gw
		gen := gw.Generation
		typ := string(gwv1.GatewayConditionAccepted)
		var accepted metav1.Condition
		valid, invalid := 0, []string{}
		for _, ls := range gs.listeners {
			if ls.valid() {
				valid++
			} else {
				invalid = append(invalid, string(ls.l.Name))
			}
		}
		switch {
		case gs.refusal.Reason != "":
			accepted = cond(typ, false, gs.refusal.Reason, gs.refusal.Message, gen)
		case valid == 0:
			accepted = cond(typ, false, string(gwv1.GatewayReasonListenersNotValid),
				"no valid listener: "+strings.Join(invalid, ", "), gen)
		case len(invalid) > 0:
			accepted = cond(typ, true, string(gwv1.GatewayReasonListenersNotValid),
				"invalid listeners not served: "+strings.Join(invalid, ", "), gen)
		default:
			accepted = cond(typ, true, string(gwv1.GatewayReasonAccepted), "accepted", gen)
		}
		gs.accepted = accepted.Status == metav1.ConditionTrue
		st := GatewayStatus{Namespace: gw.Namespace, Name: gw.Name, Conditions: []metav1.Condition{accepted}, Listeners: []gwv1.ListenerStatus{}}
		for _, ls := range gs.listeners {
			st.Listeners = append(st.Listeners, gwv1.ListenerStatus{
				Name:           ls.l.Name,
				SupportedKinds: ls.kinds,
				Conditions:     []metav1.Condition{ls.accepted, ls.resolved, ls.conflicted},
			})
		}
		out = append(out, st)
	}
	b.keepRefused()
	return out
}

// gatewayRefusal is why gw is not accepted as a whole, whatever its
// listeners: a class, annotations or addresses fleetnet cannot serve.
func (b *builder) gatewayRefusal(gw *gwv1.Gateway) refusal {
	class := b.classes[string(gw.Spec.GatewayClassName)]
	switch {
	case class.Spec.ParametersRef != nil:
		return refusal{string(gwv1.GatewayReasonInvalidParameters), fmt.Sprintf("GatewayClass %s is not accepted", class.Name)}
	case b.annotationsInvalid(gw) != nil:
		// Provider annotations are parsed strictly: a mistake there
		// must not fall back to defaults silently.
		return refusal{string(gwv1.GatewayReasonInvalidParameters), b.annotationsInvalid(gw).Error()}
	case len(gw.Spec.Addresses) > 0:
		// The entry point's addresses are the data plane's; a Gateway
		// cannot ask for others.
		return refusal{string(gwv1.GatewayReasonUnsupportedAddress), "spec.addresses is not supported: the addresses are those of the edges"}
	}
	return refusal{}
}

const gatewayGroup = gwv1.GroupName

// listener checks one listener, except for conflicts with the others.
func (b *builder) listener(gw *gwv1.Gateway, l gwv1.Listener) *listenerState {
	gen := gw.Generation
	ls := &listenerState{l: l, attached: map[string]bool{}, counted: map[string]bool{}, vhosts: map[string][]entry{}}
	ls.accepted = cond(string(gwv1.ListenerConditionAccepted), true, string(gwv1.ListenerReasonAccepted), "accepted", gen)
	ls.resolved = cond(string(gwv1.ListenerConditionResolvedRefs), true, string(gwv1.ListenerReasonResolvedRefs), "resolved", gen)
	ls.conflicted = cond(string(gwv1.ListenerConditionConflicted), false, string(gwv1.ListenerReasonNoConflicts), "no conflicts", gen)

	switch l.Protocol {
	case gwv1.HTTPProtocolType, gwv1.HTTPSProtocolType:
	default:
		ls.accepted = cond(string(gwv1.ListenerConditionAccepted), false, string(gwv1.ListenerReasonUnsupportedProtocol),
			fmt.Sprintf("protocol %s is not supported; use HTTP or HTTPS", l.Protocol), gen)
		ls.kinds = []gwv1.RouteGroupKind{}
		return ls
	}
	if what, ok := b.in.ReservedPorts[int32(l.Port)]; ok && !b.cloudClass(gw) {
		// The edges cannot bind it: refused here, where the status says
		// why, rather than by every edge.
		ls.accepted = cond(string(gwv1.ListenerConditionAccepted), false, string(gwv1.ListenerReasonPortUnavailable),
			fmt.Sprintf("port %d is reserved on the edges: %s", l.Port, what), gen)
	}

	// Route kinds: HTTPRoute is the only one fleetnet serves.
	var badKinds []string
	if l.AllowedRoutes != nil && len(l.AllowedRoutes.Kinds) > 0 {
		for _, k := range l.AllowedRoutes.Kinds {
			g := gatewayGroup
			if k.Group != nil {
				g = string(*k.Group)
			}
			if g == gatewayGroup && k.Kind == "HTTPRoute" {
				ls.kinds = append(ls.kinds, httpRouteKind())
			} else {
				badKinds = append(badKinds, g+"/"+string(k.Kind))
			}
		}
	} else {
		ls.kinds = []gwv1.RouteGroupKind{httpRouteKind()}
	}
	if ls.kinds == nil {
		ls.kinds = []gwv1.RouteGroupKind{}
	}
	if len(badKinds) > 0 {
		ls.resolved = cond(string(gwv1.ListenerConditionResolvedRefs), false, string(gwv1.ListenerReasonInvalidRouteKinds),
			"route kinds not supported: "+strings.Join(badKinds, ", "), gen)
	}

	if l.Protocol == gwv1.HTTPSProtocolType {
		if l.TLS == nil || (l.TLS.Mode != nil && *l.TLS.Mode != gwv1.TLSModeTerminate) {
			ls.accepted = cond(string(gwv1.ListenerConditionAccepted), false, string(gwv1.ListenerReasonUnsupportedValue),
				"an HTTPS listener needs tls.mode Terminate", gen)
			return ls
		}
		reason, msg := b.certificates(gw, l, ls)
		if reason != "" && ls.resolved.Status == metav1.ConditionTrue {
			ls.resolved = cond(string(gwv1.ListenerConditionResolvedRefs), false, reason, msg, gen)
		}
	}
	return ls
}

func httpRouteKind() gwv1.RouteGroupKind {
	g := gwv1.Group(gatewayGroup)
	return gwv1.RouteGroupKind{Group: &g, Kind: "HTTPRoute"}
}

// certificates resolves the listener's certificateRefs into ls.certs, and
// returns the reason and message of the first that does not resolve.
func (b *builder) certificates(gw *gwv1.Gateway, l gwv1.Listener, ls *listenerState) (string, string) {
	if len(l.TLS.CertificateRefs) == 0 {
		return string(gwv1.ListenerReasonInvalidCertificateRef), "tls.certificateRefs is empty"
	}
	for _, ref := range l.TLS.CertificateRefs {
		ns := gw.Namespace
		if ref.Namespace != nil {
			ns = string(*ref.Namespace)
		}
		name := key(ns, string(ref.Name))
		if (ref.Group != nil && *ref.Group != "") || (ref.Kind != nil && *ref.Kind != "Secret") {
			return string(gwv1.ListenerReasonInvalidCertificateRef), fmt.Sprintf("certificateRef %s: only core Secrets are supported", name)
		}
		if ns != gw.Namespace && !b.granted(gatewayGroup, "Gateway", gw.Namespace, "", "Secret", ns, string(ref.Name)) {
			return string(gwv1.ListenerReasonRefNotPermitted), fmt.Sprintf("certificateRef %s: no ReferenceGrant in %s allows Gateways of %s to reference it", name, ns, gw.Namespace)
		}
		s := b.secrets[name]
		if s == nil {
			return string(gwv1.ListenerReasonInvalidCertificateRef), fmt.Sprintf("certificateRef %s: Secret not found", name)
		}
		if s.Type != corev1.SecretTypeTLS {
			return string(gwv1.ListenerReasonInvalidCertificateRef), fmt.Sprintf("certificateRef %s: Secret is of type %s, not %s", name, s.Type, corev1.SecretTypeTLS)
		}
		crt, k := s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]
		// Parsing here, rather than in the data plane, lets the status
		// name the broken Secret before any edge refuses the model.
		if _, err := tls.X509KeyPair(crt, k); err != nil {
			return string(gwv1.ListenerReasonInvalidCertificateRef), fmt.Sprintf("certificateRef %s: %v", name, err)
		}
		sum := sha256.New()
		sum.Write(crt)
		sum.Write([]byte{0})
		sum.Write(k)
		ls.certs = append(ls.certs, edgev1.ListenerCertificate{Namespace: ns, Name: string(ref.Name),
			Digest: hex.EncodeToString(sum.Sum(nil))[:16], CertPEM: crt, KeyPEM: k})
	}
	return "", ""
}

// markConflicts sets Conflicted on listeners that share a port with
// another protocol (ProtocolConflict), or a port, protocol and hostname
// (HostnameConflict). Conflicted listeners are not served at all: the spec
// says their port should not be configured.
func markConflicts(gw *gwv1.Gateway, ls []*listenerState) {
	byPort := map[gwv1.PortNumber][]*listenerState{}
	for _, l := range ls {
		byPort[l.l.Port] = append(byPort[l.l.Port], l)
	}
	typ := string(gwv1.ListenerConditionConflicted)
	for port, group := range byPort {
		protocols := map[gwv1.ProtocolType]bool{}
		for _, l := range group {
			protocols[l.l.Protocol] = true
		}
		if len(protocols) > 1 {
			for _, l := range group {
				l.conflicted = cond(typ, true, string(gwv1.ListenerReasonProtocolConflict),
					fmt.Sprintf("port %d is used with different protocols", port), gw.Generation)
			}
			continue
		}
		hosts := map[string][]*listenerState{}
		for _, l := range group {
			h := ""
			if l.l.Hostname != nil {
				h = string(*l.l.Hostname)
			}
			hosts[h] = append(hosts[h], l)
		}
		for h, same := range hosts {
			if len(same) < 2 {
				continue
			}
			if h == "" {
				h = "(any)"
			}
			for _, l := range same {
				l.conflicted = cond(typ, true, string(gwv1.ListenerReasonHostnameConflict),
					fmt.Sprintf("port %d and hostname %s are used by %d listeners", port, h, len(same)), gw.Generation)
			}
		}
	}
}

// granted says whether a ReferenceGrant in toNS lets objects of fromKind
// in fromNS reference the object toKind/toName.
func (b *builder) granted(fromGroup, fromKind, fromNS, toGroup, toKind, toNS, toName string) bool {
	for i := range b.in.ReferenceGrants {
		rg := &b.in.ReferenceGrants[i]
		if rg.Namespace != toNS {
			continue
		}
		from := slices.ContainsFunc(rg.Spec.From, func(f gwv1.ReferenceGrantFrom) bool {
			return string(f.Group) == fromGroup && string(f.Kind) == fromKind && string(f.Namespace) == fromNS
		})
		to := slices.ContainsFunc(rg.Spec.To, func(t gwv1.ReferenceGrantTo) bool {
			return string(t.Group) == toGroup && string(t.Kind) == toKind && (t.Name == nil || string(*t.Name) == toName)
		})
		if from && to {
			return true
		}
	}
	return false
}

// assemble orders everything the routes attached into the model, and the
// refused Gateways' entries (heldGateway); statuses are the Gateways'
// (buildGateways), in b.gatewayOrder.
func (b *builder) assemble(statuses []GatewayStatus) edgev1.Model {
	m := edgev1.Model{Gateways: []edgev1.Gateway{}}
	for i, gs := range b.gatewayOrder {
		if !gs.accepted {
			m.Gateways = append(m.Gateways, heldGateway(gs, statuses[i]))
			continue
		}
		g := edgev1.Gateway{Namespace: gs.gw.Namespace, Name: gs.gw.Name, Generation: gs.gw.Generation, Listeners: []edgev1.Listener{},
			Class: string(gs.gw.Spec.GatewayClassName), UID: string(gs.gw.UID), Annotations: providerAnnotations(gs.gw.Annotations)}
		for _, ls := range gs.listeners {
			if !ls.valid() {
				continue
			}
			l := edgev1.Listener{Name: string(ls.l.Name), Port: int32(ls.l.Port), Protocol: string(ls.l.Protocol),
				Certificates: ls.certs, VirtualHosts: []edgev1.VirtualHost{}}
			if ls.l.Hostname != nil {
				l.Hostname = string(*ls.l.Hostname)
			}
			for h := range ls.vhosts {
				l.VirtualHosts = append(l.VirtualHosts, edgev1.VirtualHost{Hostname: h, Routes: virtualHostRoutes(h, ls.vhosts)})
			}
			slices.SortFunc(l.VirtualHosts, func(x, y edgev1.VirtualHost) int { return cmp.Compare(x.Hostname, y.Hostname) })
			g.Listeners = append(g.Listeners, l)
		}
		slices.SortFunc(g.Listeners, func(x, y edgev1.Listener) int {
			return cmp.Or(cmp.Compare(x.Port, y.Port), cmp.Compare(x.Name, y.Name))
		})
		m.Gateways = append(m.Gateways, g)
	}
	return m
}

// heldGateway is the entry of a Gateway of ours that is not accepted: its
// entry in Input.Previous, frozen, when it had one there of the same
// class (gs.held, less the listeners an older Gateway holds now), or else
// an entry that tells its provider to hold what it serves. A refused edit
// thus never withdraws a Gateway; deleting it, or moving it to a class of
// another controller, does.
func heldGateway(gs *gatewayState, st GatewayStatus) edgev1.Gateway {
	why := "not accepted"
	if c := meta.FindStatusCondition(st.Conditions, string(gwv1.GatewayConditionAccepted)); c != nil {
		why = c.Message
	}
	if gs.held != nil {
		g := *gs.held
		g.Refused = why
		return g
	}
	return edgev1.Gateway{Namespace: gs.gw.Namespace, Name: gs.gw.Name, Generation: gs.gw.Generation, Class: string(gs.gw.Spec.GatewayClassName),
		UID: string(gs.gw.UID), Listeners: []edgev1.Listener{}, Refused: why, Hold: true}
}

// previousEntry is gs's Gateway's entry in Input.Previous, if it had one
// there of the same class that is not a Hold.
func (b *builder) previousEntry(gs *gatewayState) (edgev1.Gateway, bool) {
	if b.in.Previous == nil {
		return edgev1.Gateway{}, false
	}
	class := string(gs.gw.Spec.GatewayClassName)
	for _, g := range b.in.Previous.Gateways {
		if g.Namespace == gs.gw.Namespace && g.Name == gs.gw.Name && g.Class == class && !g.Hold {
			return g, true
		}
	}
	return edgev1.Gateway{}, false
}

// virtualHostRoutes orders the routes a request for host h may match:
// routes whose hostname is h itself, then those of wider wildcards (the
// longest first), then those of "*", each group in match precedence. The
// spec gives precedence to the most specific matching hostname, and a
// request that matches none of those rules still falls through to the
// wider ones, so a data plane picks the most specific virtual host and
// the first route in it that matches.
func virtualHostRoutes(h string, vhosts map[string][]entry) []edgev1.Route {
	type ranked struct {
		e    entry
		rank int // 0 for h, then wildcards by decreasing length
	}
	var all []ranked
	for host, es := range vhosts {
		rank := -1
		switch {
		case host == h:
			rank = 0
		case host == "*":
			rank = 1 << 20
		case wildcardMatches(host, h):
			rank = 1<<16 - len(host)
		}
		if rank < 0 {
			continue
		}
		for _, e := range es {
			all = append(all, ranked{e, rank})
		}
	}
	slices.SortFunc(all, func(x, y ranked) int {
		return cmp.Or(cmp.Compare(x.rank, y.rank), compareEntries(x.e, y.e))
	})
	type id struct {
		ns, name    string
		rule, match int
	}
	seen := map[id]bool{}
	out := []edgev1.Route{}
	for _, r := range all {
		k := id{r.e.route.RouteNamespace, r.e.route.RouteName, r.e.route.Rule, r.e.route.Match}
		if seen[k] {
			continue // a route listing h and a wildcard covering it
		}
		seen[k] = true
		out = append(out, r.e.route)
	}
	return out
}

// providerAnnotations is the annotations of ann with the Azure prefix (what
// the model keeps of a Gateway's annotations), nil when there are none; the
// controller's own operations annotation is left out, so that writing it
// does not change the model.
func providerAnnotations(ann map[string]string) map[string]string {
	var out map[string]string
	for k, v := range ann {
		if strings.HasPrefix(k, keys.AzureAnnotationPrefix) && k != keys.AnnotationAzureOperations {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// annotationsInvalid is the error of gw's provider annotations
// (Input.ValidateAnnotations), nil when they pass or there are none.
func (b *builder) annotationsInvalid(gw *gwv1.Gateway) error {
	ann := providerAnnotations(gw.Annotations)
	if ann == nil || b.in.ValidateAnnotations == nil {
		return nil
	}
	return b.in.ValidateAnnotations(string(gw.Spec.GatewayClassName), ann)
}
