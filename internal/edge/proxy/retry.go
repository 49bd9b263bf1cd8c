package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"syscall"
	"time"
)

// retrying is the forwarder's transport: it sends each attempt over the
// backend's protocol within its timeout, feeds the outcome to the
// endpoint's passive check, and sends an idempotent request again by the
// backend's Retry policy: up to Attempts more times, when an attempt
// fails before a response or answers with one of Codes, each time to an
// endpoint of a cluster not tried yet while one remains, else to another
// healthy endpoint.
type retrying struct {
	http1, h2c http.RoundTripper
	metrics    *metrics
}

func (t *retrying) RoundTrip(req *http.Request) (*http.Response, error) {
	pk, _ := req.Context().Value(pickedKey{}).(*picked)
	if pk == nil || pk.endpoint == nil {
		return nil, errors.New("request was not routed to an endpoint")
	}
	b := pk.backend
	retries := 0
	if idempotent(req) {
		retries = b.policy.attempts
	}
	tried := pk.cluster.bit
	out := req
	for {
		resp, err := t.attempt(out, pk)
		t.passive(req.Context(), pk, resp, err)
		if retries == 0 || req.Context().Err() != nil || (err == nil && !b.policy.retriesOn(resp.StatusCode)) {
			return resp, err
		}
		c, ep := b.pick(tried, pk.endpoint)
		if c == nil {
			return resp, err
		}
		next := req.Clone(req.Context())
		if req.Body != nil && req.Body != http.NoBody {
			body, gerr := req.GetBody()
			if gerr != nil {
				return resp, err
			}
			next.Body = body
		}
		if resp != nil {
			// Read a little so that the connection can be reused; a
			// longer body costs a new connection, not a long read.
			_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
			_ = resp.Body.Close()
		}
		next.URL.Host = ep.hostport
		pk.cluster, pk.endpoint = c, ep
		tried |= c.bit
		retries--
		t.metrics.retries.WithLabelValues(pk.route.name, b.name).Inc()
		out = next
	}
}

// passive feeds an attempt's outcome to its endpoint's passive check.
func (t *retrying) passive(ctx context.Context, pk *picked, resp *http.Response, err error) {
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	feedPassive(pk, status, err, ctx.Err() != nil)
}

// feedPassive feeds an attempt's outcome to its endpoint's passive check,
// on both paths: a failed connection ejects the endpoint at once; a 5xx
// answer, or a failure after connecting that the client did not cause (a
// reset, the backend request timeout), counts toward Consecutive5xx.
// notEndpoints: the failure came from the client or the request's own
// end (the route's timeout), and says nothing of the endpoint.
func feedPassive(pk *picked, status int, err error, notEndpoints bool) {
	h, pol := pk.endpoint.health, &pk.backend.policy
	switch {
	case err == nil:
		h.Answered(status >= 500, pol.consecutive5xx, pol.ejection)
	case connectFailed(err):
		h.FailedToConnect()
	case !notEndpoints:
		h.Answered(true, pol.consecutive5xx, pol.ejection)
	}
}

