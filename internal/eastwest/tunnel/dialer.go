package tunnel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fleetnet/fleetnet/internal/tlsrefusal"
	"github.com/prometheus/client_golang/prometheus"
)

// Peer is another cluster's gateway: the cluster its certificate must
// name, at the address the cluster published.
type Peer struct {
	Cluster string
	Address string // host:port
}

// ConnectError is a failure to connect to a peer's gateway (TCP or TLS):
// the gateway itself is unreachable, unlike a refusal or a slow answer,
// which say something about one service behind it.
type ConnectError struct {
	Peer Peer
	Err  error
}

func (e *ConnectError) Error() string {
	return fmt.Sprintf("connecting to cluster %s's gateway at %s: %v", e.Peer.Cluster, e.Peer.Address, e.Err)
}

func (e *ConnectError) Unwrap() error { return e.Err }

// RefusedError is a stream the peer gateway refused, with its status and
// message.
type RefusedError struct {
	Peer    Peer
	Target  Target
	Status  int
	Message string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("cluster %s's gateway refused %s: %d %s", e.Peer.Cluster, e.Target, e.Status, e.Message)
}

// Dialer opens streams to peer gateways over pooled connections: one TLS
// connection to a peer carries as many streams as the peer allows at once
// (MaxStreamsPerConnection from a Server), and another is opened past
// that. The zero value is not usable: set Credentials.
type Dialer struct {
	// Credentials are this cluster's gateway certificate
	// (pki.EastWestCert) and the fleet CA.
	Credentials Credentials
	// DialTimeout bounds a connection and its handshake; 5 s when zero.
	DialTimeout time.Duration
	// Metrics count failed connections (nil: not counted); the Dialer
	// itself is a collector of the connections it holds.
	Metrics *Metrics

	mu    sync.Mutex
	pools map[Peer]*pool
}

// pool is one peer's connections; mu is held while one is being made,
// so that streams waiting for it share it instead of each making one.
type pool struct {
	mu        sync.Mutex
	transport *http.Transport
	conns     []*http.ClientConn
}

// Dial opens a stream to t through p's gateway. ctx bounds the wait for
// the gateway's answer; the stream lives until it is closed. A refusal is
// a *RefusedError, returned as soon as the gateway answers; a gateway
// that cannot be reached a *ConnectError.
func (d *Dialer) Dial(ctx context.Context, p Peer, t Target) (*Stream, error) {
	cc, err := d.conn(ctx, p)
	if err != nil {
		return nil, err
	}
	streamCtx, cancel := context.WithCancel(context.Background())
	stopWait := context.AfterFunc(ctx, cancel) // until the answer comes
	pr, pw := io.Pipe()
	req := (&http.Request{
		Method: http.MethodConnect,
		URL:    &url.URL{Scheme: "https", Host: t.Authority()},
		Host:   t.Authority(),
		Header: http.Header{},
		Body:   pr,
	}).WithContext(streamCtx)
	resp, err := cc.RoundTrip(req)
	if !stopWait() {
		err = errors.Join(err, ctx.Err())
	}
	if err != nil {
		cancel()
		_ = pw.Close()
		if resp != nil {
			resp.Body.Close()
		}
		return nil, fmt.Errorf("stream to %s through cluster %s's gateway at %s: %w", t, p.Cluster, p.Address, err)
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		resp.Body.Close()
		cancel()
		_ = pw.Close()
		return nil, &RefusedError{Peer: p, Target: t, Status: resp.StatusCode, Message: strings.TrimSpace(string(msg))}
	}
	return &Stream{body: resp.Body, pw: pw, cancel: cancel}, nil
}

