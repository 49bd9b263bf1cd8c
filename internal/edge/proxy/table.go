package proxy

import (
	"crypto/tls"
	"fmt"
	"iter"
	"net"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/edge/health"
)

// table is one model compiled for serving: immutable once built, swapped
// whole, so a request routes on the table it started with.
type table struct {
	version string
	ports   map[socket]*port
}

// socket is where listeners are bound: a port at the edge's listen host
// (host ""), or at a Gateway's own address (edgev1.Gateway.Address), so
// that Gateways with addresses of their own may share a port number.
type socket struct {
	host   string
	number int32
}

func (s socket) String() string {
	if s.host == "" {
		return fmt.Sprintf("port %d", s.number)
	}
	return fmt.Sprintf("port %d of %s", s.number, s.host)
}

// port is every listener of every Gateway on one socket.
type port struct {
	number int32
	tls    bool
	// listeners by their hostname: a request goes to the listener whose
	// hostname matches its host most specifically, and only that
	// listener's routes may take it (the Gateway API's listener
	// isolation); listeners of one hostname (of several Gateways) share
	// one table, the first Gateway (by namespace/name) winning a route
	// hostname.
	listeners hostTable[*hostTable[*vhost]]
	// certs by SNI hostname pattern, first listener's first as default.
	certs       map[string]*tls.Certificate
	defaultCert *tls.Certificate
}

// hostTable finds what serves a host name: by exact name, then by the
// wildcard of the longest suffix ("*.example.com"), then the catch-all.
type hostTable[T any] struct {
	exact     map[string]T
	wildcards []wildcard[T] // longest suffix first, once sorted
	any       T
	hasAny    bool
}

type wildcard[T any] struct {
	hostname string // "*.example.com"
	value    T
}

// get returns what name ("", "*", "*.example.com" or an exact name) holds,
// adding make()'s value when it holds nothing yet.
func (h *hostTable[T]) get(name string, make func() T) T {
	name = strings.ToLower(name)
	switch {
	case name == "" || name == "*":
		if !h.hasAny {
			h.any, h.hasAny = make(), true
		}
		return h.any
	case strings.HasPrefix(name, "*."):
		for _, w := range h.wildcards {
			if w.hostname == name {
				return w.value
			}
		}
		v := make()
		h.wildcards = append(h.wildcards, wildcard[T]{name, v})
		return v
	default:
		if h.exact == nil {
			h.exact = map[string]T{}
		}
		if v, ok := h.exact[name]; ok {
			return v
		}
		v := make()
		h.exact[name] = v
		return v
	}
}

// sort puts the longest wildcard suffixes first.
func (h *hostTable[T]) sort() {
	sort.SliceStable(h.wildcards, func(i, j int) bool { return len(h.wildcards[i].hostname) > len(h.wildcards[j].hostname) })
}

// lookup finds what serves host, a lower-case name.
func (h *hostTable[T]) lookup(host string) (T, bool) {
	if v, ok := h.exact[host]; ok {
		return v, true
	}
	for _, w := range h.wildcards {
		if strings.HasSuffix(host, w.hostname[1:]) && len(host) > len(w.hostname)-1 {
			return w.value, true
		}
	}
	return h.any, h.hasAny
}

// all yields every value of the table.
func (h *hostTable[T]) all() iter.Seq[T] {
	return func(yield func(T) bool) {
		for _, w := range h.wildcards {
			if !yield(w.value) {
				return
			}
		}
		for _, v := range h.exact {
			if !yield(v) {
				return
			}
		}
		if h.hasAny {
			yield(h.any)
		}
	}
}

type vhost struct {
	hostname string
	routes   []*route
}

type route struct {
	edgev1.Route
	name    string // namespace/name/rule, for logs and metrics
	headers []matcher
	query   []matcher
	// backends with their cumulative weights, for a weighted pick.
	backends []*backend
	total    int64
	// mirrors get copies of a share of the rule's requests.
	mirrors []*mirror
}

// mirror is a compiled RequestMirror filter.
type mirror struct {
	backend                *backend
	numerator, denominator int64
}

type matcher struct {
	name  string
	exact string
	re    *regexp.Regexp
}

func (m matcher) matches(v string, ok bool) bool {
	if !ok {
		return false
	}
	if m.re != nil {
		return m.re.MatchString(v)
	}
	return v == m.exact
}

type backend struct {
	edgev1.Backend
	name      string
	cumWeight int64
	clusters  []*cluster
	total     int64
	policy    policy
	// h2c: forward with HTTP/2 over cleartext, as the appProtocol says.
	h2c bool
}

type cluster struct {
	edgev1.ClusterEndpoints
	// bit marks the cluster in a retry's set of tried clusters; clusters
	// past the 64th have none, and a retry may go back to one of them.
	bit uint64
	// rank orders the clusters of a LocalFirst backend (see rank).
	rank  int
	ready []endpoint
	// series are its metric children (metrics.go), set at the first
	// request.
	series atomic.Pointer[series]
}

