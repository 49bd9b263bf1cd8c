package h2server_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/fleetnet/fleetnet/internal/edge/h2server"
)

// rawClient speaks HTTP/2 frame by frame, for what a well-behaved client
// never sends or the order of frames a client library hides.
type rawClient struct {
	t    *testing.T
	nc   net.Conn
	fr   *http2.Framer
	hbuf bytes.Buffer
	henc *hpack.Encoder
	// window is the connection's send window as the server granted it.
	window int64
}

// dialRaw opens a connection to base and sends the preface with the
// client's settings.
func dialRaw(t *testing.T, base string, settings ...http2.Setting) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	c := &rawClient{t: t, nc: nc, window: 65535}
	c.fr = http2.NewFramer(nc, nc)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.henc = hpack.NewEncoder(&c.hbuf)
	if _, err := io.WriteString(nc, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := c.fr.WriteSettings(settings...); err != nil {
		t.Fatal(err)
	}
	// The server's SETTINGS, then its connection window: the server
	// sends both before it reads anything.
	c.next(func(f http2.Frame) bool { _, ok := f.(*http2.SettingsFrame); return ok })
	c.next(func(f http2.Frame) bool { _, ok := f.(*http2.WindowUpdateFrame); return ok })
	return c
}

// headers sends a header block of name/value pairs on stream id.
func (c *rawClient) headers(id uint32, end bool, fields ...string) {
	c.t.Helper()
	c.hbuf.Reset()
	for i := 0; i+1 < len(fields); i += 2 {
		_ = c.henc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hbuf.Bytes(), EndStream: end, EndHeaders: true}); err != nil {
		c.t.Fatal(err)
	}
}

// data sends n bytes on stream id, a frame's worth at a time.
func (c *rawClient) data(id uint32, n int, end bool) {
	c.t.Helper()
	chunk := make([]byte, 16<<10)
	for n > 0 || end {
		k := min(n, len(chunk))
		n -= k
		if err := c.fr.WriteData(id, end && n == 0, chunk[:k]); err != nil {
			c.t.Fatal(err)
		}
		c.window -= int64(k)
		if n == 0 {
			return
		}
	}
}

// sync returns once the server processed every frame sent so far: it
// answers a PING in order.
func (c *rawClient) sync() {
	c.t.Helper()
	if err := c.fr.WritePing(false, [8]byte{1}); err != nil {
		c.t.Fatal(err)
	}
	c.next(func(f http2.Frame) bool { p, ok := f.(*http2.PingFrame); return ok && p.IsAck() })
}

// next reads frames until want accepts one. A GOAWAY with an error or a
// RST_STREAM it does not want fails the test; connection window updates
// are counted.
func (c *rawClient) next(want func(http2.Frame) bool) http2.Frame {
	c.t.Helper()
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.t.Fatalf("reading frames: %v", err)
		}
		if w, ok := f.(*http2.WindowUpdateFrame); ok && w.StreamID == 0 {
			c.window += int64(w.Increment)
		}
		if want(f) {
			return f
		}
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			if f.ErrCode != http2.ErrCodeNo {
				c.t.Fatalf("the server ended the connection: %v", f.ErrCode)
			}
		case *http2.RSTStreamFrame:
			c.t.Fatalf("the server reset stream %d: %v", f.StreamID, f.ErrCode)
		}
	}
}

func post() []string {
	return []string{":method", "POST", ":scheme", "http", ":authority", "example.com", ":path", "/"}
}

// TestUnreadBodiesReturnTheirWindow: a handler that returns without
// reading what its client sent gives the connection's window back, so
// later streams are not starved (six bodies of 200 KiB exceed the 1 MiB
// window).
func TestUnreadBodiesReturnTheirWindow(t *testing.T) {
	release := make(chan struct{})
	s := &h2server.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release })}
	_, base := serve(t, s)
	c := dialRaw(t, base)
	const body = 200 << 10
	for i := range 8 {
		id := uint32(2*i + 1)
		if c.window < body {
			t.Fatalf("stream %d: the connection's window is %d bytes, less than the %d unread bytes of earlier streams returned", id, c.window, body)
		}
		c.headers(id, false, post()...)
		c.data(id, body, false)
		c.sync() // the body waits in the server, unread
		release <- struct{}{}
		c.next(func(f http2.Frame) bool {
			r, ok := f.(*http2.RSTStreamFrame)
			return ok && r.StreamID == id && r.ErrCode == http2.ErrCodeNo
		})
	}
}

