package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetnet/fleetnet/internal/edge/h2server"
	"github.com/fleetnet/fleetnet/internal/edge/http1"
)

// The fast path serves the HTTP/1.1 requests that make up nearly all of
// an edge's traffic (a route without filters or mirrors, to a backend of
// HTTP/1 endpoints) on one goroutine per client connection: the request
// head is parsed in place (internal/edge/http1), routed on that view, and
// forwarded with the body over a pooled upstream connection, whose answer
// is relayed on the same goroutine. Anything else (HTTP/2 by ALPN or
// prior knowledge, HTTP/1.0, Upgrade, Expect, absolute-form or unusual
// targets, filters, mirrors, redirects, errors of the route) is handed to
// the port's net/http server at the request boundary, with the bytes read
// so far, and the connection stays there. Retries, passive health,
// weights, locality and metrics are the net/http path's (retry.go).

// fastServer serves one port's connections.
type fastServer struct {
	p    *Proxy
	at   socket
	ln   net.Listener
	hand *handoff
	// h2 serves the port's HTTP/2 connections (ALPN h2, h2c prior
	// knowledge), their writes coalesced (coalesce.go), on the goroutine
	// that accepted them.
	h2     *h2server.Server
	tlsCfg *tls.Config

	mu      sync.Mutex
	conns   map[*fastConn]struct{}
	closing bool
	wg      sync.WaitGroup
}

// fastConn is a client connection the fast path serves.
type fastConn struct {
	net.Conn
	// idle: waiting for the next request, and may be closed at once.
	idle atomic.Bool
}

// Per-connection buffers: a request head must fit in the reader's (a
// larger one goes to net/http, which takes up to MaxHeaderBytes).
const (
	clientReadBuffer  = 8 << 10
	clientWriteBuffer = 8 << 10
)

var (
	clientReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, clientReadBuffer) }}
	clientWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, clientWriteBuffer) }}
)

func (s *fastServer) acceptLoop() {
	defer s.hand.Close()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(5 * time.Millisecond) // out of file descriptors: as net/http
				continue
			}
			return
		}
		fc := &fastConn{Conn: c}
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			_ = c.Close()
			return
		}
		s.conns[fc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(fc)
	}
}

// shutdown stops accepting, closes idle connections and waits for the
// others to finish their request, or for ctx.
func (s *fastServer) shutdown(ctx context.Context) error {
	_ = s.ln.Close()
	s.mu.Lock()
	s.closing = true
	for fc := range s.conns {
		if fc.idle.Load() {
			_ = fc.SetReadDeadline(time.Now())
		}
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		for fc := range s.conns {
			_ = fc.Close()
		}
		s.mu.Unlock()
		return ctx.Err()
	}
}

func (s *fastServer) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// conn is the state of one client connection's exchange.
type conn struct {
	s       *fastServer
	fc      *fastConn
	c       net.Conn // fc, or the TLS connection over it
	tls     *tls.Conn
	sni     string
	br      *bufio.Reader
	bw      *bufio.Writer
	remote  string // client IP, for X-Forwarded-For
	req     fastRequest
	scratch []byte
	// The exchange under way: the length of its request head, whether
	// the head was consumed (its views may then be overwritten by reads
	// of the body), whether the connection may serve another request.
	headLen  int
	headSent bool
	keep     bool
}

