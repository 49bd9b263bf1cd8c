package http1_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/fleetnet/fleetnet/internal/edge/http1"
)

// head is what a test expects of a parsed head. Fields are "Name: Value"
// as they came (no canonicalization: they are views of the input).
type head struct {
	method, target, host string
	noHost               bool
	status               int
	reason               string
	minor                int
	framing              http1.Framing
	length               int64
	close                bool
	upgrade, expect      bool
	trailer              bool
	fields               []string
	tokens               []string
}

func (h head) check(t *testing.T, m *http1.Message, request bool) {
	t.Helper()
	if request {
		if string(m.Method) != h.method || string(m.Target) != h.target {
			t.Errorf("request line %q %q, want %q %q", m.Method, m.Target, h.method, h.target)
		}
		switch {
		case h.noHost && m.Host != nil:
			t.Errorf("Host %q, want none", m.Host)
		case !h.noHost && (m.Host == nil || string(m.Host) != h.host):
			t.Errorf("Host %q (nil %v), want %q", m.Host, m.Host == nil, h.host)
		}
	} else if m.Status != h.status || string(m.Reason) != h.reason {
		t.Errorf("status %d %q, want %d %q", m.Status, m.Reason, h.status, h.reason)
	}
	if m.Minor != h.minor {
		t.Errorf("minor version %d, want %d", m.Minor, h.minor)
	}
	if m.Framing != h.framing || (h.framing == http1.Length && m.ContentLength != h.length) {
		t.Errorf("framing %d (length %d), want %d (length %d)", m.Framing, m.ContentLength, h.framing, h.length)
	}
	if m.Close != h.close || m.Upgrade != h.upgrade || m.Expect != h.expect || m.Trailer != h.trailer {
		t.Errorf("Close %v Upgrade %v Expect %v Trailer %v, want %v %v %v %v", m.Close, m.Upgrade, m.Expect, m.Trailer, h.close, h.upgrade, h.expect, h.trailer)
	}
	var fields []string
	for _, f := range m.Fields {
		fields = append(fields, string(f.Name)+": "+string(f.Value))
	}
	if strings.Join(fields, "\n") != strings.Join(h.fields, "\n") {
		t.Errorf("fields\n%q\nwant\n%q", fields, h.fields)
	}
	var tokens []string
	for _, tok := range m.ConnectionTokens {
		tokens = append(tokens, string(tok))
	}
	if strings.Join(tokens, ",") != strings.Join(h.tokens, ",") {
		t.Errorf("Connection tokens %q, want %q", tokens, h.tokens)
	}
}

