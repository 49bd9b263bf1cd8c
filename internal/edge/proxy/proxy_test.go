package proxy_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"

	"github.com/fleetnet/fleetnet/internal/edge/accesslog"
	"github.com/fleetnet/fleetnet/internal/edge/proxy"
	"github.com/fleetnet/fleetnet/internal/testkit"

	"github.com/fleetnet/fleetnet/internal/pki"
)

// netHTTPOnly: the tests run on the net/http path (their second run).
var netHTTPOnly bool

// TestMain runs every test on both paths of the edge: the HTTP/1.1 fast
// path, then NetHTTPOnly, which must behave alike.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		fmt.Println("the same tests on the net/http path (NetHTTPOnly)")
		netHTTPOnly = true
		code = m.Run()
	}
	os.Exit(code)
}

// echo is a backend on loopback that answers with its name and what it
// received.
func echo(t *testing.T, name string) edgev1.Endpoint {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Backend", name)
		w.Header().Set("X-Seen-Path", r.URL.Path)
		w.Header().Set("X-Seen-Host", r.Host)
		w.Header().Set("X-Seen-Foo", r.Header.Get("Foo"))
		w.Header().Set("X-Seen-Accept-Encoding", r.Header.Get("Accept-Encoding"))
		w.Header().Set("X-Seen-Forwarded-Proto", r.Header.Get("X-Forwarded-Proto"))
		w.Header().Set("X-Drop", "me")
		fmt.Fprint(w, name)
	}))
	t.Cleanup(srv.Close)
	return endpointOf(srv)
}

// endpointOf is a ready endpoint at a test server's address.
func endpointOf(srv *httptest.Server) edgev1.Endpoint {
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	return edgev1.Endpoint{Address: host, Port: int32(p), Ready: true, Serving: true}
}

// deadEndpoint is an address where nothing listens.
func deadEndpoint(t *testing.T) edgev1.Endpoint {
	t.Helper()
	return edgev1.Endpoint{Address: "127.0.0.1", Port: freePort(t), Ready: true, Serving: true}
}

func freePort(t *testing.T) int32 {
	t.Helper()
	return int32(testkit.FreePort(t))
}

// servingCert is a serving certificate for host from a new CA, and a pool
// of that CA for clients.
func servingCert(t *testing.T, host string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.ServingCert(host, []string{host})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := kp.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	return cert, pool
}

// backend is a ServiceImport backend with a zero policy, which the edge
// reads as edgev1.DefaultBackendPolicy, as from an older controller.
func backend(name string, weight int32, clusters ...edgev1.ClusterEndpoints) edgev1.Backend {
	return edgev1.Backend{Kind: edgev1.KindServiceImport, Namespace: "demo", Name: name, Weight: weight, Clusters: clusters}
}

func withPolicy(b edgev1.Backend, p edgev1.BackendPolicy) edgev1.Backend {
	b.Policy = p
	return b
}

// fastChecks is the default policy with checks every 50 ms, for tests that
// wait for a check to notice a change. The timeout is longer than the
// interval (which the controller would refuse) so that a loaded test
// machine does not fail a check of a live endpoint.
func fastChecks() edgev1.BackendPolicy {
	p := edgev1.DefaultBackendPolicy()
	p.HealthCheck.IntervalMillis, p.HealthCheck.TimeoutMillis = 50, 1000
	return p
}

func inCluster(id string, weight int32, eps ...edgev1.Endpoint) edgev1.ClusterEndpoints {
	ready := 0
	for _, e := range eps {
		if e.Ready {
			ready++
		}
	}
	return edgev1.ClusterEndpoints{Cluster: id, Weight: weight, EffectiveWeight: int64(weight) * int64(ready), Endpoints: eps}
}

func oneListener(port int32, protocol string, hosts ...edgev1.VirtualHost) *edgev1.Model {
	return &edgev1.Model{Version: "v", Gateways: []edgev1.Gateway{{Namespace: "demo", Name: "edge", Listeners: []edgev1.Listener{{
		Name: "l", Port: port, Protocol: protocol, VirtualHosts: hosts,
	}}}}}
}

func start(t *testing.T, m *edgev1.Model, certs map[string]*tls.Certificate) *proxy.Proxy {
	t.Helper()
	return startWith(t, proxy.Options{}, m, certs)
}

