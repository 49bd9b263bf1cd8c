package proxy_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"slices"
	"strings"
	"testing"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/edge/proxy"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

// streamCase is an HTTP/2 request and the backend's canned answer.
type streamCase struct {
	name    string
	method  string
	target  string
	header  http.Header
	body    string
	chunked bool // the body's length is not announced
	resp    string
	// uri, when set, is the target the backend must read.
	uri string
	// closeAfter: the backend closes the connection after its answer.
	closeAfter bool
}

// TestStreamForwarding sends the same HTTP/2 requests (h2c, prior
// knowledge, and over TLS by ALPN, where the fast path hands the
// connection over with its writes coalesced) to two proxies, the default
// one, whose stream handler forwards them over the upstream pools, and
// NetHTTPOnly, whose reverse proxy and transport forward them, and
// compares what each backend read and what each client got back
// (normalized as the differential test does). The default proxy must
// have forwarded each over the pools.
func TestStreamForwarding(t *testing.T) {
	chunkedWithTrailers := "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTrailer: X-Sum\r\nTransfer-Encoding: chunked\r\n\r\n" +
		diffChunk("hello, ") + diffChunk("world") + "0\r\nX-Sum: abc\r\n\r\n"
	cases := []streamCase{
		{name: "GET", method: "GET", target: "/"},
		{name: "query and fields", method: "GET", target: "/a/b?x=1&y=%20z",
			header: http.Header{"X-Forwarded-For": {"192.0.2.1"}, "X-Multi": {"one", "two"}, "Te": {"trailers"}, "Accept": {"text/plain"},
				"Forwarded": {"for=192.0.2.9"}, "X-Forwarded-Proto": {"gopher"}, "Proxy-Authorization": {"Basic eDp5"}}},
		{name: "escaped path", method: "GET", target: "/a%3bb/%7Ec", uri: "/a%3Bb/~c"},
		{name: "dot segments and empty ones", method: "GET", target: "/x/%2e%2e/a//b/./c?q=/../%2e", uri: "/a/b/c?q=/../%2e"},
		{name: "HEAD", method: "HEAD", target: "/", resp: "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\n"},
		{name: "POST with a length", method: "POST", target: "/up", body: strings.Repeat("data ", 2000)},
		{name: "POST of unknown length", method: "POST", target: "/up", body: strings.Repeat("chunk ", 3000), chunked: true},
		{name: "POST without a body", method: "POST", target: "/up"},
		{name: "DELETE", method: "DELETE", target: "/x"},
		{name: "chunked answer with trailers", method: "GET", target: "/", resp: chunkedWithTrailers},
		{name: "204", method: "GET", target: "/", resp: "HTTP/1.1 204 No Content\r\nX-Backend: raw\r\n\r\n"},
		{name: "304", method: "GET", target: "/", resp: "HTTP/1.1 304 Not Modified\r\nEtag: \"v1\"\r\nContent-Type: text/plain\r\n\r\n"},
		{name: "answer delimited by close", method: "GET", target: "/", resp: "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end", closeAfter: true},
		{name: "answer with Connection: close", method: "GET", target: "/", resp: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", closeAfter: true},
		{name: "early hints", method: "GET", target: "/", resp: "HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n" + diffOK},
		{name: "hop-by-hop answer fields", method: "GET", target: "/",
			resp: "HTTP/1.1 200 OK\r\nConnection: X-Private\r\nX-Private: 1\r\nKeep-Alive: timeout=5\r\nProxy-Authenticate: Basic\r\nX-Kept: 2\r\nContent-Length: 2\r\n\r\nok"},
		{name: "server error", method: "GET", target: "/", resp: "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\nRetry-After: 1\r\n\r\nbusy"},
	}
	for _, useTLS := range []bool{false, true} {
		name := "h2c"
		if useTLS {
			name = "TLS"
		}
		t.Run(name, func(t *testing.T) { testStreamForwarding(t, cases, useTLS) })
	}
}

func testStreamForwarding(t *testing.T, cases []streamCase, useTLS bool) {
	fast := startDiffProxyOn(t, "fast", false, useTLS)
	std := startDiffProxyOn(t, "net/http", true, useTLS)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dc := &diffCase{name: tc.name, closeAfter: tc.closeAfter}
			if tc.resp != "" {
				dc.resp = []string{tc.resp}
			}
			before := forwarded(t, fast.reg)
			got := runStream(t, fast, dc, tc)
			want := runStream(t, std, dc, tc)
			if d := cmp.Diff(want.lines(), got.lines()); d != "" {
				t.Errorf("the stream forwarder differs from net/http's reverse proxy (-net/http +stream):\n%s", d)
			}
			if len(got.Backend) != 1 {
				t.Errorf("the backend read %d requests, want 1", len(got.Backend))
			} else if tc.uri != "" && got.Backend[0].URI != tc.uri {
				t.Errorf("the backend read the target %q, want %q", got.Backend[0].URI, tc.uri)
			}
			after := forwarded(t, fast.reg)
			if after["http2-stream"]-before["http2-stream"] != 1 || after["reverse-proxy"] != before["reverse-proxy"] {
				t.Errorf("forwarded by %v, then %v: want one more by http2-stream", before, after)
			}
		})
	}
}

