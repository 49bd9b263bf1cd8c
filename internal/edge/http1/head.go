// Package http1 is the HTTP/1.1 wire format of fleetnet-edge's fast path:
// strict parsing of request and response heads in place (views into the
// reader's buffer, no copies) and the relay of message bodies.
//
// It accepts less than net/http does, on purpose: whatever lets two
// parsers disagree on where a message ends (request smuggling) is refused,
// so that the edge and any backend behind it frame every message alike:
// Content-Length with Transfer-Encoding, duplicate or malformed
// Content-Length, a Transfer-Encoding other than a single "chunked",
// whitespace before a colon, obs-fold, bare CR or LF, NUL and other
// control characters. What is valid but unusual (HTTP/1.0, Upgrade,
// Expect, CONNECT, absolute-form targets) is parsed and flagged, so that
// the caller can hand it to a general-purpose server.
package http1

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
)

// ErrIncomplete says the buffer does not hold a whole head yet.
var ErrIncomplete = errors.New("http1: incomplete head")

// Error is a malformed or refused message: Status is what a server
// answers with (400, 431, 501, or 502 for a backend's response).
type Error struct {
	Status int
	Reason string
}

func (e *Error) Error() string { return fmt.Sprintf("http1: %d %s", e.Status, e.Reason) }

func bad(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Reason: fmt.Sprintf(format, args...)}
}

// Field is a header field: views into the parsed buffer.
type Field struct {
	Name, Value []byte
}

// Limits bound a head.
type Limits struct {
	// MaxFields is the most header fields a head may have.
	MaxFields int
}

// Framing is how a message's body is delimited.
type Framing uint8

const (
	// NoBody: the message has none.
	NoBody Framing = iota
	// Length: Content-Length bytes.
	Length
	// Chunked: the chunked transfer coding.
	Chunked
	// UntilClose: the rest of the connection (responses only).
	UntilClose
)

// Message is what the head of a request or a response says. Its byte
// slices are views into the buffer it was parsed from.
type Message struct {
	// Request line (requests).
	Method, Target []byte
	// Status line (responses).
	Status int
	Reason []byte
	// Minor is the HTTP/1 minor version: 0 or 1.
	Minor  int
	Fields []Field
	// Host is the Host field's value (requests).
	Host    []byte
	Framing Framing
	// ContentLength when Framing is Length.
	ContentLength int64
	// Close: the sender ends the connection after this message
	// (Connection: close, or HTTP/1.0 without keep-alive).
	Close bool
	// Upgrade, Expect: the request has those fields.
	Upgrade, Expect bool
	// ConnectionTokens is the Connection field's value (comma-separated
	// names of hop-by-hop fields); nil when absent.
	ConnectionTokens [][]byte
	// Trailer: a Trailer field announces trailers.
	Trailer bool
}

func (m *Message) reset() {
	fields := m.Fields[:0]
	tokens := m.ConnectionTokens[:0]
	*m = Message{Fields: fields, ConnectionTokens: tokens}
}