// conn returns a connection to p with a stream reserved on it.
func (d *Dialer) conn(ctx context.Context, p Peer) (*http.ClientConn, error) {
	d.mu.Lock()
	if d.pools == nil {
		d.pools = map[Peer]*pool{}
	}
	pl := d.pools[p]
	if pl == nil {
		pl = &pool{transport: d.transport(p)}
		d.pools[p] = pl
	}
	d.mu.Unlock()

	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.conns = slices.DeleteFunc(pl.conns, func(cc *http.ClientConn) bool { return cc.Err() != nil })
	for _, cc := range pl.conns {
		if cc.Reserve() == nil {
			return cc, nil
		}
	}
	timeout := d.DialTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cc, err := pl.transport.NewClientConn(dctx, "https", p.Address)
	if err != nil {
		d.Metrics.dialFailed(p.Cluster, dialReason(err))
		return nil, &ConnectError{Peer: p, Err: err}
	}
	if err := cc.Reserve(); err != nil {
		_ = cc.Close()
		return nil, &ConnectError{Peer: p, Err: fmt.Errorf("the new connection takes no stream: %w", err)}
	}
	pl.conns = append(pl.conns, cc)
	return cc, nil
}

// transport makes p's connections: HTTP/2 over TLS that checks p's
// identity (ClientConfig), pings that find a peer gone without a word
// (its streams fail within 20 s rather than hanging).
func (d *Dialer) transport(p Peer) *http.Transport {
	protocols := new(http.Protocols)
	protocols.SetHTTP2(true)
	return &http.Transport{
		TLSClientConfig: ClientConfig(d.Credentials, p.Cluster),
		Protocols:       protocols,
		HTTP2:           &http.HTTP2Config{SendPingTimeout: 15 * time.Second, PingTimeout: 5 * time.Second, MaxReadFrameSize: maxFrameSize},
		// A connection without streams for this long closes: peers that
		// left or moved do not keep theirs.
		IdleConnTimeout: 5 * time.Minute,
	}
}

// dialReason names why a connection to a peer failed: connect (no TCP
// connection), wrong_cluster (the certificate names another cluster), or
// the TLS handshake's reason (tlsrefusal: unknown_authority, expired, ...).
func dialReason(err error) string {
	var op *net.OpError
	var wrong *WrongClusterError
	switch {
	case errors.As(err, &wrong):
		return "wrong_cluster"
	case errors.As(err, &op) && op.Op == "dial", errors.Is(err, context.DeadlineExceeded):
		return "connect"
	}
	return tlsrefusal.Reason(err)
}

// Describe implements prometheus.Collector.
func (d *Dialer) Describe(ch chan<- *prometheus.Desc) { ch <- connectionsDesc }

// Collect implements prometheus.Collector: the live connections held per
// peer cluster.
func (d *Dialer) Collect(ch chan<- prometheus.Metric) {
	d.mu.Lock()
	byCluster := map[string]int{}
	for p, pl := range d.pools {
		pl.mu.Lock()
		for _, cc := range pl.conns {
			if cc.Err() == nil {
				byCluster[p.Cluster]++
			}
		}
		pl.mu.Unlock()
	}
	d.mu.Unlock()
	for c, n := range byCluster {
		ch <- prometheus.MustNewConstMetric(connectionsDesc, prometheus.GaugeValue, float64(n), c)
	}
}

// Close closes every pooled connection, cutting their streams.
func (d *Dialer) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for p, pl := range d.pools {
		pl.mu.Lock()
		for _, cc := range pl.conns {
			errs = append(errs, cc.Close())
		}
		pl.mu.Unlock()
		delete(d.pools, p)
	}
	return errors.Join(errs...)
}

// Stream is one tunnelled connection: what is written reaches the
// endpoint, what the endpoint sends is read.
type Stream struct {
	body   io.ReadCloser
	pw     *io.PipeWriter
	cancel context.CancelFunc
}

// Read reads what the endpoint sent; io.EOF once it closed its side.
func (s *Stream) Read(p []byte) (int, error) { return s.body.Read(p) }

// Write sends p to the endpoint; it waits while the stream has no
// flow-control window.
func (s *Stream) Write(p []byte) (int, error) { return s.pw.Write(p) }

// CloseWrite ends what is sent (the endpoint reads its end), and keeps
// reading.
func (s *Stream) CloseWrite() error { return s.pw.Close() }

// Close ends the stream both ways.
func (s *Stream) Close() error {
	_ = s.pw.CloseWithError(net.ErrClosed)
	err := s.body.Close()
	s.cancel()
	return err
}
