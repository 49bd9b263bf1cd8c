// Package httplimits bounds what HTTP clients may take from fleetnet's
// servers that face them (fleetnet-edge's listeners, fleetnet-discovery's
// API): time to send a request head and each part of a body, keep-alive
// idle time, head size and fields, connections, and time to take each
// part of an answer. Slow clients (slowloris) and clients that stop reading
// are closed on time, and one client cannot hold the others' connections.
package httplimits

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/net/netutil"
)

// Limits are what a client may take.
type Limits struct {
	// ReadHeaderTimeout bounds the reading of a request head (and of a
	// TLS handshake), from its first byte.
	ReadHeaderTimeout time.Duration
	// BodyReadTimeout bounds each wait for more of a request body.
	BodyReadTimeout time.Duration
	// SendTimeout bounds each wait for the client to take more of an
	// answer: a write to its connection that makes no progress for this
	// long fails, and the connection ends (Listener), as does an HTTP/2
	// stream that has had no flow-control window for as long.
	SendTimeout time.Duration
	// IdleTimeout closes a keep-alive connection without a request.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request head.
	MaxHeaderBytes int
	// MaxHeaderFields bounds the fields of a request head, where the
	// server parses heads itself (the edge's fast path).
	MaxHeaderFields int
	// MaxConnections caps the client connections of a listener; more
	// wait in the listen backlog.
	MaxConnections int
}

// Default are nginx's defaults where it has one (client_body_timeout
// 60 s, keepalive_timeout 75 s, large_client_header_buffers 4 × 8 KiB),
// with a shorter header timeout than its 60 s: a client that takes more
// than 10 s to send a head is a slowloris; and half its send_timeout: a
// client that takes nothing for 30 s holds a handler and an upstream
// connection for nothing.
func Default() Limits {
	return Limits{
		ReadHeaderTimeout: 10 * time.Second,
		BodyReadTimeout:   60 * time.Second,
		SendTimeout:       30 * time.Second,
		IdleTimeout:       75 * time.Second,
		MaxHeaderBytes:    32 << 10,
		MaxHeaderFields:   100,
		MaxConnections:    16384,
	}
}

// WithDefaults fills the zero fields from Default.
func (l Limits) WithDefaults() Limits {
	d := Default()
	for _, f := range []struct{ v, def *time.Duration }{
		{&l.ReadHeaderTimeout, &d.ReadHeaderTimeout}, {&l.BodyReadTimeout, &d.BodyReadTimeout}, {&l.IdleTimeout, &d.IdleTimeout},
		{&l.SendTimeout, &d.SendTimeout},
	} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	for _, f := range []struct{ v, def *int }{
		{&l.MaxHeaderBytes, &d.MaxHeaderBytes}, {&l.MaxHeaderFields, &d.MaxHeaderFields}, {&l.MaxConnections, &d.MaxConnections},
	} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	return l
}

// BindFlags registers the limits as flags, with Default's values.
func (l *Limits) BindFlags(fs *pflag.FlagSet) {
	d := Default()
	fs.DurationVar(&l.ReadHeaderTimeout, "client-header-timeout", d.ReadHeaderTimeout, "time a client has to send a request head (and finish a TLS handshake)")
	fs.DurationVar(&l.BodyReadTimeout, "client-body-timeout", d.BodyReadTimeout, "longest wait for more of a request body")
	fs.DurationVar(&l.SendTimeout, "client-send-timeout", d.SendTimeout, "longest wait for a client to take more of an answer (a write, an HTTP/2 stream's flow-control window); the connection or stream then ends")
	fs.DurationVar(&l.IdleTimeout, "client-idle-timeout", d.IdleTimeout, "keep-alive connections without a request are closed after this")
	fs.IntVar(&l.MaxHeaderBytes, "max-header-bytes", d.MaxHeaderBytes, "largest request head")
	fs.IntVar(&l.MaxHeaderFields, "max-header-fields", d.MaxHeaderFields, "most fields in a request head")
	fs.IntVar(&l.MaxConnections, "max-connections", d.MaxConnections, "client connections per listener; more wait in the listen backlog")
}