func TestParseRequestAccepts(t *testing.T) {
	tests := []struct {
		name string
		head string // the whole head; a body may follow it
		body string
		want head
	}{
		{"minimal", "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n", "",
			head{method: "GET", target: "/", host: "example.com", minor: 1, fields: []string{"Host: example.com"}}},
		{"fields and OWS trimmed", "GET /a/b?x=1&y=%41 HTTP/1.1\r\nhost:example.com:8080\r\nAccept: */*\r\nX-Tab:\t v \t\r\nX-Empty:\r\nX-Inner: a  b\tc\r\n\r\n", "",
			head{method: "GET", target: "/a/b?x=1&y=%41", host: "example.com:8080", minor: 1,
				fields: []string{"host: example.com:8080", "Accept: */*", "X-Tab: v", "X-Empty: ", "X-Inner: a  b\tc"}}},
		{"obs-text in a value", "GET / HTTP/1.1\r\nHost: h\r\nX-Latin: caf\xe9\r\n\r\n", "",
			head{method: "GET", target: "/", host: "h", minor: 1, fields: []string{"Host: h", "X-Latin: caf\xe9"}}},
		{"empty Host", "GET / HTTP/1.1\r\nHost:\r\n\r\n", "",
			head{method: "GET", target: "/", host: "", minor: 1, fields: []string{"Host: "}}},
		{"Content-Length and body", "POST /upload HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n", "hello",
			head{method: "POST", target: "/upload", host: "h", minor: 1, framing: http1.Length, length: 5,
				fields: []string{"Host: h", "Content-Length: 5"}}},
		{"Content-Length 0", "PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", "",
			head{method: "PUT", target: "/", host: "h", minor: 1, framing: http1.Length, length: 0, fields: []string{"Host: h", "Content-Length: 0"}}},
		{"Content-Length leading zeros and OWS", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length:  007 \r\n\r\n", "1234567",
			head{method: "POST", target: "/", host: "h", minor: 1, framing: http1.Length, length: 7, fields: []string{"Host: h", "Content-Length: 007"}}},
		{"Content-Length 18 digits", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 999999999999999999\r\n\r\n", "",
			head{method: "POST", target: "/", host: "h", minor: 1, framing: http1.Length, length: 999999999999999999, fields: []string{"Host: h", "Content-Length: 999999999999999999"}}},
		{"chunked", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n", "5\r\nhello\r\n0\r\n\r\n",
			head{method: "POST", target: "/", host: "h", minor: 1, framing: http1.Chunked, fields: []string{"Host: h", "Transfer-Encoding: chunked"}}},
		{"chunked in any case", "POST / HTTP/1.1\r\nHost: h\r\ntransfer-encoding: CHUNKED \r\n\r\n", "0\r\n\r\n",
			head{method: "POST", target: "/", host: "h", minor: 1, framing: http1.Chunked, fields: []string{"Host: h", "transfer-encoding: CHUNKED"}}},
		{"trailer announced", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n", "0\r\nX-Sum: 1\r\n\r\n",
			head{method: "POST", target: "/", host: "h", minor: 1, framing: http1.Chunked, trailer: true,
				fields: []string{"Host: h", "Transfer-Encoding: chunked", "Trailer: X-Sum"}}},
		{"Connection: close", "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", "",
			head{method: "GET", target: "/", host: "h", minor: 1, close: true, fields: []string{"Host: h", "Connection: close"}, tokens: []string{"close"}}},
		{"Connection tokens in any case, over two fields", "GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, X-Foo ,,\r\nX-Foo: 1\r\nconnection: CLOSE\r\n\r\n", "",
			head{method: "GET", target: "/", host: "h", minor: 1, close: true,
				fields: []string{"Host: h", "Connection: keep-alive, X-Foo ,,", "X-Foo: 1", "connection: CLOSE"}, tokens: []string{"keep-alive", "X-Foo", "CLOSE"}}},
		{"keep-alive in 1.1 does not matter", "GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive\r\n\r\n", "",
			head{method: "GET", target: "/", host: "h", minor: 1, fields: []string{"Host: h", "Connection: keep-alive"}, tokens: []string{"keep-alive"}}},
		{"HTTP/1.0 closes", "GET / HTTP/1.0\r\n\r\n", "",
			head{method: "GET", target: "/", noHost: true, minor: 0, close: true}},
		{"HTTP/1.0 keep-alive", "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\nHost: h\r\n\r\n", "",
			head{method: "GET", target: "/", host: "h", minor: 0, fields: []string{"Connection: Keep-Alive", "Host: h"}, tokens: []string{"Keep-Alive"}}},
		// net/http: close wins over keep-alive (shouldClose), whatever the
		// order; Message.Close says "Connection: close, or HTTP/1.0
		// without keep-alive".
		{"HTTP/1.0 close then keep-alive", "GET / HTTP/1.0\r\nConnection: close, keep-alive\r\n\r\n", "",
			head{method: "GET", target: "/", noHost: true, minor: 0, close: true, fields: []string{"Connection: close, keep-alive"}, tokens: []string{"close", "keep-alive"}}},
		{"HTTP/1.0 close then keep-alive in two fields", "GET / HTTP/1.0\r\nConnection: close\r\nConnection: keep-alive\r\n\r\n", "",
			head{method: "GET", target: "/", noHost: true, minor: 0, close: true, fields: []string{"Connection: close", "Connection: keep-alive"}, tokens: []string{"close", "keep-alive"}}},
		{"HTTP/1.0 with Content-Length", "POST / HTTP/1.0\r\nContent-Length: 2\r\n\r\n", "ok",
			head{method: "POST", target: "/", noHost: true, minor: 0, close: true, framing: http1.Length, length: 2, fields: []string{"Content-Length: 2"}}},
		{"Upgrade", "GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", "",
			head{method: "GET", target: "/ws", host: "h", minor: 1, upgrade: true, fields: []string{"Host: h", "Connection: Upgrade", "Upgrade: websocket"}, tokens: []string{"Upgrade"}}},
		{"Expect", "PUT / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n", "x",
			head{method: "PUT", target: "/", host: "h", minor: 1, expect: true, framing: http1.Length, length: 1, fields: []string{"Host: h", "Expect: 100-continue", "Content-Length: 1"}}},
		{"extension method", "PURGE /x HTTP/1.1\r\nHost: h\r\n\r\n", "",
			head{method: "PURGE", target: "/x", host: "h", minor: 1, fields: []string{"Host: h"}}},
		{"absolute-form target (the caller hands it over)", "GET http://a.example/x HTTP/1.1\r\nHost: a.example\r\n\r\n", "",
			head{method: "GET", target: "http://a.example/x", host: "a.example", minor: 1, fields: []string{"Host: a.example"}}},
		{"CONNECT authority-form", "CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n", "",
			head{method: "CONNECT", target: "a.example:443", host: "a.example:443", minor: 1, fields: []string{"Host: a.example:443"}}},
		{"OPTIONS *", "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", "",
			head{method: "OPTIONS", target: "*", host: "h", minor: 1, fields: []string{"Host: h"}}},
		{"pipelined: only the first head", "GET /1 HTTP/1.1\r\nHost: h\r\n\r\n", "GET /2 HTTP/1.1\r\nHost: h\r\n\r\n",
			head{method: "GET", target: "/1", host: "h", minor: 1, fields: []string{"Host: h"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m http1.Message
			in := []byte(tt.head + tt.body)
			n, err := http1.ParseRequest(in, &m, http1.Limits{MaxFields: 100})
			if err != nil {
				t.Fatalf("ParseRequest(%q): %v", in, err)
			}
			if n != len(tt.head) {
				t.Errorf("head length %d, want %d", n, len(tt.head))
			}
			tt.want.check(t, &m, true)
			// Any prefix of the head is incomplete, never refused nor
			// taken for a whole head.
			for i := range len(tt.head) {
				if _, err := http1.ParseRequest(in[:i], &m, http1.Limits{MaxFields: 100}); err != http1.ErrIncomplete {
					t.Fatalf("ParseRequest(%q) (a prefix): %v, want ErrIncomplete", in[:i], err)
				}
			}
		})
	}
}

// A Message is reused: nothing of a previous head survives.
func TestParseRequestResets(t *testing.T) {
	var m http1.Message
	first := "POST /1 HTTP/1.1\r\nHost: a\r\nConnection: close, x\r\nUpgrade: y\r\nExpect: z\r\nTrailer: t\r\nTransfer-Encoding: chunked\r\n\r\n"
	if _, err := http1.ParseRequest([]byte(first), &m, http1.Limits{}); err != nil {
		t.Fatal(err)
	}
	second := "GET /2 HTTP/1.1\r\nHost: b\r\n\r\n"
	if _, err := http1.ParseRequest([]byte(second), &m, http1.Limits{}); err != nil {
		t.Fatal(err)
	}
	head{method: "GET", target: "/2", host: "b", minor: 1, fields: []string{"Host: b"}}.check(t, &m, true)
}

func TestParseRequestRefuses(t *testing.T) {
	const (
		bad         = http.StatusBadRequest
		unsupported = http.StatusNotImplemented
		tooMany     = http.StatusRequestHeaderFieldsTooLarge
		version     = http.StatusHTTPVersionNotSupported
	)
	req := func(fields ...string) string {
		return "POST / HTTP/1.1\r\nHost: h\r\n" + strings.Join(fields, "\r\n") + "\r\n\r\n"
	}
	tests := []struct {
		name   string
		in     string
		status int
	}{
		// Framing.
		{"Content-Length with Transfer-Encoding", req("Content-Length: 5", "Transfer-Encoding: chunked"), bad},
		{"Transfer-Encoding with Content-Length", req("Transfer-Encoding: chunked", "Content-Length: 5"), bad},
		{"Transfer-Encoding with Content-Length 0", req("Transfer-Encoding: chunked", "Content-Length: 0"), bad},
		{"duplicate Content-Length, equal", req("Content-Length: 5", "Content-Length: 5"), bad},
		{"duplicate Content-Length, different", req("Content-Length: 5", "Content-Length: 6"), bad},
		{"duplicate Content-Length, in one field", req("Content-Length: 5, 5"), bad},
		{"Content-Length +1", req("Content-Length: +1"), bad},
		{"Content-Length 1.0", req("Content-Length: 1.0"), bad},
		{"Content-Length -1", req("Content-Length: -1"), bad},
		{"Content-Length hex", req("Content-Length: 0x10"), bad},
		{"Content-Length hex digits", req("Content-Length: 1a"), bad},
		{"Content-Length empty", req("Content-Length:"), bad},
		{"Content-Length blank", req("Content-Length:   "), bad},
		{"Content-Length space inside", req("Content-Length: 1 0"), bad},
		{"Content-Length tab inside", req("Content-Length: 1\t0"), bad},
		{"Content-Length 1e3", req("Content-Length: 1e3"), bad},
		{"Content-Length underscore", req("Content-Length: 1_0"), bad},
		{"Content-Length 19 digits", req("Content-Length: 1000000000000000000"), bad},
		{"Content-Length overflows int64", req("Content-Length: 99999999999999999999"), bad},
		{"Content-Length non-ASCII digit", req("Content-Length: \xd9\xa1"), bad},
		{"Transfer-Encoding gzip, chunked", req("Transfer-Encoding: gzip, chunked"), unsupported},
		{"Transfer-Encoding chunked, gzip", req("Transfer-Encoding: chunked, gzip"), unsupported},
		{"Transfer-Encoding chunked, chunked", req("Transfer-Encoding: chunked, chunked"), unsupported},
		{"two Transfer-Encoding fields", req("Transfer-Encoding: chunked", "Transfer-Encoding: chunked"), unsupported},
		{"Transfer-Encoding gzip then chunked", req("Transfer-Encoding: gzip", "Transfer-Encoding: chunked"), unsupported},
		{"Transfer-Encoding xchunked", req("Transfer-Encoding: xchunked"), unsupported},
		{"Transfer-Encoding chunkedx", req("Transfer-Encoding: chunkedx"), unsupported},
		{"Transfer-Encoding identity", req("Transfer-Encoding: identity"), unsupported},
		{"Transfer-Encoding empty", req("Transfer-Encoding:"), unsupported},
		{"Transfer-Encoding quoted", req(`Transfer-Encoding: "chunked"`), unsupported},
		{"Transfer-Encoding chunked;q=1", req("Transfer-Encoding: chunked;q=1"), unsupported},
		{"Transfer-Encoding with a vertical tab", req("Transfer-Encoding: \vchunked"), bad},
		{"Transfer-Encoding in HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", bad},
		{"Transfer-Encoding in HTTP/1.0 after Content-Length", "POST / HTTP/1.0\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", bad},
		// Field syntax.
		{"space before colon", req("Content-Length : 5"), bad},
		{"tab before colon", req("Transfer-Encoding\t: chunked"), bad},
		{"space before colon, other field", req("X-Foo : bar"), bad},
		{"empty field name", req(": x"), bad},
		{"no colon", req("X-Foo bar"), bad},
		{"non-token field name", req("X(Foo): bar"), bad},
		{"non-ASCII field name", req("X-F\xf6o: bar"), bad},
		{"obs-fold", req("X-Foo: a", " b"), bad},
		{"obs-fold with a tab", req("X-Foo: a", "\tb"), bad},
		{"obs-fold of Transfer-Encoding", req("Transfer-Encoding: chunked", " , gzip"), bad},
		{"obs-fold of Content-Length", req("Content-Length: 1", " 0"), bad},
		{"obs-fold as the first field", "GET / HTTP/1.1\r\n Host: h\r\n\r\n", bad},
		{"bare CR in a value", req("X-Foo: a\rb"), bad},
		{"bare CR ending a field", "GET / HTTP/1.1\r\nHost: h\rX: y\r\n\r\n", bad},
		{"bare CR in the request line", "GET /\r HTTP/1.1\r\nHost: h\r\n\r\n", bad},
		{"bare LF ending the request line", "GET / HTTP/1.1\nHost: h\r\n\r\n", bad},
		{"bare LF ending a field", "GET / HTTP/1.1\r\nHost: h\nX: y\r\n\r\n", bad},
		{"bare LF ending the head", "GET / HTTP/1.1\r\nHost: h\r\n\n", bad},
		{"bare LF everywhere", "GET / HTTP/1.1\nHost: h\n\n", bad},
		{"bare LF in a value", req("X-Foo: a\nb: c"), bad},
		{"CR CR LF", "GET / HTTP/1.1\r\nHost: h\r\r\n\r\n", bad},
		{"NUL in a value", req("X-Foo: a\x00b"), bad},
		{"NUL ending a value", req("X-Foo: a\x00"), bad},
		{"NUL in a name", req("X-F\x00oo: a"), bad},
		{"NUL in the target", "GET /\x00 HTTP/1.1\r\nHost: h\r\n\r\n", bad},
		{"SOH in a value", req("X-Foo: \x01"), bad},
		{"ESC in a value", req("X-Foo: a\x1b[0m"), bad},
		{"VT in a value", req("X-Foo: a\vb"), bad},
		{"FF in a value", req("X-Foo: a\fb"), bad},
		{"DEL in a value", req("X-Foo: a\x7fb"), bad},
		{"DEL in the target", "GET /\x7f HTTP/1.1\r\nHost: h\r\n\r\n", bad},
		{"control in Host", "GET / HTTP/1.1\r\nHost: h\x01\r\n\r\n", bad},
		// Host.
		{"missing Host in 1.1", "GET / HTTP/1.1\r\nX: y\r\n\r\n", bad},
		{"no fields in 1.1", "GET / HTTP/1.1\r\n\r\n", bad},
		{"two Host fields", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", bad},
		{"two equal Host fields", "GET / HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n", bad},
		{"two Host fields in 1.0", "GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", bad},
		// Request line.
		{"empty line before the request line", "\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n", bad},
		{"invalid method", "G(ET / HTTP/1.1\r\nHost: h\r\n\r\n", bad},
		{"non-ASCII method", "G\xc9T / HTTP/1.1\r\nHost: h\r\n\r\n", bad},
		{"method with a tab", "GET\t/ HTTP/1.1\r\nHost: h\r\n\r\n", bad},
		{"no method", " / HTTP/1.1\r\nHost: h\r\n\r\n", bad},
		{"two spaces after the method", "GET  / HTTP/1.1\r\nHost: h\r\n\r\n", bad},
		{"no target", "GET HTTP/1.1\r\nHost: h\r\n\r\n", bad},
		{"no version", "GET /\r\nHost: h\r\n\r\n", bad},
		{"tab in the target", "GET /a\tb HTTP/1.1\r\nHost: h\r\n\r\n", bad},
		{"HTTP/2.0 (h2 preface)", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", version},
		{"HTTP/1.2", "GET / HTTP/1.2\r\nHost: h\r\n\r\n", version},
		{"lower-case version", "GET / http/1.1\r\nHost: h\r\n\r\n", version},
		{"space after the version", "GET / HTTP/1.1 \r\nHost: h\r\n\r\n", version},
		{"HTTP/0.9", "GET /\r\n\r\n", bad},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m http1.Message
			n, err := http1.ParseRequest([]byte(tt.in), &m, http1.Limits{MaxFields: 100})
			var he *http1.Error
			if !errors.As(err, &he) {
				t.Fatalf("ParseRequest(%q) = %d, %v; want a %d", tt.in, n, err, tt.status)
			}
			if he.Status != tt.status {
				t.Errorf("ParseRequest(%q): %v, want a %d", tt.in, err, tt.status)
			}
		})
	}
}

func TestParseRequestMaxFields(t *testing.T) {
	fields := func(n int) string {
		var b strings.Builder
		b.WriteString("GET / HTTP/1.1\r\nHost: h\r\n")
		for i := 1; i < n; i++ {
			fmt.Fprintf(&b, "X-%d: v\r\n", i)
		}
		b.WriteString("\r\n")
		return b.String()
	}
	var m http1.Message
	for _, tt := range []struct {
		max, fields int
		status      int // 0: accepted
	}{
		{3, 3, 0},
		{3, 4, http.StatusRequestHeaderFieldsTooLarge},
		{1, 1, 0},
		{1, 2, http.StatusRequestHeaderFieldsTooLarge},
		{100, 100, 0},
		{100, 101, http.StatusRequestHeaderFieldsTooLarge},
		{0, 1000, 0}, // no limit
	} {
		_, err := http1.ParseRequest([]byte(fields(tt.fields)), &m, http1.Limits{MaxFields: tt.max})
		var he *http1.Error
		switch {
		case tt.status == 0 && err != nil:
			t.Errorf("%d fields, at most %d: %v", tt.fields, tt.max, err)
		case tt.status == 0 && len(m.Fields) != tt.fields:
			t.Errorf("%d fields, at most %d: %d parsed", tt.fields, tt.max, len(m.Fields))
		case tt.status != 0 && (!errors.As(err, &he) || he.Status != tt.status):
			t.Errorf("%d fields, at most %d: %v, want a %d", tt.fields, tt.max, err, tt.status)
		}
	}
}

func TestParseResponseAccepts(t *testing.T) {
	tests := []struct {
		name   string
		method string
		head   string
		want   head
	}{
		{"Content-Length", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b\r\n\r\n",
			head{status: 200, reason: "OK", minor: 1, framing: http1.Length, length: 5, fields: []string{"Content-Length: 5", "X-A: b"}}},
		{"no reason", "GET", "HTTP/1.1 404\r\nContent-Length: 0\r\n\r\n",
			head{status: 404, minor: 1, framing: http1.Length, fields: []string{"Content-Length: 0"}}},
		{"empty reason", "GET", "HTTP/1.1 404 \r\nContent-Length: 0\r\n\r\n",
			head{status: 404, minor: 1, framing: http1.Length, fields: []string{"Content-Length: 0"}}},
		{"reason with spaces", "GET", "HTTP/1.1 599 Some Thing Odd\r\nContent-Length: 0\r\n\r\n",
			head{status: 599, reason: "Some Thing Odd", minor: 1, framing: http1.Length, fields: []string{"Content-Length: 0"}}},
		{"chunked", "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n",
			head{status: 200, reason: "OK", minor: 1, framing: http1.Chunked, trailer: true, fields: []string{"Transfer-Encoding: chunked", "Trailer: X-Sum"}}},
		{"until close", "GET", "HTTP/1.1 200 OK\r\nX-A: b\r\n\r\n",
			head{status: 200, reason: "OK", minor: 1, framing: http1.UntilClose, close: true, fields: []string{"X-A: b"}}},
		{"Connection: close", "GET", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
			head{status: 200, reason: "OK", minor: 1, framing: http1.Length, close: true, fields: []string{"Connection: close", "Content-Length: 0"}, tokens: []string{"close"}}},
		{"HTTP/1.0", "GET", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n",
			head{status: 200, reason: "OK", minor: 0, framing: http1.Length, length: 2, close: true, fields: []string{"Content-Length: 2"}}},
		{"HTTP/1.0 keep-alive", "GET", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n",
			head{status: 200, reason: "OK", minor: 0, framing: http1.Length, length: 2, fields: []string{"Connection: keep-alive", "Content-Length: 2"}, tokens: []string{"keep-alive"}}},
		{"HEAD with Content-Length", "HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 42\r\n\r\n",
			head{status: 200, reason: "OK", minor: 1, framing: http1.NoBody, fields: []string{"Content-Length: 42"}}},
		{"HEAD chunked", "HEAD", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
			head{status: 200, reason: "OK", minor: 1, framing: http1.NoBody, fields: []string{"Transfer-Encoding: chunked"}}},
		{"HEAD without framing", "HEAD", "HTTP/1.1 200 OK\r\n\r\n",
			head{status: 200, reason: "OK", minor: 1, framing: http1.NoBody}},
		{"204", "GET", "HTTP/1.1 204 No Content\r\n\r\n",
			head{status: 204, reason: "No Content", minor: 1, framing: http1.NoBody}},
		{"304 with Content-Length", "GET", "HTTP/1.1 304 Not Modified\r\nContent-Length: 100\r\nETag: \"x\"\r\n\r\n",
			head{status: 304, reason: "Not Modified", minor: 1, framing: http1.NoBody, fields: []string{"Content-Length: 100", "ETag: \"x\""}}},
		{"103", "GET", "HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\n",
			head{status: 103, reason: "Early Hints", minor: 1, framing: http1.NoBody, fields: []string{"Link: </a>; rel=preload"}}},
		{"100", "POST", "HTTP/1.1 100 Continue\r\n\r\n",
			head{status: 100, reason: "Continue", minor: 1, framing: http1.NoBody}},
		{"Host and duplicate names are a response's business", "GET", "HTTP/1.1 200 OK\r\nHost: a\r\nHost: b\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nContent-Length: 0\r\n\r\n",
			head{status: 200, reason: "OK", minor: 1, framing: http1.Length, fields: []string{"Host: a", "Host: b", "Set-Cookie: a=1", "Set-Cookie: b=2", "Content-Length: 0"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m http1.Message
			in := []byte(tt.head + "BODY")
			n, err := http1.ParseResponse(in, []byte(tt.method), &m, http1.Limits{MaxFields: 100})
			if err != nil {
				t.Fatalf("ParseResponse(%q): %v", in, err)
			}
			if n != len(tt.head) {
				t.Errorf("head length %d, want %d", n, len(tt.head))
			}
			tt.want.check(t, &m, false)
			for i := range len(tt.head) {
				if _, err := http1.ParseResponse(in[:i], []byte(tt.method), &m, http1.Limits{MaxFields: 100}); err != http1.ErrIncomplete {
					t.Fatalf("ParseResponse(%q) (a prefix): %v, want ErrIncomplete", in[:i], err)
				}
			}
		})
	}
}

// Whatever is wrong with a backend's response is a 502.
func TestParseResponseRefuses(t *testing.T) {
	resp := func(fields ...string) string {
		return "HTTP/1.1 200 OK\r\n" + strings.Join(fields, "\r\n") + "\r\n\r\n"
	}
	for _, in := range []string{
		resp("Content-Length: 5", "Transfer-Encoding: chunked"),
		resp("Transfer-Encoding: chunked", "Content-Length: 5"),
		resp("Content-Length: 5", "Content-Length: 5"),
		resp("Content-Length: +5"),
		resp("Content-Length: 5 5"),
		resp("Content-Length:"),
		resp("Transfer-Encoding: gzip, chunked"),
		resp("Transfer-Encoding: chunked", "Transfer-Encoding: chunked"),
		resp("Transfer-Encoding: gzip"),
		resp("X-A : b"),
		resp("X-A: b", " c"),
		resp("X-A: b\x00"),
		resp("X-A: b\rc"),
		"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
		"HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 0\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\n",
		"HTTP/1.1 20 OK\r\n\r\n",
		"HTTP/1.1 2000 OK\r\n\r\n",
		"HTTP/1.1 099 Odd\r\n\r\n",
		"HTTP/1.1 2x0 OK\r\n\r\n",
		"HTTP/1.1  200 OK\r\n\r\n",
		"HTTP/1.2 200 OK\r\n\r\n",
		"HTTP/2 200 OK\r\n\r\n",
		"HTTP/1.1\r\n\r\n",
		"ICY 200 OK\r\n\r\n",
	} {
		var m http1.Message
		_, err := http1.ParseResponse([]byte(in), []byte("GET"), &m, http1.Limits{MaxFields: 100})
		var he *http1.Error
		if !errors.As(err, &he) || he.Status != http.StatusBadGateway {
			t.Errorf("ParseResponse(%q): %v, want a 502", in, err)
		}
	}
	var m http1.Message
	_, err := http1.ParseResponse([]byte(resp("A: 1", "B: 2", "C: 3")), []byte("GET"), &m, http1.Limits{MaxFields: 2})
	var he *http1.Error
	if !errors.As(err, &he) || he.Status != http.StatusBadGateway {
		t.Errorf("a response of 3 fields, at most 2: %v, want a 502", err)
	}
}

func TestCopyChunked(t *testing.T) {
	tests := []struct {
		name string
		in   string
		out  string
		n    int64
		err  error // nil: accepted; else errors.Is
	}{
		{"one chunk", "5\r\nhello\r\n0\r\n\r\n", "5\r\nhello\r\n0\r\n\r\n", 5, nil},
		{"empty body", "0\r\n\r\n", "0\r\n\r\n", 0, nil},
		{"chunks", "5\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\n\r\n", "5\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\n\r\n", 11, nil},
		{"CRLF in data", "4\r\n\r\n\r\n\r\n0\r\n\r\n", "4\r\n\r\n\r\n\r\n0\r\n\r\n", 4, nil},
		{"upper-case hex", "A\r\n0123456789\r\n0\r\n\r\n", "a\r\n0123456789\r\n0\r\n\r\n", 10, nil},
		{"leading zeros", "0005\r\nhello\r\n000\r\n\r\n", "5\r\nhello\r\n0\r\n\r\n", 5, nil},
		{"extensions dropped", "5;name=value\r\nhello\r\n5;a;b=\"q;x\"\r\nworld\r\n0;last\r\n\r\n", "5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n", 10, nil},
		{"BWS before an extension (RFC 9112 7.1.1)", "5 ;a=b\r\nhello\r\n0\r\n\r\n", "5\r\nhello\r\n0\r\n\r\n", 5, nil},
		{"trailing whitespace", "5 \r\nhello\r\n0\t\r\n\r\n", "5\r\nhello\r\n0\r\n\r\n", 5, nil},
		{"trailers passed", "5\r\nhello\r\n0\r\nX-Sum: abc\r\nX-Other:  spaced \r\n\r\n", "5\r\nhello\r\n0\r\nX-Sum: abc\r\nX-Other:  spaced \r\n\r\n", 5, nil},
		{"15 hex digits", "00000000000000a\r\n0123456789\r\n0\r\n\r\n", "a\r\n0123456789\r\n0\r\n\r\n", 10, nil},
		// Malformed sizes.
		{"empty size", "\r\nhello\r\n0\r\n\r\n", "", 0, http1.ErrChunked},
		{"only an extension", ";x\r\nhello\r\n0\r\n\r\n", "", 0, http1.ErrChunked},
		{"not hex", "g\r\nhello\r\n0\r\n\r\n", "", 0, http1.ErrChunked},
		{"negative", "-5\r\nhello\r\n0\r\n\r\n", "", 0, http1.ErrChunked},
		{"plus sign", "+5\r\nhello\r\n0\r\n\r\n", "", 0, http1.ErrChunked},
		{"0x prefix", "0x5\r\nhello\r\n0\r\n\r\n", "", 0, http1.ErrChunked},
		{"underscore", "1_0\r\n0123456789abcdef\r\n0\r\n\r\n", "", 0, http1.ErrChunked},
		{"space inside", "1 0\r\n0123456789abcdef\r\n0\r\n\r\n", "", 0, http1.ErrChunked},
		{"leading whitespace", " 5\r\nhello\r\n0\r\n\r\n", "", 0, http1.ErrChunked},
		{"leading tab", "\t5\r\nhello\r\n0\r\n\r\n", "", 0, http1.ErrChunked},
		{"16 hex digits (overflow)", "ffffffffffffffff\r\nhello\r\n0\r\n\r\n", "", 0, http1.ErrChunked},
		{"16 digits, small value", "0000000000000005\r\nhello\r\n0\r\n\r\n", "", 0, http1.ErrChunked},
		{"20 hex digits", "10000000000000000005\r\nhello\r\n0\r\n\r\n", "", 0, http1.ErrChunked},
		{"bare LF after the size", "5\nhello\r\n0\r\n\r\n", "", 0, http1.ErrChunked},
		{"bare CR in the size line", "5\r;x\r\nhello\r\n0\r\n\r\n", "", 0, http1.ErrChunked},
		{"NUL in the size", "5\x00\r\nhello\r\n0\r\n\r\n", "", 0, http1.ErrChunked},
		// Data not followed by CRLF.
		{"data longer than its size", "5\r\nhelloX\r\n0\r\n\r\n", "5\r\nhello", 5, http1.ErrChunked},
		{"data followed by the next size", "5\r\nhello0\r\n\r\n", "5\r\nhello", 5, http1.ErrChunked},
		{"data followed by LF", "5\r\nhello\n0\r\n\r\n", "5\r\nhello", 5, http1.ErrChunked},
		{"data followed by CR", "5\r\nhello\r0\r\n\r\n", "5\r\nhello", 5, http1.ErrChunked},
		// Truncated.
		{"truncated data", "5\r\nhel", "5\r\nhel", 3, io.ErrUnexpectedEOF},
		{"truncated size line", "5", "", 0, io.ErrUnexpectedEOF},
		{"no last chunk", "5\r\nhello\r\n", "5\r\nhello\r\n", 5, io.ErrUnexpectedEOF},
		{"no end of trailers", "0\r\n", "0\r\n", 0, io.ErrUnexpectedEOF},
		{"truncated trailer", "0\r\nX-Sum: 1\r\n", "0\r\nX-Sum: 1\r\n", 0, io.ErrUnexpectedEOF},
		// Malformed trailers.
		{"trailer without a colon", "0\r\nX-Sum\r\n\r\n", "0\r\n", 0, http1.ErrChunked},
		{"trailer with an empty name", "0\r\n: x\r\n\r\n", "0\r\n", 0, http1.ErrChunked},
		{"trailer with space before the colon", "0\r\nX-Sum : 1\r\n\r\n", "0\r\n", 0, http1.ErrChunked},
		{"obs-fold in trailers", "0\r\nX-Sum: 1\r\n 2\r\n\r\n", "0\r\nX-Sum: 1\r\n", 0, http1.ErrChunked},
		{"NUL in a trailer", "0\r\nX-Sum: 1\x00\r\n\r\n", "0\r\n", 0, http1.ErrChunked},
		{"bare CR in a trailer", "0\r\nX-Sum: 1\r2\r\n\r\n", "0\r\n", 0, http1.ErrChunked},
		{"bare LF in trailers", "0\r\nX-Sum: 1\n\r\n", "0\r\n", 0, http1.ErrChunked},
		{"bare LF ending trailers", "0\r\nX-Sum: 1\r\n\n", "0\r\nX-Sum: 1\r\n", 0, http1.ErrChunked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const next = "GET /next HTTP/1.1\r\n"
			src := bufio.NewReader(strings.NewReader(tt.in + next))
			if errors.Is(tt.err, io.ErrUnexpectedEOF) {
				src = bufio.NewReader(strings.NewReader(tt.in))
			}
			var out bytes.Buffer
			dst := bufio.NewWriter(&out)
			n, err := http1.CopyChunked(dst, src, nil)
			_ = dst.Flush()
			switch {
			case tt.err == nil && err != nil:
				t.Fatalf("CopyChunked(%q): %v", tt.in, err)
			case tt.err != nil && !errors.Is(err, tt.err):
				t.Fatalf("CopyChunked(%q): %v, want %v", tt.in, err, tt.err)
			}
			if n != tt.n {
				t.Errorf("CopyChunked(%q) relayed %d bytes of data, want %d", tt.in, n, tt.n)
			}
			if tt.err != nil {
				// What was relayed before the error is only a prefix of
				// a body, never a whole one.
				if strings.HasSuffix(out.String(), "0\r\n\r\n") {
					t.Errorf("CopyChunked(%q) failed after relaying a whole body: %q", tt.in, out.String())
				}
				return
			}
			if out.String() != tt.out {
				t.Errorf("CopyChunked(%q) wrote %q, want %q", tt.in, out.String(), tt.out)
			}
			// The reader stops at the end of the body: a pipelined
			// request follows it.
			if rest, _ := io.ReadAll(src); string(rest) != next {
				t.Errorf("CopyChunked(%q) left %q, want %q", tt.in, rest, next)
			}
			// What it writes, net/http reads as the same body.
			body, err := io.ReadAll(httputil.NewChunkedReader(bytes.NewReader(out.Bytes())))
			if err != nil || int64(len(body)) != tt.n {
				t.Errorf("net/http reads %q as %q, %v", out.String(), body, err)
			}
		})
		// DecodeChunked reads the same bodies, refuses the same ones, and
		// hands over the data and the trailers CopyChunked relays.
		t.Run(tt.name+"/decoded", func(t *testing.T) {
			const next = "GET /next HTTP/1.1\r\n"
			in := tt.in
			if !errors.Is(tt.err, io.ErrUnexpectedEOF) {
				in += next
			}
			src := bufio.NewReader(strings.NewReader(in))
			var data bytes.Buffer
			var trailers []string
			chunks := 0
			n, err := http1.DecodeChunked(&data, src, func() error { chunks++; return nil }, func(name, value []byte) {
				trailers = append(trailers, string(name)+": "+string(value))
			})
			switch {
			case tt.err == nil && err != nil:
				t.Fatalf("DecodeChunked(%q): %v", tt.in, err)
			case tt.err != nil && !errors.Is(err, tt.err):
				t.Fatalf("DecodeChunked(%q): %v, want %v", tt.in, err, tt.err)
			}
			if n != tt.n || int64(data.Len()) != n {
				t.Errorf("DecodeChunked(%q) = %d bytes, wrote %d, want %d", tt.in, n, data.Len(), tt.n)
			}
			if tt.err != nil {
				return
			}
			want, _ := io.ReadAll(httputil.NewChunkedReader(strings.NewReader(tt.out)))
			if data.String() != string(want) {
				t.Errorf("DecodeChunked(%q) wrote %q, want %q", tt.in, data.String(), want)
			}
			// Each chunk's size and data end in CRLF, so do the last
			// chunk, each trailer and the body.
			if crlfs := strings.Count(tt.out, "\r\n") - len(trailers) - strings.Count(data.String(), "\r\n"); 2*chunks+2 != crlfs {
				t.Errorf("DecodeChunked(%q) reported %d chunks done", tt.in, chunks)
			}
			var wantTrailers []string
			for _, line := range strings.Split(tt.out[strings.LastIndex(tt.out, "0\r\n")+3:], "\r\n") {
				if name, value, ok := strings.Cut(line, ":"); ok {
					wantTrailers = append(wantTrailers, name+": "+strings.TrimSpace(value))
				}
			}
			if strings.Join(trailers, "|") != strings.Join(wantTrailers, "|") {
				t.Errorf("DecodeChunked(%q) trailers %q, want %q", tt.in, trailers, wantTrailers)
			}
			if rest, _ := io.ReadAll(src); string(rest) != next {
				t.Errorf("DecodeChunked(%q) left %q, want %q", tt.in, rest, next)
			}
		})
	}
}

func TestCopyChunkedProgressAndLimits(t *testing.T) {
	calls := 0
	src := bufio.NewReader(strings.NewReader("1\r\na\r\n1\r\nb\r\n0\r\n\r\n"))
	if _, err := http1.CopyChunked(bufio.NewWriter(io.Discard), src, func() { calls++ }); err != nil {
		t.Fatal(err)
	}
	if calls != 3 {
		t.Errorf("progress called %d times for 3 chunk lines, want 3", calls)
	}
	// A size line longer than the reader's buffer is refused, not
	// read on.
	long := "5;" + strings.Repeat("x", 5000) + "\r\nhello\r\n0\r\n\r\n"
	if _, err := http1.CopyChunked(bufio.NewWriter(io.Discard), bufio.NewReaderSize(strings.NewReader(long), 8192), nil); !errors.Is(err, http1.ErrChunked) {
		t.Errorf("a 5000-byte extension: %v, want ErrChunked", err)
	}
	if _, err := http1.CopyChunked(bufio.NewWriter(io.Discard), bufio.NewReader(strings.NewReader(long)), nil); !errors.Is(err, http1.ErrChunked) {
		t.Errorf("a 5000-byte extension (4 KiB reader): %v, want ErrChunked", err)
	}
	// Trailers of more than 16 KiB in all are refused.
	var tr strings.Builder
	tr.WriteString("0\r\n")
	for i := range 20 {
		fmt.Fprintf(&tr, "X-%d: %s\r\n", i, strings.Repeat("v", 1000))
	}
	tr.WriteString("\r\n")
	if _, err := http1.CopyChunked(bufio.NewWriter(io.Discard), bufio.NewReader(strings.NewReader(tr.String())), nil); !errors.Is(err, http1.ErrChunked) {
		t.Errorf("20 KiB of trailers: %v, want ErrChunked", err)
	}
	// A large body in many reads.
	var big strings.Builder
	for range 300 {
		big.WriteString("1000\r\n" + strings.Repeat("z", 0x1000) + "\r\n")
	}
	big.WriteString("0\r\n\r\n")
	var out bytes.Buffer
	w := bufio.NewWriter(&out)
	n, err := http1.CopyChunked(w, bufio.NewReader(iotest.HalfReader(strings.NewReader(big.String()))), nil)
	_ = w.Flush()
	if err != nil || n != 300*0x1000 || out.String() != big.String() {
		t.Errorf("300 chunks of 4 KiB: %d bytes, %v, identical %v", n, err, out.String() == big.String())
	}
}

func TestCopyAsChunks(t *testing.T) {
	for _, in := range []string{"", "x", "hello, world", strings.Repeat("0123456789", 10000)} {
		var out bytes.Buffer
		w := bufio.NewWriter(&out)
		n, err := http1.CopyAsChunks(w, iotest.HalfReader(strings.NewReader(in)), make([]byte, 4096))
		if err != nil || n != int64(len(in)) {
			t.Fatalf("CopyAsChunks of %d bytes: %d, %v", len(in), n, err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(out.String(), "0\r\n\r\n") {
			t.Errorf("CopyAsChunks of %d bytes does not end with the last chunk: %q", len(in), out.String())
		}
		// net/http and CopyChunked read it back as it was, and the body
		// ends where the coding says.
		body, err := io.ReadAll(httputil.NewChunkedReader(bytes.NewReader(out.Bytes())))
		if err != nil || string(body) != in {
			t.Errorf("net/http reads CopyAsChunks of %d bytes as %d bytes, %v", len(in), len(body), err)
		}
		src := bufio.NewReader(io.MultiReader(bytes.NewReader(out.Bytes()), strings.NewReader("next")))
		if n, err := http1.CopyChunked(bufio.NewWriter(io.Discard), src, nil); err != nil || n != int64(len(in)) {
			t.Errorf("CopyChunked reads CopyAsChunks of %d bytes as %d, %v", len(in), n, err)
		}
		if rest, _ := io.ReadAll(src); string(rest) != "next" {
			t.Errorf("after CopyAsChunks of %d bytes, %q is left", len(in), rest)
		}
	}
	// Each read is passed on as it arrives (flushed), for a slow stream.
	var out bytes.Buffer
	w := bufio.NewWriterSize(&out, 64<<10)
	r := &flushProbe{data: []string{"a", "bc"}, out: &out}
	if _, err := http1.CopyAsChunks(w, r, make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	if r.seen[1] != "1\r\na\r\n" || r.seen[2] != "1\r\na\r\n2\r\nbc\r\n" {
		t.Errorf("before each read the writer had flushed %q", r.seen)
	}
	// A read error ends the copy with that error, without a last chunk.
	out.Reset()
	w = bufio.NewWriter(&out)
	boom := errors.New("boom")
	if _, err := http1.CopyAsChunks(w, io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(boom)), make([]byte, 16)); !errors.Is(err, boom) {
		t.Errorf("a failing reader: %v", err)
	}
	_ = w.Flush()
	if strings.Contains(out.String(), "0\r\n\r\n") {
		t.Errorf("a failing reader's copy ends as a whole body: %q", out.String())
	}
}

// flushProbe records, at each read, what was written through so far.
type flushProbe struct {
	data []string
	out  *bytes.Buffer
	seen []string
}

func (p *flushProbe) Read(b []byte) (int, error) {
	p.seen = append(p.seen, p.out.String())
	if len(p.data) == 0 {
		return 0, io.EOF
	}
	n := copy(b, p.data[0])
	p.data = p.data[1:]
	return n, nil
}
