package http1_test

import (
	"bufio"
	"bytes"
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fleetnet/fleetnet/internal/edge/http1"
	"golang.org/x/net/http/httpguts"
)

// FuzzParseRequest checks the fast path's request parser against
// net/http's: whatever head ParseRequest accepts, net/http reads alike
// (http.ReadRequest), ending at the same byte, with the same method,
// target, Host, fields (canonical names, values in order), framing and
// Close. The converse need not hold: ParseRequest refuses more on
// purpose (see the package doc).
//
// The oracle is http.ReadRequest, with two adjustments, each because the
// parser's contract is narrower or wider than ReadRequest's:
//
//   - The parser checks a request target only for control characters and
//     spaces: the caller (fast.go's parseTarget) serves origin-form targets
//     of a few characters itself and hands every other target to net/http.
//     So when ReadRequest refuses the input and fast.go would not serve the
//     target, the comparison is made again with the target replaced by
//     "/", to compare the rest of the head; when fast.go would serve it,
//     ReadRequest must accept it as it is.
//   - net/http's server adds checks of its own to ReadRequest's
//     (conn.readRequest: a valid Host, valid field names and values). The
//     fast path answers the requests it serves without that server, so for
//     those (HTTP/1.1, no Upgrade or Expect, a target it serves) the head
//     must also pass those checks.
//
// And the comparison undoes what ReadRequest changes in the header it
// returns: Host, Transfer-Encoding and (chunked) Trailer are taken out of
// it, and Pragma: no-cache adds Cache-Control: no-cache.
func FuzzParseRequest(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var m http1.Message
		n, err := http1.ParseRequest(in, &m, http1.Limits{})
		if err != nil {
			var he *http1.Error
			switch {
			case err == http1.ErrIncomplete:
				if bytes.Contains(in, []byte("\r\n\r\n")) {
					t.Fatalf("ParseRequest(%q): incomplete, though a CRLF CRLF ends the head", in)
				}
			case errors.As(err, &he):
				switch he.Status {
				case http.StatusBadRequest, http.StatusRequestHeaderFieldsTooLarge, http.StatusNotImplemented, http.StatusHTTPVersionNotSupported:
				default:
					t.Fatalf("ParseRequest(%q): %v: a status a server does not answer a request with", in, err)
				}
			default:
				t.Fatalf("ParseRequest(%q): %v, neither ErrIncomplete nor an *Error", in, err)
			}
			return
		}
		if end := bytes.Index(in, []byte("\r\n\r\n")); end < 0 || n != end+4 {
			t.Fatalf("ParseRequest(%q) = %d: the head ends at the first CRLF CRLF, %d", in, n, end+4)
		}
		served := servedTarget(m.Target)
		wantLen := n
		whole := true
		req, consumed, rerr := readRequest(in)
		if rerr != nil {
			if served {
				t.Fatalf("ParseRequest accepts %q (a target fast.go serves); net/http refuses it: %v", in, rerr)
			}
			// The target is the caller's to check: compare the rest.
			line := bytes.IndexByte(in, '\n')
			sub := slices.Concat(m.Method, []byte(" / "), in[len(m.Method)+1+len(m.Target)+1:line+1], in[line+1:])
			req, consumed, rerr = readRequest(sub)
			if rerr != nil {
				t.Fatalf("ParseRequest accepts %q; net/http refuses it, with the target %q replaced by \"/\" too: %v", in, m.Target, rerr)
			}
			wantLen, whole = n-len(m.Target)+1, false
		}
		if consumed != wantLen {
			t.Errorf("the head of %q ends at %d for ParseRequest, at %d for net/http", in, wantLen, consumed)
		}
		if req.Method != string(m.Method) {
			t.Errorf("%q: method %q, net/http %q", in, m.Method, req.Method)
		}
		if whole && req.RequestURI != string(m.Target) {
			t.Errorf("%q: target %q, net/http %q", in, m.Target, req.RequestURI)
		}
		// net/http takes the host of an absolute-form (or CONNECT's
		// authority-form) target over Host; the fast path hands those over.
		if req.URL.Host == "" && req.Host != string(m.Host) {
			t.Errorf("%q: Host %q, net/http %q", in, m.Host, req.Host)
		}
		if m.Minor != req.ProtoMinor || req.ProtoMajor != 1 {
			t.Errorf("%q: HTTP/1.%d, net/http HTTP/%d.%d", in, m.Minor, req.ProtoMajor, req.ProtoMinor)
		}

		fields := http.Header{}
		for _, f := range m.Fields {
			k := http.CanonicalHeaderKey(string(f.Name))
			fields[k] = append(fields[k], string(f.Value))
		}
		if m.Upgrade != (fields["Upgrade"] != nil) || m.Expect != (fields["Expect"] != nil) || m.Trailer != (fields["Trailer"] != nil) {
			t.Errorf("%q: flags Upgrade %v Expect %v Trailer %v, fields %q", in, m.Upgrade, m.Expect, m.Trailer, fields)
		}
		if m.Framing == http1.Length && fields["Content-Length"] == nil || m.Framing == http1.Chunked && fields["Transfer-Encoding"] == nil {
			t.Errorf("%q: framing %d, fields %q", in, m.Framing, fields)
		}
		var tokens []string
		for _, v := range fields["Connection"] {
			for tok := range strings.SplitSeq(v, ",") {
				if tok = strings.Trim(tok, " \t"); tok != "" {
					tokens = append(tokens, tok)
				}
			}
		}
		var got []string
		for _, tok := range m.ConnectionTokens {
			got = append(got, string(tok))
		}
		if !slices.Equal(got, tokens) {
			t.Errorf("%q: Connection tokens %q, want %q", in, got, tokens)
		}

		want := fields.Clone()
		delete(want, "Host")
		delete(want, "Transfer-Encoding")
		if m.Framing == http1.Chunked {
			delete(want, "Content-Length")
			delete(want, "Trailer")
		}
		if p := want["Pragma"]; len(p) > 0 && p[0] == "no-cache" && want["Cache-Control"] == nil {
			want["Cache-Control"] = []string{"no-cache"}
		}
		if !reflect.DeepEqual(want, req.Header) {
			t.Errorf("%q: fields\n%q\nnet/http reads\n%q", in, want, req.Header)
		}

		switch m.Framing {
		case http1.NoBody:
			if req.ContentLength != 0 || req.TransferEncoding != nil {
				t.Errorf("%q: no body; net/http: length %d, %q", in, req.ContentLength, req.TransferEncoding)
			}
		case http1.Length:
			if req.ContentLength != m.ContentLength || req.TransferEncoding != nil {
				t.Errorf("%q: length %d; net/http: length %d, %q", in, m.ContentLength, req.ContentLength, req.TransferEncoding)
			}
		case http1.Chunked:
			if req.ContentLength != -1 || !slices.Equal(req.TransferEncoding, []string{"chunked"}) {
				t.Errorf("%q: chunked; net/http: length %d, %q", in, req.ContentLength, req.TransferEncoding)
			}
		default:
			t.Errorf("%q: framing %d for a request", in, m.Framing)
		}
		if m.Close != req.Close {
			t.Errorf("%q: Close %v, net/http %v", in, m.Close, req.Close)
		}

		// What the fast path serves without net/http's server passes that
		// server's checks too.
		if m.Minor == 1 && !m.Upgrade && !m.Expect && served {
			if !httpguts.ValidHostHeader(req.Host) {
				t.Errorf("%q: the fast path serves Host %q, which net/http's server refuses (400 malformed Host header)", in, req.Host)
			}
			for k, vv := range req.Header {
				if !httpguts.ValidHeaderFieldName(k) {
					t.Errorf("%q: the fast path serves field %q, whose name net/http's server refuses", in, k)
				}
				for _, v := range vv {
					if !httpguts.ValidHeaderFieldValue(v) {
						t.Errorf("%q: the fast path serves %s: %q, a value net/http's server refuses", in, k, v)
					}
				}
			}
		}
	})
}

