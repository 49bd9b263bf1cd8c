package proxy

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// handoff is the listener a port's net/http server accepts from when the
// fast path serves the port: connections the fast path passes on (HTTP/2,
// upgrades and anything unusual), from a request boundary.
type handoff struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newHandoff(addr net.Addr) *handoff {
	return &handoff{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

func (h *handoff) Accept() (net.Conn, error) {
	select {
	case c := <-h.ch:
		return c, nil
	case <-h.done:
		return nil, net.ErrClosed
	}
}

func (h *handoff) Close() error {
	h.once.Do(func() { close(h.done) })
	return nil
}

func (h *handoff) Addr() net.Addr { return h.addr }

// push gives net/http a connection; it is closed when the server is gone.
func (h *handoff) push(c net.Conn) {
	select {
	case h.ch <- c:
	case <-h.done:
		_ = c.Close()
	}
}

// prefixConn is a connection whose first bytes were already read (the
// request head the fast path looked at and the bytes after it): reads
// return them first.
type prefixConn struct {
	net.Conn
	prefix []byte
	// tls is the TLS connection under Conn, if any: net/http sees a
	// prefixConn, not a *tls.Conn, so the request's TLS state comes
	// from here (connContext).
	tls *tls.Conn
}

func (c *prefixConn) Read(b []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(b, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

type tlsStateKey struct{}

// connContext gives requests of TLS connections that the fast path handed
// over their TLS state.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if pc, ok := c.(*prefixConn); ok && pc.tls != nil {
		st := pc.tls.ConnectionState()
		return context.WithValue(ctx, tlsStateKey{}, &st)
	}
	return ctx
}

// withTLSState sets r.TLS for a request of a handed-over TLS connection.
func withTLSState(r *http.Request) {
	if r.TLS == nil {
		if st, ok := r.Context().Value(tlsStateKey{}).(*tls.ConnectionState); ok {
			r.TLS = st
		}
	}
}

// dateNow is the Date field value of the current second, shared by every
// answer of that second without a lock.
var dateNow atomic.Pointer[dateValue]

type dateValue struct {
	unix int64
	v    []byte
}

// appendDate appends the current Date field value.
func appendDate(b []byte, now time.Time) []byte {
	d := dateNow.Load()
	if d == nil || d.unix != now.Unix() {
		d = &dateValue{unix: now.Unix(), v: now.UTC().AppendFormat(nil, http.TimeFormat)}
		dateNow.Store(d)
	}
	return append(b, d.v...)
}
