package proxy_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/edge/proxy"

	"github.com/prometheus/client_golang/prometheus"
)

// The differential test sends the same raw bytes to two proxies, the fast
// path and NetHTTPOnly, each in front of its own raw TCP backend, and
// compares what each backend received and what each client read back.
//
// Normalization, beyond what net/http's readers do on both sides (field
// names canonical, the order of distinct fields lost, the order of one
// field's values kept; bodies de-chunked, chunk extensions gone):
//   - Date values are replaced by "<date>" (the time differs, its presence
//     is compared).
//
//   - An answer the proxy makes itself (nothing reached the backend) is
//     compared by its status and whether it closes: its text and fields
//     are each server's error page.
//   - Transport errors read by the client (EOF, unexpected EOF, reset)
//     are all "connection closed": which one a closed connection gives
//     depends on timing.
//
// Nothing else is normalized: framing (Content-Length or chunked, at the
// backend and at the client), Close, trailers and 1xx answers are
// compared as they are. After its answers, unless the last one closes,
// each case's connection gets a probe request: the connection is still
// in step (the backend's answer names the method it read), or closed.
//
// Each case also says whether the fast path serves it or hands it to
// net/http (by the proxy's handoff metric): a case handed over is alike
// by construction, so the corpus must keep most cases on the fast path.
//
// The refusals are requests the fast path must refuse itself (400 or 501,
// the connection closed), with nothing reaching the backend and nothing
// handed to net/http; what the net/http path does with them is logged,
// not asserted. The bad answers are backend answers the fast path must
// turn into a 502.

// diffCase is a client's bytes and the backend's canned answers.
type diffCase struct {
	name string
	raw  string
	// resp are the backend's answers, by request of the case; the last
	// one answers the requests after it. Empty: diffOK.
	resp []string
	// closeAfter: the backend closes the connection after each answer.
	closeAfter bool
	// check, when set, asserts on each path's result.
	check func(r *diffResult) error
	// handoff is why the fast path hands the case to net/http (the
	// reason label of fleetnet_edge_http_handoffs_total); "" when it
	// serves it itself.
	handoff string
}

const diffOK = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nX-Backend: raw\r\n\r\nok"

// diffProbe is a request sent after a case's answers on the same connection:
// the connection is still in step (or was closed).
const diffProbe = "GET /__probe HTTP/1.1\r\nHost: diff.test\r\n\r\n"

// diffSeenRequest is a request as the backend read it.
type diffSeenRequest struct {
	Method, URI, Host, Proto string
	Header                   http.Header
	Body                     string
	// Announced are the trailer fields the Trailer field announced.
	Announced        []string
	Trailer          http.Header
	ContentLength    int64
	TransferEncoding []string
	// Err is what the backend could not read.
	Err string
}

// diffAnswer is an answer as the client read it.
type diffAnswer struct {
	// Informational are the 1xx answers before it.
	Informational []string
	Status        int
	Proto         string
	Header        http.Header
	Body          string
	// Announced are the trailer fields the Trailer field announced.
	Announced        []string
	Trailer          http.Header
	ContentLength    int64
	TransferEncoding []string
	Close            bool
	Err              string
}

type diffResult struct {
	Backend []diffSeenRequest
	Client  []diffAnswer
	// Probe is the answer to the probe request, "closed" when the
	// connection was closed, or "" when the last answer said it closes.
	Probe string
	// Handoffs are the fast path's hand-overs to net/http during the
	// case, by reason (not compared).
	Handoffs map[string]float64
}

// diffBackend reads requests with http.ReadRequest, records them and
// answers with the current case's canned bytes.
type diffBackend struct {
	ln net.Listener
	mu sync.Mutex
	c  *diffCase
	n  int
	// seen are the requests of the current case.
	seen  []diffSeenRequest
	conns map[net.Conn]struct{}
}

func newDiffBackend(t *testing.T) *diffBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &diffBackend{ln: ln, conns: map[net.Conn]struct{}{}}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.conns[c] = struct{}{}
			b.mu.Unlock()
			wg.Go(func() { b.serve(c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		b.mu.Lock()
		for c := range b.conns {
			c.Close()
		}
		b.mu.Unlock()
		wg.Wait()
	})
	return b
}

func (b *diffBackend) endpoint() edgev1.Endpoint {
	a := b.ln.Addr().(*net.TCPAddr)
	return edgev1.Endpoint{Address: a.IP.String(), Port: int32(a.Port), Ready: true, Serving: true}
}

// diffCountingReader counts the bytes read from a connection.
type diffCountingReader struct {
	r io.Reader
	n int64
}

