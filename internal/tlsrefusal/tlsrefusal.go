// Package tlsrefusal makes refused TLS handshakes visible on both sides.
//
// A server of ours (the registry, the gateway's model stream,
// fleetnet-discovery, the edge's HTTPS listeners) logs each refused
// handshake with the peer's address and the reason, at most once per
// reason every LogEvery (with the number left out), and counts them in
// fleetnet_tls_handshake_errors_total{server,reason}: grpc-go reports them
// only at a level we discard, and net/http in an unstructured line.
//
// A client cannot always see why: with TLS 1.3 the server checks the
// client's certificate after the client has finished its handshake, and
// the alert may arrive after the client's first write failed ("broken
// pipe"). Probe asks again on a connection of its own and reads the alert;
// the registry client's interceptors turn a refusal it finds into
// Unauthenticated naming the certificate problem and the flags to check,
// which callers treat as a configuration error rather than an outage.
//
// A gRPC client of ours (the edge, the registry client) counts and logs its
// failed handshakes the same way, under the name of the server it dials
// (Credentials): its refusal of a server certificate that is not valid for
// the host dialled, even one of the fleet CA, is a name_mismatch.
package tlsrefusal

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// HandshakeErrors counts refused handshakes by server and Reason.
var HandshakeErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "fleetnet_tls_handshake_errors_total",
	Help: "TLS handshakes a server refused or that failed, by server and reason (no_certificate, unknown_authority, expired, name_mismatch, bad_certificate, protocol, not_tls, closed, other).",
}, []string{"server", "reason"})

// Register registers HandshakeErrors on reg; registering it twice is no
// error.
func Register(reg prometheus.Registerer) error {
	if err := reg.Register(HandshakeErrors); err != nil {
		var already prometheus.AlreadyRegisteredError
		if !errors.As(err, &already) {
			return err
		}
	}
	return nil
}

// Reason names why a handshake failed, from its error: a server's, or a
// client's (name_mismatch: the server's certificate is not valid for the
// host the client dialled).
func Reason(err error) string {
	s := err.Error()
	switch {
	case strings.Contains(s, "didn't provide a certificate"):
		return "no_certificate"
	case strings.Contains(s, "unknown authority"):
		return "unknown_authority"
	case strings.Contains(s, "expired or is not yet valid"):
		return "expired"
	case isNameMismatch(err):
		return "name_mismatch"
	case strings.Contains(s, "bad certificate"), strings.Contains(s, "x509:"), strings.Contains(s, "certificate"):
		return "bad_certificate"
	case strings.Contains(s, "does not look like a TLS handshake"):
		return "not_tls"
	case strings.Contains(s, "unsupported versions"), strings.Contains(s, "no cipher suite"), strings.Contains(s, "protocol version"):
		return "protocol"
	case errors.Is(err, net.ErrClosed), strings.Contains(s, "EOF"), strings.Contains(s, "connection reset"), strings.Contains(s, "broken pipe"):
		return "closed"
	}
	return "other"
}

// isNameMismatch says whether err is x509's refusal of a certificate not
// valid for the host verified, or reads like one (a logged line).
func isNameMismatch(err error) bool {
	if errors.As(err, new(x509.HostnameError)) {
		return true
	}
	s := err.Error()
	for _, m := range []string{"x509: certificate is valid for ", "x509: certificate is not valid for any names", "doesn't contain any IP SANs", "x509: certificate relies on legacy Common Name field"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// LogEvery is how often an Observer logs refusals of one reason.
const LogEvery = 30 * time.Second

// Observer tells and counts the refused handshakes of one server.
type Observer struct {
	Server string
	Log    *slog.Logger
	// IgnoreClosed leaves out connections closed before a handshake
	// (reason closed): a server that peers check with TCP connects, such
	// as an east-west gateway, sees one per check.
	IgnoreClosed bool

	mu         sync.Mutex
	last       map[string]time.Time
	suppressed map[string]int
}

// Refused records a failed handshake with the peer at remote.
func (o *Observer) Refused(remote string, err error) {
	reason := Reason(err)
	if o.IgnoreClosed && reason == "closed" {
		return
	}
	HandshakeErrors.WithLabelValues(o.Server, reason).Inc()
	o.mu.Lock()
	if o.last == nil {
		o.last, o.suppressed = map[string]time.Time{}, map[string]int{}
	}
	now := time.Now()
	if now.Sub(o.last[reason]) < LogEvery {
		o.suppressed[reason]++
		o.mu.Unlock()
		return
	}
	left := o.suppressed[reason]
	o.last[reason], o.suppressed[reason] = now, 0
	o.mu.Unlock()
	// The peer's mistake (or its configuration's), not this side's
	// failure: a warning.
	o.Log.Warn("TLS handshake refused", "server", o.Server, "peer", remote, "reason", reason, "err", err, "leftOutSinceLast", left)
}

// Credentials wraps a gRPC server's or client's transport credentials so
// that its failed handshakes are recorded. A client's Observer is named
// after the server it dials; a handshake its connection attempt abandoned
// (a cancelled or expired context) is no refusal and is not recorded.
func (o *Observer) Credentials(inner credentials.TransportCredentials) credentials.TransportCredentials {
	return &observed{TransportCredentials: inner, o: o}
}

type observed struct {
	credentials.TransportCredentials
	o *Observer
}

func (c *observed) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	out, info, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		c.o.Refused(conn.RemoteAddr().String(), err)
	}
	return out, info, err
}

