package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
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
	if timeout <= 0 {
		return next.RoundTrip(req)
	}
	ctx, cancel := context.WithTimeout(req.Context(), timeout)
	resp, err := next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

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
	return d.DialContext(ctx, network, addr)
}
