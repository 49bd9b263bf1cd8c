package model

import (
	"cmp"
	"fmt"
	"slices"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Without an address pool (Input.AddressPool), the edge's Gateways share
// its listening sockets: one port at the edge's listen host serves the
// listeners of every Gateway on that port. Two Gateways then must not
// claim the same port with different protocols, nor the same port and
// hostname: the data plane would serve one of them for both, or refuse
// the model. Such conflicts are decided as the Gateway API decides
// conflicts between objects: the oldest Gateway (creation time, then
// namespace/name) keeps the port's protocol and each of its hostnames;
// the newer Gateway's listener is Conflicted (ProtocolConflict or
// HostnameConflict, naming the winner) and not served, and the rest of
// that Gateway is unaffected. Different hostnames on one port are no
// conflict: a request goes to the listener with the most specific
// matching hostname, whichever Gateway it belongs to.

// sharedPorts records which Gateway holds each shared port's protocol and
// each hostname on it, as claims are made oldest Gateway first.
type sharedPorts struct {
	protocols map[int32]portClaim
	hostnames map[portHostname]string // Gateway namespace/name
}

type portClaim struct {
	gateway  string
	protocol string
}

type portHostname struct {
	port     int32
	hostname string // "" for any
}

func newSharedPorts() *sharedPorts {
	return &sharedPorts{protocols: map[int32]portClaim{}, hostnames: map[portHostname]string{}}
}

// claim gives gateway (namespace/name) the port's protocol and the
// hostname on it, unless another Gateway holds them: then it returns the
// conflict's reason and the holder. A Gateway's own listeners never
// conflict here (markConflicts decides those).
func (s *sharedPorts) claim(gateway string, port int32, protocol, hostname string) (gwv1.ListenerConditionReason, string) {
	if p, ok := s.protocols[port]; ok && p.gateway != gateway && p.protocol != protocol {
		return gwv1.ListenerReasonProtocolConflict, p.gateway
	}
	ph := portHostname{port, hostname}
	if holder, ok := s.hostnames[ph]; ok && holder != gateway {
		return gwv1.ListenerReasonHostnameConflict, holder
	}
	if _, ok := s.protocols[port]; !ok {
		s.protocols[port] = portClaim{gateway: gateway, protocol: protocol}
	}
	s.hostnames[ph] = gateway
	return "", ""
}

// conflictMessage says which Gateway keeps what a listener asked for.
func conflictMessage(reason gwv1.ListenerConditionReason, holder string, port int32, protocol, hostname string) string {
	if reason == gwv1.ListenerReasonProtocolConflict {
		return fmt.Sprintf("port %d is served with another protocol than %s by Gateway %s, which was created first (ties go by namespace/name): the oldest Gateway keeps a shared port", port, protocol, holder)
	}
	h := hostname
	if h == "" {
		h = "(any)"
	}
	return fmt.Sprintf("hostname %s on port %d is served by Gateway %s, which was created first (ties go by namespace/name): the oldest Gateway keeps a hostname of a shared port", h, port, holder)
}

// sharesSockets says whether gw's listeners are bound at the edge's shared
// listen host: an edge Gateway without an address pool.
func (b *builder) sharesSockets(gw *gwv1.Gateway) bool {
	return !b.in.AddressPool.IsValid() && !b.cloudClass(gw)
}

// cloudClass says whether a cloud provider, not the edge, serves gw.
func (b *builder) cloudClass(gw *gwv1.Gateway) bool {
	return b.in.CloudClass != nil && b.in.CloudClass(string(gw.Spec.GatewayClassName))
}

// byAge orders Gateways oldest first, then by namespace/name.
func byAge(x, y *gatewayState) int {
	return cmp.Or(x.gw.CreationTimestamp.Time.Compare(y.gw.CreationTimestamp.Time),
		cmp.Compare(x.gw.Namespace, y.gw.Namespace), cmp.Compare(x.gw.Name, y.gw.Name))
}

// claimSharedPorts decides the conflicts between Gateways that share the
// edge's sockets, oldest first. A Gateway that is accepted as a whole
// claims with its valid listeners, and those that lose are Conflicted; one
// refused as a whole (refusal) claims with the listeners of its last
// accepted entry (Input.Previous), which it keeps serving (fail static):
// an edit that is refused gives nothing away. Entries of Gateways refused
// because none of their listeners is valid are decided later
// (keepRefused), after every claim made here.
func (b *builder) claimSharedPorts() {
	b.shared = newSharedPorts()
	order := slices.Clone(b.gatewayOrder)
	slices.SortFunc(order, byAge)
	for _, gs := range order {
		if !b.sharesSockets(gs.gw) {
			continue
		}
		name := key(gs.gw.Namespace, gs.gw.Name)
		if gs.refusal.Reason != "" {
			if entry, ok := b.previousEntry(gs); ok {
				b.keepClaimed(&entry)
				gs.held = &entry
			}
			continue
		}
		for _, ls := range gs.listeners {
			if !ls.valid() {
				continue
			}
			h := ""
			if ls.l.Hostname != nil {
				h = string(*ls.l.Hostname)
			}
			if reason, holder := b.shared.claim(name, int32(ls.l.Port), string(ls.l.Protocol), h); reason != "" {
				ls.conflicted = cond(string(gwv1.ListenerConditionConflicted), true, string(reason),
					conflictMessage(reason, holder, int32(ls.l.Port), string(ls.l.Protocol), h), gs.gw.Generation)
			}
		}
	}
}

// keepClaimed leaves out of a kept entry the listeners whose port or
// hostname an older Gateway holds, and claims the others.
func (b *builder) keepClaimed(entry *edgev1.Gateway) {
	if b.shared == nil || entry.Address != "" {
		return
	}
	name := key(entry.Namespace, entry.Name)
	entry.Listeners = slices.DeleteFunc(slices.Clone(entry.Listeners), func(l edgev1.Listener) bool {
		reason, _ := b.shared.claim(name, l.Port, l.Protocol, l.Hostname)
		return reason != ""
	})
}

// keepRefused sets the kept entry of every Gateway that is not accepted
// and has none yet: its last accepted entry, less what an older Gateway
// now holds, oldest first; none (a Hold entry, see heldGateway) when
// Input.Previous does not have it.
func (b *builder) keepRefused() {
	order := slices.Clone(b.gatewayOrder)
	slices.SortFunc(order, byAge)
	for _, gs := range order {
		if gs.accepted || gs.held != nil {
			continue
		}
		if entry, ok := b.previousEntry(gs); ok {
			if b.sharesSockets(gs.gw) {
				b.keepClaimed(&entry)
			}
			gs.held = &entry
		}
	}
}
