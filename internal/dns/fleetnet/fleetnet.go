// Package fleetnet is the CoreDNS plugin that answers the clusterset zone
// (KEP-1645: <svc>.<ns>.svc.clusterset.local) from the cluster's
// ServiceImports and imported EndpointSlices, held in memory by informers.
//
// Corefile syntax:
//
//	fleetnet [ZONES...] {
//	    kubeconfig PATH [CONTEXT]
//	    ttl SECONDS
//	}
//
// ZONES default to the server block's; kubeconfig defaults to the
// in-cluster configuration (a Pod's ServiceAccount), then $KUBECONFIG; ttl
// defaults to 5 seconds, so that a withdrawn import is forgotten quickly.
// The plugin answers SERVFAIL until its informers have listed everything
// once, and implements the ready plugin's Readiness so that /ready waits
// for that too.
package fleetnet

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/request"
	"github.com/fleetnet/fleetnet/internal/dns/index"
	"github.com/fleetnet/fleetnet/internal/dns/zone"
	"github.com/miekg/dns"
)

// Name is the plugin's name, its Corefile directive.
const Name = "fleetnet"

// DefaultTTL is the TTL of every record unless the stanza says otherwise.
const DefaultTTL = 5

// Handler answers the zones from an index. It is a plugin.Handler.
type Handler struct {
	// Next is the next plugin of the chain, for names outside Zones.
	Next plugin.Handler
	// Zones are the zones answered, fully qualified and in lower case.
	Zones []string
	// TTL of every record.
	TTL uint32
	// Index holds the zone.
	Index *index.Index

	// synced is set once the informers have listed everything.
	synced atomic.Bool
}

// Name implements plugin.Handler.
func (h *Handler) Name() string { return Name }

// Ready implements the ready plugin's Readiness: true once the informers'
// caches have synced.
func (h *Handler) Ready() bool { return h.synced.Load() }

// SetSynced marks the caches synced (tests that feed the index themselves
// call it too).
func (h *Handler) SetSynced() { h.synced.Store(true) }

// ServeDNS implements plugin.Handler.
func (h *Handler) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	state := request.Request{W: w, Req: r}
	name := plugin.Zones(h.Zones).Matches(state.Name())
	if name == "" {
		return plugin.NextOrFailure(h.Name(), h.Next, ctx, w, r)
	}
	if state.QClass() != dns.ClassINET {
		// The zone has records of class IN only; CHAOS and the others are
		// not ours to answer (and a CH TXT query would otherwise get an
		// IN answer).
		return dns.RcodeRefused, nil
	}
	if !h.synced.Load() {
		// Before the first list an unknown name may well exist: a
		// SERVFAIL is retried, where an NXDOMAIN would be cached.
		return dns.RcodeServerFailure, nil
	}
	rep := zone.Zone{Name: name, TTL: h.TTL}.Answer(state.QName(), state.QType(), h.Index)
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	m.Rcode = rep.Rcode
	m.Answer, m.Ns, m.Extra = rep.Answer, rep.Ns, rep.Extra
	// Success tells the server that the reply has been written, whatever
	// its rcode (CoreDNS's convention, plugin.ClientWrite), even when the
	// write failed: a second write would fail too. The errors plugin logs
	// the error.
	if err := w.WriteMsg(m); err != nil {
		return dns.RcodeSuccess, plugin.Error(Name, fmt.Errorf("writing the reply to %s: %w", state.IP(), err))
	}
	return dns.RcodeSuccess, nil
}
