// Package proxy is fleetnet-edge's data plane: it serves a model of the
// gateway controller as HTTP(S) listeners, routes each request by the
// Gateway API's rules (the model is already in match precedence order),
// applies the route's filters, splits traffic between backends and
// clusters by weight and forwards to an endpoint. Each backend's policy in
// the model says how its endpoints are checked (policy.go,
// internal/edge/health), picked (pick.go, internal/edge/pick) and retried
// (retry.go).
//
// A model is compiled into an immutable table and swapped whole: a request
// routes on the table it started with, so a swap drops nothing in flight.
package proxy

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/edge/accesslog"
	"github.com/fleetnet/fleetnet/internal/edge/h2server"
	"github.com/fleetnet/fleetnet/internal/edge/health"
	"github.com/fleetnet/fleetnet/internal/httplimits"
	"github.com/fleetnet/fleetnet/internal/tlsrefusal"

	"github.com/prometheus/client_golang/prometheus"
)

// Options configure a Proxy. How endpoints are checked, retried and
// picked is each backend's edgev1.BackendPolicy, from the model.
type Options struct {
	// ListenHost is the address listeners bind, e.g. 127.0.0.1 or "" for
	// every interface.
	ListenHost string
	// Region is the edge's region: backends whose policy is LocalFirst
	// prefer the clusters of this region. None when "".
	Region string
	Log    *slog.Logger
	// Registerer receives the proxy's metrics; none when nil.
	Registerer prometheus.Registerer
	// AccessLog, when set, gets a JSON line per request (method, host,
	// path, code, route, backend, cluster, duration).
	AccessLog *accesslog.Writer
	// Health checks the endpoints; a checker shared with the edge's
	// other data planes (an endpoint checked alike by both is probed
	// once). The proxy runs its own when nil.
	Health *health.Checker
	// NetHTTPOnly serves every request through net/http's server and
	// reverse proxy, without the HTTP/1.1 fast path (fast.go).
	NetHTTPOnly bool
	// Clients bounds what clients may take; zero fields take
	// httplimits.Default's values.
	Clients ClientLimits
}

// ClientLimits protect the edge from slow and abusive clients.
type ClientLimits = httplimits.Limits

// Proxy serves models.
type Proxy struct {
	opts    Options
	log     *slog.Logger
	table   atomic.Pointer[table]
	http1   *http.Transport
	h2c     *http.Transport
	metrics *metrics
	// refusals records the HTTPS listeners' failed handshakes.
	refusals *tlsrefusal.Observer
	health   *health.Checker
	// ownHealth: the proxy started health and closes it.
	ownHealth bool
	// checks are the units of the served table.
	checks  *health.Set
	forward *httputil.ReverseProxy
	// limits are Options.Clients with defaults.
	limits ClientLimits
	// upstreams are the fast path's connections to endpoints.
	upstreams *upstreams

	mu      sync.Mutex
	servers map[socket]*listener
}

type listener struct {
	srv *http.Server
	// h2 serves the port's HTTP/2 connections (ALPN h2, or h2c prior
	// knowledge) when the fast path accepts; nil with NetHTTPOnly.
	h2   *h2server.Server
	ln   net.Listener
	addr net.Addr
	tls  bool
	// fast serves the port's HTTP/1.1 requests; nil with NetHTTPOnly.
	fast *fastServer
}

// New returns a proxy that serves nothing until Apply.
func New(o Options) *Proxy {
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	base := &http.Transport{
		Proxy: nil,
		// Within the connect timeout of the request's backend: an endpoint
		// that vanished without a reset (a stopped pod whose address no
		// longer answers ARP) would otherwise hold an idempotent request
		// for the dialer's whole timeout before it is retried elsewhere.
		DialContext:         dial,
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 256, // keep-alive pool per endpoint
		IdleConnTimeout:     90 * time.Second,
		// A proxy passes the client's Accept-Encoding on as it is; left
		// on, the transport would ask backends for gzip the client did not
		// ask for and spend the edge's CPU decompressing it.
		DisableCompression: true,
	}
	h2c := base.Clone()
	h2c.Protocols = new(http.Protocols)
	h2c.Protocols.SetUnencryptedHTTP2(true)
	p := &Proxy{opts: o, log: log, http1: base, h2c: h2c, servers: map[socket]*listener{}, health: o.Health,
		limits: o.Clients.WithDefaults(), upstreams: newUpstreams()}
	if p.health == nil {
		p.health, p.ownHealth = health.New(), true
	}
	p.checks = p.health.NewSet()
	p.table.Store(&table{ports: map[socket]*port{}})
	p.metrics = newMetrics(o.Registerer, p.table.Load)
	p.refusals = &tlsrefusal.Observer{Server: "edge-https", Log: log}
	if o.Registerer != nil {
		if err := tlsrefusal.Register(o.Registerer); err != nil {
			panic(err) // as newMetrics' MustRegister
		}
	}
	p.forward = p.newForwarder()
	return p
}