// connectFailed reports whether err is a failure to connect, which says
// the endpoint is down (rather than slow or broken mid-response).
func connectFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// attempt sends req once, over h2c when the backend's appProtocol says
// so, within the route's backendRequest timeout, or the backend policy's
// when the route sets none.
func (t *retrying) attempt(req *http.Request, pk *picked) (*http.Response, error) {
	next := t.http1
	if pk.backend.h2c {
		next = t.h2c
	}
	timeout := millis(pk.route.Timeouts.BackendRequestMillis)
	if timeout <= 0 {
		timeout = pk.backend.policy.backendRequest
	}
	send := next.RoundTrip
	if !pk.backend.h2c && !idempotent(req) {
		send = func(req *http.Request) (*http.Response, error) { return sendUnrepeatable(next, req) }
	}
	if timeout <= 0 {
		return send(req)
	}
	ctx, cancel := context.WithTimeout(req.Context(), timeout)
	resp, err := send(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// sendUnrepeatable sends, over HTTP/1, a request that must not reach the
// endpoint twice. net/http's transport sends such a request again only
// when none of it was written and its body can be read again (GetBody),
// and not at all when its idle connection was found closed at the moment
// it was taken ("server closed idle connection"). So: an idle pooled
// connection the endpoint already closed is closed before use (the fast
// path checks the same way), which makes the write fail with nothing
// written; up to maxReplay bytes of the body are kept for GetBody; and a
// request that failed on a reused connection without a byte of it written
// is sent again here, up to maxStale times. Without this a POST after the
// endpoint closed a kept-alive connection would fail with a 502.
func sendUnrepeatable(rt http.RoundTripper, req *http.Request) (*http.Response, error) {
	var rb *replayBody
	if req.Body != nil && req.Body != http.NoBody {
		rb = &replayBody{src: req.Body}
	}
	for stale := 0; ; stale++ {
		// The connection the transport's last attempt used, if reused,
		// and its bytes written before it.
		var used *countingConn
		var before int64
		trace := &httptrace.ClientTrace{GetConn: func(string) { used = nil }, GotConn: func(info httptrace.GotConnInfo) {
			used = nil
			c, ok := info.Conn.(*countingConn)
			if !ok || !info.Reused {
				return
			}
			used, before = c, c.written.Load()
			if info.WasIdle && !connAlive(c) {
				_ = c.Close()
			}
		}}
		out := req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		if rb != nil {
			// GetBody also makes a POST with an Idempotency-Key header
			// replayable to net/http, which would then send it again
			// after it was written: refuse unless nothing was.
			out.Body, out.GetBody = &replayReader{body: rb}, func() (io.ReadCloser, error) {
				if used != nil && used.written.Load() != before {
					return nil, errors.New("request written: not sent again")
				}
				return rb.again()
			}
		}
		resp, err := rt.RoundTrip(out)
		if err == nil || used == nil || used.written.Load() != before || stale == maxStale ||
			req.Context().Err() != nil || (rb != nil && rb.over) {
			return resp, err
		}
	}
}

// maxStale bounds how many closed connections one request may meet.
const maxStale = 4

// maxReplay bounds the request body kept for sending again.
const maxReplay = 64 << 10

// replayBody records what its readers read of a request body, up to
// maxReplay bytes, so that another reader can start again from the
// beginning. One reader reads at a time: the transport asks for the next
// (GetBody) after the write with the previous one ended.
type replayBody struct {
	src  io.ReadCloser
	rec  []byte
	over bool // more than maxReplay bytes were read: no replay
}

func (b *replayBody) again() (io.ReadCloser, error) {
	if b.over {
		return nil, errors.New("request body too long to send again")
	}
	return &replayReader{body: b}, nil
}

// replayReader reads what was recorded, then on from the source.
type replayReader struct {
	body *replayBody
	off  int
}

func (r *replayReader) Read(p []byte) (int, error) {
	b := r.body
	if r.off < len(b.rec) {
		n := copy(p, b.rec[r.off:])
		r.off += n
		return n, nil
	}
	n, err := b.src.Read(p)
	if n > 0 && !b.over {
		if len(b.rec)+n > maxReplay {
			b.over, b.rec = true, nil
		} else {
			b.rec = append(b.rec, p[:n]...)
			r.off = len(b.rec)
		}
	}
	return n, err
}

// Close leaves the source open for the next reader: it is the inbound
// request's body, which the server closes when the handler returns.
func (r *replayReader) Close() error { return nil }

// idempotent: a request that may be sent again (its body, if any, can be
// read again).
func idempotent(req *http.Request) bool {
	return idempotentMethod(req.Method) && (req.Body == nil || req.Body == http.NoBody || req.GetBody != nil)
}

// idempotentMethod reports the methods whose requests may be sent again.
func idempotentMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// cancelOnClose ends a backend request's timeout when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// dial connects to an endpoint within the connect timeout of the backend
// the request was routed to. The transport dials with a context that
// keeps the request's values but not its cancellation (net/http's
// Transport.getConn, checked in Go 1.26), so the picked backend is found
// there. A connection dialed for one request may serve another later;
// the timeout is that of the request that asked for it.
func dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: defaultConnect, KeepAlive: 30 * time.Second}
	if pk, ok := ctx.Value(pickedKey{}).(*picked); ok && pk.backend != nil {
		d.Timeout = pk.backend.policy.connect
	}
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c}, nil
}

// countingConn counts the bytes written to an endpoint, which tells
// whether any of a failed request reached it (sendUnrepeatable).
type countingConn struct {
	net.Conn
	written atomic.Int64
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.written.Add(int64(n))
	return n, err
}

// ReadFrom keeps the TCP connection's own ReadFrom (splice) for bodies.
func (c *countingConn) ReadFrom(r io.Reader) (int64, error) {
	n, err := io.Copy(c.Conn, r)
	c.written.Add(n)
	return n, err
}

// SyscallConn lets connAlive peek at the connection.
func (c *countingConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.New("connection has no file descriptor")
	}
	return sc.SyscallConn()
}