// TestGoAwayIgnoresLaterStreams: after Shutdown's GOAWAY, a stream above
// the last one served is ignored, its data and trailers too, and the
// served one completes.
func TestGoAwayIgnoresLaterStreams(t *testing.T) {
	h, started, release := heldHandler("served")
	s := &h2server.Server{Handler: h}
	_, base := serve(t, s)
	c := dialRaw(t, base)
	c.headers(1, true, ":method", "GET", ":scheme", "http", ":authority", "example.com", ":path", "/")
	<-started
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	ga := c.next(func(f http2.Frame) bool { _, ok := f.(*http2.GoAwayFrame); return ok }).(*http2.GoAwayFrame)
	if ga.LastStreamID != 1 || ga.ErrCode != http2.ErrCodeNo {
		t.Fatalf("GOAWAY last stream %d, code %v; want 1, NO_ERROR", ga.LastStreamID, ga.ErrCode)
	}
	c.headers(3, false, post()...)
	c.data(3, 1000, false)
	c.headers(3, true, "x-trailer", "v")
	c.sync()
	close(release)
	c.next(func(f http2.Frame) bool {
		d, ok := f.(*http2.DataFrame)
		return ok && d.StreamID == 1 && d.StreamEnded()
	})
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

// TestNoContinueAfterTheFinalHead: a handler that answers before it reads
// a body that expects 100-continue sends no interim answer after its
// final one.
func TestNoContinueAfterTheFinalHead(t *testing.T) {
	s := &h2server.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b)
	})}
	_, base := serve(t, s)
	c := dialRaw(t, base)
	c.headers(1, false, append(post(), "expect", "100-continue", "content-length", "4")...)
	var statuses []string
	c.next(func(f http2.Frame) bool {
		h, ok := f.(*http2.MetaHeadersFrame)
		if ok {
			statuses = append(statuses, h.PseudoValue("status"))
		}
		return ok
	})
	c.data(1, 4, true)
	c.next(func(f http2.Frame) bool {
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			statuses = append(statuses, f.PseudoValue("status"))
			return f.StreamEnded()
		case *http2.DataFrame:
			return f.StreamEnded()
		}
		return false
	})
	if len(statuses) != 1 || statuses[0] != "200" {
		t.Fatalf("heads sent: %q; want only the final 200", statuses)
	}
}

// TestMalformedRequests: requests RFC 9113 calls malformed are reset
// with PROTOCOL_ERROR, the connection serving on.
func TestMalformedRequests(t *testing.T) {
	s := &h2server.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})}
	_, base := serve(t, s)
	c := dialRaw(t, base)
	cases := []struct {
		name   string
		fields []string
	}{
		{"method not a token", []string{":method", "GE T", ":scheme", "http", ":authority", "a", ":path", "/"}},
		{"method with a line break", []string{":method", "GET\r\nX:", ":scheme", "http", ":authority", "a", ":path", "/"}},
		{"no method", []string{":scheme", "http", ":authority", "a", ":path", "/"}},
		{"connection header", []string{":method", "GET", ":scheme", "http", ":authority", "a", ":path", "/", "connection", "close"}},
	}
	for i, tc := range cases {
		id := uint32(2*i + 1)
		c.headers(id, true, tc.fields...)
		c.next(func(f http2.Frame) bool {
			r, ok := f.(*http2.RSTStreamFrame)
			if ok && (r.StreamID != id || r.ErrCode != http2.ErrCodeProtocol) {
				t.Fatalf("%s: RST_STREAM %d %v; want %d PROTOCOL_ERROR", tc.name, r.StreamID, r.ErrCode, id)
			}
			if h, isHead := f.(*http2.MetaHeadersFrame); isHead {
				t.Fatalf("%s: answered %s", tc.name, h.PseudoValue("status"))
			}
			return ok
		})
	}
}

// heldHandler answers body once release is closed, after closing started
// (it serves one request).
func heldHandler(body string) (h http.Handler, started, release chan struct{}) {
	started, release = make(chan struct{}), make(chan struct{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
		_, _ = io.WriteString(w, body)
	}), started, release
}