// runStream sends tc over HTTP/2 on a new connection to d, with c's
// answers at its backend.
func runStream(t *testing.T, d *diffProxy, c *diffCase, tc streamCase) *diffResult {
	t.Helper()
	d.backend.begin(c)
	tr := &http.Transport{Protocols: new(http.Protocols), DisableCompression: true, TLSClientConfig: d.tls}
	scheme := "https"
	if d.tls != nil {
		tr.Protocols.SetHTTP2(true)
	} else {
		scheme = "http"
		tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return nil, fmt.Errorf("no TLS here: %s", addr)
		}
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	t.Cleanup(tr.CloseIdleConnections)
	var body io.Reader
	if tc.body != "" {
		body = strings.NewReader(tc.body)
		if tc.chunked {
			body = struct{ io.Reader }{body} // no length known
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var informational []string
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		informational = append(informational, fmt.Sprintf("%d %s", code, diffFlatHeader(http.Header(h))))
		return nil
	}})
	req, err := http.NewRequestWithContext(ctx, tc.method, scheme+"://stream.test"+tc.target, body)
	if err != nil {
		t.Fatal(err)
	}
	req.URL.Host = d.addr
	req.Host = "stream.test"
	maps.Copy(req.Header, tc.header)
	r := &diffResult{}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		r.Client = append(r.Client, diffAnswer{Err: diffNormalizeErr(err)})
		r.Backend = d.backend.requests()
		return r
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("%s: answered over %s, want HTTP/2", d.name, resp.Proto)
	}
	a := diffAnswer{Informational: informational, Status: resp.StatusCode, Proto: resp.Proto, Announced: slices.Sorted(maps.Keys(resp.Trailer))}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		a.Err = "reading the body: " + diffNormalizeErr(err)
	}
	diffNormalizeDate(resp.Header)
	a.Header, a.Body, a.Trailer, a.ContentLength = resp.Header, string(b), resp.Trailer, resp.ContentLength
	r.Client = append(r.Client, a)
	r.Backend = d.backend.requests()
	return r
}

// forwarded returns the proxy's requests by forwarder so far.
func forwarded(t *testing.T, g prometheus.Gatherer) map[string]float64 {
	return counterBy(t, g, "fleetnet_edge_forwarded_requests_total", "forwarder")
}

// TestStreamCanceledByClient: a client that resets its stream while the
// endpoint has not answered ends the upstream exchange at once: the
// endpoint's connection is closed, not kept until the backend timeout.
func TestStreamCanceledByClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			got <- "reading the request: " + err.Error()
			return
		}
		got <- "request " + req.URL.Path
		// No answer: wait for the edge to close the connection.
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == io.EOF {
			got <- "closed"
		} else {
			got <- fmt.Sprintf("still open: %v", err)
		}
	}()
	a := ln.Addr().(*net.TCPAddr)
	port := freePort(t)
	reg := prometheus.NewRegistry()
	p := proxy.New(proxy.Options{ListenHost: "127.0.0.1", Log: slog.New(slog.DiscardHandler), Registerer: reg})
	m := oneListener(port, edgev1.ProtocolHTTP, edgev1.VirtualHost{Hostname: "*", Routes: []edgev1.Route{
		{RouteName: "r", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/"}, Backends: []edgev1.Backend{
			backend("slow", 1, inCluster("east", 1, edgev1.Endpoint{Address: a.IP.String(), Port: int32(a.Port), Ready: true, Serving: true}))}},
	}})
	if _, err := p.Apply(m, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })

	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/slow", port), nil)
	errc := make(chan error, 1)
	go func() {
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	if s := <-got; s != "request /slow" {
		t.Fatalf("backend: %s", s)
	}
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the canceled request got an answer")
	}
	if s := <-got; s != "closed" {
		t.Errorf("after the client reset its stream, the endpoint's connection is %s", s)
	}
	if f := forwarded(t, reg); f["http2-stream"] != 1 {
		t.Errorf("forwarded by %v, want http2-stream", f)
	}
}

// TestHTTP2ShutdownOverTLS: closing the proxy while an HTTP/2 request over
// TLS is in flight (on a connection the fast path handed over) waits for
// it, and it finishes with its answer whole.
func TestHTTP2ShutdownOverTLS(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		fmt.Fprint(w, "finished")
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	a := slow.Listener.Addr().(*net.TCPAddr)
	port := freePort(t)
	cert, pool := servingCert(t, "shop.example.com")
	m := oneListener(port, edgev1.ProtocolHTTPS, edgev1.VirtualHost{Hostname: "*", Routes: []edgev1.Route{
		{RouteName: "r", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/"}, Backends: []edgev1.Backend{
			backend("slow", 1, inCluster("east", 1, edgev1.Endpoint{Address: a.IP.String(), Port: int32(a.Port), Ready: true, Serving: true}))}},
	}})
	m.Gateways[0].Listeners[0].Certificates = []edgev1.ListenerCertificate{{Name: "shop", Digest: "d"}}
	p := start(t, m, map[string]*tls.Certificate{"d": &cert})

	tr := &http.Transport{Protocols: new(http.Protocols), TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "shop.example.com"}}
	tr.Protocols.SetHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	url := fmt.Sprintf("https://127.0.0.1:%d/", port)
	type answer struct {
		proto, body string
		err         error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := client.Get(url)
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- answer{proto: resp.Proto, body: string(b), err: err}
	}()
	<-arrived
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		closed <- p.Close(ctx)
	}()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a request was in flight", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	a1 := <-got
	if a1.err != nil || a1.proto != "HTTP/2.0" || a1.body != "finished" {
		t.Fatalf("the request in flight: %s %q, %v; want HTTP/2.0 %q", a1.proto, a1.body, a1.err, "finished")
	}
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
}
