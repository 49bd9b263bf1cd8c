// Package edge is the embedded provider: it publishes models to the
// fleetnet-edge processes through the distribution server and reports
// their acknowledgements as progress.
package edge

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/distribute"

	"github.com/fleetnet/fleetnet/internal/gateway/provider"
)

// Provider implements provider.Provider for fleetnet-edge.
type Provider struct {
	Server *distribute.Server
	// Addresses are where the edges serve the Gateways (status.addresses).
	Addresses []string

	mu        sync.Mutex
	model     string // model.Version deployed last
	published int64  // its distribution version
}

// Deploy publishes m to every edge.
func (p *Provider) Deploy(_ context.Context, m *edgev1.Model) error {
	doc, certs, err := edgev1.EncodeModel(m)
	if err != nil {
		return err
	}
	v := p.Server.Publish(edgev1.ModelContentType, doc, certs)
	p.mu.Lock()
	p.model, p.published = m.Version, v
	p.mu.Unlock()
	return nil
}

// Progress reports whether the connected edges serve the last model.
func (p *Provider) Progress() provider.Progress {
	p.mu.Lock()
	version, published := p.model, p.published
	p.mu.Unlock()
	current, edges := p.Server.Status()
	progress := provider.Progress{
		Version:   version,
		Served:    published != 0 && current == published && distribute.Programmed(current, edges),
		Message:   distribute.Summary(current, edges, time.Now()),
		Addresses: p.Addresses,
	}
	if published != 0 && current == published {
		progress.PartRefusals = partRefusals(current, edges)
	}
	return progress
}

// partRefusals are the parts of version that connected edges serving it
// serve it without, each once with every edge's reason, sorted.
func partRefusals(version int64, edges []distribute.EdgeStatus) []provider.PartRefusal {
	type part struct {
		kind, namespace, name, listener, protocol string
		port                                      int32
	}
	reasons := map[part][]string{}
	for _, e := range edges { // sorted by name
		if !e.Connected || e.Serving != version {
			continue
		}
		for _, r := range e.Without {
			k := part{r.GetKind(), r.GetNamespace(), r.GetName(), r.GetListener(), r.GetProtocol(), r.GetPort()}
			reasons[k] = append(reasons[k], e.Name+": "+r.GetReason())
		}
	}
	out := make([]provider.PartRefusal, 0, len(reasons))
	for k, rs := range reasons {
		out = append(out, provider.PartRefusal{Kind: k.kind, Namespace: k.namespace, Name: k.name, Listener: k.listener,
			Port: k.port, Protocol: k.protocol, Reason: strings.Join(rs, "; ")})
	}
	slices.SortFunc(out, func(x, y provider.PartRefusal) int {
		return cmp.Or(cmp.Compare(x.Kind, y.Kind), cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Name, y.Name),
			cmp.Compare(x.Listener, y.Listener), cmp.Compare(x.Port, y.Port), cmp.Compare(x.Protocol, y.Protocol))
	})
	return out
}
