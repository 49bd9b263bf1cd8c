package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// retrying sends a request once more, to an endpoint of another cluster,
// when the first attempt failed before any response and the request can be
// sent again safely: an idempotent method without a body, or with one the
// request can replay.
type retrying struct {
	http1, h2c http.RoundTripper
	health     *health
}

func (t *retrying) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.attempt(req)
	if err == nil || req.Context().Err() != nil {
		return resp, err
	}
	pk, _ := req.Context().Value(pickedKey{}).(*picked)
	if pk == nil || pk.backend == nil {
		return resp, err
	}
	if connectFailed(err) {
		t.health.failed(pk.endpoint) // passive ejection
	}
	if !idempotent(req) {
		return resp, err
	}
	avoid := ""
	if pk.cluster != nil {
		avoid = pk.cluster.Cluster
	}
	c, ep := pk.backend.pick(avoid, t.health.healthy)
	if c == nil {
		return resp, err
	}
	retry := req.Clone(req.Context())
	if req.Body != nil && req.Body != http.NoBody {
		body, gerr := req.GetBody()
		if gerr != nil {
			return resp, err
		}
		retry.Body = body
	}
	retry.URL.Host = net.JoinHostPort(ep.Address, strconv.Itoa(int(ep.Port)))
	pk.cluster, pk.endpoint = c, ep
	resp, err = t.attempt(retry)
	if err != nil && connectFailed(err) {
		t.health.failed(ep)
	}
	return resp, err
}

// connectFailed reports whether err is a failure to connect, which says
// the endpoint is down (rather than slow or broken mid-response).
func connectFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// attempt sends req once, over h2c when the backend's appProtocol says
// so, within the route's backendRequest timeout.
func (t *retrying) attempt(req *http.Request) (*http.Response, error) {
	next := t.http1
	var timeout time.Duration
	if pk, ok := req.Context().Value(pickedKey{}).(*picked); ok {
		if ap := pk.backend.AppProtocol; ap == "kubernetes.io/h2c" || ap == "h2c" {
			next = t.h2c
		}
		timeout = time.Duration(pk.route.Timeouts.BackendRequestMillis) * time.Millisecond
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

func idempotent(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
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
