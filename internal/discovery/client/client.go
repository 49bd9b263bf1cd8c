// Package client is a small Go client of fleetnet-discovery's HTTP API:
// pools, routers, registrations, and a watch that resumes by itself from
// the last revision after a disconnect. Pools keeps a client's view of the
// pools from the watch's events.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
)

// Options configure a Client.
type Options struct {
	// BaseURL is the server's address, e.g. https://discovery.example:7480.
	BaseURL string
	// HTTPClient carries TLS (the fleet CA, and a client certificate for
	// mutual TLS); nil is http.DefaultClient. Its Timeout, if any, must
	// not be set: it would end watches.
	HTTPClient *http.Client
	// Token is a bearer token; empty sends none.
	Token string
	// MinBackoff and MaxBackoff bound the wait before a watch reconnects
	// (doubling, with jitter); zero are 100ms and 10s.
	MinBackoff, MaxBackoff time.Duration
	// IdleTimeout drops and resumes a watch connection on which nothing,
	// not even a bookmark, arrived for this long; zero is 2 minutes (four
	// of the server's default bookmark intervals).
	IdleTimeout time.Duration
	// Log receives reconnections; nil is slog.Default().
	Log *slog.Logger
}

// Client calls one fleetnet-discovery server.
type Client struct {
	o    Options
	base *url.URL
}

// New returns a client.
func New(o Options) (*Client, error) {
	base, err := url.Parse(o.BaseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("discovery server URL %q: want http(s)://host:port", o.BaseURL)
	}
	if o.HTTPClient == nil {
		o.HTTPClient = http.DefaultClient
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 10 * time.Second
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 2 * time.Minute
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &Client{o: o, base: base}, nil
}

// StatusError is an error answer of the server.
type StatusError struct {
	StatusCode int
	// Body is the server's error: the field and value at fault, and why.
	Body discoveryv1.Error
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.StatusCode, http.StatusText(e.StatusCode), e.Body.Error())
}

// IsNotFound reports whether err is a 404: no such pool, or a registration
// that expired (register again).
func IsNotFound(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.StatusCode == http.StatusNotFound
}

func (c *Client) request(ctx context.Context, method, path string, q url.Values, body any) (*http.Request, error) {
	u := c.base.JoinPath(path)
	u.RawQuery = q.Encode()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.o.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.o.Token)
	}
	return req, nil
}

// do sends a request and decodes a JSON answer into out (nil: none
// expected).
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body, out any) error {
	req, err := c.request(ctx, method, path, q, body)
	if err != nil {
		return err
	}
	resp, err := c.o.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %w", method, path, statusError(resp))
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decoding the answer: %w", method, path, err)
	}
	return nil
}

func statusError(resp *http.Response) error {
	se := &StatusError{StatusCode: resp.StatusCode}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err := json.Unmarshal(b, &se.Body); err != nil || se.Body.Message == "" {
		se.Body = discoveryv1.Error{Message: strings.TrimSpace(string(b))}
	}
	return se
}

// ListOptions filter ListPools.
type ListOptions struct {
	Namespace string
	// LabelSelector is in Kubernetes syntax.
	LabelSelector string
	// Region keeps only each pool's clusters in the region.
	Region string
}

func (o ListOptions) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"namespace": o.Namespace, "labelSelector": o.LabelSelector, "region": o.Region} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// ListPools lists pools.
func (c *Client) ListPools(ctx context.Context, o ListOptions) (*discoveryv1.PoolList, error) {
	var out discoveryv1.PoolList
	return &out, c.do(ctx, http.MethodGet, "/v1/pools", o.query(), nil, &out)
}

// GetPool gets one pool; IsNotFound tells a missing one.
func (c *Client) GetPool(ctx context.Context, namespace, name string) (*discoveryv1.Pool, error) {
	var out discoveryv1.Pool
	return &out, c.do(ctx, http.MethodGet, "/v1/pools/"+url.PathEscape(namespace)+"/"+url.PathEscape(name), nil, nil, &out)
}

// Routers lists the router replicas.
func (c *Client) Routers(ctx context.Context) (*discoveryv1.RouterList, error) {
	var out discoveryv1.RouterList
	return &out, c.do(ctx, http.MethodGet, "/v1/routers", nil, nil, &out)
}

// Register registers pool members; renew the lease before it expires.
func (c *Client) Register(ctx context.Context, reg discoveryv1.Registration) (*discoveryv1.Lease, error) {
	var out discoveryv1.Lease
	return &out, c.do(ctx, http.MethodPost, "/v1/registrations", nil, reg, &out)
}

