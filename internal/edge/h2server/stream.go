package h2server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
)

// stream is one request and its answer. Its fields are guarded by its
// connection's mu, except wclosed (the connection's wmu).
type stream struct {
	c  *conn
	id uint32
	// remoteClosed: the client ended its side (END_STREAM).
	remoteClosed bool
	// reset: RST_STREAM was sent or received, or the connection ended;
	// err says which.
	reset bool
	err   error
	// peerReset: the client reset it; its later frames are errors.
	peerReset bool
	// handlerDone: the handler returned.
	handlerDone bool
	sendWindow  int64
	// waitingSince is when the writer began to wait for send window
	// (the connection's clock), 0 when it does not wait.
	waitingSince int64
	// recvAvail is what the client may still send on the stream;
	// recvUnacked what the handler read and no WINDOW_UPDATE returned.
	recvAvail, recvUnacked int32
	// body is nil for a request that ended with its headers.
	body *requestBody
	// declaredTrailers are the trailer names the request announced;
	// trailers gathers their values until the handler reads the end of
	// the body, when they are copied into the request's Trailer (which
	// is the handler's, not the connection goroutine's, to write).
	declaredTrailers map[string]bool
	trailers         http.Header
	trailer          http.Header
	cancel           context.CancelFunc

	// localClosed: END_STREAM was written.
	localClosed bool

	// wclosed: END_STREAM or RST_STREAM was written; no frame follows.
	// finalSent: the final head was written. Both guarded by c.wmu.
	wclosed, finalSent bool
}

// resetLocked ends the stream's request: body reads and waits for window
// fail with err. Callers hold c.mu.
func (st *stream) resetLocked(err error) {
	if st.reset {
		return
	}
	st.reset, st.err = true, err
	st.c.active--
	if st.body != nil {
		if st.body.err == nil {
			st.body.err = err
		}
		st.body.cond.Broadcast()
	}
	st.c.window.Broadcast()
	st.cancel()
}

// remoteEnded marks the client's side ended; callers hold c.mu.
func (st *stream) remoteEnded() {
	st.remoteClosed = true
	if st.body != nil && st.body.err == nil {
		st.body.err = io.EOF
		st.body.cond.Broadcast()
	}
}

