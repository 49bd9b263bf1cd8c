package h2server

import (
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// responseWriter is a stream's http.ResponseWriter. Like net/http's, it
// gathers the first bytes of the body before it sends the head, so that a
// short answer goes out as HEADERS and one DATA frame (or HEADERS alone),
// with a Content-Length and a sniffed Content-Type.
type responseWriter struct {
	st     *stream
	req    *http.Request
	header http.Header
	// snap is the head as it was at WriteHeader; later changes to header
	// are trailers only.
	snap   http.Header
	status int
	// wroteHeader: WriteHeader ran; sentHeader: the head was sent.
	wroteHeader, sentHeader bool
	// declared is the handler's Content-Length, -1 when none; written
	// counts body bytes.
	declared, written int64
	// trailers are the names the handler announced (Trailer field).
	trailers []string
	buf      *[]byte
	err      error
}

// writeBuffer is how much of a body is gathered before frames are sent:
// a frame's worth at the default frame size.
const writeBuffer = 16 << 10

var writeBuffers = sync.Pool{New: func() any { b := make([]byte, 0, writeBuffer); return &b }}

func newResponseWriter(st *stream, r *http.Request) *responseWriter {
	return &responseWriter{st: st, req: r, header: http.Header{}, declared: -1}
}

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic("invalid WriteHeader code " + strconv.Itoa(code))
	}
	if w.wroteHeader {
		return
	}
	if code < 200 {
		// An interim answer, sent at once with the fields set so far;
		// 101 has no meaning in HTTP/2.
		if code != http.StatusSwitchingProtocols {
			w.st.c.writeHead(w.st, code, w.header, nil, false)
		}
		return
	}
	w.wroteHeader, w.status = true, code
	w.snap = w.header.Clone()
	if cl := w.snap["Content-Length"]; len(cl) > 0 {
		if n, err := strconv.ParseInt(cl[0], 10, 64); err == nil && n >= 0 {
			w.declared = n
		} else {
			delete(w.snap, "Content-Length")
		}
	}
	for _, v := range w.snap["Trailer"] {
		for _, k := range strings.Split(v, ",") {
			if k = http.CanonicalHeaderKey(strings.TrimSpace(k)); k != "" && httpguts.ValidTrailerHeader(k) {
				w.trailers = append(w.trailers, k)
			}
		}
	}
}

func (w *responseWriter) Write(p []byte) (int, error) { return w.write(p, "") }

func (w *responseWriter) WriteString(s string) (int, error) { return w.write(nil, s) }

func (w *responseWriter) write(p []byte, s string) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	n := len(p) + len(s)
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	if w.declared >= 0 && w.written+int64(n) > w.declared {
		return 0, http.ErrContentLength
	}
	if w.err != nil {
		return 0, w.err
	}
	w.written += int64(n)
	if w.req.Method == http.MethodHead {
		return n, nil
	}
	if w.buf == nil {
		w.buf = writeBuffers.Get().(*[]byte)
	}
	b := *w.buf
	if len(b)+n <= cap(b) {
		b = append(b, p...)
		*w.buf = append(b, s...)
		return n, nil
	}
	// More than the buffer holds: what is gathered, then the rest.
	if err := w.flush(false); err != nil {
		return 0, err
	}
	if s != "" {
		p = []byte(s)
	}
	if err := w.st.c.writeData(w.st, p, false); err != nil {
		w.err = err
		return 0, err
	}
	return n, nil
}