func (c *observed) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	out, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, conn)
	if err != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		c.o.Refused(conn.RemoteAddr().String(), err)
	}
	return out, info, err
}

func (c *observed) Clone() credentials.TransportCredentials {
	return &observed{TransportCredentials: c.TransportCredentials.Clone(), o: c.o}
}

// ErrorLog is an http.Server's ErrorLog that records its TLS handshake
// errors and passes its other lines to the Observer's log as warnings.
func (o *Observer) ErrorLog() *log.Logger {
	return log.New(errorWriter{o}, "", 0)
}

type errorWriter struct{ o *Observer }

// net/http's line: "http: TLS handshake error from 10.0.0.1:5555: <err>".
var handshakeLine = []byte("http: TLS handshake error from ")

func (w errorWriter) Write(p []byte) (int, error) {
	line := bytes.TrimSpace(p)
	if rest, ok := bytes.CutPrefix(line, handshakeLine); ok {
		addr, msg, _ := strings.Cut(string(rest), ": ")
		w.o.Refused(addr, errors.New(msg))
		return len(p), nil
	}
	w.o.Log.Warn(string(line), "server", w.o.Server)
	return len(p), nil
}

// CertificateRefused is a server's refusal of the client's certificate.
type CertificateRefused struct {
	Addr  string
	Cause error
}

func (e *CertificateRefused) Error() string {
	return fmt.Sprintf("%s refused this client's certificate (%v): check --cert-file and --key-file (a certificate of the fleet CA, not expired) and --ca-file", e.Addr, e.Cause)
}

func (e *CertificateRefused) Unwrap() error { return e.Cause }

// Probe connects to addr with cfg and reads, so that a refusal of the
// client's certificate (an alert the server sends once it checked it)
// arrives: it returns a *CertificateRefused for one, a
// *tls.CertificateVerificationError wrapped for a server certificate the
// client does not trust (its CA, its validity, or names that are not the
// one dialled), and nil when the server accepted the handshake or could
// not be reached (an outage, not a refusal).
func Probe(ctx context.Context, addr string, cfg *tls.Config) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	d := tls.Dialer{Config: cfg.Clone()}
	if d.Config.ServerName == "" {
		host, _, _ := net.SplitHostPort(addr)
		d.Config.ServerName = host
	}
	d.Config.NextProtos = []string{"h2"}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		var verify *tls.CertificateVerificationError
		switch {
		case errors.As(err, &verify) && isNameMismatch(err):
			return fmt.Errorf("%s presents a certificate for other names than the one dialled (check the address against the certificate's names): %w", addr, err)
		case errors.As(err, &verify):
			return fmt.Errorf("%s presents a certificate this client does not trust (check --ca-file): %w", addr, err)
		case isAlert(err):
			return &CertificateRefused{Addr: addr, Cause: err}
		}
		return nil
	}
	defer conn.Close()
	// The server speaks first on HTTP/2 (its SETTINGS) once it accepted
	// the certificate; a refusal arrives as an alert instead.
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err != nil && isAlert(err) {
		return &CertificateRefused{Addr: addr, Cause: err}
	}
	return nil
}

// isAlert says whether err is a TLS alert about the client's certificate
// (crypto/tls reports a peer's alert as "remote error: tls: <alert>").
func isAlert(err error) bool {
	s := err.Error()
	return strings.Contains(s, "remote error: tls:") && (strings.Contains(s, "certificate") || strings.Contains(s, "unknown") || strings.Contains(s, "expired"))
}

// Prober probes a client's servers when its calls fail as Unavailable, at
// most once per ProbeEvery, and keeps the finding meanwhile.
type Prober struct {
	Addrs []string
	// Config is the client's configuration for a connection to addr (one
	// of Addrs), which verifies the server as that address.
	Config func(addr string) (*tls.Config, error)

	mu  sync.Mutex
	at  time.Time
	err error
}

// ProbeEvery bounds how often a Prober dials.
const ProbeEvery = 5 * time.Second

// Check probes the addresses (or returns the last finding, when recent):
// the first refusal found, nil when none.
func (p *Prober) Check(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.at.IsZero() && time.Since(p.at) < ProbeEvery {
		return p.err
	}
	p.at, p.err = time.Now(), nil
	for _, a := range p.Addrs {
		cfg, err := p.Config(a)
		if err == nil {
			err = Probe(ctx, a, cfg)
		}
		if err != nil {
			p.err = err
			break
		}
	}
	return p.err
}

// explain turns an Unavailable err into Unauthenticated naming the
// refusal Check finds, and leaves any other error as it is.
func (p *Prober) explain(ctx context.Context, err error) error {
	if status.Code(err) != codes.Unavailable {
		return err
	}
	if found := p.Check(ctx); found != nil {
		return status.Error(codes.Unauthenticated, found.Error())
	}
	return err
}

// UnaryClientInterceptor explains a call's Unavailable by a refused
// certificate when there is one.
func (p *Prober) UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return p.explain(ctx, invoker(ctx, method, req, reply, cc, opts...))
	}
}

// StreamClientInterceptor does the same for opening a stream.
func (p *Prober) StreamClientInterceptor() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		return s, p.explain(ctx, err)
	}
}