// Validate refuses negative values (zero takes the default), naming the
// flag.
func (l Limits) Validate() error {
	var errs []error
	for _, f := range []struct {
		name  string
		value time.Duration
	}{{"--client-header-timeout", l.ReadHeaderTimeout}, {"--client-body-timeout", l.BodyReadTimeout}, {"--client-idle-timeout", l.IdleTimeout},
		{"--client-send-timeout", l.SendTimeout}} {
		if f.value < 0 {
			errs = append(errs, fmt.Errorf("%s=%s: must not be negative (0 takes the default)", f.name, f.value))
		}
	}
	for _, f := range []struct {
		name  string
		value int
	}{{"--max-header-bytes", l.MaxHeaderBytes}, {"--max-header-fields", l.MaxHeaderFields}, {"--max-connections", l.MaxConnections}} {
		if f.value < 0 {
			errs = append(errs, fmt.Errorf("%s=%d: must not be negative (0 takes the default)", f.name, f.value))
		}
	}
	return errors.Join(errs...)
}

// Apply sets srv's timeouts and head size (defaults for zero fields).
// No ReadTimeout or WriteTimeout: they would bound whole requests and
// answers, and end long watches and downloads.
func (l Limits) Apply(srv *http.Server) {
	l = l.WithDefaults()
	srv.ReadHeaderTimeout, srv.IdleTimeout, srv.MaxHeaderBytes = l.ReadHeaderTimeout, l.IdleTimeout, l.MaxHeaderBytes
}

// Listener caps ln's open connections, and bounds each write to one by
// the send timeout (sendTimeoutConn).
func (l Limits) Listener(ln net.Listener) net.Listener {
	l = l.WithDefaults()
	return sendTimeoutListener{Listener: netutil.LimitListener(ln, l.MaxConnections), timeout: l.SendTimeout}
}

type sendTimeoutListener struct {
	net.Listener
	timeout time.Duration
}

func (ln sendTimeoutListener) Accept() (net.Conn, error) {
	c, err := ln.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &sendTimeoutConn{Conn: c, timeout: ln.timeout}, nil
}

// sendTimeoutConn is a client connection each of whose writes fails once
// it made no progress for the send timeout: the servers clear write
// deadlines (net/http's without WriteTimeout, the edge's fast path after a
// TLS handshake), so a client that stops reading would otherwise hold the
// writer, its handler and the upstream connection it relays for as long as
// it keeps the socket open. A sooner deadline its user set (a handshake's,
// a close's flush) stands.
type sendTimeoutConn struct {
	net.Conn
	timeout time.Duration
	// set is the write deadline the user set, in Unix nanoseconds; 0 for
	// none.
	set atomic.Int64
}

func (c *sendTimeoutConn) Write(p []byte) (int, error) {
	d := time.Now().Add(c.timeout)
	if set := c.set.Load(); set == 0 || d.UnixNano() < set {
		_ = c.Conn.SetWriteDeadline(d)
	}
	return c.Conn.Write(p)
}

func (c *sendTimeoutConn) SetDeadline(t time.Time) error {
	c.set.Store(unixNano(t))
	return c.Conn.SetDeadline(t)
}

func (c *sendTimeoutConn) SetWriteDeadline(t time.Time) error {
	c.set.Store(unixNano(t))
	return c.Conn.SetWriteDeadline(t)
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// Handler bounds each wait for more of a request body.
func (l Limits) Handler(h http.Handler) http.Handler {
	timeout := l.WithDefaults().BodyReadTimeout
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		TimeBody(w, r, timeout)
		h.ServeHTTP(w, r)
	})
}

// TimeBody makes each read of r's body wait at most timeout for more.
func TimeBody(w http.ResponseWriter, r *http.Request, timeout time.Duration) {
	if r.Body != nil && r.Body != http.NoBody {
		rc := http.NewResponseController(w)
		// Set at once too: a handler that does not read the body leaves
		// it to the server, which reads what is left before the next
		// request.
		_ = rc.SetReadDeadline(time.Now().Add(timeout))
		r.Body = &timedBody{ReadCloser: r.Body, rc: rc, timeout: timeout}
	}
}

type timedBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
}

// Read extends the deadline before each read. Once the body ends,
// net/http clears the deadline itself (its watch for the client going
// away starts then), so a slow answer is not cut by it.
func (b *timedBody) Read(p []byte) (int, error) {
	_ = b.rc.SetReadDeadline(time.Now().Add(b.timeout))
	return b.ReadCloser.Read(p)
}
