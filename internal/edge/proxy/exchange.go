package proxy

import (
	"context"
	"errors"
	"net/http"
	"os"
	"time"

	"github.com/fleetnet/fleetnet/internal/edge/http1"
)

// An exchange forwards one request over the edge's own upstream pools
// (upstream.go), on the request's goroutine: the endpoint's answer is read
// with internal/edge/http1 and relayed as it arrives. Two client sides
// use it: the fast path's HTTP/1.1 connections (fast.go) and net/http's
// HTTP/2 streams (stream.go). Retries, passive health and timeouts are
// the same on both, and the same as the net/http path's (retry.go).

// exchangeClient is the side of an exchange that faces the client.
type exchangeClient interface {
	// sendRequest writes the request head, as net/http's reverse proxy
	// rewrites it, and its body to up.
	sendRequest(x *exchangeState, up *upConn) error
	// informational passes an interim (1xx) answer, up's head, on.
	informational(x *exchangeState, up *upConn) error
	// writeAnswer writes up's answer, head and body, to the client;
	// x.respHeadLen bytes of up's reader are its head.
	writeAnswer(x *exchangeState, up *upConn) error
	// fail answers a request that got no answer from an endpoint.
	fail(x *exchangeState, code int)
}

// exchangeState is one request's forwarding.
type exchangeState struct {
	p      *Proxy
	client exchangeClient
	pk     *picked
	// deadline is the route's request timeout; zero when none.
	deadline time.Time
	// ctx, when set, ends the exchange when it is done (the client reset
	// its stream): the endpoint's connection is closed.
	ctx context.Context
	// unwatch stops watching ctx for the attempt's connection; false when
	// ctx ended meanwhile.
	unwatch func() bool
	// method of the request, kept apart from the head's views.
	method string
	// bodiless: the request has no body, so it can be sent again.
	bodiless bool
	// respHeadLen is the length of the response head read last.
	respHeadLen int
}

// newExchange is the exchange of a request that arrived at start, whose
// route's request timeout counts from then.
func newExchange(p *Proxy, client exchangeClient, pk *picked, start time.Time, method string, bodiless bool) exchangeState {
	x := exchangeState{p: p, client: client, pk: pk, method: method, bodiless: bodiless}
	if ms := pk.route.Timeouts.RequestMillis; ms > 0 {
		x.deadline = start.Add(time.Duration(ms) * time.Millisecond)
	}
	return x
}

// forward sends the request to its endpoint, retrying as the backend's
// policy says, and relays the answer; it returns the status sent.
func (x *exchangeState) forward() int {
	pk := x.pk
	b := pk.backend
	retries := 0
	if x.bodiless && idempotentMethod(x.method) {
		retries = b.policy.attempts
	}
	tried := pk.cluster.bit
	var up *upConn
	var err error
	for {
		up, err = x.attempt()
		x.passive(up, err)
		if retries == 0 || x.expired() || (err == nil && !b.policy.retriesOn(up.head.Status)) {
			break
		}
		c, ep := b.pick(tried, pk.endpoint)
		if c == nil {
			break
		}
		if up != nil {
			x.discard(up)
		}
		pk.cluster, pk.endpoint = c, ep
		tried |= c.bit
		retries--
		x.p.metrics.retries.WithLabelValues(pk.route.name, b.name).Inc()
	}
	if err != nil {
		code := http.StatusBadGateway
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
			code = http.StatusGatewayTimeout
		}
		x.p.log.Info("backend request failed", "route", pk.route.name, "backend", b.name, "err", err)
		x.client.fail(x, code)
		return code
	}
	return x.relay(up)
}

func (x *exchangeState) expired() bool {
	return !x.deadline.IsZero() && !time.Now().Before(x.deadline)
}

// canceled reports whether the client ended the exchange.
func (x *exchangeState) canceled() bool {
	return x.ctx != nil && x.ctx.Err() != nil
}