// Unbound is a socket of a model that the proxy could not listen on (in
// use by another process, or by the edge itself).
type Unbound struct {
	// Host is the Gateway's own address, "" for the edge's listen host.
	Host string
	Port int32
	Err  error
}

// Apply serves m from now on. Certificates are the listeners' TLS key
// pairs by their model digest. A socket that cannot be bound is left out
// and returned, and the rest of m is served: one Gateway's listener on a
// taken port must not stop every other update of the edge. An error (a
// model the edge cannot serve) leaves what was served before in place.
func (p *Proxy) Apply(m *edgev1.Model, certs map[string]*tls.Certificate) ([]Unbound, error) {
	t, err := compile(m, certs, p.opts.Region)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var unbound []Unbound
	for at, pt := range t.ports {
		if l, ok := p.servers[at]; ok {
			if l.tls == pt.tls {
				continue
			}
			// HTTP became HTTPS or back: this port starts again.
			p.stop(at)
		}
		l, err := p.listen(at, pt.tls)
		if err != nil {
			unbound = append(unbound, Unbound{Host: at.host, Port: at.number, Err: err})
			delete(t.ports, at)
			continue
		}
		p.servers[at] = l
	}
	track(p.checks, t)
	p.table.Store(t)
	p.upstreams.retain(t.endpoints())
	for at := range p.servers {
		if _, ok := t.ports[at]; !ok {
			p.stop(at)
		}
	}
	slices.SortFunc(unbound, func(a, b Unbound) int { return cmp.Or(cmp.Compare(a.Host, b.Host), cmp.Compare(a.Port, b.Port)) })
	p.log.Info("serving model", "version", t.version, "ports", len(t.ports), "unbound", len(unbound))
	return unbound, nil
}

// Addr returns the address a port of the model is bound to at the edge's
// listen host (Gateways without an address of their own).
func (p *Proxy) Addr(port int32) net.Addr {
	return p.AddrAt("", port)
}

// AddrAt returns the address a port of the model is bound to at host, a
// Gateway's own address ("" for the edge's listen host).
func (p *Proxy) AddrAt(host string, port int32) net.Addr {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l := p.servers[socket{host: host, number: port}]; l != nil {
		return l.addr
	}
	return nil
}

// Close stops the health checks of the proxy's endpoints (all of them
// when it runs its own checker) and every listener, letting requests in
// flight finish.
func (p *Proxy) Close(ctx context.Context) error {
	if p.ownHealth {
		p.health.Close()
	} else {
		p.checks.Release()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for num, l := range p.servers {
		errs = append(errs, l.shutdown(ctx))
		delete(p.servers, num)
	}
	p.upstreams.close()
	return errors.Join(errs...)
}

func (p *Proxy) listen(at socket, useTLS bool) (*listener, error) {
	host := at.host
	if host == "" {
		host = p.opts.ListenHost
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(int(at.number))))
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", at, err)
	}
	addr := ln.Addr()
	ln = p.limits.Listener(ln)
	srv := &http.Server{
		Handler:     http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { p.serve(at, w, r) }),
		ErrorLog:    slog.NewLogLogger(p.log.Handler(), slog.LevelWarn),
		Protocols:   new(http.Protocols),
		ConnContext: connContext,
	}
	p.limits.Apply(srv)
	// HTTP/1 always; HTTP/2 by ALPN over TLS, and with prior knowledge
	// (h2c) over cleartext, as gRPC clients and other proxies speak it.
	srv.Protocols.SetHTTP1(true)
	var tlsConfig *tls.Config
	if useTLS {
		// Refused handshakes (scanners, clients of an unknown name) are
		// counted and logged rate-limited, not line by line.
		srv.ErrorLog = p.refusals.ErrorLog()
		srv.Protocols.SetHTTP2(true)
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"},
			GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
				return p.certificate(at, hello.ServerName)
			}}
	} else {
		srv.Protocols.SetUnencryptedHTTP2(true)
	}
	l := &listener{srv: srv, ln: ln, addr: addr, tls: useTLS}
	switch {
	case p.opts.NetHTTPOnly && useTLS:
		srv.TLSConfig = tlsConfig
		go func() { p.served(at, srv.ServeTLS(ln, "", "")) }()
	case p.opts.NetHTTPOnly:
		go func() { p.served(at, srv.Serve(ln)) }()
	default:
		// The fast path accepts; net/http serves what it hands over,
		// TLS connections already past their handshake.
		hand := newHandoff(addr)
		// HTTP/2 connections, TLS ones past their handshake, are served
		// by the edge's own HTTP/2 server, their writes coalesced.
		l.h2 = &h2server.Server{Handler: srv.Handler, Log: p.log, MaxHeaderBytes: p.limits.MaxHeaderBytes,
			ReadHeaderTimeout: p.limits.ReadHeaderTimeout, IdleTimeout: p.limits.IdleTimeout, SendTimeout: p.limits.SendTimeout}
		l.fast = &fastServer{p: p, at: at, ln: ln, hand: hand, h2: l.h2, tlsCfg: tlsConfig, conns: map[*fastConn]struct{}{}}
		go l.fast.acceptLoop()
		go func() { p.served(at, srv.Serve(hand)) }()
	}
	return l, nil
}