func (s *fastServer) serveConn(fc *fastConn) {
	handedOff := false
	defer func() {
		s.mu.Lock()
		delete(s.conns, fc)
		s.mu.Unlock()
		if !handedOff {
			_ = fc.Close()
		}
		s.wg.Done()
	}()
	lim := &s.p.limits
	cn := &conn{s: s, fc: fc, c: fc, scratch: make([]byte, 0, 256)}
	if host, _, err := net.SplitHostPort(fc.RemoteAddr().String()); err == nil {
		cn.remote = host
	}
	if s.tlsCfg != nil {
		tc := tls.Server(fc, s.tlsCfg)
		_ = fc.SetDeadline(time.Now().Add(lim.ReadHeaderTimeout))
		if err := tc.Handshake(); err != nil {
			s.p.refusals.Refused(fc.RemoteAddr().String(), err)
			return
		}
		_ = fc.SetWriteDeadline(time.Time{})
		st := tc.ConnectionState()
		if st.NegotiatedProtocol == "h2" {
			_ = fc.SetReadDeadline(time.Time{})
			s.p.metrics.handoffs.WithLabelValues("h2").Inc()
			if !h2CipherAdequate(st) {
				handedOff = true
				s.hand.push(tc)
				return
			}
			// The HTTP/2 server closes it, after sending what the
			// coalescing connection gathered.
			handedOff = true
			s.h2.ServeConn(context.Background(), newCoalescedConn(tc), &st)
			return
		}
		cn.c, cn.tls, cn.sni = tc, tc, st.ServerName
	}
	cn.br = clientReaders.Get().(*bufio.Reader)
	cn.br.Reset(cn.c)
	cn.bw = clientWriters.Get().(*bufio.Writer)
	cn.bw.Reset(cn.c)
	defer func() {
		cn.br.Reset(nil)
		clientReaders.Put(cn.br)
		cn.bw.Reset(nil)
		clientWriters.Put(cn.bw)
	}()
	first := true
	for {
		fc.idle.Store(true)
		wait := lim.IdleTimeout
		if first {
			wait = lim.ReadHeaderTimeout
		}
		_ = fc.SetReadDeadline(time.Now().Add(wait))
		// After the deadline is set: a shutdown from now on moves it to
		// now, and the wait below ends at once.
		if s.isClosing() {
			return
		}
		if _, err := cn.br.Peek(1); err != nil {
			return
		}
		fc.idle.Store(false)
		if !first {
			_ = fc.SetReadDeadline(time.Now().Add(lim.ReadHeaderTimeout))
		}
		first = false
		next, handOff := cn.exchange()
		if handOff != "" {
			s.p.metrics.handoffs.WithLabelValues(handOff).Inc()
			_ = fc.SetDeadline(time.Time{})
			buffered, _ := cn.br.Peek(cn.br.Buffered())
			handedOff = true
			if cn.tls == nil && bytes.HasPrefix(buffered, h2PrefaceLine) {
				// HTTP/2 with prior knowledge (h2c), served as on TLS
				// ports.
				s.h2.ServeConn(context.Background(), &prefixConn{Conn: newCoalescedConn(cn.c), prefix: bytes.Clone(buffered)}, nil)
				return
			}
			s.hand.push(&prefixConn{Conn: cn.c, prefix: bytes.Clone(buffered), tls: cn.tls})
			return
		}
		if !next {
			return
		}
	}
}

// errHeadTooLarge: the head does not fit in the fast path's buffer.
var errHeadTooLarge = errors.New("request head larger than the fast path's buffer")

// readHead parses the next request head, reading until it is whole.
func (cn *conn) readHead() (int, error) {
	m := &cn.req.head
	for {
		buf, _ := cn.br.Peek(cn.br.Buffered())
		n, err := http1.ParseRequest(buf, m, http1.Limits{MaxFields: cn.s.p.limits.MaxHeaderFields})
		if err != http1.ErrIncomplete {
			return n, err
		}
		if cn.br.Buffered() == cn.br.Size() {
			return 0, errHeadTooLarge
		}
		if _, err := cn.br.Peek(cn.br.Buffered() + 1); err != nil {
			return 0, err
		}
	}
}