// startWith starts a proxy with o on loopback, and before serving m runs
// each of before on it.
func startWith(t *testing.T, o proxy.Options, m *edgev1.Model, certs map[string]*tls.Certificate, before ...func(*proxy.Proxy)) *proxy.Proxy {
	t.Helper()
	o.ListenHost = "127.0.0.1"
	o.NetHTTPOnly = o.NetHTTPOnly || netHTTPOnly
	p := proxy.New(o)
	for _, f := range before {
		f(p)
	}
	if unbound, err := p.Apply(m, certs); err != nil || len(unbound) > 0 {
		t.Fatalf("Apply: %v, unbound %v", err, unbound)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

// A socket the proxy cannot bind (here held by another listener) is left
// out alone and returned; the model's other listeners are served, and the
// socket is bound by the next model once it is free.
func TestUnbindableSocketIsLeftOut(t *testing.T) {
	ep := echo(t, "web")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	busyPort, freeP := int32(busy.Addr().(*net.TCPAddr).Port), freePort(t)
	vh := edgev1.VirtualHost{Hostname: "*", Routes: []edgev1.Route{{RouteName: "r", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/"},
		Backends: []edgev1.Backend{backend("web", 1, inCluster("east", 1, ep))}}}}
	model := func(version string) *edgev1.Model {
		return &edgev1.Model{Version: version, Gateways: []edgev1.Gateway{
			{Namespace: "a", Name: "taken", Listeners: []edgev1.Listener{{Name: "l", Port: busyPort, Protocol: edgev1.ProtocolHTTP, VirtualHosts: []edgev1.VirtualHost{vh}}}},
			{Namespace: "b", Name: "free", Listeners: []edgev1.Listener{{Name: "l", Port: freeP, Protocol: edgev1.ProtocolHTTP, VirtualHosts: []edgev1.VirtualHost{vh}}}},
		}}
	}
	p := proxy.New(proxy.Options{ListenHost: "127.0.0.1", NetHTTPOnly: netHTTPOnly})
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	unbound, err := p.Apply(model("1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(unbound) != 1 || unbound[0].Port != busyPort || unbound[0].Err == nil {
		t.Fatalf("unbound %+v, want port %d alone with its error", unbound, busyPort)
	}
	if resp := get(t, freeP, "x", "/", nil); resp.StatusCode != 200 {
		t.Errorf("the free listener: %d", resp.StatusCode)
	}
	if p.Addr(busyPort) != nil {
		t.Errorf("port %d is reported bound", busyPort)
	}
	_ = busy.Close()
	if unbound, err := p.Apply(model("2"), nil); err != nil || len(unbound) != 0 {
		t.Fatalf("once free: %v, unbound %+v", err, unbound)
	}
	for _, port := range []int32{busyPort, freeP} {
		if resp := get(t, port, "x", "/", nil); resp.StatusCode != 200 {
			t.Errorf("port %d once free: %d", port, resp.StatusCode)
		}
	}
}

var client = &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func get(t *testing.T, port int32, host, path string, header http.Header) *http.Response {
	t.Helper()
	return do(t, http.MethodGet, port, host, path, header)
}

func do(t *testing.T, method string, port int32, host, path string, header http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, fmt.Sprintf("http://127.0.0.1:%d%s", port, path), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// Routes come in the model's (precedence) order; the edge takes the first
// that matches, host by exact name, then wildcard, then any.
func TestMatching(t *testing.T) {
	exact, prefix, method, header, query, wild, anyHost := echo(t, "exact"), echo(t, "prefix"), echo(t, "method"), echo(t, "header"), echo(t, "query"), echo(t, "wild"), echo(t, "any")
	to := func(ep edgev1.Endpoint) []edgev1.Backend {
		return []edgev1.Backend{backend("b", 1, inCluster("east", 1, ep))}
	}
	port := freePort(t)
	start(t, oneListener(port, edgev1.ProtocolHTTP,
		edgev1.VirtualHost{Hostname: "shop.example.com", Routes: []edgev1.Route{
			{RouteName: "r", Path: edgev1.PathMatch{Type: edgev1.PathExact, Value: "/cart"}, Backends: to(exact)},
			{RouteName: "r", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/api"}, Method: http.MethodPost, Backends: to(method)},
			{RouteName: "r", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/api"}, Headers: []edgev1.ValueMatch{{Type: edgev1.MatchExact, Name: "x-canary", Value: "yes"}}, Backends: to(header)},
			{RouteName: "r", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/api"}, QueryParams: []edgev1.ValueMatch{{Type: edgev1.MatchRegularExpression, Name: "v", Value: "^2"}}, Backends: to(query)},
			{RouteName: "r", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/"}, Backends: to(prefix)},
		}},
		edgev1.VirtualHost{Hostname: "*.example.com", Routes: []edgev1.Route{{RouteName: "w", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/"}, Backends: to(wild)}}},
		edgev1.VirtualHost{Hostname: "*", Routes: []edgev1.Route{{RouteName: "a", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/only"}, Backends: to(anyHost)}}},
	), nil)
	tests := []struct {
		method, host, path string
		header             http.Header
		want               string
		code               int
	}{
		{"GET", "shop.example.com", "/cart", nil, "exact", 200},
		{"GET", "shop.example.com", "/cart/x", nil, "prefix", 200},
		{"POST", "shop.example.com", "/api/x", nil, "method", 200},
		{"GET", "shop.example.com", "/api/x", http.Header{"X-Canary": {"yes"}}, "header", 200},
		{"GET", "shop.example.com", "/api?v=2.1", nil, "query", 200},
		{"GET", "shop.example.com", "/apix", nil, "prefix", 200}, // /api does not match /apix
		{"GET", "SHOP.example.com:8080", "/cart", nil, "exact", 200},
		{"GET", "img.example.com", "/x", nil, "wild", 200},
		{"GET", "other.test", "/only/a", nil, "any", 200},
		{"GET", "other.test", "/nothing", nil, "", 404},
	}
	for _, tt := range tests {
		resp := do(t, tt.method, port, tt.host, tt.path, tt.header)
		if resp.StatusCode != tt.code || resp.Header.Get("X-Backend") != tt.want {
			t.Errorf("%s %s%s: %d from %q, want %d from %q", tt.method, tt.host, tt.path, resp.StatusCode, resp.Header.Get("X-Backend"), tt.code, tt.want)
		}
	}
}

// The client's Accept-Encoding reaches the backend as it is: the edge asks
// for no compression of its own (which it would then undo for the client).
func TestAcceptEncodingPassesAsIs(t *testing.T) {
	port := freePort(t)
	start(t, oneListener(port, edgev1.ProtocolHTTP, edgev1.VirtualHost{Hostname: "*", Routes: []edgev1.Route{
		{RouteName: "r", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/"}, Backends: []edgev1.Backend{backend("b", 1, inCluster("east", 1, echo(t, "web")))}},
	}}), nil)
	plain := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableCompression: true}}
	t.Cleanup(plain.CloseIdleConnections)
	for _, tt := range []struct{ sent, want string }{{"", ""}, {"br", "br"}, {"gzip, zstd", "gzip, zstd"}} {
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", port), nil)
		if err != nil {
			t.Fatal(err)
		}
		if tt.sent != "" {
			req.Header.Set("Accept-Encoding", tt.sent)
		}
		resp, err := plain.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("X-Seen-Accept-Encoding"); got != tt.want {
			t.Errorf("client sent Accept-Encoding %q: backend saw %q, want %q", tt.sent, got, tt.want)
		}
	}
}

func TestFilters(t *testing.T) {
	ep := echo(t, "web")
	port := freePort(t)
	start(t, oneListener(port, edgev1.ProtocolHTTP, edgev1.VirtualHost{Hostname: "*", Routes: []edgev1.Route{
		{RouteName: "redirect", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/old"}, Filters: []edgev1.Filter{{
			Type: edgev1.FilterRequestRedirect, RequestRedirect: &edgev1.Redirect{Scheme: "https", StatusCode: 301, Path: &edgev1.PathModifier{Type: edgev1.PathReplacePrefix, Value: "/new"}},
		}}},
		{RouteName: "rewrite", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/v1"}, Filters: []edgev1.Filter{
			{Type: edgev1.FilterURLRewrite, URLRewrite: &edgev1.Rewrite{Hostname: "internal.svc", Path: &edgev1.PathModifier{Type: edgev1.PathReplacePrefix, Value: "/api"}}},
			{Type: edgev1.FilterRequestHeaderModifier, RequestHeaderModifier: &edgev1.HeaderModifier{Set: []edgev1.Header{{Name: "Foo", Value: "bar"}}}},
			{Type: edgev1.FilterResponseHeaderModifier, ResponseHeaderModifier: &edgev1.HeaderModifier{Add: []edgev1.Header{{Name: "X-Edge", Value: "1"}}, Remove: []string{"X-Drop"}}},
		}, Backends: []edgev1.Backend{backend("web", 1, inCluster("east", 1, ep))}},
	}}), nil)

	resp := get(t, port, "shop.example.com", "/old/page?q=1", nil)
	if resp.StatusCode != 301 || resp.Header.Get("Location") != "https://shop.example.com/new/page?q=1" {
		t.Errorf("redirect: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp = get(t, port, "shop.example.com", "/v1/items", http.Header{"Foo": {"old"}})
	for h, want := range map[string]string{"X-Seen-Path": "/api/items", "X-Seen-Host": "internal.svc", "X-Seen-Foo": "bar", "X-Edge": "1", "X-Drop": ""} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
}

// Traffic splits by backendRef weight, then by cluster effective weight;
// an invalid backend's share gets 500, one without ready endpoints 503.
func TestWeightsAnd500And503(t *testing.T) {
	east, west, other := echo(t, "east"), echo(t, "west"), echo(t, "other")
	port := freePort(t)
	notReady := other
	notReady.Ready = false
	start(t, oneListener(port, edgev1.ProtocolHTTP, edgev1.VirtualHost{Hostname: "*", Routes: []edgev1.Route{
		{RouteName: "split", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/split"}, Backends: []edgev1.Backend{
			backend("echo", 90, inCluster("east", 3, east), inCluster("west", 1, west)),
			backend("other", 10, inCluster("east", 1, other)),
		}},
		{RouteName: "broken", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/broken"}, Backends: []edgev1.Backend{
			backend("echo", 50, inCluster("east", 1, east)),
			{Kind: edgev1.KindServiceImport, Namespace: "demo", Name: "gone", Weight: 30, Invalid: &edgev1.Invalid{Reason: "BackendNotFound", Message: "ServiceImport demo/gone not found"}},
			{Kind: edgev1.KindServiceImport, Namespace: "demo", Name: "idle", Weight: 20, NoReadyEndpoints: true, Clusters: []edgev1.ClusterEndpoints{inCluster("east", 1, notReady)}},
		}},
		{RouteName: "zero", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/zero"}, Backends: []edgev1.Backend{backend("echo", 0, inCluster("east", 1, east))}},
	}}), nil)

	const n = 1000
	count := func(path string, key func(*http.Response) string) map[string]int {
		got := map[string]int{}
		for range n {
			got[key(get(t, port, "x", path, nil))]++
		}
		return got
	}
	within := func(what string, got, want int) {
		t.Helper()
		// 5 standard deviations of a binomial at n=1000 is at most ~80.
		if d := got - want; d < -80 || d > 80 {
			t.Errorf("%s: %d of %d, want about %d", what, got, n, want)
		}
	}
	split := count("/split", func(r *http.Response) string { return r.Header.Get("X-Backend") })
	within("east (90% × 3/4)", split["east"], 675)
	within("west (90% × 1/4)", split["west"], 225)
	within("other (10%)", split["other"], 100)

	codes := count("/broken", func(r *http.Response) string { return strconv.Itoa(r.StatusCode) })
	within("200", codes["200"], 500)
	within("500", codes["500"], 300)
	within("503", codes["503"], 200)

	if resp := get(t, port, "x", "/zero", nil); resp.StatusCode != 500 {
		t.Errorf("all weights 0: %d, want 500", resp.StatusCode)
	}
}

// A GET whose endpoint refuses the connection is sent once more, to
// another cluster: no request fails.
func TestRetryOnAnotherCluster(t *testing.T) {
	west := echo(t, "west")
	port := freePort(t)
	start(t, oneListener(port, edgev1.ProtocolHTTP, edgev1.VirtualHost{Hostname: "*", Routes: []edgev1.Route{
		{RouteName: "r", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/"}, Backends: []edgev1.Backend{
			backend("echo", 1, inCluster("east", 1, deadEndpoint(t)), inCluster("west", 1, west)),
		}},
	}}), nil)
	for i := range 100 {
		if resp := get(t, port, "x", "/", nil); resp.StatusCode != 200 || resp.Header.Get("X-Backend") != "west" {
			t.Fatalf("request %d: %d from %q", i, resp.StatusCode, resp.Header.Get("X-Backend"))
		}
	}
	if resp := do(t, http.MethodPost, port, "x", "/", nil); resp.StatusCode != 200 && resp.StatusCode != 502 {
		t.Errorf("POST: %d", resp.StatusCode)
	}
}

// HTTPS listeners present the certificate of the SNI host name.
func TestTLSBySNI(t *testing.T) {
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	certs := map[string]*tls.Certificate{}
	for _, host := range []string{"a.example.com", "b.example.com"} {
		kp, err := ca.ServingCert(host, []string{host})
		if err != nil {
			t.Fatal(err)
		}
		c, err := kp.TLSCertificate()
		if err != nil {
			t.Fatal(err)
		}
		certs[host] = &c
	}
	ep := echo(t, "web")
	port := freePort(t)
	routes := []edgev1.Route{{RouteName: "r", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/"}, Backends: []edgev1.Backend{backend("web", 1, inCluster("east", 1, ep))}}}
	m := &edgev1.Model{Version: "v", Gateways: []edgev1.Gateway{{Namespace: "demo", Name: "edge", Listeners: []edgev1.Listener{
		{Name: "a", Port: port, Protocol: edgev1.ProtocolHTTPS, Hostname: "a.example.com", Certificates: []edgev1.ListenerCertificate{{Name: "a", Digest: "a.example.com"}},
			VirtualHosts: []edgev1.VirtualHost{{Hostname: "a.example.com", Routes: routes}}},
		{Name: "b", Port: port, Protocol: edgev1.ProtocolHTTPS, Hostname: "b.example.com", Certificates: []edgev1.ListenerCertificate{{Name: "b", Digest: "b.example.com"}},
			VirtualHosts: []edgev1.VirtualHost{{Hostname: "b.example.com", Routes: routes}}},
	}}}}
	start(t, m, certs)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	for _, host := range []string{"a.example.com", "b.example.com"} {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: host}}}
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/", port), nil)
		req.Host = host
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		resp.Body.Close()
		if got := resp.TLS.PeerCertificates[0].DNSNames; len(got) != 1 || got[0] != host || resp.StatusCode != 200 {
			t.Errorf("%s: certificate for %v, status %d", host, got, resp.StatusCode)
		}
	}
	// A host of another listener on a connection made for a's name is
	// misdirected (421): the client must connect again for it.
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "a.example.com"}}}
	for host, want := range map[string]int{"b.example.com": http.StatusMisdirectedRequest, "a.example.com": http.StatusOK} {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/", port), nil)
		req.Host = host
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s on a's connection: %v", host, err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s on a's connection: status %d, want %d", host, resp.StatusCode, want)
		}
	}
	// The same over HTTP/2 with ":scheme: http" on the TLS connection: the
	// request is https all the same, so it is checked for 421 and reaches
	// the backend with X-Forwarded-Proto: https.
	// net/http's client speaks HTTP/2 with prior knowledge over what its
	// DialContext returns, here a TLS connection that negotiated h2: its
	// requests then say ":scheme: http".
	protocols := new(http.Protocols)
	protocols.SetUnencryptedHTTP2(true)
	h2 := &http.Transport{Protocols: protocols, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := &tls.Dialer{Config: &tls.Config{RootCAs: pool, ServerName: "a.example.com", NextProtos: []string{"h2"}}}
		return d.DialContext(ctx, network, addr)
	}}
	t.Cleanup(h2.CloseIdleConnections)
	for host, want := range map[string]int{"b.example.com": http.StatusMisdirectedRequest, "a.example.com": http.StatusOK} {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", port), nil)
		req.Host = host
		resp, err := (&http.Client{Timeout: 5 * time.Second, Transport: h2}).Do(req)
		if err != nil {
			t.Fatalf("HTTP/2 :scheme http, %s on a's connection: %v", host, err)
		}
		resp.Body.Close()
		if resp.ProtoMajor != 2 || resp.StatusCode != want {
			t.Errorf("HTTP/2 :scheme http, %s on a's connection: %s status %d, want HTTP/2 %d", host, resp.Proto, resp.StatusCode, want)
		}
		if got := resp.Header.Get("X-Seen-Forwarded-Proto"); want == http.StatusOK && got != "https" {
			t.Errorf("HTTP/2 :scheme http over TLS reached the backend with X-Forwarded-Proto %q, want https", got)
		}
	}
}

// Swapping models under load fails no request, and a model the edge
// cannot serve is refused while the previous one stays.
func TestSwapUnderLoadAndRefusal(t *testing.T) {
	a, b := echo(t, "a"), echo(t, "b")
	port := freePort(t)
	modelTo := func(ep edgev1.Endpoint, version string) *edgev1.Model {
		m := oneListener(port, edgev1.ProtocolHTTP, edgev1.VirtualHost{Hostname: "*", Routes: []edgev1.Route{
			{RouteName: "r", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/"}, Backends: []edgev1.Backend{backend("echo", 1, inCluster("east", 1, ep))}},
		}})
		m.Version = version
		return m
	}
	p := start(t, modelTo(a, "1"), nil)
	var failed, total atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			c := &http.Client{Timeout: 5 * time.Second}
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
				total.Add(1)
				if err != nil || resp.StatusCode != 200 {
					failed.Add(1)
					if resp != nil {
						resp.Body.Close()
					}
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	for i := range 50 {
		ep := a
		if i%2 == 0 {
			ep = b
		}
		if _, err := p.Apply(modelTo(ep, strconv.Itoa(i)), nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if failed.Load() != 0 {
		t.Errorf("%d of %d requests failed during 50 swaps", failed.Load(), total.Load())
	}
	t.Logf("%d requests during 50 swaps, none failed", total.Load())

	bad := modelTo(a, "bad")
	bad.Gateways[0].Listeners[0].VirtualHosts[0].Routes[0].Headers = []edgev1.ValueMatch{{Type: edgev1.MatchRegularExpression, Name: "x", Value: "("}}
	if _, err := p.Apply(bad, nil); err == nil || !strings.Contains(err.Error(), `x "("`) {
		t.Errorf("a bad regular expression: %v", err)
	}
	if resp := get(t, port, "x", "/", nil); resp.StatusCode != 200 {
		t.Errorf("after a refused model: %d", resp.StatusCode)
	}
}

// flaky is a backend that can be stopped and started again on its address.
type flaky struct {
	name string
	addr string
	mu   sync.Mutex
	srv  *http.Server
}

func newFlaky(t *testing.T, name string) *flaky {
	t.Helper()
	f := &flaky{name: name, addr: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	f.start(t)
	t.Cleanup(f.stop)
	return f
}

func (f *flaky) start(t *testing.T) {
	t.Helper()
	l, err := net.Listen("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Backend", f.name)
		fmt.Fprint(w, f.name)
	})}
	go func() { _ = srv.Serve(l) }()
	f.mu.Lock()
	f.srv = srv
	f.mu.Unlock()
}

func (f *flaky) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.srv != nil {
		_ = f.srv.Close()
		f.srv = nil
	}
}

func (f *flaky) endpoint() edgev1.Endpoint {
	host, port, _ := net.SplitHostPort(f.addr)
	p, _ := strconv.Atoi(port)
	return edgev1.Endpoint{Address: host, Port: int32(p), Ready: true, Serving: true}
}

// When a cluster's endpoints stop answering, requests go to the other
// cluster with none failed (connection failures are retried and eject the
// endpoint), and the cluster is used again once its health check passes.
func TestFailoverAndRecovery(t *testing.T) {
	east, west := newFlaky(t, "east"), newFlaky(t, "west")
	port := freePort(t)
	start(t, oneListener(port, edgev1.ProtocolHTTP, edgev1.VirtualHost{Hostname: "*", Routes: []edgev1.Route{
		{RouteName: "r", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/"}, Backends: []edgev1.Backend{
			withPolicy(backend("echo", 1, inCluster("east", 1, east.endpoint()), inCluster("west", 1, west.endpoint())), fastChecks()),
		}},
	}}), nil)

	var mu sync.Mutex
	var failed, total int
	lastWest := time.Time{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			c := &http.Client{Timeout: 5 * time.Second}
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
				mu.Lock()
				total++
				if err != nil || resp.StatusCode != 200 {
					failed++
				} else if resp.Header.Get("X-Backend") == "west" {
					lastWest = time.Now()
				}
				mu.Unlock()
				if resp != nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	stopped := time.Now()
	west.stop()
	time.Sleep(time.Second)
	mu.Lock()
	lastWestAfterStop := lastWest.Sub(stopped)
	failedDuringOutage, totalDuringOutage := failed, total
	mu.Unlock()
	if failedDuringOutage != 0 {
		t.Errorf("%d of %d requests failed while west stopped", failedDuringOutage, totalDuringOutage)
	}
	t.Logf("west stopped: last answer from west %s after the stop, %d requests, %d failed", lastWestAfterStop.Round(time.Millisecond), totalDuringOutage, failedDuringOutage)

	west.start(t)
	back := time.Now()
	testkit.Eventually(t, 10*time.Second, "west answers again", func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if lastWest.Before(back) {
			return fmt.Errorf("no answer from west since it returned")
		}
		return nil
	})
	t.Logf("west back in traffic %s after it returned", time.Since(back).Round(time.Millisecond))
	close(stop)
	wg.Wait()
	if failed != 0 {
		t.Errorf("%d of %d requests failed in all", failed, total)
	}
}

// A port that turns from HTTP to HTTPS is served again at once.
func TestPortChangesProtocol(t *testing.T) {
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	kp, _ := ca.ServingCert("shop", []string{"shop.example.com"})
	cert, _ := kp.TLSCertificate()
	ep := echo(t, "web")
	port := freePort(t)
	routes := []edgev1.Route{{RouteName: "r", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/"}, Backends: []edgev1.Backend{backend("web", 1, inCluster("east", 1, ep))}}}
	p := start(t, oneListener(port, edgev1.ProtocolHTTP, edgev1.VirtualHost{Hostname: "*", Routes: routes}), nil)
	if resp := get(t, port, "shop.example.com", "/", nil); resp.StatusCode != 200 {
		t.Fatalf("HTTP: %d", resp.StatusCode)
	}
	https := oneListener(port, edgev1.ProtocolHTTPS, edgev1.VirtualHost{Hostname: "*", Routes: routes})
	https.Gateways[0].Listeners[0].Certificates = []edgev1.ListenerCertificate{{Name: "shop", Digest: "d"}}
	if _, err := p.Apply(https, map[string]*tls.Certificate{"d": &cert}); err != nil {
		t.Fatalf("switching to HTTPS: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "shop.example.com"}}}
	resp, err := c.Get(fmt.Sprintf("https://127.0.0.1:%d/", port))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("HTTPS: %d", resp.StatusCode)
	}
}

// Gateways with addresses of their own share a port number: each one's
// listener is bound at its address and routes only its own routes, while a
// Gateway without one is served at the listen host (issue 24: the Gateway
// API conformance suite's Gateways all listen on port 80).
func TestGatewaysOnTheirOwnAddresses(t *testing.T) {
	port := freePort(t)
	route := func(name string) []edgev1.VirtualHost {
		return []edgev1.VirtualHost{{Hostname: "*", Routes: []edgev1.Route{{Backends: []edgev1.Backend{backend(name, 1, inCluster("east", 1, echo(t, name)))}}}}}
	}
	gateway := func(name, address string) edgev1.Gateway {
		return edgev1.Gateway{Namespace: "demo", Name: name, Address: address, Listeners: []edgev1.Listener{{Name: "http", Port: port, Protocol: edgev1.ProtocolHTTP, VirtualHosts: route(name)}}}
	}
	m := &edgev1.Model{Version: "v1", Gateways: []edgev1.Gateway{gateway("shared", ""), gateway("first", "127.0.1.1"), gateway("second", "127.0.1.2")}}
	p := start(t, m, nil)
	for host, want := range map[string]string{"127.0.0.1": "shared", "127.0.1.1": "first", "127.0.1.2": "second"} {
		resp, err := client.Get(fmt.Sprintf("http://%s:%d/", host, port))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("X-Backend"); got != want {
			t.Errorf("%s:%d answered by %q, want %q", host, port, got, want)
		}
		if a := p.AddrAt(strings.TrimPrefix(host, "127.0.0.1"), port); a == nil {
			t.Errorf("AddrAt(%q, %d) = nil", host, port)
		}
	}
	// The second Gateway goes: its address is let go, the others serve on.
	m = &edgev1.Model{Version: "v2", Gateways: m.Gateways[:2]}
	if _, err := p.Apply(m, nil); err != nil {
		t.Fatal(err)
	}
	if a := p.AddrAt("127.0.1.2", port); a != nil {
		t.Errorf("127.0.1.2:%d still bound after its Gateway left the model", port)
	}
	if _, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.1.2:%d", port), time.Second); err == nil {
		t.Errorf("127.0.1.2:%d still accepts connections", port)
	}
}

// A request goes to the listener whose hostname matches its host most
// specifically, and only that listener's routes may take it, even when a
// route of a less specific listener names the host (the Gateway API's
// listener isolation, conformance test GatewayHTTPListenerIsolation).
func TestListenerIsolation(t *testing.T) {
	port := freePort(t)
	routes := func(path, backendName string, hostnames ...string) []edgev1.VirtualHost {
		var out []edgev1.VirtualHost
		for _, h := range hostnames {
			out = append(out, edgev1.VirtualHost{Hostname: h, Routes: []edgev1.Route{{RouteName: path, Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: path},
				Backends: []edgev1.Backend{backend(backendName, 1, inCluster("east", 1, echo(t, backendName)))}}}})
		}
		return out
	}
	listener := func(name, hostname string, hosts []edgev1.VirtualHost) edgev1.Listener {
		return edgev1.Listener{Name: name, Hostname: hostname, Port: port, Protocol: edgev1.ProtocolHTTP, VirtualHosts: hosts}
	}
	m := &edgev1.Model{Version: "v", Gateways: []edgev1.Gateway{{Namespace: "demo", Name: "edge", Listeners: []edgev1.Listener{
		listener("empty", "", routes("/empty", "empty", "bar.com", "*.example.com", "abc.example.com")),
		listener("wildcard", "*.example.com", routes("/wildcard", "wildcard", "*.example.com", "abc.example.com")),
		listener("abc", "abc.example.com", routes("/abc", "abc", "abc.example.com")),
	}}}}
	start(t, m, nil)
	tests := []struct {
		host, path string
		want       string // backend; "" for 404
	}{
		{"bar.com", "/empty", "empty"},
		{"bar.example.com", "/empty", ""}, // the wildcard listener's host
		{"bar.example.com", "/wildcard", "wildcard"},
		{"abc.example.com", "/wildcard", ""}, // the abc listener's host
		{"abc.example.com", "/empty", ""},
		{"abc.example.com", "/abc", "abc"},
		{"other.org", "/empty", ""}, // the empty listener's, but no route names it
	}
	for _, tt := range tests {
		resp := get(t, port, tt.host, tt.path, nil)
		got := resp.Header.Get("X-Backend")
		if tt.want == "" && resp.StatusCode != http.StatusNotFound || got != tt.want {
			t.Errorf("%s%s: %d from %q, want %q (404 when none)", tt.host, tt.path, resp.StatusCode, got, tt.want)
		}
	}
}

// A RequestMirror filter sends a copy of the request (body included) to its
// backend and drops the answer; a share of 0 sends none.
func TestRequestMirror(t *testing.T) {
	seen := make(chan string, 16)
	mirrorSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen <- r.Method + " " + r.Host + r.URL.Path + " " + string(b)
		w.WriteHeader(http.StatusTeapot) // dropped
	}))
	t.Cleanup(mirrorSrv.Close)
	host, portStr, _ := net.SplitHostPort(mirrorSrv.Listener.Addr().String())
	mport, _ := strconv.Atoi(portStr)
	mirrorTo := backend("shadow", 1, inCluster("east", 1, edgev1.Endpoint{Address: host, Port: int32(mport), Ready: true, Serving: true}))
	main := backend("web", 1, inCluster("east", 1, echo(t, "web")))
	port := freePort(t)
	m := oneListener(port, edgev1.ProtocolHTTP, edgev1.VirtualHost{Hostname: "*", Routes: []edgev1.Route{
		{RouteName: "all", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/all"}, Backends: []edgev1.Backend{main},
			Filters: []edgev1.Filter{{Type: edgev1.FilterRequestMirror, RequestMirror: &edgev1.Mirror{Backend: mirrorTo, Numerator: 1, Denominator: 1}}}},
		{RouteName: "none", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/none"}, Backends: []edgev1.Backend{main},
			Filters: []edgev1.Filter{{Type: edgev1.FilterRequestMirror, RequestMirror: &edgev1.Mirror{Backend: mirrorTo, Numerator: 0, Denominator: 100}}}},
	}})
	start(t, m, nil)

	resp, err := client.Post(fmt.Sprintf("http://127.0.0.1:%d/all", port), "text/plain", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Backend") != "web" || resp.Header.Get("X-Seen-Path") != "/all" {
		t.Fatalf("the mirrored request itself: %d from %q", resp.StatusCode, resp.Header.Get("X-Backend"))
	}
	select {
	case got := <-seen:
		if want := fmt.Sprintf("POST 127.0.0.1:%d/all hello", port); got != want {
			t.Errorf("mirror got %q, want %q", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the mirror got nothing")
	}
	for range 5 {
		get(t, port, "", "/none", nil)
	}
	// A copy sent would arrive long before the next mirrored request's.
	get(t, port, "", "/all", nil)
	if got := <-seen; !strings.HasPrefix(got, "GET ") || !strings.Contains(got, "/all") {
		t.Errorf("a 0%% mirror sent %q", got)
	}
}

// A model that stops routing to an endpoint (its pod stopping) closes the
// fast path's idle connections to it at once, not after the pool's idle
// timeout; the endpoints still routed to keep theirs. On the net/http path
// the transport's pool keeps them until its idle timeout, so only the
// requests are checked there.
func TestRemovedEndpointsConnectionsClosed(t *testing.T) {
	// closed counts connections that served a request, then closed
	// (health checks' connections serve none).
	type backendConns struct {
		ep     edgev1.Endpoint
		mu     sync.Mutex
		served map[net.Conn]bool
		closed int
	}
	serve := func(name string) *backendConns {
		b := &backendConns{served: map[net.Conn]bool{}}
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Backend", name)
		}))
		srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
			b.mu.Lock()
			defer b.mu.Unlock()
			switch s {
			case http.StateActive:
				b.served[c] = true
			case http.StateClosed, http.StateHijacked:
				if b.served[c] {
					b.closed++
				}
				delete(b.served, c)
			}
		}
		srv.Start()
		t.Cleanup(srv.Close)
		b.ep = endpointOf(srv)
		return b
	}
	closed := func(b *backendConns) int {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.closed
	}
	east, west := serve("east"), serve("west")
	port := freePort(t)
	model := func(clusters ...edgev1.ClusterEndpoints) *edgev1.Model {
		return oneListener(port, edgev1.ProtocolHTTP, edgev1.VirtualHost{Hostname: "*", Routes: []edgev1.Route{
			{RouteName: "r", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/"}, Backends: []edgev1.Backend{backend("echo", 1, clusters...)}},
		}})
	}
	p := start(t, model(inCluster("east", 1, east.ep), inCluster("west", 1, west.ep)), nil)
	seen := map[string]int{}
	for range 40 {
		resp := get(t, port, "x", "/", nil)
		seen[resp.Header.Get("X-Backend")]++
	}
	if seen["east"] == 0 || seen["west"] == 0 {
		t.Fatalf("answers by backend %v, want both", seen)
	}
	if _, err := p.Apply(model(inCluster("east", 1, east.ep)), nil); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if resp := get(t, port, "x", "/", nil); resp.StatusCode != 200 || resp.Header.Get("X-Backend") != "east" {
			t.Fatalf("after west left the model: %d from %q", resp.StatusCode, resp.Header.Get("X-Backend"))
		}
	}
	if netHTTPOnly {
		return
	}
	testkit.Eventually(t, 5*time.Second, "west's pooled connections to be closed", func(context.Context) error {
		if n := closed(west); n == 0 {
			return errors.New("west's server saw no connection closed")
		}
		return nil
	})
	if n := closed(east); n != 0 {
		t.Errorf("east's server saw %d connections closed; it is still routed to", n)
	}
}