// attempt sends the request to the picked endpoint and reads the answer's
// head, on a pooled connection when one is idle. A pooled connection the
// endpoint closed meanwhile fails before any answer: a request that can be
// sent again is, once, on a new connection.
func (x *exchangeState) attempt() (*upConn, error) {
	pk := x.pk
	timeout := millis(pk.route.Timeouts.BackendRequestMillis)
	if timeout <= 0 {
		timeout = pk.backend.policy.backendRequest
	}
	deadline := x.deadline
	if timeout > 0 {
		if d := time.Now().Add(timeout); deadline.IsZero() || d.Before(deadline) {
			deadline = d
		}
	}
	replayable := x.bodiless && idempotentMethod(x.method)
	for fresh := false; ; fresh = true {
		if x.canceled() {
			return nil, x.ctx.Err()
		}
		up, reused, err := x.p.upstreams.get(pk.endpoint.hostport, fresh, pk.backend.policy.connect, deadline)
		if err != nil {
			return nil, err
		}
		if reused && !replayable && !up.alive() {
			// Checked first: a request that cannot be sent again must
			// not go to a connection the endpoint has closed: a new one.
			_ = up.conn.Close()
			continue
		}
		if !deadline.IsZero() {
			up.deadline = true
			_ = up.conn.SetDeadline(deadline)
		}
		x.watch(up)
		err = x.client.sendRequest(x, up)
		if err == nil {
			err = x.readHead(up)
		}
		if err == nil {
			return up, nil
		}
		x.stopWatching()
		_ = up.conn.Close()
		if x.canceled() {
			return nil, x.ctx.Err()
		}
		var he *http1.Error
		if reused && replayable && !errors.As(err, &he) && !errors.Is(err, os.ErrDeadlineExceeded) {
			continue
		}
		return nil, err
	}
}

// watch ends up's reads and writes once x.ctx ends. The connection is
// pooled only when the watch stopped before that (stopWatching), so the
// deadline it moves never reaches another request.
func (x *exchangeState) watch(up *upConn) {
	if x.ctx == nil {
		return
	}
	x.unwatch = context.AfterFunc(x.ctx, func() { _ = up.conn.SetDeadline(time.Unix(1, 0)) })
}

// stopWatching stops watching x.ctx; false when it ended meanwhile, and
// the connection's deadline was moved to the past.
func (x *exchangeState) stopWatching() bool {
	if x.unwatch == nil {
		return true
	}
	ok := x.unwatch()
	x.unwatch = nil
	return ok
}

// readHead reads the endpoint's response head, passing informational
// (1xx) answers on to the client.
func (x *exchangeState) readHead(up *upConn) error {
	var method []byte
	if x.method == http.MethodHead {
		method = []byte(http.MethodHead)
	}
	for {
		var n int
		for {
			buf, _ := up.br.Peek(up.br.Buffered())
			var err error
			n, err = http1.ParseResponse(buf, method, &up.head, http1.Limits{MaxFields: 256})
			if err == nil {
				break
			}
			if err != http1.ErrIncomplete {
				return err
			}
			if up.br.Buffered() == up.br.Size() {
				return &http1.Error{Status: http.StatusBadGateway, Reason: "response head too large"}
			}
			if _, err := up.br.Peek(up.br.Buffered() + 1); err != nil {
				return err
			}
		}
		st := up.head.Status
		if st >= 200 {
			x.respHeadLen = n
			return nil
		}
		if st == http.StatusSwitchingProtocols {
			return &http1.Error{Status: http.StatusBadGateway, Reason: "101 to a request without Upgrade"}
		}
		err := x.client.informational(x, up)
		_, _ = up.br.Discard(n)
		if err != nil {
			return &clientError{err}
		}
	}
}

// passive feeds an attempt's outcome to its endpoint's passive check, as
// the net/http path does (feedPassive).
func (x *exchangeState) passive(up *upConn, err error) {
	status := 0
	if up != nil {
		status = up.head.Status
	}
	var ce *clientError
	feedPassive(x.pk, status, err, errors.As(err, &ce) || x.expired() || x.canceled())
}

// discard ends an answer that is retried: a short body is read so that
// the connection can be reused.
func (x *exchangeState) discard(up *upConn) {
	_, _ = up.br.Discard(x.respHeadLen)
	h := &up.head
	if x.stopWatching() && !h.Close {
		if h.Framing == http1.Length && h.ContentLength <= 4<<10 {
			if _, err := up.br.Discard(int(h.ContentLength)); err == nil {
				x.p.upstreams.put(up)
				return
			}
		}
		if h.Framing == http1.NoBody {
			x.p.upstreams.put(up)
			return
		}
	}
	_ = up.conn.Close()
}

// relay writes the answer to the client and returns its status; the
// endpoint's connection goes back to its pool when the answer ended
// cleanly and the endpoint keeps it open.
func (x *exchangeState) relay(up *upConn) int {
	h := &up.head
	status := h.Status
	err := x.client.writeAnswer(x, up)
	watched := x.stopWatching()
	switch {
	case err != nil:
		// The endpoint or the client went away mid-answer.
		_ = up.conn.Close()
		x.p.log.Info("relaying the response failed", "route", x.pk.route.name, "backend", x.pk.backend.name, "err", err)
	case !watched, h.Close, h.Framing == http1.UntilClose:
		_ = up.conn.Close()
	default:
		// Last: once pooled, another request may take it, and its head.
		x.p.upstreams.put(up)
	}
	return status
}
