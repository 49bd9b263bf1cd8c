package proxy

import (
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"time"

	"github.com/fleetnet/fleetnet/internal/edge/http1"
)

// HTTP/2 requests are served by the edge's HTTP/2 server
// (internal/edge/h2server; net/http's with NetHTTPOnly). Those the fast
// path would take if they came over HTTP/1.1 (a route without filters or
// mirrors, to a backend of HTTP/1 endpoints) skip net/http's reverse proxy and transport: the stream's
// handler forwards them itself over the fast path's upstream pools
// (exchange.go). The transport would pass each request and answer
// through two goroutines of its own (writeLoop, readLoop) and clone the
// request on the way; here the handler writes and reads the endpoint's
// connection itself.

// streamForwardable reports whether the HTTP/2 request r, routed to rt's
// backend b, is forwarded over the upstream pools; the rest goes through
// the reverse proxy.
func streamForwardable(r *http.Request, rt *route, b *backend) bool {
	return r.ProtoMajor == 2 && r.Method != http.MethodConnect && r.Host != "" &&
		len(rt.Filters) == 0 && len(rt.mirrors) == 0 && len(b.Filters) == 0 && !b.h2c &&
		len(r.Trailer) == 0 &&
		// A target net/http would write upstream otherwise than it came
		// (a query with characters it escapes) keeps net/http's form; the
		// path is already its normal form (path.go).
		len(r.RequestURI) > 0 && r.RequestURI[0] == '/' && r.URL.RequestURI() == r.RequestURI
}

// streamClient is an HTTP/2 stream as the client side of an exchange.
type streamClient struct {
	w     http.ResponseWriter
	r     *http.Request
	https bool
	// scratch for number formatting.
	scratch [20]byte
}

// forwardStream forwards the HTTP/2 request r, routed and picked in pk,
// and answers it on w.
func (p *Proxy) forwardStream(w http.ResponseWriter, r *http.Request, pk *picked, start time.Time) {
	x := newExchange(p, &streamClient{w: w, r: r, https: r.TLS != nil}, pk, start, r.Method, r.ContentLength == 0)
	x.ctx = r.Context()
	p.metrics.viaStream.Inc()
	x.forward()
}

func (c *streamClient) sendRequest(_ *exchangeState, up *upConn) error {
	r, w := c.r, up.bw
	_, _ = w.WriteString(r.Method)
	_ = w.WriteByte(' ')
	_, _ = w.WriteString(r.RequestURI)
	_, _ = w.WriteString(" HTTP/1.1\r\nHost: ")
	_, _ = w.WriteString(r.Host)
	_, _ = w.WriteString("\r\n")
	// Both HTTP/2 servers refuse connection-specific fields and a TE
	// other than "trailers"; the rest is dropped as its reverse proxy
	// drops it.
	for name, values := range r.Header {
		switch name {
		case "Te", "Host", "Content-Length", "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto",
			"Trailer", "Proxy-Authenticate", "Proxy-Authorization":
			continue
		}
		for _, v := range values {
			_, _ = w.WriteString(name)
			_, _ = w.WriteString(": ")
			_, _ = w.WriteString(v)
			_, _ = w.WriteString("\r\n")
		}
	}
	switch {
	case r.ContentLength > 0:
		_, _ = w.WriteString("Content-Length: ")
		_, _ = w.Write(strconv.AppendInt(c.scratch[:0], r.ContentLength, 10))
		_, _ = w.WriteString("\r\n")
	case r.ContentLength < 0:
		_, _ = w.WriteString("Transfer-Encoding: chunked\r\n")
	case bodyMethod([]byte(r.Method)):
		_, _ = w.WriteString("Content-Length: 0\r\n")
	}
	if te := r.Header["Te"]; len(te) > 0 && te[0] == "trailers" {
		_, _ = w.WriteString("Te: trailers\r\n")
	}
	_, _ = w.WriteString("X-Forwarded-For: ")
	for _, v := range r.Header["X-Forwarded-For"] {
		_, _ = w.WriteString(v)
		_, _ = w.WriteString(", ")
	}
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		_, _ = w.WriteString(ip)
	}
	_, _ = w.WriteString("\r\nX-Forwarded-Host: ")
	_, _ = w.WriteString(r.Host)
	if c.https {
		_, _ = w.WriteString("\r\nX-Forwarded-Proto: https\r\n\r\n")
	} else {
		_, _ = w.WriteString("\r\nX-Forwarded-Proto: http\r\n\r\n")
	}
	var err error
	switch {
	case r.ContentLength > 0:
		var n int64
		n, err = io.CopyN(w, r.Body, r.ContentLength)
		if err == nil && n < r.ContentLength {
			err = io.ErrUnexpectedEOF
		}
	case r.ContentLength < 0:
		cw := httputil.NewChunkedWriter(w)
		buf := bufferPool{}.Get()
		_, err = io.CopyBuffer(cw, struct{ io.Reader }{r.Body}, buf)
		bufferPool{}.Put(buf)
		if err == nil {
			_ = cw.Close()
			_, _ = w.WriteString("\r\n")
		}
	}
	if err != nil {
		return clientErr(err)
	}
	return up.flushRequest()
}

// copyHead sets h's fields into the response's header, hop-by-hop ones
// dropped as net/http's reverse proxy drops them; net/http's server
// writes them as it writes the reverse proxy's.
func (c *streamClient) copyHead(h *http1.Message) http.Header {
	hdr := c.w.Header()
	for _, f := range h.Fields {
		switch {
		case http1.EqualFold(f.Name, "trailer") && h.Framing == http1.Chunked:
		case hopByHop(f.Name), listed(h.ConnectionTokens, f.Name):
			continue
		}
		name := http.CanonicalHeaderKey(string(f.Name))
		hdr[name] = append(hdr[name], string(f.Value))
	}
	return hdr
}

func (c *streamClient) informational(_ *exchangeState, up *upConn) error {
	hdr := c.copyHead(&up.head)
	c.w.WriteHeader(up.head.Status)
	clear(hdr)
	return nil
}

func (c *streamClient) writeAnswer(x *exchangeState, up *upConn) error {
	h := &up.head
	c.copyHead(h)
	c.w.WriteHeader(h.Status)
	_, _ = up.br.Discard(x.respHeadLen)
	// A body of unknown length is passed on as it arrives, as the reverse
	// proxy flushes it.
	var rc *http.ResponseController
	flush := func() error {
		if rc == nil {
			rc = http.NewResponseController(c.w)
		}
		if err := rc.Flush(); err != nil {
			return &clientError{err}
		}
		return nil
	}
	var err error
	switch h.Framing {
	case http1.Length:
		if h.ContentLength > 0 {
			_, err = io.CopyN(c.w, up.br, h.ContentLength)
		}
	case http1.Chunked:
		_, err = http1.DecodeChunked(c.w, up.br, flush, func(name, value []byte) {
			k := http.TrailerPrefix + http.CanonicalHeaderKey(string(name))
			c.w.Header()[k] = append(c.w.Header()[k], string(value))
		})
	case http1.UntilClose:
		buf := bufferPool{}.Get()
		for {
			n, rerr := up.br.Read(buf)
			if n > 0 {
				if _, werr := c.w.Write(buf[:n]); werr != nil {
					err = werr
					break
				}
				if err = flush(); err != nil {
					break
				}
			}
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				err = rerr
				break
			}
		}
		bufferPool{}.Put(buf)
	}
	return err
}

func (c *streamClient) fail(_ *exchangeState, code int) {
	http.Error(c.w, "backend request failed", code)
}