// ParseRequest parses the request head at the start of buf into m and
// returns its length. ErrIncomplete means more bytes are needed; an
// *Error means the request is refused.
func ParseRequest(buf []byte, m *Message, l Limits) (int, error) {
	m.reset()
	line, rest, ok := nextLine(buf)
	if !ok {
		return 0, incompleteOrBad(buf)
	}
	// RFC 9112 2.2: a server SHOULD ignore at least one empty line before
	// the request line; net/http does not, and neither do we.
	sp1 := bytes.IndexByte(line, ' ')
	if sp1 <= 0 {
		return 0, bad("malformed request line")
	}
	m.Method = line[:sp1]
	if !isToken(m.Method) {
		return 0, bad("invalid method")
	}
	sp2 := bytes.IndexByte(line[sp1+1:], ' ')
	if sp2 <= 0 {
		return 0, bad("malformed request line")
	}
	m.Target = line[sp1+1 : sp1+1+sp2]
	for _, c := range m.Target {
		if c <= ' ' || c == 0x7f {
			return 0, bad("invalid request target")
		}
	}
	proto := line[sp1+1+sp2+1:]
	switch string(proto) {
	case "HTTP/1.1":
		m.Minor = 1
	case "HTTP/1.0":
		m.Minor = 0
		m.Close = true
	default:
		return 0, &Error{Status: http.StatusHTTPVersionNotSupported, Reason: "unsupported protocol version"}
	}
	n, err := parseFields(buf, rest, m, l, true)
	if err != nil {
		return 0, err
	}
	if m.Minor == 1 && m.Host == nil {
		return 0, bad("missing Host")
	}
	for _, c := range m.Host {
		if c >= 0x80 || !hostChar[c] {
			return 0, bad("invalid Host")
		}
	}
	if m.Minor == 0 {
		keep, closeTok := false, false
		for _, t := range m.ConnectionTokens {
			keep = keep || equalFold(t, "keep-alive")
			closeTok = closeTok || equalFold(t, "close")
		}
		m.Close = closeTok || !keep
	}
	if m.Trailer && m.Framing == Chunked {
		for _, f := range m.Fields {
			if !equalFold(f.Name, "trailer") {
				continue
			}
			for tok := range bytes.SplitSeq(f.Value, []byte(",")) {
				tok = trimOWS(tok)
				if equalFold(tok, "content-length") || equalFold(tok, "transfer-encoding") || equalFold(tok, "trailer") {
					return 0, bad("Trailer names %s", tok)
				}
			}
		}
	}
	return n, nil
}

// ParseResponse parses the response head at the start of buf, of a
// response to a request with method, into m and returns its length.
func ParseResponse(buf []byte, method []byte, m *Message, l Limits) (int, error) {
	m.reset()
	line, rest, ok := nextLine(buf)
	if !ok {
		err := incompleteOrBad(buf)
		if e, ok := err.(*Error); ok {
			e.Status = http.StatusBadGateway
		}
		return 0, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' || (len(line) > 12 && line[12] != ' ') {
		return 0, badResponse("malformed status line")
	}
	switch line[7] {
	case '1':
		m.Minor = 1
	case '0':
		m.Minor, m.Close = 0, true
	default:
		return 0, badResponse("unsupported protocol version")
	}
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return 0, badResponse("malformed status code")
		}
		m.Status = m.Status*10 + int(c-'0')
	}
	if m.Status < 100 {
		return 0, badResponse("malformed status code")
	}
	if len(line) > 13 {
		m.Reason = line[13:]
	}
	n, err := parseFields(buf, rest, m, l, false)
	if err != nil {
		if e, ok := err.(*Error); ok {
			e.Status = http.StatusBadGateway
		}
		return 0, err
	}
	switch {
	case m.Status < 200 || m.Status == http.StatusNoContent || m.Status == http.StatusNotModified || string(method) == http.MethodHead:
		m.Framing = NoBody
	case m.Framing == NoBody:
		m.Framing = UntilClose
		m.Close = true
	}
	return n, nil
}

func badResponse(reason string) *Error {
	return &Error{Status: http.StatusBadGateway, Reason: reason}
}

// incompleteOrBad: a buffer without a line end is incomplete, unless it
// already holds a bare CR or LF.
func incompleteOrBad(buf []byte) error {
	if i := bytes.IndexByte(buf, '\n'); i >= 0 {
		return bad("bare LF")
	}
	if i := bytes.IndexByte(buf, '\r'); i >= 0 && i+1 < len(buf) {
		return bad("bare CR")
	}
	return ErrIncomplete
}

// nextLine returns the line at the start of b without its CRLF, and what
// follows; ok is false when b holds no CRLF. A LF without CR before it is
// returned as part of no line: the caller sees it as bad.
func nextLine(b []byte) (line, rest []byte, ok bool) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return nil, nil, false
	}
	if i == 0 || b[i-1] != '\r' {
		return nil, nil, false
	}
	line = b[:i-1]
	if bytes.IndexByte(line, '\r') >= 0 {
		return nil, nil, false
	}
	return line, b[i+1:], true
}