// Renew renews a registration's lease and, with reg, replaces its members.
// IsNotFound means it expired: register again.
func (c *Client) Renew(ctx context.Context, id string, reg *discoveryv1.Registration) (*discoveryv1.Lease, error) {
	var out discoveryv1.Lease
	var body any
	if reg != nil {
		body = reg
	}
	return &out, c.do(ctx, http.MethodPut, "/v1/registrations/"+url.PathEscape(id), nil, body, &out)
}

// Deregister removes a registration.
func (c *Client) Deregister(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/registrations/"+url.PathEscape(id), nil, nil, nil)
}

// WatchOptions filter a watch and say where it starts.
type WatchOptions struct {
	Namespace     string
	LabelSelector string
	// Revision is the last revision the caller has; zero starts with a
	// snapshot.
	Revision int64
}

// errPermanent marks answers that a retry would not change.
type errPermanent struct{ error }

func (e errPermanent) Unwrap() error { return e.error }

// Watch calls handle with every event, in order, until ctx ends (it then
// returns ctx's error), handle returns an error (returned as is), or the
// server refuses the watch (400, 401, 403: returned as a *StatusError).
//
// After a disconnect it reconnects with backoff and resumes from the last
// revision it may resume from, so handle sees no gap. If the connection
// broke in the middle of a snapshot, handle first gets a reset event (made
// by the client) so that it drops the partial snapshot; the server sends
// the snapshot again. Bookmarks are not passed on.
func (c *Client) Watch(ctx context.Context, o WatchOptions, handle func(discoveryv1.Event) error) error {
	w := &watch{c: c, o: o, rev: o.Revision, handle: handle}
	backoff := c.o.MinBackoff
	for {
		delivered, err := w.once(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var perm errPermanent
		if errors.As(err, &perm) {
			return perm.error
		}
		var herr handlerError
		if errors.As(err, &herr) {
			return herr.error
		}
		if w.inSnapshot {
			w.inSnapshot = false
			if err := handle(discoveryv1.Event{Type: discoveryv1.EventReset, Revision: w.rev}); err != nil {
				return err
			}
		}
		if delivered {
			backoff = c.o.MinBackoff
		}
		// Full jitter over [backoff/2, backoff): replicas that lost the same
		// server do not come back in step.
		wait := backoff/2 + rand.N(backoff/2+1)
		c.o.Log.Info("discovery watch disconnected; resuming", "err", err, "revision", w.rev, "in", wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		backoff = min(2*backoff, c.o.MaxBackoff)
	}
}

type handlerError struct{ error }

type watch struct {
	c      *Client
	o      WatchOptions
	handle func(discoveryv1.Event) error
	// rev is where the next connection resumes from.
	rev int64
	// inSnapshot: snapshot events were passed on since the last synced.
	inSnapshot bool
}

// once runs one connection; delivered says whether it passed anything on.
func (w *watch) once(ctx context.Context) (delivered bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	q := url.Values{}
	if w.rev > 0 {
		q.Set("revision", strconv.FormatInt(w.rev, 10))
	}
	if w.o.Namespace != "" {
		q.Set("namespace", w.o.Namespace)
	}
	if w.o.LabelSelector != "" {
		q.Set("labelSelector", w.o.LabelSelector)
	}
	req, err := w.c.request(ctx, http.MethodGet, "/v1/watch", q, nil)
	if err != nil {
		return false, errPermanent{err}
	}
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := w.c.o.HTTPClient.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		err := statusError(resp)
		switch resp.StatusCode {
		case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
			return false, errPermanent{fmt.Errorf("watch: %w", err)}
		}
		return false, err
	}
	// A connection that went silent (no bookmark either) is dead.
	idle := time.AfterFunc(w.c.o.IdleTimeout, cancel)
	defer idle.Stop()
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF // the server ended the stream: resume
			}
			return delivered, err
		}
		idle.Reset(w.c.o.IdleTimeout)
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var e discoveryv1.Event
		if err := json.Unmarshal(line, &e); err != nil {
			return delivered, fmt.Errorf("watch: undecodable event %.200q: %w", line, err)
		}
		switch e.Type {
		case discoveryv1.EventBookmark:
			w.rev = e.Revision
			continue
		case discoveryv1.EventReset, discoveryv1.EventSnapshot:
			w.inSnapshot = true
		case discoveryv1.EventSynced, discoveryv1.EventUpsert, discoveryv1.EventDelete:
			w.inSnapshot = false
			w.rev = e.Revision
		}
		if err := w.handle(e); err != nil {
			return delivered, handlerError{err}
		}
		delivered = true
	}
}