func (c *diffCountingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (b *diffBackend) serve(c net.Conn) {
	defer func() {
		c.Close()
		b.mu.Lock()
		delete(b.conns, c)
		b.mu.Unlock()
	}()
	cr := &diffCountingReader{r: c}
	br := bufio.NewReader(cr)
	for {
		before := cr.n - int64(br.Buffered())
		req, err := http.ReadRequest(br)
		if err != nil {
			// A connection closed between requests (the proxies' pools,
			// TCP health checks) is no request.
			if cr.n > before {
				b.record(diffSeenRequest{Err: "malformed request: " + err.Error()})
			}
			return
		}
		announced := slices.Sorted(maps.Keys(req.Trailer))
		body, berr := io.ReadAll(req.Body)
		if req.RequestURI == "/__probe" {
			// The method says what the backend took for the probe's.
			answer := "probe " + req.Method
			if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(answer), answer); err != nil {
				return
			}
			continue
		}
		s := diffSeenRequest{Method: req.Method, URI: req.RequestURI, Host: req.Host, Proto: req.Proto, Header: req.Header,
			Body: string(body), Announced: announced, Trailer: req.Trailer, ContentLength: req.ContentLength, TransferEncoding: req.TransferEncoding}
		if berr != nil {
			s.Err = "reading the body: " + berr.Error()
		}
		answer, closeAfter := b.record(s)
		if berr != nil {
			return
		}
		if _, err := io.WriteString(c, answer); err != nil || closeAfter {
			return
		}
	}
}

// record adds a request to the current case's, and returns its answer.
func (b *diffBackend) record(s diffSeenRequest) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seen = append(b.seen, s)
	answer, closeAfter := diffOK, false
	if b.c != nil {
		if len(b.c.resp) > 0 {
			answer = b.c.resp[min(b.n, len(b.c.resp)-1)]
		}
		closeAfter = b.c.closeAfter
	}
	b.n++
	return answer, closeAfter
}

func (b *diffBackend) begin(c *diffCase) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.c, b.n, b.seen = c, 0, nil
}

func (b *diffBackend) requests() []diffSeenRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.seen)
}

// diffProxy is one of the two proxies with its backend.
type diffProxy struct {
	name    string
	addr    string
	backend *diffBackend
	// reg has the proxy's metrics (the fast path's).
	reg *prometheus.Registry
	// tls is the client's configuration for an HTTPS listener; nil for
	// an HTTP one.
	tls *tls.Config
}

func startDiffProxy(t *testing.T, name string, netHTTPOnly bool) *diffProxy {
	return startDiffProxyOn(t, name, netHTTPOnly, false)
}

