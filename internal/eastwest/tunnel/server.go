package tunnel

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetnet/fleetnet/internal/tlsrefusal"
)

// Refusal reasons, the values of fleetnet_eastwest_streams_refused_total's
// reason label.
const (
	// ReasonNotConnect: a request that is not CONNECT.
	ReasonNotConnect = "not_connect"
	// ReasonNotCluster: the caller's certificate names no fleet cluster.
	ReasonNotCluster = "not_cluster"
	// ReasonBadTarget: the :authority names no service port.
	ReasonBadTarget = "bad_target"
	// ReasonNotExported: this cluster exports no such service port.
	ReasonNotExported = "not_exported"
	// ReasonOutOfScope: the export's scope leaves the caller out.
	ReasonOutOfScope = "out_of_scope"
	// ReasonNoEndpoint: the export has no ready endpoint here.
	ReasonNoEndpoint = "no_ready_endpoint"
	// ReasonUnreachable: no endpoint could be dialled.
	ReasonUnreachable = "endpoints_unreachable"
	// ReasonPeerLimit: the calling cluster holds MaxStreamsPerPeer streams.
	ReasonPeerLimit = "peer_limit"
)

// Refusal is why a stream is not carried: an HTTP status, one of the
// Reason* values and a message for the caller naming what was refused.
type Refusal struct {
	Status  int
	Reason  string
	Message string
}

func (r *Refusal) Error() string { return r.Message }

// Defaults of a Server's timeouts.
const (
	DefaultConnectTimeout = 5 * time.Second
	DefaultSendTimeout    = 30 * time.Second
	DefaultIdleTimeout    = time.Hour
	// DefaultMaxStreamsPerPeer: a cluster's pods rarely hold more
	// connections to another network at once; one cluster cannot take
	// every endpoint connection and goroutine of the gateway (a stream
	// holds about 40 KiB: two goroutines, two 16 KiB buffers).
	DefaultMaxStreamsPerPeer = 4096
)

// Server is the receiving side of the tunnel: it authorizes each stream
// and carries it to a local endpoint. It is never an open proxy: it dials
// only what Authorize returns.
type Server struct {
	// Authorize decides a stream of caller (a verified fleet cluster) for
	// t: the endpoints ("host:port") to try, in order, or a refusal.
	Authorize func(caller string, t Target) ([]string, *Refusal)
	// Dial connects to an endpoint; a net.Dialer's when nil.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// ConnectTimeout bounds each dial; SendTimeout each write to the caller
	// that makes no progress (a caller that stops reading holds an
	// endpoint's connection no longer); IdleTimeout a stream without a
	// byte either way. Zero takes the default.
	ConnectTimeout, SendTimeout, IdleTimeout time.Duration
	// MaxStreamsPerPeer caps the streams one calling cluster holds at
	// once; more are refused (429). DefaultMaxStreamsPerPeer when zero.
	MaxStreamsPerPeer int
	Metrics           *Metrics
	Log               *slog.Logger

	mu     sync.Mutex
	active map[string]int // streams carried, by calling cluster
}

// ServeHTTP carries one CONNECT stream.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	caller, t, endpoints, ref := s.decide(r)
	if ref != nil {
		s.Metrics.refused(ref.Reason)
		s.log().Info("east-west stream refused", "caller", caller, "authority", r.Host, "reason", ref.Reason, "err", ref.Message)
		http.Error(w, ref.Message, ref.Status)
		return
	}
	release, ok := s.acquire(caller)
	if !ok {
		s.Metrics.refused(ReasonPeerLimit)
		s.log().Info("east-west stream refused", "caller", caller, "target", t.String(), "reason", ReasonPeerLimit)
		http.Error(w, fmt.Sprintf("cluster %s holds %d streams through this gateway, its maximum", caller, s.maxPerPeer()), http.StatusTooManyRequests)
		return
	}
	defer release()
	backend, err := s.dialAny(r.Context(), endpoints)
	if err != nil {
		s.Metrics.refused(ReasonUnreachable)
		s.log().Info("east-west stream refused", "caller", caller, "target", t.String(), "reason", ReasonUnreachable, "err", err)
		http.Error(w, fmt.Sprintf("no endpoint of %s answered: %v", t, err), http.StatusBadGateway)
		return
	}
	defer backend.Close()
	rc := http.NewResponseController(w)
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return
	}
	service := t.Namespace + "/" + t.Name
	done := s.Metrics.started(caller, service)
	defer done()
	s.carry(rc, w, r.Body, backend, s.Metrics.bytes(caller, service))
}