// headers opens a stream, or ends one with trailers.
func (c *conn) headers(f *http2.MetaHeadersFrame) error {
	id := f.StreamID
	if id%2 == 0 {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	c.mu.Lock()
	if st := c.streams[id]; st != nil {
		defer c.mu.Unlock()
		return c.trailers(st, f)
	}
	if c.goingAway && id > c.lastServed {
		// Past the last stream the GOAWAY promised: ignored, its
		// trailers too.
		c.maxClientID = max(c.maxClientID, id)
		c.mu.Unlock()
		return nil
	}
	if id <= c.maxClientID {
		c.mu.Unlock()
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	c.maxClientID = id
	if f.HasPriority() && f.Priority.StreamDep == id {
		c.mu.Unlock()
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
	}
	limit := int(c.srv.maxStreams())
	// Reset streams whose handlers still run count too, up to twice the
	// limit: a client that opens and resets streams at once cannot start
	// handlers without bound.
	if c.active >= limit || len(c.streams) >= 2*limit {
		c.mu.Unlock()
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeRefusedStream}
	}
	// The stream counts from now on: a GOAWAY or the idle timeout that
	// comes while its request is built does not close the connection
	// under it.
	st := &stream{c: c, id: id, recvAvail: streamWindow, sendWindow: c.peerInitialWindow}
	c.streams[id] = st
	c.active++
	if c.idle != nil {
		c.idle.Stop()
	}
	c.mu.Unlock()
	r, handler, err := c.newRequest(st, f)
	if err != nil {
		c.mu.Lock()
		delete(c.streams, id)
		c.active--
		none := len(c.streams) == 0
		if none {
			c.startIdle()
		}
		c.mu.Unlock()
		if none {
			c.closeIfDone()
		}
		return err
	}
	go c.runHandler(st, newResponseWriter(st, r), r, handler)
	return nil
}

// trailers ends st's request with trailer fields; callers hold c.mu.
func (c *conn) trailers(st *stream, f *http2.MetaHeadersFrame) error {
	switch {
	case st.remoteClosed && st.localClosed:
		// Closed both ways, though its handler still runs.
		return http2.ConnectionError(http2.ErrCodeStreamClosed)
	case st.peerReset, st.remoteClosed:
		return http2.StreamError{StreamID: st.id, Code: http2.ErrCodeStreamClosed}
	case st.reset:
		return nil
	case !f.StreamEnded() || len(f.PseudoFields()) > 0:
		return http2.StreamError{StreamID: st.id, Code: http2.ErrCodeProtocol}
	}
	if b := st.body; b != nil && b.declared >= 0 && b.got != b.declared {
		return http2.StreamError{StreamID: st.id, Code: http2.ErrCodeProtocol}
	}
	for _, hf := range f.RegularFields() {
		key := canonical(hf.Name)
		if !httpguts.ValidTrailerHeader(key) {
			return http2.StreamError{StreamID: st.id, Code: http2.ErrCodeProtocol}
		}
		// Only what the request declared reaches the handler, as with
		// net/http.
		if st.declaredTrailers[key] {
			if st.trailers == nil {
				st.trailers = http.Header{}
			}
			st.trailers[key] = append(st.trailers[key], hf.Value)
		}
	}
	st.remoteEnded()
	return nil
}

// connHeaders are fields HTTP/2 forbids (RFC 9113, section 8.2.2).
var connHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade"}

// newRequest builds the stream's request; a malformed one is a stream
// error. The handler is the server's, or one that answers 431 for a
// header list over the limit.
func (c *conn) newRequest(st *stream, f *http2.MetaHeadersFrame) (*http.Request, http.Handler, error) {
	malformed := http2.StreamError{StreamID: st.id, Code: http2.ErrCodeProtocol}
	method := f.PseudoValue("method")
	scheme := f.PseudoValue("scheme")
	authority := f.PseudoValue("authority")
	path := f.PseudoValue("path")
	if f.PseudoValue("protocol") != "" || f.PseudoValue("status") != "" {
		// No extended CONNECT is offered; :status is a response's.
		return nil, nil, malformed
	}
	connect := method == http.MethodConnect
	if connect {
		if path != "" || scheme != "" || authority == "" {
			return nil, nil, malformed
		}
	} else if path == "" || (scheme != "https" && scheme != "http") {
		return nil, nil, malformed
	}
	if !httpguts.ValidHeaderFieldName(method) {
		// Not a token: a proxy would forward it into an HTTP/1 request
		// line.
		return nil, nil, malformed
	}
	regular := f.RegularFields()
	header := make(http.Header, len(regular))
	for _, hf := range regular {
		key := canonical(hf.Name)
		header[key] = append(header[key], hf.Value)
	}
	for _, k := range connHeaders {
		if _, ok := header[k]; ok {
			return nil, nil, malformed
		}
	}
	if te := header["Te"]; len(te) > 1 || (len(te) == 1 && te[0] != "trailers") {
		return nil, nil, malformed
	}
	if cookies := header["Cookie"]; len(cookies) > 1 {
		// RFC 9113, section 8.2.3: one field again for HTTP/1.
		header["Cookie"] = []string{strings.Join(cookies, "; ")}
	}
	if host := header["Host"]; len(host) > 1 || (len(host) == 1 && authority != "" && host[0] != authority) {
		return nil, nil, malformed
	} else if len(host) == 1 {
		authority = host[0]
		delete(header, "Host")
	}
	if (strings.IndexByte(authority, '@') >= 0 && !connect) || (authority != "" && !httpguts.ValidHostHeader(authority)) {
		return nil, nil, malformed
	}
	needContinue := false
	if httpguts.HeaderValuesContainsToken(header["Expect"], "100-continue") {
		needContinue = true
		delete(header, "Expect")
	}
	for _, v := range header["Trailer"] {
		for _, key := range strings.Split(v, ",") {
			switch key = textproto.CanonicalMIMEHeaderKey(textproto.TrimString(key)); key {
			case "Transfer-Encoding", "Trailer", "Content-Length", "":
			default:
				if st.trailer == nil {
					st.trailer, st.declaredTrailers = http.Header{}, map[string]bool{}
				}
				st.trailer[key], st.declaredTrailers[key] = nil, true
			}
		}
	}
	delete(header, "Trailer")

	var u *url.URL
	requestURI := path
	if connect {
		u, requestURI = &url.URL{Host: authority}, authority
	} else {
		if path[0] != '/' && path != "*" {
			return nil, nil, malformed
		}
		var err error
		if u, err = url.ParseRequestURI(path); err != nil {
			return nil, nil, malformed
		}
	}
	ctx, cancel := context.WithCancel(c.ctx)
	st.cancel = cancel
	r := &http.Request{
		Method:     method,
		URL:        u,
		Proto:      "HTTP/2.0",
		ProtoMajor: 2,
		Header:     header,
		Host:       authority,
		RemoteAddr: c.remoteAddr,
		RequestURI: requestURI,
		Trailer:    st.trailer,
		Body:       http.NoBody,
	}
	// On a TLS connection the request is https whatever :scheme says: a
	// client's "http" must not skip the misdirected-request check or
	// reach the backend as plain (X-Forwarded-Proto).
	r.TLS = c.tls
	if !f.StreamEnded() {
		st.body = &requestBody{st: st, declared: -1, needContinue: needContinue}
		st.body.cond.L = &c.mu
		r.ContentLength = -1
		if v := header["Content-Length"]; len(v) > 0 {
			n, err := strconv.ParseUint(v[0], 10, 63)
			if err != nil || len(v) > 1 {
				cancel()
				return nil, nil, malformed
			}
			r.ContentLength, st.body.declared = int64(n), int64(n)
		}
		r.Body = st.body
	} else {
		st.remoteClosed = true
		if v := header["Content-Length"]; len(v) > 0 && v[0] != "0" {
			cancel()
			return nil, nil, malformed
		}
	}
	r = r.WithContext(ctx)
	if f.Truncated {
		return r, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "request header fields too large", http.StatusRequestHeaderFieldsTooLarge)
		}), nil
	}
	return r, c.srv.Handler, nil
}