// startDiffProxyOn starts a proxy with one route to a diffBackend, on an
// HTTPS listener (a certificate of diff.test) when useTLS.
func startDiffProxyOn(t *testing.T, name string, netHTTPOnly, useTLS bool) *diffProxy {
	t.Helper()
	be := newDiffBackend(t)
	port := freePort(t)
	reg := prometheus.NewRegistry()
	p := proxy.New(proxy.Options{ListenHost: "127.0.0.1", NetHTTPOnly: netHTTPOnly, Log: slog.New(slog.DiscardHandler), Registerer: reg})
	protocol, certs := edgev1.ProtocolHTTP, map[string]*tls.Certificate(nil)
	var clientTLS *tls.Config
	if useTLS {
		cert, pool := servingCert(t, "diff.test")
		protocol, certs, clientTLS = edgev1.ProtocolHTTPS, map[string]*tls.Certificate{"d": &cert}, &tls.Config{RootCAs: pool, ServerName: "diff.test"}
	}
	m := oneListener(port, protocol, edgev1.VirtualHost{Hostname: "*", Routes: []edgev1.Route{
		{RouteName: "r", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/"}, Backends: []edgev1.Backend{backend("raw", 1, inCluster("east", 1, be.endpoint()))}},
	}})
	if useTLS {
		m.Gateways[0].Listeners[0].Certificates = []edgev1.ListenerCertificate{{Name: "diff", Digest: "d"}}
	}
	if _, err := p.Apply(m, certs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return &diffProxy{name: name, addr: fmt.Sprintf("127.0.0.1:%d", port), backend: be, reg: reg, tls: clientTLS}
}

// run sends c's bytes to the proxy on a new connection and reads the
// answers to methods (one per request of the case).
func (d *diffProxy) run(t *testing.T, c *diffCase, methods []string, timeout time.Duration) *diffResult {
	t.Helper()
	d.backend.begin(c)
	before := diffHandoffs(t, d.reg)
	conn, err := net.Dial("tcp", d.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(conn, c.raw); err != nil {
		t.Fatalf("%s: writing the request: %v", d.name, err)
	}
	br := bufio.NewReader(conn)
	r := &diffResult{}
	closing := false
	for _, method := range methods {
		cr := diffReadAnswer(br, method)
		r.Client = append(r.Client, cr)
		if cr.Err != "" || cr.Close {
			closing = true
			break
		}
	}
	if !closing {
		if _, err := io.WriteString(conn, diffProbe); err != nil {
			r.Probe = "closed"
		} else if pr := diffReadAnswer(br, http.MethodGet); pr.Err != "" {
			r.Probe = "closed"
		} else {
			r.Probe = fmt.Sprintf("%d %s", pr.Status, pr.Body)
		}
	}
	r.Backend = d.backend.requests()
	conn.Close()
	r.Handoffs = diffHandoffs(t, d.reg)
	for k, v := range before {
		if r.Handoffs[k] -= v; r.Handoffs[k] == 0 {
			delete(r.Handoffs, k)
		}
	}
	return r
}

// diffHandoffs returns the fast path's hand-overs so far, by reason.
func diffHandoffs(t *testing.T, g prometheus.Gatherer) map[string]float64 {
	return counterBy(t, g, "fleetnet_edge_http_handoffs_total", "reason")
}

// counterBy returns a counter's values so far, summed by one label.
func counterBy(t *testing.T, g prometheus.Gatherer, name, label string) map[string]float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// diffReadAnswer reads an answer (and the 1xx before it) to a request of
// method.
func diffReadAnswer(br *bufio.Reader, method string) diffAnswer {
	var cr diffAnswer
	for {
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			cr.Err = "reading the response: " + diffNormalizeErr(err)
			return cr
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			cr.Informational = append(cr.Informational, fmt.Sprintf("%d %s", resp.StatusCode, diffFlatHeader(resp.Header)))
			continue
		}
		cr.Announced = slices.Sorted(maps.Keys(resp.Trailer))
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			cr.Err = "reading the body: " + diffNormalizeErr(err)
		}
		diffNormalizeDate(resp.Header)
		cr.Status, cr.Proto, cr.Header, cr.Body, cr.Trailer = resp.StatusCode, resp.Proto, resp.Header, string(body), resp.Trailer
		cr.ContentLength, cr.TransferEncoding, cr.Close = resp.ContentLength, resp.TransferEncoding, resp.Close
		return cr
	}
}

func diffNormalizeErr(err error) string {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return "connection closed"
	case strings.Contains(err.Error(), "connection reset"):
		return "connection closed"
	}
	return err.Error()
}

func diffNormalizeDate(h http.Header) {
	if _, ok := h["Date"]; ok {
		h["Date"] = []string{"<date>"}
	}
}

// diffFieldLines are a header's fields, one "Name=[values]" each, sorted.
func diffFieldLines(h http.Header) []string {
	var out []string
	for k, vv := range h {
		out = append(out, fmt.Sprintf("%s=%q", k, vv))
	}
	sort.Strings(out)
	return out
}

func diffFlatHeader(h http.Header) string { return strings.Join(diffFieldLines(h), " ") }

// short quotes a body, or sums up a long one.
func short(s string) string {
	if len(s) <= 200 {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%d bytes, sha256 %x, starting %q", len(s), sha256.Sum256([]byte(s)), s[:40])
}

// lines describes a result line by line, for a readable difference.
func (r *diffResult) lines() []string {
	var out []string
	for i, s := range r.Backend {
		p := fmt.Sprintf("backend request %d: ", i)
		if s.Err != "" {
			out = append(out, p+"error "+s.Err)
		}
		if s.Method == "" {
			continue
		}
		out = append(out, fmt.Sprintf("%s%s %s %s Host %q, length %d, transfer-encoding %q", p, s.Method, s.URI, s.Proto, s.Host, s.ContentLength, s.TransferEncoding))
		out = append(out, messageLines(p, s.Header, s.Body, s.Announced, s.Trailer)...)
	}
	for i, c := range r.Client {
		p := fmt.Sprintf("answer %d: ", i)
		if len(r.Backend) == 0 && c.Status >= 400 {
			// The proxy's own answer: its text is each server's.
			out = append(out, fmt.Sprintf("%sthe proxy's own %d, close %v", p, c.Status, c.Close))
			continue
		}
		for _, inf := range c.Informational {
			out = append(out, p+"informational "+inf)
		}
		if c.Status != 0 {
			out = append(out, fmt.Sprintf("%s%s %d, length %d, transfer-encoding %q, close %v", p, c.Proto, c.Status, c.ContentLength, c.TransferEncoding, c.Close))
			out = append(out, messageLines(p, c.Header, c.Body, c.Announced, c.Trailer)...)
		}
		if c.Err != "" {
			out = append(out, p+"error "+c.Err)
		}
	}
	if r.Probe != "" {
		out = append(out, "probe after the answers: "+r.Probe)
	}
	return out
}

// diffMethods returns the methods of the requests in raw, as net/http reads
// them: one answer is read for each.
func diffMethods(raw string) []string {
	var methods []string
	br := bufio.NewReader(strings.NewReader(raw))
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return methods
		}
		methods = append(methods, req.Method)
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return methods
		}
	}
}

