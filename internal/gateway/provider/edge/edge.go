// Package edge is the embedded provider: it publishes models to the
// fleetnet-edge processes through the distribution server and reports
// their acknowledgements as progress.
package edge

import (
	"context"
	"sync"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/gateway/distribute"

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
	return provider.Progress{
		Version:   version,
		Served:    published != 0 && current == published && distribute.Programmed(current, edges),
		Message:   distribute.Summary(current, edges, time.Now()),
		Addresses: p.Addresses,
	}
}