// runHandler answers the stream's request, then ends the stream.
func (c *conn) runHandler(st *stream, w *responseWriter, r *http.Request, h http.Handler) {
	defer func() {
		code := http2.ErrCodeNo
		if e := recover(); e != nil {
			if e != http.ErrAbortHandler {
				buf := make([]byte, 64<<10)
				buf = buf[:runtime.Stack(buf, false)]
				c.srv.log().Error("handler panicked", "remote", c.remoteAddr, "uri", r.RequestURI, "panic", e, "stack", string(buf))
			}
			code = http2.ErrCodeInternal
		} else if err := w.finish(); err != nil {
			code = http2.ErrCodeInternal
		}
		w.release()
		c.endStream(st, code)
	}()
	h.ServeHTTP(w, r)
}

// endStream ends a stream whose handler returned: a stream whose answer
// did not end cleanly, or whose client still sends, is reset with code
// (NO_ERROR when the answer is complete: RFC 9113, section 8.1).
func (c *conn) endStream(st *stream, code http2.ErrCode) {
	c.mu.Lock()
	st.handlerDone = true
	rst := !st.reset && (!st.remoteClosed || code != http2.ErrCodeNo)
	remoteOpen := !st.remoteClosed
	if !st.reset {
		st.resetLocked(errStreamDone)
	}
	var inc credit
	if b := st.body; b != nil && len(b.buf) > 0 {
		// What arrived and was never read goes back to the connection's
		// window.
		inc = c.creditLocked(nil, int32(len(b.buf)))
		b.buf = nil
	}
	delete(c.streams, st.id)
	none := len(c.streams) == 0
	if none {
		c.startIdle()
	}
	c.mu.Unlock()
	c.sendCredit(st.id, inc)
	if rst {
		c.write(func() error {
			if st.wclosed {
				// The answer ended: only a client still sending is told.
				if !remoteOpen {
					return nil
				}
				code = http2.ErrCodeNo
			}
			st.wclosed = true
			return c.fr.WriteRSTStream(st.id, code)
		})
	}
	if none {
		c.closeIfDone()
	}
}