// parseFields parses the header fields that start at rest (within buf)
// up to the empty line, and returns the head's length.
func parseFields(buf, rest []byte, m *Message, l Limits, request bool) (int, error) {
	var lengths, encodings int
	for {
		line, next, ok := nextLine(rest)
		if !ok {
			if i := bytes.IndexByte(rest, '\n'); i >= 0 {
				return 0, bad("bare LF or CR in a header line")
			}
			if i := bytes.IndexByte(rest, '\r'); i >= 0 && i+1 < len(rest) {
				return 0, bad("bare CR in a header line")
			}
			return 0, ErrIncomplete
		}
		if len(line) == 0 {
			if lengths > 0 && encodings > 0 {
				return 0, bad("both Content-Length and Transfer-Encoding")
			}
			return len(buf) - len(next), nil
		}
		rest = next
		if line[0] == ' ' || line[0] == '\t' {
			return 0, bad("obs-fold in a header")
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return 0, bad("header line without a name")
		}
		name := line[:colon]
		if !isToken(name) {
			return 0, bad("invalid header name %q", name)
		}
		value := trimOWS(line[colon+1:])
		for _, c := range value {
			if (c < ' ' && c != '\t') || c == 0x7f {
				return 0, bad("invalid character in header %s", name)
			}
		}
		if len(m.Fields) == l.MaxFields && l.MaxFields > 0 {
			return 0, &Error{Status: http.StatusRequestHeaderFieldsTooLarge, Reason: "too many header fields"}
		}
		m.Fields = append(m.Fields, Field{Name: name, Value: value})
		switch {
		case equalFold(name, "content-length"):
			lengths++
			if lengths > 1 {
				return 0, bad("more than one Content-Length")
			}
			n, ok := parseLength(value)
			if !ok {
				return 0, bad("invalid Content-Length %q", value)
			}
			m.Framing, m.ContentLength = Length, n
		case equalFold(name, "transfer-encoding"):
			encodings++
			if encodings > 1 || !equalFold(value, "chunked") {
				return 0, &Error{Status: http.StatusNotImplemented, Reason: "unsupported Transfer-Encoding"}
			}
			if m.Minor == 0 {
				return 0, bad("Transfer-Encoding in HTTP/1.0")
			}
			m.Framing = Chunked
		case equalFold(name, "host"):
			if !request {
				continue
			}
			if m.Host != nil {
				return 0, bad("more than one Host")
			}
			m.Host = value
		case equalFold(name, "connection"):
			for tok := range bytes.SplitSeq(value, []byte(",")) {
				tok = trimOWS(tok)
				if len(tok) == 0 {
					continue
				}
				m.ConnectionTokens = append(m.ConnectionTokens, tok)
				switch {
				case equalFold(tok, "close"):
					m.Close = true
				case equalFold(tok, "keep-alive") && m.Minor == 0:
					m.Close = false
				}
			}
		case equalFold(name, "upgrade"):
			m.Upgrade = true
		case equalFold(name, "expect"):
			m.Expect = true
		case equalFold(name, "trailer"):
			m.Trailer = true
		}
	}
}

// parseLength reads a Content-Length: digits only, at most 18 of them.
func parseLength(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// equalFold compares b with the lower-case ASCII s, ignoring case.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// EqualFold reports whether the field name b is s, ignoring ASCII case;
// s is lower case.
func EqualFold(b []byte, s string) bool { return equalFold(b, s) }

// isToken reports whether b is a non-empty RFC 9110 token.
func isToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c >= 0x80 || !tokenChar[c] {
			return false
		}
	}
	return true
}

var tokenChar = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// hostChar: net/http's httpguts.ValidHostHeader.
var hostChar = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!$%&'()*+,-.:;=[]_~" {
		t[c] = true
	}
	return t
}()