// exchange serves one request: next says whether the connection goes on
// to another; handOff, when set, why net/http takes over from this
// request.
func (cn *conn) exchange() (next bool, handOff string) {
	headLen, err := cn.readHead()
	if err != nil {
		var he *http1.Error
		switch {
		case errors.Is(err, errHeadTooLarge):
			return false, "head-size"
		case errors.As(err, &he) && he.Status == http.StatusHTTPVersionNotSupported:
			// HTTP/2 with prior knowledge (its preface reads as a
			// request line of HTTP/2.0), or a version net/http answers.
			return false, "version"
		case errors.As(err, &he):
			cn.refuse(he.Status, he.Reason)
		}
		return false, ""
	}
	r := &cn.req
	m := &r.head
	switch {
	case m.Minor == 0:
		return false, "version"
	case m.Upgrade:
		return false, "upgrade"
	case m.Expect:
		return false, "expect"
	case len(m.Target) == 0 || m.Target[0] != '/':
		return false, "target"
	}
	if ok, err := r.parseTarget(); err != nil {
		cn.refuse(http.StatusBadRequest, err.Error())
		return false, ""
	} else if !ok {
		return false, "target"
	}
	start := time.Now()
	p := cn.s.p
	pt := p.table.Load().ports[cn.s.at]
	if pt == nil {
		return false, "route"
	}
	hostport := string(m.Host)
	host := hostOnly(hostport)
	if pt.tls && cn.tls != nil && pt.misdirected(cn.sni, host) {
		return false, "route"
	}
	vh := pt.host(host)
	if vh == nil {
		return false, "route"
	}
	rt := vh.match(r)
	if rt == nil || len(rt.Filters) > 0 || rt.DirectResponse != nil || len(rt.mirrors) > 0 {
		return false, "route"
	}
	b := rt.pick()
	if b == nil || b.Invalid != nil || b.total == 0 || len(b.Filters) > 0 || b.h2c {
		return false, "route"
	}
	c, ep := b.pick(0, nil)
	if c == nil {
		return false, "route"
	}
	// Routed here: the head is consumed once it is written upstream.
	pk := &picked{route: rt, backend: b, cluster: c, endpoint: ep}
	cn.headLen, cn.headSent, cn.keep = headLen, false, false
	x := newExchange(p, cn, pk, start, r.method(), m.Framing == http1.NoBody || (m.Framing == http1.Length && m.ContentLength == 0))
	p.metrics.viaFast.Inc()
	code := x.forward()
	p.observe(x.method, hostport, r.decoded, code, pk, start)
	return cn.keep && !m.Close && !cn.s.isClosing(), ""
}

// refuse answers a request the fast path cannot parse and closes.
func (cn *conn) refuse(code int, reason string) {
	cn.writeError(code, reason, true)
	_ = cn.bw.Flush()
}

