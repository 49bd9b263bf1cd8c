// Package httpserve runs a component's HTTP listeners — its API, /metrics
// and probes — each with the client limits of httplimits, TLS where it is
// given (refused handshakes named in the log, see tlsrefusal), and a
// graceful shutdown. fleetnet-discovery and fleetnet-console use it.
package httpserve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/fleetnet/fleetnet/internal/httplimits"
	"github.com/fleetnet/fleetnet/internal/tlsrefusal"
)

// Endpoint is one listener: the flag that set its address (named in
// errors), the address ("" leaves it out), its handler, and its TLS
// configuration (nil: plain HTTP).
type Endpoint struct {
	Flag, Addr string
	Handler    http.Handler
	TLS        *tls.Config
}

// Servers are the bound listeners of a component.
type Servers struct {
	flags   []string
	servers []*http.Server
	lns     []net.Listener
}

// Listen binds every endpoint that has an address. No read or write
// timeout is set: watches and event streams are long-lived, and the
// limits close slow clients instead. On a failure what was bound is
// closed, and the error names the flag and the address.
func Listen(component string, limits httplimits.Limits, log *slog.Logger, endpoints ...Endpoint) (*Servers, error) {
	if log == nil {
		log = slog.Default()
	}
	s := &Servers{}
	for _, e := range endpoints {
		if e.Addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", e.Addr)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("%s=%s: %w", e.Flag, e.Addr, err)
		}
		ln = limits.Listener(ln)
		if e.TLS != nil {
			ln = tls.NewListener(ln, e.TLS)
		}
		srv := &http.Server{Handler: limits.Handler(e.Handler)}
		limits.Apply(srv)
		if e.TLS != nil {
			srv.ErrorLog = (&tlsrefusal.Observer{Server: component, Log: log}).ErrorLog()
		}
		s.flags = append(s.flags, e.Flag)
		s.servers = append(s.servers, srv)
		s.lns = append(s.lns, ln)
	}
	return s, nil
}

// Addr is the bound address of the endpoint of flag, nil if it has none.
func (s *Servers) Addr(flag string) net.Addr {
	for i, f := range s.flags {
		if f == flag {
			return s.lns[i].Addr()
		}
	}
	return nil
}

// Serve serves every listener in a goroutine of its own; a failure other
// than the shutdown is sent to errc, which must have room for one error per
// listener.
func (s *Servers) Serve(errc chan<- error) {
	for i, srv := range s.servers {
		ln := s.lns[i]
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("serving %s: %w", ln.Addr(), err)
			}
		}()
	}
}

// Len is how many listeners are bound.
func (s *Servers) Len() int { return len(s.servers) }

// Shutdown stops accepting and waits up to timeout for requests in flight;
// what is still open then is closed. Long-lived streams should be ended
// before (their handlers' own stop), or they hold the whole timeout.
func (s *Servers) Shutdown(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, srv := range s.servers {
		if err := srv.Shutdown(ctx); err != nil {
			srv.Close()
		}
	}
}

func (s *Servers) close() {
	for _, ln := range s.lns {
		ln.Close()
	}
}