var (
	errStreamDone   = errors.New("h2server: the handler returned")
	errBodyClosed   = errors.New("http: invalid Read on closed Body")
	errStreamClosed = errors.New("h2server: stream closed")
)

// requestBody is a stream's request body, as the client sends it.
type requestBody struct {
	st *stream
	// declared is the Content-Length, -1 when none; got what arrived.
	declared, got int64
	// buf holds what arrived and was not read; guarded by c.mu, as
	// the rest.
	buf          []byte
	err          error
	closed       bool
	needContinue bool
	deadline     time.Time
	cond         sync.Cond
}

func (b *requestBody) received(n int) { b.got += int64(n) }

// Read returns what arrived, waiting for more within the deadline that
// SetReadDeadline set.
func (b *requestBody) Read(p []byte) (int, error) {
	c := b.st.c
	c.mu.Lock()
	if b.needContinue {
		b.needContinue = false
		c.mu.Unlock()
		b.st.continue100()
		c.mu.Lock()
	}
	var timer *time.Timer
	var armed time.Time
	for len(b.buf) == 0 && b.err == nil && !b.closed {
		if !b.deadline.IsZero() {
			d := time.Until(b.deadline)
			if d <= 0 {
				c.mu.Unlock()
				if timer != nil {
					timer.Stop()
				}
				return 0, os.ErrDeadlineExceeded
			}
			switch {
			case timer == nil:
				timer = time.AfterFunc(d, func() {
					c.mu.Lock()
					b.cond.Broadcast()
					c.mu.Unlock()
				})
			case !armed.Equal(b.deadline):
				// SetReadDeadline moved it while the read waited.
				timer.Reset(d)
			}
			armed = b.deadline
		}
		b.cond.Wait()
	}
	if timer != nil {
		timer.Stop()
	}
	if b.closed {
		c.mu.Unlock()
		return 0, errBodyClosed
	}
	if len(b.buf) == 0 {
		err := b.err
		if st := b.st; err == io.EOF && st.trailers != nil {
			for k, vv := range st.trailers {
				st.trailer[k] = vv
			}
			st.trailers = nil
		}
		c.mu.Unlock()
		return 0, err
	}
	n := copy(p, b.buf)
	b.buf = b.buf[n:]
	if len(b.buf) == 0 {
		b.buf = b.buf[:0:0]
	}
	inc := c.creditLocked(b.st, int32(n))
	c.mu.Unlock()
	c.sendCredit(b.st.id, inc)
	return n, nil
}

// Close drops what is unread; what still arrives is dropped too, its
// window returned at once.
func (b *requestBody) Close() error {
	c := b.st.c
	c.mu.Lock()
	n := len(b.buf)
	b.buf, b.closed = nil, true
	b.cond.Broadcast()
	inc := c.creditLocked(nil, int32(n))
	c.mu.Unlock()
	c.sendCredit(b.st.id, inc)
	return nil
}

func (b *requestBody) setDeadline(t time.Time) {
	c := b.st.c
	c.mu.Lock()
	b.deadline = t
	b.cond.Broadcast()
	c.mu.Unlock()
}
