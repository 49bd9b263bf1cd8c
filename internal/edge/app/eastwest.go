package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/certfiles"
	"github.com/fleetnet/fleetnet/internal/eastwest/ingress"
	"github.com/fleetnet/fleetnet/internal/eastwest/tunnel"
	"github.com/fleetnet/fleetnet/internal/edge/l4"
	"github.com/fleetnet/fleetnet/internal/tlsrefusal"
	"github.com/prometheus/client_golang/prometheus"
)

// eastWest is the edge's east-west role: the tunnel listener, which
// carries other clusters' streams to the exports of the model served, and
// the dialer through which the L4 proxy reaches clusters of other
// networks.
type eastWest struct {
	server *tunnel.Server
	dialer *tunnel.Dialer
	table  atomic.Pointer[ingress.Table]
	done   chan error
	cancel context.CancelFunc
	log    *slog.Logger
}

func startEastWest(ctx context.Context, o Options, reg prometheus.Registerer, log *slog.Logger) (*eastWest, error) {
	creds, err := certfiles.Load(certfiles.Files{CertFile: o.EastWestCertFile, KeyFile: o.EastWestKeyFile, CAFile: o.CAFile,
		Component: "edge", Usage: "east-west", Log: log})
	if err != nil {
		return nil, fmt.Errorf("--eastwest-cert-file/--eastwest-key-file/--ca-file: %w", err)
	}
	if err := tlsrefusal.Register(reg); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", o.EastWestListen)
	if err != nil {
		return nil, fmt.Errorf("--eastwest-listen: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	go creds.Run(ctx, 0)
	metrics := tunnel.NewMetrics(reg)
	ew := &eastWest{dialer: &tunnel.Dialer{Credentials: creds, Metrics: metrics}, done: make(chan error, 1), cancel: cancel, log: log}
	reg.MustRegister(ew.dialer)
	ew.table.Store(ingress.FromModel(nil)) // nothing carried before a model
	ew.server = &tunnel.Server{Log: log, Metrics: metrics,
		Authorize: func(caller string, t tunnel.Target) ([]string, *tunnel.Refusal) {
			return ew.table.Load().Authorize(caller, t)
		}}
	go func() { ew.done <- ew.server.Serve(ctx, ln, tunnel.ServerConfig(creds)) }()
	log.Info("east-west gateway listening", "address", ln.Addr().String())
	return ew, nil
}

// tunnel is the L4 proxy's way to other networks; none without the role.
func (ew *eastWest) tunnel() l4.Tunnel {
	if ew == nil {
		return nil
	}
	return ew.dialer
}

// serve makes the exports of a model served the ones streams reach.
func (ew *eastWest) serve(m *edgev1.EastWest) {
	if ew != nil {
		ew.table.Store(ingress.FromModel(m))
	}
}

func (ew *eastWest) stop() {
	ew.cancel()
	if err := <-ew.done; err != nil && !errors.Is(err, net.ErrClosed) {
		ew.log.Error("east-west listener", "err", err)
	}
	_ = ew.dialer.Close()
}