// decide authorizes r: the caller, its target and the endpoints to try.
func (s *Server) decide(r *http.Request) (string, Target, []string, *Refusal) {
	if r.Method != http.MethodConnect {
		return "", Target{}, nil, &Refusal{http.StatusMethodNotAllowed, ReasonNotConnect, "only CONNECT streams are carried"}
	}
	caller, err := ClusterOf(r.TLS)
	if err != nil {
		return "", Target{}, nil, &Refusal{http.StatusForbidden, ReasonNotCluster, err.Error()}
	}
	t, err := ParseAuthority(r.Host)
	if err != nil {
		return caller, Target{}, nil, &Refusal{http.StatusBadRequest, ReasonBadTarget, err.Error()}
	}
	endpoints, ref := s.Authorize(caller, t)
	if ref == nil && len(endpoints) == 0 {
		ref = &Refusal{http.StatusServiceUnavailable, ReasonNoEndpoint, fmt.Sprintf("%s has no ready endpoint in this cluster", t)}
	}
	return caller, t, endpoints, ref
}

func (s *Server) maxPerPeer() int {
	if s.MaxStreamsPerPeer > 0 {
		return s.MaxStreamsPerPeer
	}
	return DefaultMaxStreamsPerPeer
}

// acquire counts a stream of caller, unless it holds its maximum.
func (s *Server) acquire(caller string) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active == nil {
		s.active = map[string]int{}
	}
	if s.active[caller] >= s.maxPerPeer() {
		return nil, false
	}
	s.active[caller]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.active[caller]--; s.active[caller] == 0 {
			delete(s.active, caller)
		}
	}, true
}