// flush sends the head if it was not sent, and the gathered body; end
// ends the stream with the last frame.
func (w *responseWriter) flush(end bool) error {
	if w.err != nil {
		return w.err
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	var body []byte
	if w.buf != nil {
		body = *w.buf
	}
	c := w.st.c
	head := w.req.Method == http.MethodHead
	var trailers http.Header
	if end {
		trailers = w.trailerFields()
	}
	if !w.sentHeader {
		w.sentHeader = true
		var extra []hpack.HeaderField
		if _, ok := w.snap["Content-Length"]; !ok && end && bodyAllowed(w.status) && (len(body) > 0 || !head) {
			extra = append(extra, hpack.HeaderField{Name: "content-length", Value: strconv.Itoa(len(body))})
		}
		if _, ok := w.snap["Content-Type"]; !ok && len(body) > 0 && bodyAllowed(w.status) && len(w.snap["Content-Encoding"]) == 0 {
			extra = append(extra, hpack.HeaderField{Name: "content-type", Value: http.DetectContentType(body)})
		}
		if _, ok := w.snap["Date"]; !ok {
			extra = append(extra, hpack.HeaderField{Name: "date", Value: date()})
		}
		headEnd := head || (end && len(body) == 0 && trailers == nil)
		if err := c.writeHead(w.st, w.status, w.snap, extra, headEnd); err != nil {
			w.err = err
			return err
		}
		if headEnd {
			return nil
		}
	}
	if head {
		return nil
	}
	if len(body) > 0 || (end && trailers == nil) {
		if err := c.writeData(w.st, body, end && trailers == nil); err != nil {
			w.err = err
			return err
		}
		if w.buf != nil {
			*w.buf = body[:0]
		}
	}
	if trailers != nil {
		if err := c.writeHead(w.st, 0, trailers, nil, true); err != nil {
			w.err = err
			return err
		}
	}
	return nil
}

// trailerFields are the trailers to send: announced names and
// http.TrailerPrefix keys with values; nil when none.
func (w *responseWriter) trailerFields() http.Header {
	var t http.Header
	add := func(k string, vv []string) {
		if len(vv) == 0 || !httpguts.ValidTrailerHeader(k) {
			return
		}
		if t == nil {
			t = http.Header{}
		}
		t[k] = append(t[k], vv...)
	}
	for _, k := range w.trailers {
		add(k, w.header[k])
	}
	for k, vv := range w.header {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			add(http.CanonicalHeaderKey(strings.TrimPrefix(k, http.TrailerPrefix)), vv)
		}
	}
	return t
}

// Flush sends the head and what the body gathered.
func (w *responseWriter) Flush() { _ = w.FlushError() }

// FlushError is Flush with its error, for http.ResponseController.
func (w *responseWriter) FlushError() error { return w.flush(false) }

// SetReadDeadline bounds the waits of the request body's reads, for
// http.ResponseController.
func (w *responseWriter) SetReadDeadline(t time.Time) error {
	if b := w.st.body; b != nil {
		b.setDeadline(t)
	}
	return nil
}

// finish ends the answer after the handler returned.
func (w *responseWriter) finish() error {
	if w.err != nil {
		return w.err
	}
	if w.declared > 0 && w.written < w.declared && w.req.Method != http.MethodHead && bodyAllowed(w.status) {
		// Fewer bytes than the Content-Length promised: the client sees
		// the stream reset, not a short answer.
		return http.ErrContentLength
	}
	return w.flush(true)
}

func (w *responseWriter) release() {
	if w.buf != nil {
		*w.buf = (*w.buf)[:0]
		writeBuffers.Put(w.buf)
		w.buf = nil
	}
}

func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

// continue100 answers a request that expects 100-continue, when its
// handler starts reading the body.
func (st *stream) continue100() {
	_ = st.c.writeHead(st, http.StatusContinue, nil, nil, false)
}

// writeHead sends a header block: an answer's head (status > 0) or
// trailers (status 0), ending the stream when end is set.
func (c *conn) writeHead(st *stream, status int, h http.Header, extra []hpack.HeaderField, end bool) error {
	return c.write(func() error {
		if st.wclosed {
			return errStreamClosed
		}
		if status >= 200 {
			st.finalSent = true
		} else if status > 0 && st.finalSent {
			// An interim answer (a late 100-continue) after the final
			// head has no place.
			return nil
		}
		c.hbuf.Reset()
		if status > 0 {
			_ = c.henc.WriteField(hpack.HeaderField{Name: ":status", Value: statusText(status)})
		}
		for k, vv := range h {
			name, ok := lower(k)
			if !ok {
				continue
			}
			for _, v := range vv {
				if !httpguts.ValidHeaderFieldValue(v) {
					continue
				}
				_ = c.henc.WriteField(hpack.HeaderField{Name: name, Value: v})
			}
		}
		for _, f := range extra {
			_ = c.henc.WriteField(f)
		}
		block := c.hbuf.Bytes()
		max := int(c.peerMaxFrame.Load())
		first := block
		if len(first) > max {
			first = first[:max]
		}
		block = block[len(first):]
		if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: st.id, BlockFragment: first, EndStream: end, EndHeaders: len(block) == 0}); err != nil {
			return err
		}
		for len(block) > 0 {
			frag := block
			if len(frag) > max {
				frag = frag[:max]
			}
			block = block[len(frag):]
			if err := c.fr.WriteContinuation(st.id, len(block) == 0, frag); err != nil {
				return err
			}
		}
		if end {
			c.closeLocal(st)
		}
		return nil
	})
}