func diffGet(path string, fields ...string) string {
	return "GET " + path + " HTTP/1.1\r\nHost: diff.test\r\n" + diffFields(fields) + "\r\n"
}

func diffFields(fields []string) string {
	var b strings.Builder
	for _, f := range fields {
		b.WriteString(f + "\r\n")
	}
	return b.String()
}

func diffChunk(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }

// field returns a backend request's field, or an error naming the path.
func diffBackendField(r *diffResult, i int, name string) ([]string, error) {
	if len(r.Backend) <= i {
		return nil, fmt.Errorf("the backend saw %d requests", len(r.Backend))
	}
	return r.Backend[i].Header[name], nil
}

func diffWantField(name string, want ...string) func(r *diffResult) error {
	return func(r *diffResult) error {
		got, err := diffBackendField(r, 0, name)
		if err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("the backend saw %s %q, want %q", name, got, want)
		}
		return nil
	}
}

// diffWantURI: the backend read the request target uri.
func diffWantURI(uri string) func(r *diffResult) error {
	return func(r *diffResult) error {
		if len(r.Backend) == 0 {
			return errors.New("the backend saw no request")
		}
		if got := r.Backend[0].URI; got != uri {
			return fmt.Errorf("the backend read the target %q, want %q", got, uri)
		}
		return nil
	}
}

func diffAll(checks ...func(r *diffResult) error) func(r *diffResult) error {
	return func(r *diffResult) error {
		var errs []error
		for _, c := range checks {
			errs = append(errs, c(r))
		}
		return errors.Join(errs...)
	}
}