// writeError writes a response as net/http's http.Error does.
func (cn *conn) writeError(code int, msg string, closeAfter bool) {
	b := cn.scratch[:0]
	b = appendStatusLine(b, code)
	b = append(b, "Content-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\nDate: "...)
	b = appendDate(b, time.Now())
	b = append(b, "\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(msg)+1), 10)
	if closeAfter {
		b = append(b, "\r\nConnection: close"...)
	}
	b = append(b, "\r\n\r\n"...)
	b = append(b, msg...)
	b = append(b, '\n')
	_, _ = cn.bw.Write(b)
	cn.scratch = b
}

// sendRequest writes the request head, as net/http's reverse proxy
// rewrites it (hop-by-hop fields dropped, X-Forwarded-* set), and the
// body.
func (cn *conn) sendRequest(_ *exchangeState, up *upConn) error {
	m := &cn.req.head
	w := up.bw
	_, _ = w.Write(m.Method)
	_ = w.WriteByte(' ')
	_, _ = w.Write(cn.req.target)
	_, _ = w.WriteString(" HTTP/1.1\r\nHost: ")
	_, _ = w.Write(m.Host)
	_, _ = w.WriteString("\r\n")
	var xff [][]byte
	teTrailers := false
	for _, f := range m.Fields {
		switch {
		case http1.EqualFold(f.Name, "x-forwarded-for"):
			xff = append(xff, f.Value)
			continue
		case http1.EqualFold(f.Name, "te"):
			teTrailers = teTrailers || hasToken(f.Value, "trailers")
			continue
		case http1.EqualFold(f.Name, "trailer") && m.Framing == http1.Chunked:
			// Passed on: the trailers it names follow the body.
		case http1.EqualFold(f.Name, "host"), http1.EqualFold(f.Name, "content-length"),
			http1.EqualFold(f.Name, "forwarded"), http1.EqualFold(f.Name, "x-forwarded-host"), http1.EqualFold(f.Name, "x-forwarded-proto"),
			hopByHop(f.Name), listed(m.ConnectionTokens, f.Name):
			continue
		}
		_, _ = w.Write(f.Name)
		_, _ = w.WriteString(": ")
		_, _ = w.Write(f.Value)
		_, _ = w.WriteString("\r\n")
	}
	switch m.Framing {
	case http1.Length:
		if m.ContentLength > 0 || bodyMethod(m.Method) {
			_, _ = w.WriteString("Content-Length: ")
			_, _ = w.Write(strconv.AppendInt(cn.scratch[:0], m.ContentLength, 10))
			_, _ = w.WriteString("\r\n")
		}
	case http1.Chunked:
		_, _ = w.WriteString("Transfer-Encoding: chunked\r\n")
	case http1.NoBody:
		if bodyMethod(m.Method) {
			_, _ = w.WriteString("Content-Length: 0\r\n")
		}
	}
	if teTrailers {
		_, _ = w.WriteString("Te: trailers\r\n")
	}
	_, _ = w.WriteString("X-Forwarded-For: ")
	for _, v := range xff {
		_, _ = w.Write(v)
		_, _ = w.WriteString(", ")
	}
	_, _ = w.WriteString(cn.remote)
	_, _ = w.WriteString("\r\nX-Forwarded-Host: ")
	_, _ = w.Write(m.Host)
	if cn.tls != nil {
		_, _ = w.WriteString("\r\nX-Forwarded-Proto: https\r\n\r\n")
	} else {
		_, _ = w.WriteString("\r\nX-Forwarded-Proto: http\r\n\r\n")
	}
	// The head's views are no longer needed; the body follows it.
	if !cn.headSent {
		_, _ = cn.br.Discard(cn.headLen)
		cn.headSent = true
	}
	var err error
	switch m.Framing {
	case http1.Length:
		if m.ContentLength > 0 {
			_, err = io.CopyN(w, cn.bodyReader(), m.ContentLength)
			err = clientErr(err)
		}
	case http1.Chunked:
		// Only announced trailers, as net/http's transport sends. The
		// names are copied: reading the body overwrites the head.
		var keep func([]byte) bool
		if m.Trailer {
			var names [][]byte
			for _, f := range m.Fields {
				if http1.EqualFold(f.Name, "trailer") {
					for tok := range bytes.SplitSeq(f.Value, []byte(",")) {
						names = append(names, bytes.Clone(bytes.TrimSpace(tok)))
					}
				}
			}
			keep = func(name []byte) bool { return listed(names, name) }
		} else {
			keep = func([]byte) bool { return false }
		}
		_, err = http1.CopyChunkedTrailers(w, cn.br, cn.bodyProgress, keep)
		err = clientErr(err)
	}
	if err != nil {
		return err
	}
	return up.flushRequest()
}

// clientErr marks a failure to read the client's body, which says nothing
// about the endpoint.
func clientErr(err error) error {
	if err == nil {
		return nil
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return &clientError{err}
}

type clientError struct{ error }

func (e *clientError) Unwrap() error { return e.error }

// bodyReader reads the client's body, each read within the body timeout.
func (cn *conn) bodyReader() io.Reader {
	return &timedReader{r: cn.br, c: cn.fc, timeout: cn.s.p.limits.BodyReadTimeout}
}

// bodyProgress extends the body timeout before each read of a chunked
// body.
func (cn *conn) bodyProgress() {
	_ = cn.fc.SetReadDeadline(time.Now().Add(cn.s.p.limits.BodyReadTimeout))
}

type timedReader struct {
	r       io.Reader
	c       net.Conn
	timeout time.Duration
}

func (t *timedReader) Read(b []byte) (int, error) {
	_ = t.c.SetReadDeadline(time.Now().Add(t.timeout))
	return t.r.Read(b)
}

// writeHead writes the answer's head to the client, as net/http's reverse
// proxy does: hop-by-hop fields dropped, the status text net/http's, a
// Date when the endpoint sent none, chunked framing for a body of unknown
// length.
func (cn *conn) writeHead(up *upConn, informational bool) {
	h := &up.head
	w := cn.bw
	_, _ = w.Write(appendStatusLine(cn.scratch[:0], h.Status))
	date := false
	noBody := h.Status < 200 || h.Status == http.StatusNoContent || h.Status == http.StatusNotModified
	for _, f := range h.Fields {
		switch {
		case http1.EqualFold(f.Name, "trailer") && h.Framing == http1.Chunked:
		case hopByHop(f.Name), listed(h.ConnectionTokens, f.Name):
			continue
		case noBody && http1.EqualFold(f.Name, "content-length"),
			h.Status == http.StatusNotModified && http1.EqualFold(f.Name, "content-type"):
			continue
		case http1.EqualFold(f.Name, "date"):
			date = true
		}
		_, _ = w.Write(f.Name)
		_, _ = w.WriteString(": ")
		_, _ = w.Write(f.Value)
		_, _ = w.WriteString("\r\n")
	}
	if !informational {
		if !date {
			_, _ = w.Write(appendDate(append(cn.scratch[:0], "Date: "...), time.Now()))
			_, _ = w.WriteString("\r\n")
		}
		if h.Framing == http1.Chunked || h.Framing == http1.UntilClose {
			_, _ = w.WriteString("Transfer-Encoding: chunked\r\n")
		}
		if cn.req.head.Close {
			_, _ = w.WriteString("Connection: close\r\n")
		}
	}
	_, _ = w.WriteString("\r\n")
}

// informational passes an interim answer on at once.
func (cn *conn) informational(_ *exchangeState, up *upConn) error {
	cn.writeHead(up, true)
	return cn.bw.Flush()
}

// writeAnswer relays the answer; a body of unknown length goes on in the
// chunked coding, so that the connection stays open.
func (cn *conn) writeAnswer(x *exchangeState, up *upConn) error {
	h := &up.head
	cn.writeHead(up, false)
	_, _ = up.br.Discard(x.respHeadLen)
	var err error
	switch h.Framing {
	case http1.Length:
		_, err = io.CopyN(cn.bw, up.br, h.ContentLength)
	case http1.Chunked:
		_, err = http1.CopyChunked(cn.bw, up.br, nil)
	case http1.UntilClose:
		buf := bufferPool{}.Get()
		_, err = http1.CopyAsChunks(cn.bw, up.br, buf)
		bufferPool{}.Put(buf)
	}
	if ferr := cn.bw.Flush(); err == nil {
		err = ferr
	}
	cn.keep = err == nil
	return err
}

// fail answers a request no endpoint answered. A body not sent whole
// leaves the client's stream where no request starts: the connection
// ends.
func (cn *conn) fail(x *exchangeState, code int) {
	cn.keep = x.bodiless
	if !cn.headSent {
		_, _ = cn.br.Discard(cn.headLen)
	}
	cn.writeError(code, "backend request failed", !cn.keep || cn.req.head.Close)
	_ = cn.bw.Flush()
}

// appendStatusLine appends net/http's status line for code.
func appendStatusLine(b []byte, code int) []byte {
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, ' ')
	if text := http.StatusText(code); text != "" {
		b = append(b, text...)
	} else {
		b = append(b, "status code "...)
		b = strconv.AppendInt(b, int64(code), 10)
	}
	return append(b, "\r\n"...)
}

// hopByHop reports the fields net/http's reverse proxy drops both ways.
func hopByHop(name []byte) bool {
	switch len(name) {
	case 2:
		return http1.EqualFold(name, "te")
	case 7:
		return http1.EqualFold(name, "trailer") || http1.EqualFold(name, "upgrade")
	case 10:
		return http1.EqualFold(name, "connection") || http1.EqualFold(name, "keep-alive")
	case 16:
		return http1.EqualFold(name, "proxy-connection")
	case 17:
		return http1.EqualFold(name, "transfer-encoding")
	case 18:
		return http1.EqualFold(name, "proxy-authenticate")
	case 19:
		return http1.EqualFold(name, "proxy-authorization")
	}
	return false
}

// listed reports whether the Connection field names the field.
func listed(tokens [][]byte, name []byte) bool {
	for _, t := range tokens {
		if bytes.EqualFold(t, name) {
			return true
		}
	}
	return false
}

func hasToken(v []byte, token string) bool {
	for t := range bytes.SplitSeq(v, []byte(",")) {
		if http1.EqualFold(bytes.TrimSpace(t), token) {
			return true
		}
	}
	return false
}

// bodyMethod: net/http's transport sends Content-Length: 0 for these.
func bodyMethod(m []byte) bool {
	switch string(m) {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		return true
	}
	return false
}

// fastRequest is a parsed request head, as routes match it.
type fastRequest struct {
	head http1.Message
	// target is what is sent upstream: the head's target, or the normal
	// form of its path (path.go) with its query.
	target   []byte
	rawPath  []byte
	rawQuery []byte
	decoded  string
	params   url.Values
	paramsOK bool
}

// parseTarget splits the origin-form target, normalizes its path (an
// error, a 400, when it has no normal form) and decodes it; false for a
// query net/http would write upstream otherwise than it came, which goes
// to net/http.
func (r *fastRequest) parseTarget() (bool, error) {
	t := r.head.Target
	r.target, r.rawPath, r.rawQuery, r.params, r.paramsOK = t, t, nil, nil, false
	if i := bytes.IndexByte(t, '?'); i >= 0 {
		r.rawPath, r.rawQuery = t[:i], t[i+1:]
	}
	for i, c := range r.rawQuery {
		if c >= 0x80 || !queryChar[c] {
			return false, nil
		}
		// net/http's reverse proxy drops parameters with a bad escape.
		if c == '%' && (i+2 >= len(r.rawQuery) || !isHex(r.rawQuery[i+1]) || !isHex(r.rawQuery[i+2])) {
			return false, nil
		}
	}
	norm, err := normalize(r.rawPath)
	if err != nil {
		return false, err
	}
	if norm != nil {
		// The normal form is the request's own bytes; the query is
		// copied after it.
		r.target = append(norm, t[len(r.rawPath):]...)
		r.rawPath = r.target[:len(norm)]
	}
	if bytes.IndexByte(r.rawPath, '%') < 0 {
		r.decoded = string(r.rawPath)
		return true, nil
	}
	r.decoded, _ = url.PathUnescape(string(r.rawPath)) // a normal form's encodings are valid
	return true, nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func (r *fastRequest) method() string { return methodString(r.head.Method) }
func (r *fastRequest) path() string   { return r.decoded }

func (r *fastRequest) header(name string) (string, bool) {
	var v string
	found := false
	for _, f := range r.head.Fields {
		if len(f.Name) == len(name) && bytes.EqualFold(f.Name, []byte(name)) {
			if found {
				v += "," + string(f.Value)
			} else {
				v, found = string(f.Value), true
			}
		}
	}
	return v, found
}

func (r *fastRequest) query(name string) (string, bool) {
	if !r.paramsOK {
		r.params, _ = url.ParseQuery(string(r.rawQuery))
		r.paramsOK = true
	}
	v, ok := r.params[name]
	if !ok {
		return "", false
	}
	return v[0], true
}

// methodString returns common methods without an allocation.
func methodString(m []byte) string {
	switch string(m) {
	case http.MethodGet:
		return http.MethodGet
	case http.MethodPost:
		return http.MethodPost
	case http.MethodHead:
		return http.MethodHead
	case http.MethodPut:
		return http.MethodPut
	case http.MethodDelete:
		return http.MethodDelete
	}
	return string(m)
}

// pathChar and queryChar are the characters net/http's URL keeps as they
// are in a request's path and query (RFC 3986 unreserved, sub-delims, ':'
// and '@', '/' and '%'; '?' in the query). The normal form of a path
// (path.go) encodes the others.
var pathChar, queryChar = func() (p, q [128]bool) {
	for c := '0'; c <= '9'; c++ {
		p[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		p[c], p[c-'a'+'A'] = true, true
	}
	for _, c := range "-._~!$&'()*+,;=:@/%" {
		p[c] = true
	}
	// Without ';': net/http's reverse proxy drops query parameters with
	// one.
	q = p
	q[';'], q['?'] = false, true
	return p, q
}()