// writeData sends p on st as DATA frames, each as large as the client's
// frame size and both send windows allow, waiting for window as needed;
// end ends the stream with the last.
func (c *conn) writeData(st *stream, p []byte, end bool) error {
	for {
		n, err := c.takeWindow(st, len(p))
		if err != nil {
			return err
		}
		last := end && n == len(p)
		if err := c.write(func() error {
			if st.wclosed {
				return errStreamClosed
			}
			if last {
				c.closeLocal(st)
			}
			return c.fr.WriteData(st.id, last, p[:n])
		}); err != nil {
			if err == errStreamClosed {
				// The stream was reset meanwhile: the connection's window
				// taken for it goes back to the other streams.
				c.mu.Lock()
				c.sendWindow += int64(n)
				c.window.Broadcast()
				c.mu.Unlock()
			}
			return err
		}
		p = p[n:]
		if len(p) == 0 {
			return nil
		}
	}
}

// closeLocal marks st's answer ended; callers hold c.wmu.
func (c *conn) closeLocal(st *stream) {
	st.wclosed = true
	c.mu.Lock()
	st.localClosed = true
	c.mu.Unlock()
}

// takeWindow waits until st may send, and takes up to want bytes of
// both windows, at most a frame's worth; a wait longer than the send
// timeout resets the stream (stall.go).
func (c *conn) takeWindow(st *stream, want int) (int, error) {
	if want == 0 {
		return 0, nil
	}
	if max := int(c.peerMaxFrame.Load()); want > max {
		want = max
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if st.reset {
			return 0, st.err
		}
		if c.closed {
			return 0, errConnClosed
		}
		if n := min(int64(want), st.sendWindow, c.sendWindow); n > 0 {
			st.sendWindow -= n
			c.sendWindow -= n
			st.waitingSince = 0
			return int(n), nil
		}
		c.waitForWindow(st)
		c.window.Wait()
	}
}

// lower is the HTTP/2 name of a header key (lower case), false for one
// HTTP/2 forbids or net/http would not send.
func lower(k string) (string, bool) {
	if v, ok := commonLower[k]; ok {
		return v, true
	}
	switch k {
	case "Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade":
		return "", false
	}
	if strings.HasPrefix(k, http.TrailerPrefix) || !httpguts.ValidHeaderFieldName(k) {
		return "", false
	}
	return strings.ToLower(k), true
}

// canonical is the http.Header key of an HTTP/2 field name.
func canonical(name string) string {
	if v, ok := commonCanonical[name]; ok {
		return v
	}
	return textproto.CanonicalMIMEHeaderKey(name)
}

var commonLower, commonCanonical = func() (map[string]string, map[string]string) {
	lower, canon := map[string]string{}, map[string]string{}
	for _, k := range []string{"Accept", "Accept-Charset", "Accept-Encoding", "Accept-Language", "Accept-Ranges",
		"Access-Control-Allow-Origin", "Age", "Allow", "Authorization", "Cache-Control", "Content-Disposition",
		"Content-Encoding", "Content-Language", "Content-Length", "Content-Location", "Content-Range",
		"Content-Type", "Cookie", "Date", "Etag", "Expect", "Expires", "From", "Host", "If-Match",
		"If-Modified-Since", "If-None-Match", "If-Unmodified-Since", "Last-Modified", "Link", "Location",
		"Max-Forwards", "Origin", "Proxy-Authenticate", "Proxy-Authorization", "Range", "Referer", "Refresh",
		"Retry-After", "Server", "Set-Cookie", "Strict-Transport-Security", "Te", "User-Agent", "Vary", "Via",
		"Www-Authenticate", "X-Content-Type-Options", "X-Forwarded-For", "X-Forwarded-Host",
		"X-Forwarded-Proto", "X-Request-Id", "Grpc-Status", "Grpc-Message", "Grpc-Encoding", "Grpc-Timeout",
		"Grpc-Accept-Encoding"} {
		l := strings.ToLower(k)
		lower[k], canon[l] = l, k
	}
	return lower, canon
}()

var statusTexts = func() map[int]string {
	m := map[int]string{}
	for code := 100; code < 600; code++ {
		if http.StatusText(code) != "" {
			m[code] = strconv.Itoa(code)
		}
	}
	return m
}()

func statusText(code int) string {
	if s, ok := statusTexts[code]; ok {
		return s
	}
	return strconv.Itoa(code)
}

// dateNow is the Date value of the current second.
var dateNow atomic.Pointer[dateValue]

type dateValue struct {
	unix int64
	v    string
}

func date() string {
	now := time.Now()
	d := dateNow.Load()
	if d == nil || d.unix != now.Unix() {
		d = &dateValue{unix: now.Unix(), v: now.UTC().Format(http.TimeFormat)}
		dateNow.Store(d)
	}
	return d.v
}
