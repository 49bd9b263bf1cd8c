// Package h2server serves HTTP/2 connections (RFC 9113) to an
// http.Handler, for the edge's HTTP/2 clients.
//
// net/http's HTTP/2 server runs every connection through a serve loop:
// frames read by one goroutine reach it over a channel, and every frame a
// handler writes goes to it over another and waits for its turn there.
// With many short streams, those hand-offs (a select and two goroutine
// switches per frame) were the largest share of the edge's CPU per
// HTTP/2 request after the system calls. Here the connection's goroutine
// reads and handles frames itself, and a stream's handler writes its
// frames directly, under the connection's write lock; flow control is
// shared state under a mutex, with a condition for writers that wait for
// window. Frames are read and written with golang.org/x/net/http2's
// Framer and hpack; this package owns the connection and stream states.
//
// What a client sees is what net/http's server gives it: request fields,
// response headers (Date, sniffed Content-Type, Content-Length of bodies
// that fit in the first write), trailers, 100-continue, and the limits.
// Server push and the extended CONNECT protocol (RFC 8441) are not
// offered; priorities are read and ignored.
package h2server

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/http2"
)

// Server serves HTTP/2 connections that its owner accepted.
type Server struct {
	// Handler answers each stream's request.
	Handler http.Handler
	// MaxConcurrentStreams is advertised to clients; 250 when zero.
	MaxConcurrentStreams uint32
	// MaxHeaderBytes bounds a request's header list (as RFC 9113
	// counts it); a larger one is answered 431. 1 MiB when zero.
	MaxHeaderBytes int
	// ReadHeaderTimeout bounds the wait for the client's preface and
	// first SETTINGS frame.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a connection without an open stream; none
	// when zero.
	IdleTimeout time.Duration
	// SendTimeout bounds each wait for the client to take more of an
	// answer (stall.go): a stream that has had no send window for this
	// long is reset (CANCEL) and its handler's writes fail; a connection
	// whose open streams all wait for window while the client sends
	// nothing is closed (GOAWAY ENHANCE_YOUR_CALM); a write to the socket
	// that makes no progress for this long ends the connection.
	// DefaultSendTimeout when zero or negative.
	SendTimeout time.Duration
	// Log receives handler panics and connection errors.
	Log *slog.Logger

	mu       sync.Mutex
	conns    map[*conn]struct{}
	shutdown bool
	// gone is signalled when a connection ends.
	gone chan struct{}
}

// Receive windows: each stream may have streamWindow bytes in flight and
// the connection connWindow in all. A handler that does not read its body
// holds back only its own stream once the connection's window is not
// exhausted by it (connWindow is several streams' worth).
const (
	streamWindow = 256 << 10
	connWindow   = 1 << 20
	// maxReadFrameSize is the largest frame read: HTTP/2's default, so
	// that clients need not wait for SETTINGS to know it.
	maxReadFrameSize  = 16 << 10
	defaultMaxStreams = 250
	defaultMaxHeader  = 1 << 20
	// initialHeaderTable is HPACK's default table size, both ways.
	initialHeaderTable = 4096
)

// DefaultSendTimeout is the send timeout of a Server without one: half
// of nginx's send_timeout, which bounds the same waits.
const DefaultSendTimeout = 30 * time.Second

var errConnClosed = errors.New("h2server: connection closed")

// ServeConn serves c, whose client preface (PRI * HTTP/2.0 ...) is the
// next thing it reads, until the client closes it, a connection error,
// the idle timeout or Shutdown. ctx is every request's base context;
// st is c's TLS state, nil for cleartext (h2c).
func (s *Server) ServeConn(ctx context.Context, c net.Conn, st *tls.ConnectionState) {
	sc := s.newConn(ctx, c, st)
	if !s.track(sc, true) {
		_ = c.Close()
		return
	}
	defer s.track(sc, false)
	sc.serve()
}

func (s *Server) track(sc *conn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if add {
		if s.shutdown {
			return false
		}
		if s.conns == nil {
			s.conns = map[*conn]struct{}{}
			s.gone = make(chan struct{}, 1)
		}
		s.conns[sc] = struct{}{}
		return true
	}
	delete(s.conns, sc)
	select {
	case s.gone <- struct{}{}:
	default:
	}
	return true
}

// Shutdown tells every client that no new stream is taken (GOAWAY) and
// waits until their streams ended and connections closed, or ctx ends:
// then the rest are closed.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.shutdown = true
	conns := make([]*conn, 0, len(s.conns))
	for sc := range s.conns {
		conns = append(conns, sc)
	}
	gone := s.gone
	s.mu.Unlock()
	for _, sc := range conns {
		sc.goAway(http2.ErrCodeNo, nil)
	}
	for {
		s.mu.Lock()
		n := len(s.conns)
		for sc := range s.conns {
			// A connection that arrived meanwhile was refused by track.
			sc.closeIfDone()
		}
		s.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-gone:
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			s.mu.Lock()
			for sc := range s.conns {
				_ = sc.nc.Close()
			}
			s.mu.Unlock()
			return ctx.Err()
		}
	}
}

func (s *Server) maxStreams() uint32 {
	if s.MaxConcurrentStreams == 0 {
		return defaultMaxStreams
	}
	return s.MaxConcurrentStreams
}

func (s *Server) sendTimeout() time.Duration {
	if s.SendTimeout <= 0 {
		return DefaultSendTimeout
	}
	return s.SendTimeout
}

func (s *Server) maxHeaderBytes() uint32 {
	if s.MaxHeaderBytes <= 0 {
		return defaultMaxHeader
	}
	return uint32(s.MaxHeaderBytes)
}

func (s *Server) log() *slog.Logger {
	if s.Log == nil {
		return slog.Default()
	}
	return s.Log
}