func diffCases() []diffCase {
	big := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	var bigChunked strings.Builder
	for i := 0; i < len(big); i += 50000 {
		bigChunked.WriteString(diffChunk(big[i:min(i+50000, len(big))]))
	}
	bigChunked.WriteString("0\r\n\r\n")
	return []diffCase{
		{name: "GET", raw: diffGet("/", "User-Agent: raw-client/1", "Accept: */*")},
		{name: "GET with a query string", raw: diffGet("/search?q=a+b&lang=en&empty=&x=%20y")},
		{name: "escaped path", raw: diffGet("/a%3bb/%41bc/%7e/%E2%82%ac"), check: diffWantURI("/a%3Bb/Abc/~/%E2%82%AC")},
		{name: "dot segments and empty ones", raw: diffGet("/x/%2e%2e/a//b/./c/..?q=/../%2e"), check: diffWantURI("/a/b/?q=/../%2e")},
		{name: "bytes a path holds encoded", raw: diffGet("/caf\xc3\xa9/{x}|\"y\""), check: diffWantURI("/caf%C3%A9/%7Bx%7D%7C%22y%22")},
		{name: "query with an invalid escape", handoff: "target", raw: diffGet("/q?b=%zz&a=1")},
		{name: "query with a semicolon", handoff: "target", raw: diffGet("/q?a=1;b=2&c=3")},
		{name: "HEAD with a Content-Length answer", raw: "HEAD /h HTTP/1.1\r\nHost: diff.test\r\n\r\n",
			resp: []string{"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 42\r\n\r\n"}},
		{name: "POST with Content-Length", raw: "POST /p HTTP/1.1\r\nHost: diff.test\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{\"name\":\"x\"}\n"},
		{name: "POST with Content-Length 0", raw: "POST /p HTTP/1.1\r\nHost: diff.test\r\nContent-Length: 0\r\n\r\n"},
		{name: "POST without a body", raw: "POST /p HTTP/1.1\r\nHost: diff.test\r\n\r\n"},
		{name: "DELETE without a body", raw: "DELETE /d HTTP/1.1\r\nHost: diff.test\r\n\r\n"},
		{name: "OPTIONS with Content-Length 0", raw: "OPTIONS /o HTTP/1.1\r\nHost: diff.test\r\nContent-Length: 0\r\n\r\n"},
		{name: "GET with Content-Length 0", raw: "GET /g HTTP/1.1\r\nHost: diff.test\r\nContent-Length: 0\r\n\r\n"},
		{name: "chunked body with extensions", raw: "POST /c HTTP/1.1\r\nHost: diff.test\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b\r\nhello\r\n6;c\r\n world\r\n0;last=1\r\n\r\n"},
		{name: "chunked body with announced trailers", raw: "POST /c HTTP/1.1\r\nHost: diff.test\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\nTE: trailers\r\n\r\n" + diffChunk("hello") + "0\r\nX-Sum: 42\r\n\r\n"},
		{name: "chunked body with unannounced trailers", raw: "POST /c HTTP/1.1\r\nHost: diff.test\r\nTransfer-Encoding: chunked\r\n\r\n" + diffChunk("hello") + "0\r\nX-Sum: 42\r\n\r\n"},
		{name: "Connection: close", raw: diffGet("/close", "Connection: close")},
		{name: "Connection lists a field", raw: diffGet("/conn", "Connection: keep-alive, X-Foo", "X-Foo: bar", "X-Kept: yes"),
			check: diffAll(diffWantField("X-Foo"), diffWantField("Connection"), diffWantField("X-Kept", "yes"))},
		{name: "Upgrade not requested, with hop-by-hop fields", handoff: "upgrade", raw: diffGet("/hop", "Keep-Alive: timeout=5", "Proxy-Connection: keep-alive", "TE: trailers, deflate", "Proxy-Authorization: Basic eDp5", "Upgrade: websocket"),
			check: diffAll(diffWantField("Keep-Alive"), diffWantField("Proxy-Connection"), diffWantField("Te", "trailers"), diffWantField("Proxy-Authorization"), diffWantField("Upgrade"))},
		{name: "hop-by-hop fields without Upgrade", raw: diffGet("/hop", "Keep-Alive: timeout=5", "Proxy-Connection: keep-alive", "TE: trailers, deflate", "Proxy-Authorization: Basic eDp5", "Trailer: X-Sum"),
			check: diffAll(diffWantField("Keep-Alive"), diffWantField("Proxy-Connection"), diffWantField("Te", "trailers"), diffWantField("Proxy-Authorization"), diffWantField("Trailer"))},
		{name: "X-Forwarded-For appended", raw: diffGet("/xff", "X-Forwarded-For: 1.2.3.4"),
			check: diffWantField("X-Forwarded-For", "1.2.3.4, 127.0.0.1")},
		{name: "two X-Forwarded-For fields", raw: diffGet("/xff", "X-Forwarded-For: 1.2.3.4", "X-Forwarded-For: 5.6.7.8"),
			check: diffWantField("X-Forwarded-For", "1.2.3.4, 5.6.7.8, 127.0.0.1")},
		{name: "forwarding fields replaced", raw: diffGet("/fwd", "Forwarded: for=6.6.6.6;host=evil", "X-Forwarded-Host: evil.example", "X-Forwarded-Proto: https"),
			check: diffAll(diffWantField("Forwarded"), diffWantField("X-Forwarded-Host", "diff.test"), diffWantField("X-Forwarded-Proto", "http"), diffWantField("X-Forwarded-For", "127.0.0.1"))},
		{name: "Host with a port", raw: "GET /port HTTP/1.1\r\nHost: Diff.Test:8080\r\n\r\n"},
		{name: "fields of many values, odd case, empty, obs-text", raw: diffGet("/f", "accept: text/html", "ACCEPT: */*", "Cookie: a=1", "Cookie: b=2", "X-Empty:", "X-Latin: caf\xe9", "x-lower-case: v")},
		{name: "Pragma: no-cache", raw: diffGet("/pragma", "Pragma: no-cache")},
		{name: "Host with a space", raw: "GET /bad-host HTTP/1.1\r\nHost: a b\r\n\r\n"},
		{name: "pipelined GETs", raw: diffGet("/1") + diffGet("/2"),
			resp: []string{"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Type: text/plain\r\n\r\none", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Type: text/plain\r\n\r\ntwo"}},
		{name: "pipelined POST and GET", raw: "POST /1 HTTP/1.1\r\nHost: diff.test\r\nContent-Length: 5\r\n\r\nhello" + diffGet("/2"),
			resp: []string{"HTTP/1.1 201 Created\r\nContent-Length: 3\r\nContent-Type: text/plain\r\n\r\none", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Type: text/plain\r\n\r\ntwo"}},
		{name: "pipelined chunked POST and GET", raw: "POST /1 HTTP/1.1\r\nHost: diff.test\r\nTransfer-Encoding: chunked\r\n\r\n" + diffChunk("hello") + "0\r\n\r\n" + diffGet("/2")},
		{name: "204", raw: diffGet("/204"), resp: []string{"HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n"}},
		{name: "304", raw: diffGet("/304", "If-None-Match: \"v1\""), resp: []string{"HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\nCache-Control: max-age=60\r\n\r\n"}},
		{name: "answer delimited by close", raw: diffGet("/eof"), closeAfter: true,
			resp: []string{"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-A: 1\r\n\r\nthe body ends with the connection"}},
		{name: "chunked answer with trailers", raw: diffGet("/trailers", "TE: trailers"),
			resp: []string{"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Sum: 42\r\n\r\n"}},
		{name: "chunked answer with unannounced trailers", raw: diffGet("/trailers", "TE: trailers"),
			resp: []string{"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n" + diffChunk("hello") + "0\r\nX-Sum: 42\r\n\r\n"}},
		{name: "chunked answer without trailers", raw: diffGet("/chunked"),
			resp: []string{"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n" + diffChunk("hello") + "0\r\n\r\n"}},
		{name: "103 Early Hints before the 200", raw: diffGet("/hints"),
			resp: []string{"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\n" + diffOK}},
		{name: "two 103s before the 200", raw: diffGet("/hints2"),
			resp: []string{"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </b.js>; rel=preload\r\n\r\n" + diffOK}},
		{name: "unsolicited 100 Continue before the 200", raw: diffGet("/continue"), resp: []string{"HTTP/1.1 100 Continue\r\n\r\n" + diffOK}},
		{name: "204 with Content-Length 0", raw: diffGet("/204cl"), resp: []string{"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"}},
		{name: "304 with Content-Length and Content-Type", raw: diffGet("/304cl"), resp: []string{"HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\nContent-Length: 100\r\nContent-Type: text/html\r\n\r\n"}},
		{name: "103 with Content-Length", raw: diffGet("/103cl"), resp: []string{"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\nContent-Length: 0\r\n\r\n" + diffOK}},
		{name: "HEAD with a chunked answer", raw: "HEAD /hc HTTP/1.1\r\nHost: diff.test\r\n\r\n",
			resp: []string{"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"}},
		{name: "GET with a body", raw: "GET /gb HTTP/1.1\r\nHost: diff.test\r\nContent-Length: 5\r\n\r\nhello"},
		{name: "answer without Content-Type", raw: diffGet("/sniff"), resp: []string{"HTTP/1.1 200 OK\r\nContent-Length: 14\r\n\r\n<html></html>\n"}},
		{name: "HTTP/1.0 answer", raw: diffGet("/10"), resp: []string{"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"}, closeAfter: true},
		{name: "answer with Connection: close", raw: diffGet("/bye"), closeAfter: true,
			resp: []string{"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"}},
		{name: "answer with hop-by-hop fields", raw: diffGet("/hop-answer"),
			resp: []string{"HTTP/1.1 200 OK\r\nConnection: X-Bar\r\nX-Bar: 1\r\nKeep-Alive: timeout=5\r\nProxy-Authenticate: Basic\r\nUpgrade: foo\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"}},
		{name: "answer with an unknown status", raw: diffGet("/299"), resp: []string{"HTTP/1.1 299 Whatever\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"}},
		{name: "pipelined HEAD and GET", raw: "HEAD /1 HTTP/1.1\r\nHost: diff.test\r\n\r\n" + diffGet("/2"),
			resp: []string{"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 42\r\n\r\n", diffOK}},
		{name: "pipelined after Connection: close", raw: diffGet("/1", "Connection: close") + diffGet("/2")},
		{name: "head of almost 8 KiB", raw: diffGet("/large-head", "X-Large: "+strings.Repeat("a", 7900))},
		{name: "head of 10 KiB", handoff: "head-size", raw: diffGet("/larger-head", "X-Large: "+strings.Repeat("a", 10<<10))},
		{name: "1 MiB request body", raw: "PUT /big HTTP/1.1\r\nHost: diff.test\r\nContent-Length: " + strconv.Itoa(len(big)) + "\r\n\r\n" + big},
		{name: "1 MiB chunked request body", raw: "PUT /big HTTP/1.1\r\nHost: diff.test\r\nTransfer-Encoding: chunked\r\n\r\n" + bigChunked.String()},
		{name: "1 MiB answer", raw: diffGet("/big"), resp: []string{"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: " + strconv.Itoa(len(big)) + "\r\n\r\n" + big}},
		// Handed over to net/http by the fast path: alike by construction,
		// checked for the hand-over itself.
		{name: "HTTP/1.0 request", handoff: "version", raw: "GET /10 HTTP/1.0\r\nHost: diff.test\r\n\r\n"},
		{name: "absolute-form target", handoff: "target", raw: "GET http://diff.test/abs HTTP/1.1\r\nHost: diff.test\r\n\r\n"},
		{name: "absolute-form target with dot segments", handoff: "target", raw: "GET http://diff.test/x/../abs?q HTTP/1.1\r\nHost: diff.test\r\n\r\n",
			check: diffWantURI("/abs?q")},
		{name: "Expect: 100-continue", handoff: "expect", raw: "PUT /e HTTP/1.1\r\nHost: diff.test\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhello"},
	}
}

// diffRefusal is a request the fast path must refuse, forwarding nothing.
type diffRefusal struct {
	name   string
	raw    string
	status int
}

func diffRefusals() []diffRefusal {
	post := "POST /smuggle HTTP/1.1\r\nHost: diff.test\r\n"
	smuggled := "GET /smuggled HTTP/1.1\r\nHost: diff.test\r\n\r\n"
	return []diffRefusal{
		{"Content-Length and Transfer-Encoding", post + "Content-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nX", http.StatusBadRequest},
		{"Transfer-Encoding and Content-Length", post + "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n" + fmt.Sprintf("%x\r\n", len(smuggled)+5) + "hello" + smuggled + "\r\n0\r\n\r\n", http.StatusBadRequest},
		{"duplicate Content-Length, equal", post + "Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello", http.StatusBadRequest},
		{"duplicate Content-Length, different", post + "Content-Length: 5\r\nContent-Length: 0\r\n\r\nhello", http.StatusBadRequest},
		{"Content-Length +5", post + "Content-Length: +5\r\n\r\nhello", http.StatusBadRequest},
		{"Transfer-Encoding gzip, chunked", post + "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", http.StatusNotImplemented},
		{"two Transfer-Encoding fields", post + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", http.StatusNotImplemented},
		{"obs-fold", post + "X-Foo: a\r\n b\r\nContent-Length: 0\r\n\r\n", http.StatusBadRequest},
		{"obs-fold of Content-Length", post + "Content-Length: 1\r\n 0\r\n\r\nhelloworld", http.StatusBadRequest},
		{"space before colon", post + "Content-Length : 5\r\n\r\nhello", http.StatusBadRequest},
		{"space before colon of Transfer-Encoding", post + "Transfer-Encoding : chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n", http.StatusBadRequest},
		{"bare LF", "GET /lf HTTP/1.1\nHost: diff.test\n\n", http.StatusBadRequest},
		{"bare LF before Transfer-Encoding", post + "X: y\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\nhello", http.StatusBadRequest},
		{"bare CR", post + "X: a\rContent-Length: 5\r\n\r\nhello", http.StatusBadRequest},
		{"NUL in a value", diffGet("/nul", "X-Foo: a\x00b"), http.StatusBadRequest},
		{"two Host fields", "GET /hosts HTTP/1.1\r\nHost: diff.test\r\nHost: other.test\r\n\r\n", http.StatusBadRequest},
		// Paths without a normal form (path.go).
		{"encoded slash in the path", diffGet("/a%2Fb"), http.StatusBadRequest},
		{"dot segment above the root", diffGet("/x/%2e%2e/.."), http.StatusBadRequest},
		{"invalid escape in the path", diffGet("/a/%zz"), http.StatusBadRequest},
		{"backslash in the path", diffGet("/a\\b"), http.StatusBadRequest},
	}
}

// diffBadAnswers are backend answers that the fast path refuses (a 502
// to the client), where net/http's transport may read them otherwise.
func diffBadAnswers() []diffCase {
	return []diffCase{
		{name: "Content-Length and Transfer-Encoding", resp: []string{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"}},
		{name: "duplicate Content-Length", resp: []string{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok"}},
		{name: "obs-fold", resp: []string{"HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\nContent-Length: 2\r\n\r\nok"}},
		{name: "bare LF", resp: []string{"HTTP/1.1 200 OK\nContent-Length: 2\n\nok"}},
		{name: "Transfer-Encoding gzip", resp: []string{"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nok"}},
	}
}

// TestDifferential: the fast path and the net/http path forward the same
// requests alike and answer the client alike, and the fast path refuses
// what lets two parsers frame a request differently, forwarding nothing.
func TestDifferential(t *testing.T) {
	fast := startDiffProxy(t, "fast path", false)
	std := startDiffProxy(t, "net/http", true)
	for _, c := range diffCases() {
		t.Run(c.name, func(t *testing.T) {
			methods := diffMethods(c.raw)
			if len(methods) == 0 {
				t.Fatalf("net/http reads no request in %q", c.raw)
			}
			rf := fast.run(t, &c, methods, 10*time.Second)
			rs := std.run(t, &c, methods, 10*time.Second)
			fl, sl := rf.lines(), rs.lines()
			if !slices.Equal(fl, sl) {
				none := func(l []string) []string {
					if len(l) == 0 {
						return []string{"(nothing)"}
					}
					return l
				}
				var onlyFast, onlyStd []string
				for _, l := range fl {
					if !slices.Contains(sl, l) {
						onlyFast = append(onlyFast, l)
					}
				}
				for _, l := range sl {
					if !slices.Contains(fl, l) {
						onlyStd = append(onlyStd, l)
					}
				}
				t.Errorf("the paths differ on %q\nfast path only:\n\t%s\nnet/http only:\n\t%s", diffClip(c.raw), strings.Join(none(onlyFast), "\n\t"), strings.Join(none(onlyStd), "\n\t"))
			}
			want := map[string]float64{}
			if c.handoff != "" {
				want[c.handoff] = 1
			}
			if !maps.Equal(rf.Handoffs, want) {
				t.Errorf("fast path: handed to net/http %v, want %v", rf.Handoffs, want)
			}
			answered := 0
			for _, a := range rf.Client {
				if a.Status != 0 && (a.Status < 400 || len(rf.Backend) > 0) {
					answered++
				}
			}
			if len(rf.Backend) != answered {
				t.Errorf("fast path: the backend saw %d requests, the client read %d answers", len(rf.Backend), answered)
			}
			if c.check != nil {
				if err := c.check(rf); err != nil {
					t.Errorf("fast path: %v", err)
				}
				if err := c.check(rs); err != nil {
					t.Errorf("net/http: %v", err)
				}
			}
			if t.Failed() {
				t.Logf("fast path:\n\t%s", strings.Join(fl, "\n\t"))
			}
		})
	}
	for _, c := range diffRefusals() {
		t.Run("refused/"+c.name, func(t *testing.T) {
			dc := &diffCase{name: c.name, raw: c.raw}
			one := []string{http.MethodPost}
			rf := fast.run(t, dc, one, 10*time.Second)
			// Some of these leave net/http waiting for a body that never
			// comes: what it did by then is enough.
			rs := std.run(t, dc, one, time.Second)
			// Anything forwarded would have reached the backend before
			// the client read its answer; a little more for a second
			// request the proxy might send after answering.
			time.Sleep(50 * time.Millisecond)
			rf.Backend, rs.Backend = fast.backend.requests(), std.backend.requests()
			if len(rf.Client) != 1 || rf.Client[0].Status != c.status || !rf.Client[0].Close {
				t.Errorf("fast path: %q answered\n\t%s\nwant a %d, closing", diffClip(c.raw), strings.Join(rf.lines(), "\n\t"), c.status)
			}
			if len(rf.Backend) != 0 {
				t.Errorf("fast path: %q reached the backend:\n\t%s", diffClip(c.raw), strings.Join(rf.lines(), "\n\t"))
			}
			if len(rf.Handoffs) != 0 {
				t.Errorf("fast path: %q handed to net/http (%v), which may take it", diffClip(c.raw), rf.Handoffs)
			}
			t.Logf("net/http does with %q:\n\t%s", diffClip(c.raw), strings.Join(rs.lines(), "\n\t"))
		})
	}
	// Last: a 502 counts toward the endpoint's passive ejection
	// (Consecutive5xx), which the cases before must not meet.
	for _, c := range diffBadAnswers() {
		t.Run("bad answer/"+c.name, func(t *testing.T) {
			c.raw, c.closeAfter = diffGet("/bad-answer"), true
			get := []string{http.MethodGet}
			rf := fast.run(t, &c, get, 10*time.Second)
			rs := std.run(t, &c, get, time.Second)
			if len(rf.Client) != 1 || rf.Client[0].Status != http.StatusBadGateway {
				t.Errorf("fast path: %q answered\n\t%s\nwant a 502", c.resp[0], strings.Join(rf.lines(), "\n\t"))
			}
			t.Logf("net/http does with %q:\n\t%s", c.resp[0], strings.Join(rs.lines(), "\n\t"))
		})
	}
}

func diffClip(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// messageLines are a message's fields, body and trailers, a line each.
func messageLines(p string, header http.Header, body string, announced []string, trailer http.Header) []string {
	var out []string
	for _, kv := range diffFieldLines(header) {
		out = append(out, p+"field "+kv)
	}
	out = append(out, p+"body "+short(body))
	if len(announced) > 0 {
		out = append(out, fmt.Sprintf("%sannounced trailers %q", p, announced))
	}
	if len(trailer) > 0 {
		out = append(out, p+"trailer "+diffFlatHeader(trailer))
	}
	return out
}