// endpoint is a ready endpoint of a backend's cluster.
type endpoint struct {
	edgev1.Endpoint
	// hostport is the address to forward to, computed once per model.
	hostport string
	// health is the state of the backend's check of this endpoint, set
	// by track before the table is served.
	health *health.Target
}

// track makes the units of t the ones s holds and points every ready
// endpoint of t at its unit's state.
func track(s *health.Set, t *table) {
	s.Track(func(unit func(health.Key) *health.Target) {
		for b := range t.backends() {
			for _, c := range b.clusters {
				for i := range c.ready {
					e := &c.ready[i]
					e.health = unit(health.Key{Address: e.Address, Port: e.Port, Check: b.policy.check, H2C: b.h2c && b.policy.check.Type == edgev1.HealthCheckHTTP})
				}
			}
		}
	})
}

// endpoints are the addresses (host:port) the table forwards to.
func (t *table) endpoints() map[string]struct{} {
	eps := map[string]struct{}{}
	for b := range t.backends() {
		for _, c := range b.clusters {
			for _, e := range c.ready {
				eps[e.hostport] = struct{}{}
			}
		}
	}
	return eps
}

// compile checks and compiles a model for an edge in region. Its errors
// name what the edge cannot serve; the edge then refuses the model (NACK)
// and keeps serving the one before.
func compile(m *edgev1.Model, certs map[string]*tls.Certificate, region string) (*table, error) {
	t := &table{version: m.Version, ports: map[socket]*port{}}
	for _, gw := range m.Gateways {
		for _, l := range gw.Listeners {
			at := socket{host: gw.Address, number: l.Port}
			p := t.ports[at]
			if p == nil {
				p = &port{number: l.Port, tls: l.Protocol == edgev1.ProtocolHTTPS, certs: map[string]*tls.Certificate{}}
				t.ports[at] = p
			}
			if (l.Protocol == edgev1.ProtocolHTTPS) != p.tls {
				return nil, fmt.Errorf("gateway %s/%s listener %s: %s serves both HTTP and HTTPS", gw.Namespace, gw.Name, l.Name, at)
			}
			for _, c := range l.Certificates {
				cert := certs[c.Digest]
				if cert == nil {
					return nil, fmt.Errorf("gateway %s/%s listener %s: certificate %s/%s was not sent", gw.Namespace, gw.Name, l.Name, c.Namespace, c.Name)
				}
				if p.defaultCert == nil {
					p.defaultCert = cert
				}
				if _, ok := p.certs[l.Hostname]; !ok {
					p.certs[l.Hostname] = cert
				}
			}
			hosts := p.listeners.get(l.Hostname, func() *hostTable[*vhost] { return &hostTable[*vhost]{} })
			for _, vh := range l.VirtualHosts {
				if err := addVirtualHost(hosts, vh, region); err != nil {
					return nil, fmt.Errorf("gateway %s/%s listener %s: %w", gw.Namespace, gw.Name, l.Name, err)
				}
			}
		}
	}
	for at, p := range t.ports {
		p.listeners.sort()
		for hosts := range p.listeners.all() {
			hosts.sort()
		}
		if p.tls && p.defaultCert == nil {
			return nil, fmt.Errorf("HTTPS %s has no certificate", at)
		}
	}
	return t, nil
}

// add compiles vh into the listener's hosts; the first of a hostname
// wins.
func addVirtualHost(h *hostTable[*vhost], vh edgev1.VirtualHost, region string) error {
	compiled := &vhost{hostname: strings.ToLower(vh.Hostname)}
	for _, r := range vh.Routes {
		cr, err := compileRoute(r, region)
		if err != nil {
			return err
		}
		compiled.routes = append(compiled.routes, cr)
	}
	h.get(vh.Hostname, func() *vhost { return compiled })
	return nil
}

// compileBackend compiles one backend: its policy and its clusters' ready
// endpoints; the route sets its cumulative weight.
func compileBackend(b edgev1.Backend, region string) *backend {
	cb := &backend{Backend: b, name: fmt.Sprintf("%s/%s/%s", b.Kind, b.Namespace, b.Name), policy: compilePolicy(b.Policy),
		h2c: b.AppProtocol == "kubernetes.io/h2c" || b.AppProtocol == "h2c"}
	for i, c := range b.Clusters {
		cc := &cluster{ClusterEndpoints: c, rank: rank(c, region, cb.policy.failover)}
		if i < 64 {
			cc.bit = 1 << i
		}
		for _, e := range c.Endpoints {
			if e.Ready {
				cc.ready = append(cc.ready, endpoint{Endpoint: e, hostport: net.JoinHostPort(e.Address, strconv.Itoa(int(e.Port)))})
			}
		}
		if c.EffectiveWeight > 0 && len(cc.ready) > 0 {
			cb.total += c.EffectiveWeight
		}
		cb.clusters = append(cb.clusters, cc)
	}
	return cb
}