func (s *Server) dialAny(ctx context.Context, endpoints []string) (net.Conn, error) {
	dial := s.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	var errs []error
	for _, ep := range endpoints {
		dctx, cancel := context.WithTimeout(ctx, orDefault(s.ConnectTimeout, DefaultConnectTimeout))
		c, err := dial(dctx, "tcp", ep)
		cancel()
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// carry copies both ways until the endpoint closes, either side fails, or
// the stream is idle for IdleTimeout. The caller's end of stream is passed
// on as a half-close, so that request-then-response protocols work.
//
// No read deadline is set on the request body while the stream lives: in
// HTTP/2 one that fires closes the body for good. Idleness is a
// watchdog's instead, which closes the endpoint's connection; the copy
// from the endpoint then ends, and only then is the body's deadline set,
// so that the copy from the caller returns before the handler does (a
// body must not be read after it).
func (s *Server) carry(rc *http.ResponseController, w io.Writer, body io.Reader, backend net.Conn, counted *byteCounters) {
	idle, send := orDefault(s.IdleTimeout, DefaultIdleTimeout), orDefault(s.SendTimeout, DefaultSendTimeout)
	var last atomic.Int64 // unix nanoseconds of the last byte either way
	touch := func() { last.Store(time.Now().UnixNano()) }
	touch()
	end := func() { _ = backend.Close() }
	var mu sync.Mutex // orders the watchdog's making before its first run
	var watchdog *time.Timer
	mu.Lock()
	watchdog = time.AfterFunc(idle, func() {
		mu.Lock()
		defer mu.Unlock()
		if quiet := time.Since(time.Unix(0, last.Load())); quiet < idle {
			watchdog.Reset(idle - quiet)
			return
		}
		end()
	})
	mu.Unlock()
	defer func() {
		mu.Lock()
		watchdog.Stop()
		mu.Unlock()
	}()

	done := make(chan struct{})
	go func() { // caller → endpoint
		defer close(done)
		var buf buffer
		defer buf.release()
		for {
			n, err := body.Read(buf.next())
			buf.used(n)
			if n > 0 {
				touch()
				counted.addIn(n)
				if _, werr := backend.Write(buf.b[:n]); werr != nil {
					end()
					return
				}
			}
			if err == nil {
				continue
			}
			if errors.Is(err, io.EOF) {
				if cw, ok := backend.(interface{ CloseWrite() error }); ok {
					_ = cw.CloseWrite() // the endpoint answers, then closes
					return
				}
			}
			end()
			return
		}
	}()
	var buf buffer
	defer buf.release()
	for { // endpoint → caller
		n, err := backend.Read(buf.next())
		buf.used(n)
		if n > 0 {
			touch()
			counted.addOut(n)
			_ = rc.SetWriteDeadline(time.Now().Add(send))
			_, werr := w.Write(buf.b[:n])
			if werr == nil {
				werr = rc.Flush()
			}
			if werr != nil {
				// HTTP/2 may still hold a frame of this buffer in its
				// queue: it is not put back for another stream to fill.
				buf.forget()
				break
			}
		}
		if err != nil {
			break
		}
	}
	end()
	_ = rc.SetReadDeadline(time.Now())
	<-done
}

// buffer is a copy's buffer: a small one of its own while the stream
// trickles, a large pooled one while reads fill it. Fewer, larger writes
// mean fewer TLS records and system calls (about a fifth more throughput
// in make bench-eastwest). Large buffers are few in all (maxLarge): past
// them a stream keeps its small one, so what streams hold stays bounded
// whatever callers do.
type buffer struct {
	small [16 << 10]byte
	large *[]byte
	b     []byte
}

const (
	largeSize = 256 << 10
	// maxLarge bounds the large buffers in use: 64 MiB.
	maxLarge = 256
)

var (
	largeBuffers = sync.Pool{New: func() any { b := make([]byte, largeSize); return &b }}
	largeInUse   atomic.Int64
)

// next is the buffer for the next read.
func (b *buffer) next() []byte {
	if b.large != nil {
		b.b = *b.large
	} else {
		b.b = b.small[:]
	}
	return b.b
}

// used takes the size of the last read: a full small buffer calls for a
// large one, if one is free; a read into the large one that the small one
// would have held (the flow slowed) goes back to the small one.
func (b *buffer) used(n int) {
	switch {
	case b.large == nil && n == len(b.small):
		if largeInUse.Add(1) > maxLarge {
			largeInUse.Add(-1)
			return
		}
		b.large = largeBuffers.Get().(*[]byte)
	case b.large != nil && n < len(b.small):
		// Copied out first, whole: the caller writes b.b[:n] next.
		copy(b.small[:], b.b[:n])
		b.b = b.small[:]
		b.release()
	}
}

// release puts the large buffer back.
func (b *buffer) release() {
	if b.large != nil {
		largeBuffers.Put(b.large)
		b.large = nil
		largeInUse.Add(-1)
	}
}

// forget drops the large buffer without putting it back: something may
// still read it.
func (b *buffer) forget() {
	if b.large != nil {
		b.large = nil
		largeInUse.Add(-1)
	}
}

func (s *Server) log() *slog.Logger {
	if s.Log == nil {
		return slog.Default()
	}
	return s.Log
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// MaxStreamsPerConnection is how many streams one peer connection may
// carry at once; a dialer opens another connection past it.
const MaxStreamsPerConnection = 250

// Serve serves s on ln, HTTP/2 over TLS only (tlsConfig: ServerConfig),
// until ctx ends, when every stream is cut.
func (s *Server) Serve(ctx context.Context, ln net.Listener, tlsConfig *tls.Config) error {
	srv := &http.Server{
		Handler:           s,
		TLSConfig:         tlsConfig,
		Protocols:         new(http.Protocols),
		ReadHeaderTimeout: 10 * time.Second,
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: MaxStreamsPerConnection, MaxReadFrameSize: maxFrameSize},
		// Refused handshakes are counted and logged, rate-limited
		// (fleetnet_tls_handshake_errors_total{server="eastwest-tunnel"}),
		// except connections closed before one: peers' edges check the
		// gateway with TCP connects.
		ErrorLog: (&tlsrefusal.Observer{Server: "eastwest-tunnel", Log: s.log(), IgnoreClosed: true}).ErrorLog(),
	}
	srv.Protocols.SetHTTP2(true)
	stop := context.AfterFunc(ctx, func() { _ = srv.Close() })
	defer stop()
	err := srv.ServeTLS(ln, "", "")
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// maxFrameSize is the largest HTTP/2 frame each side takes (SETTINGS_MAX_
// FRAME_SIZE): a stream's data goes in frames of up to 256 KiB rather than
// 16 KiB, fewer frames and scheduler rounds per byte.
const maxFrameSize = 256 << 10