// Every request gets its access log line, with the route, backend and
// cluster that served it, whichever path served it.
func TestAccessLog(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(srv.Close)
	out := &testkit.SyncBuffer{}
	w := accesslog.New(out, accesslog.Options{})
	port := freePort(t)
	startWith(t, proxy.Options{AccessLog: w}, oneListener(port, edgev1.ProtocolHTTP, edgev1.VirtualHost{Hostname: "*", Routes: []edgev1.Route{
		{RouteName: "r", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/"}, Backends: []edgev1.Backend{backend("echo", 1, inCluster("east", 1, endpointOf(srv)))}},
	}}), nil)
	get(t, port, "a.example", "/x%20y", nil)
	get(t, port, "b.example", "/none", http.Header{"Expect": {"100-continue"}}) // net/http's path on both
	h2c := &http.Transport{Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(h2c.CloseIdleConnections)
	res, err := (&http.Client{Transport: h2c, Timeout: 10 * time.Second}).Get(fmt.Sprintf("http://127.0.0.1:%d/h2", port))
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	_ = w.Close()
	type line struct {
		Msg, Method, Host, Path, Route, Backend, Cluster string
		Code                                             int
		Duration                                         int64
	}
	var got []line
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var v line
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("access log line %q: %v", l, err)
		}
		if v.Duration <= 0 {
			t.Errorf("line %q: no duration", l)
		}
		v.Duration = 0
		got = append(got, v)
	}
	want := []line{
		{Msg: "request", Method: "GET", Host: "a.example", Path: "/x y", Route: "/r/0", Backend: "ServiceImport/demo/echo", Cluster: "east", Code: 200},
		{Msg: "request", Method: "GET", Host: "b.example", Path: "/none", Route: "/r/0", Backend: "ServiceImport/demo/echo", Cluster: "east", Code: 200},
		{Msg: "request", Method: "GET", Host: fmt.Sprintf("127.0.0.1:%d", port), Path: "/h2", Route: "/r/0", Backend: "ServiceImport/demo/echo", Cluster: "east", Code: 200},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("access log:\n got %+v\nwant %+v", got, want)
	}
}