func compileRoute(r edgev1.Route, region string) (*route, error) {
	cr := &route{Route: r, name: fmt.Sprintf("%s/%s/%d", r.RouteNamespace, r.RouteName, r.Rule)}
	for _, list := range []struct {
		in  []edgev1.ValueMatch
		out *[]matcher
	}{{r.Headers, &cr.headers}, {r.QueryParams, &cr.query}} {
		for _, v := range list.in {
			m := matcher{name: v.Name, exact: v.Value}
			if v.Type == edgev1.MatchRegularExpression {
				re, err := regexp.Compile(v.Value)
				if err != nil {
					return nil, fmt.Errorf("route %s: %s %q: %w", cr.name, v.Name, v.Value, err)
				}
				m.re = re
			}
			if list.out == &cr.headers {
				m.name = http.CanonicalHeaderKey(m.name)
			}
			*list.out = append(*list.out, m)
		}
	}
	for _, b := range r.Backends {
		cb := compileBackend(b, region)
		if b.Weight > 0 {
			cr.total += int64(b.Weight)
		}
		cb.cumWeight = cr.total
		cr.backends = append(cr.backends, cb)
	}
	for _, f := range r.Filters {
		if m := f.RequestMirror; f.Type == edgev1.FilterRequestMirror && m != nil && m.Denominator > 0 {
			cr.mirrors = append(cr.mirrors, &mirror{backend: compileBackend(m.Backend, region), numerator: int64(m.Numerator), denominator: int64(m.Denominator)})
		}
	}
	return cr, nil
}

// backends yields every backend of every route of the table, once per
// route that names it.
func (t *table) backends() iter.Seq[*backend] {
	return func(yield func(*backend) bool) {
		for _, p := range t.ports {
			for vh := range p.allHosts() {
				for _, r := range vh.routes {
					for _, b := range r.backends {
						if !yield(b) {
							return
						}
					}
					for _, m := range r.mirrors {
						if !yield(m.backend) {
							return
						}
					}
				}
			}
		}
	}
}

// allHosts yields every virtual host of the port.
func (p *port) allHosts() iter.Seq[*vhost] {
	return func(yield func(*vhost) bool) {
		for hosts := range p.listeners.all() {
			for vh := range hosts.all() {
				if !yield(vh) {
					return
				}
			}
		}
	}
}

// misdirected says whether a request for host came on a TLS connection
// whose server name (SNI) selects another listener: its certificate and
// client settings were the other listener's, so the client must connect
// again (421, RFC 9110; HTTP/2 clients reuse a connection for every host
// its certificate covers). No server name: nothing to compare.
func (p *port) misdirected(serverName, host string) bool {
	if serverName == "" {
		return false
	}
	byName, _ := p.listeners.lookup(strings.ToLower(serverName))
	byHost, _ := p.listeners.lookup(strings.ToLower(host))
	return byName != byHost
}

// host finds the virtual host of a request's host name: in the listener
// that matches it most specifically, the most specific virtual host.
func (p *port) host(host string) *vhost {
	host = strings.ToLower(host)
	hosts, ok := p.listeners.lookup(host)
	if !ok {
		return nil
	}
	vh, _ := hosts.lookup(host)
	return vh
}

// request is what routes match on: a net/http request, or the fast
// path's parsed head.
type request interface {
	method() string
	// path is the decoded path.
	path() string
	// header returns a field's values joined by commas; name is
	// canonical.
	header(name string) (string, bool)
	// query returns the first value of a query parameter.
	query(name string) (string, bool)
}

// stdRequest adapts a net/http request.
type stdRequest http.Request

func (r *stdRequest) method() string { return r.Method }
func (r *stdRequest) path() string   { return r.URL.Path }
func (r *stdRequest) header(name string) (string, bool) {
	v, ok := r.Header[name]
	return strings.Join(v, ","), ok
}
func (r *stdRequest) query(name string) (string, bool) {
	v, ok := r.URL.Query()[name]
	if !ok {
		return "", false
	}
	return v[0], true
}

// match returns the first route that matches r, in the model's order,
// which is the Gateway API's match precedence.
func (vh *vhost) match(r request) *route {
	for _, rt := range vh.routes {
		if rt.matches(r) {
			return rt
		}
	}
	return nil
}

func (rt *route) matches(r request) bool {
	path := r.path()
	switch rt.Path.Type {
	case edgev1.PathExact:
		if path != rt.Path.Value {
			return false
		}
	case edgev1.PathPrefix:
		if !prefixMatches(rt.Path.Value, path) {
			return false
		}
	}
	if rt.Method != "" && r.method() != rt.Method {
		return false
	}
	for _, m := range rt.headers {
		if !m.matches(r.header(m.name)) {
			return false
		}
	}
	for _, m := range rt.query {
		if !m.matches(r.query(m.name)) {
			return false
		}
	}
	return true
}

// prefixMatches is the Gateway API's PathPrefix: element-wise, so /foo
// matches /foo and /foo/bar but not /foobar; a trailing slash is ignored.
func prefixMatches(prefix, path string) bool {
	prefix = strings.TrimSuffix(prefix, "/")
	if prefix == "" {
		return true
	}
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}