func (p *Proxy) served(at socket, err error) {
	if err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
		p.log.Error("listener failed", "port", at.number, "host", at.host, "err", err)
	}
}

// shutdown ends a listener's connections, letting requests in flight
// finish within ctx.
func (l *listener) shutdown(ctx context.Context) error {
	// At once on every server: each tells its clients (GOAWAY, Connection:
	// close) as soon as the shutdown starts.
	stops := []func(context.Context) error{l.srv.Shutdown}
	if l.fast != nil {
		stops = append(stops, l.fast.shutdown)
	}
	if l.h2 != nil {
		stops = append(stops, l.h2.Shutdown)
	}
	errs := make([]error, len(stops))
	var wg sync.WaitGroup
	for i, stop := range stops {
		wg.Go(func() { errs[i] = stop(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// stop closes a port's listener; requests in flight finish in the
// background. Callers hold p.mu.
func (p *Proxy) stop(at socket) {
	l := p.servers[at]
	delete(p.servers, at)
	// The port is free at once (a listener of the other protocol may take
	// it next); the requests in flight finish in the background.
	_ = l.ln.Close()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = l.shutdown(ctx)
	}()
}

// certificate picks a listener's certificate by SNI: the exact hostname,
// then a wildcard, then the port's default.
func (p *Proxy) certificate(at socket, sni string) (*tls.Certificate, error) {
	pt := p.table.Load().ports[at]
	if pt == nil {
		return nil, fmt.Errorf("%s serves nothing", at)
	}
	sni = strings.ToLower(sni)
	if c, ok := pt.certs[sni]; ok {
		return c, nil
	}
	if i := strings.IndexByte(sni, '.'); i > 0 {
		if c, ok := pt.certs["*"+sni[i:]]; ok {
			return c, nil
		}
	}
	return pt.defaultCert, nil
}

// picked is what a request was routed to, for the retry and for metrics.
type picked struct {
	route    *route
	backend  *backend
	cluster  *cluster
	endpoint *endpoint
	rewrite  *edgev1.Rewrite
	respMods []*edgev1.HeaderModifier
}

type pickedKey struct{}

func (p *Proxy) serve(at socket, w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	withTLSState(r)
	httplimits.TimeBody(w, r, p.limits.BodyReadTimeout)
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	pk := &picked{}
	defer func() { p.observe(r.Method, r.Host, r.URL.Path, rec.status, pk, start) }()
	if !normalizeRequest(rec, r) {
		return
	}

	pt := p.table.Load().ports[at]
	var vh *vhost
	if pt != nil {
		if pt.tls && r.TLS != nil && pt.misdirected(r.TLS.ServerName, hostOnly(r.Host)) {
			http.Error(rec, "misdirected request: the host is served by another listener than the TLS server name", http.StatusMisdirectedRequest)
			return
		}
		vh = pt.host(hostOnly(r.Host))
	}
	var rt *route
	if vh != nil {
		rt = vh.match((*stdRequest)(r))
	}
	if rt == nil {
		http.Error(rec, "no route matches", http.StatusNotFound)
		return
	}
	pk.route = rt
	var respMods []*edgev1.HeaderModifier
	var rewrite *edgev1.Rewrite
	if done := applyFilters(rec, r, rt.Filters, &rt.Route, &respMods, &rewrite, pt.tls); done {
		return
	}
	if rt.DirectResponse != nil {
		http.Error(rec, rt.DirectResponse.Reason, rt.DirectResponse.Status)
		return
	}
	if len(rt.mirrors) > 0 {
		p.mirror(r, rt.mirrors)
	}
	b := rt.pick()
	if b == nil {
		// No backend, or every weight 0: the spec's 500.
		http.Error(rec, "the route has no backend with a weight", http.StatusInternalServerError)
		return
	}
	pk.backend = b
	switch {
	case b.Invalid != nil:
		http.Error(rec, b.Invalid.Message, http.StatusInternalServerError)
		return
	case b.total == 0:
		http.Error(rec, "no ready endpoint for "+b.name, http.StatusServiceUnavailable)
		return
	}
	if done := applyFilters(rec, r, b.Filters, &rt.Route, &respMods, &rewrite, pt.tls); done {
		return
	}
	c, ep := b.pick(0, nil)
	if c == nil {
		// A model whose effective weights disagree with its weights.
		http.Error(rec, "no endpoint to pick for "+b.name, http.StatusServiceUnavailable)
		return
	}
	pk.cluster, pk.endpoint = c, ep
	if !p.opts.NetHTTPOnly && streamForwardable(r, rt, b) {
		p.forwardStream(rec, r, pk, start)
		return
	}
	ctx := context.WithValue(r.Context(), pickedKey{}, pk)
	if ms := rt.Timeouts.RequestMillis; ms > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
		defer cancel()
	}
	pk.rewrite, pk.respMods = rewrite, respMods
	p.metrics.viaReverseProxy.Inc()
	p.forward.ServeHTTP(rec, r.WithContext(ctx))
}

// maxMirroredBody is the largest request body the edge copies to mirrors;
// a request with a larger (or unknown-length) body is not mirrored, so that
// mirroring never holds a large upload in memory.
const maxMirroredBody = 64 << 10

// mirrorTimeout bounds a mirrored request; its answer is dropped.
const mirrorTimeout = 10 * time.Second

// mirror sends copies of r (as the rule's filters left it) to the
// mirrors whose share it falls in, in the background; what they answer,
// or whether they answer, changes nothing for r.
func (p *Proxy) mirror(r *http.Request, mirrors []*mirror) {
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		if r.ContentLength < 0 || r.ContentLength > maxMirroredBody {
			return
		}
		var err error
		if body, err = io.ReadAll(io.LimitReader(r.Body, maxMirroredBody+1)); err != nil || len(body) > maxMirroredBody {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	for _, m := range mirrors {
		if m.numerator < m.denominator && rand.Int64N(m.denominator) >= m.numerator {
			continue
		}
		_, ep := m.backend.pick(0, nil)
		if ep == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), mirrorTimeout)
		out := r.Clone(ctx)
		out.RequestURI = ""
		out.URL.Scheme, out.URL.Host = "http", ep.hostport
		out.Body = http.NoBody
		if body != nil {
			out.Body = io.NopCloser(bytes.NewReader(body))
		}
		transport := p.http1
		if m.backend.h2c {
			transport = p.h2c
		}
		go func() {
			defer cancel()
			resp, err := transport.RoundTrip(out)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}()
	}
}

// newForwarder returns the one reverse proxy every request goes through;
// what differs per request (endpoint, rewrite, response filters, transport)
// comes from the request's picked value, so that a request allocates no
// proxy and no closures, and copies through pooled buffers.
func (p *Proxy) newForwarder() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Transport:  &retrying{http1: p.http1, h2c: p.h2c, metrics: p.metrics},
		BufferPool: bufferPool{},
		Rewrite: func(pr *httputil.ProxyRequest) {
			pk := pr.In.Context().Value(pickedKey{}).(*picked)
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = pk.endpoint.hostport
			pr.Out.Host = pr.In.Host
			if rw := pk.rewrite; rw != nil {
				if rw.Hostname != "" {
					pr.Out.Host = rw.Hostname
				}
				if rw.Path != nil {
					pr.Out.URL.Path = rewritePath(pr.In.URL.Path, pk.route.Path, rw.Path)
					pr.Out.URL.RawPath = ""
				}
			}
			if prior, ok := pr.In.Header["X-Forwarded-For"]; ok {
				pr.Out.Header["X-Forwarded-For"] = prior
			}
			// The inbound request's trailer map, filled once its body is
			// read, is the one the transport writes after the body.
			pr.Out.Trailer = pr.In.Trailer
			pr.SetXForwarded()
		},
		ModifyResponse: func(resp *http.Response) error {
			if pk, ok := resp.Request.Context().Value(pickedKey{}).(*picked); ok {
				for _, m := range pk.respMods {
					modifyHeaders(resp.Header, m)
				}
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			code := http.StatusBadGateway
			if errors.Is(err, context.DeadlineExceeded) {
				code = http.StatusGatewayTimeout
			}
			pk := r.Context().Value(pickedKey{}).(*picked)
			p.log.Info("backend request failed", "route", pk.route.name, "backend", pk.backend.name, "err", err)
			http.Error(w, "backend request failed", code)
		},
	}
}

// bufferPool lends the reverse proxy its copy buffers, instead of a new
// 32 KiB buffer per request. The pool holds array pointers, which a slice
// of the whole array converts back to without an allocation (a pointer to
// the slice header would be a new allocation at every Put).
type bufferPool struct{}

const bufferSize = 32 * 1024

var buffers = sync.Pool{New: func() any { return new([bufferSize]byte) }}

func (bufferPool) Get() []byte { return buffers.Get().(*[bufferSize]byte)[:] }

func (bufferPool) Put(b []byte) {
	if cap(b) == bufferSize {
		buffers.Put((*[bufferSize]byte)(b[:bufferSize]))
	}
}

// applyFilters applies filters to the request (header modifiers, rewrite)
// and collects response modifiers; it answers a redirect itself and then
// reports true.
func applyFilters(w http.ResponseWriter, r *http.Request, filters []edgev1.Filter, rt *edgev1.Route, respMods *[]*edgev1.HeaderModifier, rewrite **edgev1.Rewrite, isTLS bool) bool {
	for _, f := range filters {
		switch f.Type {
		case edgev1.FilterRequestHeaderModifier:
			modifyHeaders(r.Header, f.RequestHeaderModifier)
		case edgev1.FilterResponseHeaderModifier:
			*respMods = append(*respMods, f.ResponseHeaderModifier)
		case edgev1.FilterURLRewrite:
			*rewrite = f.URLRewrite
		case edgev1.FilterRequestRedirect:
			redirect(w, r, f.RequestRedirect, rt.Path, isTLS)
			return true
		}
	}
	return false
}

func modifyHeaders(h http.Header, m *edgev1.HeaderModifier) {
	if m == nil {
		return
	}
	for _, s := range m.Set {
		h.Set(s.Name, s.Value)
	}
	for _, a := range m.Add {
		h.Add(a.Name, a.Value)
	}
	for _, name := range m.Remove {
		h.Del(name)
	}
}

// redirect answers with the Gateway API's RequestRedirect: unset parts keep
// the request's; the port is left out when it is the scheme's default.
func redirect(w http.ResponseWriter, r *http.Request, rd *edgev1.Redirect, match edgev1.PathMatch, isTLS bool) {
	scheme := "http"
	if isTLS {
		scheme = "https"
	}
	host, portStr := hostOnly(r.Host), ""
	if _, p, err := net.SplitHostPort(r.Host); err == nil {
		portStr = p
	}
	if rd.Scheme != "" {
		scheme = rd.Scheme
		if rd.Port == 0 {
			portStr = "" // the new scheme's default port
		}
	}
	if rd.Hostname != "" {
		host = rd.Hostname
	}
	if rd.Port != 0 {
		portStr = strconv.Itoa(int(rd.Port))
	}
	if (scheme == "http" && portStr == "80") || (scheme == "https" && portStr == "443") {
		portStr = ""
	}
	path := r.URL.Path
	if rd.Path != nil {
		path = rewritePath(path, match, rd.Path)
	}
	u := url.URL{Scheme: scheme, Host: host, Path: path, RawQuery: r.URL.RawQuery}
	if portStr != "" {
		u.Host = net.JoinHostPort(host, portStr)
	}
	code := rd.StatusCode
	if code == 0 {
		code = http.StatusFound
	}
	http.Redirect(w, r, u.String(), code)
}

// rewritePath applies a path modifier: the whole path, or the prefix the
// route matched.
func rewritePath(path string, match edgev1.PathMatch, m *edgev1.PathModifier) string {
	switch m.Type {
	case edgev1.PathReplaceFull:
		return m.Value
	case edgev1.PathReplacePrefix:
		prefix := strings.TrimSuffix(match.Value, "/")
		rest := strings.TrimPrefix(path, prefix)
		repl := strings.TrimSuffix(m.Value, "/")
		if rest == "" || rest == "/" {
			if repl == "" {
				return "/"
			}
			return repl + rest
		}
		return repl + rest
	}
	return path
}

func hostOnly(hostport string) string {
	if !strings.Contains(hostport, ":") {
		return hostport // no port: SplitHostPort would build an error to say so
	}
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

// recorder remembers the status written, for logs and metrics.
type recorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (r *recorder) WriteHeader(code int) {
	if _, ok := r.Header()["Content-Type"]; !ok && code >= 200 {
		r.Header()["Content-Type"] = nil // no sniffing
	}
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