// readRequest reads in with net/http and returns how many bytes the head
// took.
func readRequest(in []byte) (*http.Request, int, error) {
	r := bytes.NewReader(in)
	br := bufio.NewReader(r)
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, 0, err
	}
	return req, len(in) - r.Len() - br.Buffered(), nil
}

// servedTarget reports whether fast.go serves a request with target t
// itself (fastRequest.parseTarget), rather than handing it to net/http.
func servedTarget(t []byte) bool {
	if len(t) == 0 || t[0] != '/' {
		return false
	}
	path, query, _ := bytes.Cut(t, []byte("?"))
	const path1 = "-._~!$&'()*+,;=:@/%"
	for _, c := range path {
		if !isAlnum(c) && !strings.ContainsRune(path1, rune(c)) {
			return false
		}
	}
	for i, c := range query {
		if !isAlnum(c) && (c == ';' || !strings.ContainsRune(path1+"?", rune(c))) {
			return false
		}
		if c == '%' && (i+2 >= len(query) || !isHex(query[i+1]) || !isHex(query[i+2])) {
			return false
		}
	}
	if bytes.IndexByte(path, '%') >= 0 {
		if _, err := url.PathUnescape(string(path)); err != nil {
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isAlnum(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// fuzzSeeds are realistic requests, and attempts at smuggling a second
// request past a proxy that frames the first one otherwise than its
// backend.
var fuzzSeeds = []string{
	"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
	"GET /search?q=a+b&lang=en HTTP/1.1\r\nHost: shop.example.com:8080\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\n\r\n",
	"GET /a%2Fb/%41?x=%zz HTTP/1.1\r\nHost: h\r\n\r\n",
	"GET /caf\xc3\xa9 HTTP/1.1\r\nHost: h\r\n\r\n",
	"HEAD /index.html HTTP/1.1\r\nHost: h\r\nAccept-Encoding: gzip, br\r\nIf-None-Match: \"abc\"\r\n\r\n",
	"POST /api/items HTTP/1.1\r\nHost: api.example.com\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{\"name\":\"x\"}\n",
	"PUT /upload HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum\r\nTE: trailers\r\n\r\n5;ext=1\r\nhello\r\n0\r\nX-Checksum: 1\r\n\r\n",
	"DELETE /items/1 HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
	"OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n",
	"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
	"GET http://example.com/x HTTP/1.1\r\nHost: other\r\n\r\n",
	"GET / HTTP/1.0\r\n\r\n",
	"GET / HTTP/1.0\r\nConnection: keep-alive\r\nHost: h\r\n\r\n",
	"GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
	"GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, X-Foo\r\nX-Foo: 1\r\nKeep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\nX-Forwarded-For: 1.2.3.4\r\nX-Forwarded-For: 5.6.7.8\r\nForwarded: for=1.2.3.4\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: h\r\nPragma: no-cache\r\nCookie: a=1\r\nCookie: b=2\r\nX-Empty:\r\nX-Latin: caf\xe9\r\n\r\n",
	"GET /1 HTTP/1.1\r\nHost: h\r\n\r\nGET /2 HTTP/1.1\r\nHost: h\r\n\r\n",
	// CL.TE and TE.CL.
	"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nG",
	"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n5c\r\nGPOST / HTTP/1.1\r\n\r\n0\r\n\r\n",
	// TE.TE: obfuscated Transfer-Encoding.
	"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: xchunked\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding : chunked\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-encoding: cow\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:\tchunked\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding\r\n : chunked\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: h\r\nX: X\nTransfer-Encoding: chunked\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: \"chunked\"\r\n\r\n",
	"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
	// Content-Length forms.
	"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
	"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 5\r\n\r\nhello",
	"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +5\r\n\r\nhello",
	"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0x5\r\n\r\nhello",
	"POST / HTTP/1.1\r\nHost: h\r\nContent-Length:  005 \r\n\r\nhello",
	"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n 0\r\n\r\n",
	// Line ends and controls.
	"GET / HTTP/1.1\nHost: h\n\n",
	"GET / HTTP/1.1\r\nHost: h\rX: y\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: h\r\nX: a\x00b\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n",
	"GET / HTTP/1.1\r\n Host: h\r\n\r\n",
	"\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
	"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: h\r\n",
}
