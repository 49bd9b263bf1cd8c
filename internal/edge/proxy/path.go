package proxy

import (
	"bytes"
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// Routes match the normal form of a request's path, and the endpoint
// receives that form: what a rule's match, rewrite or redirect saw is what
// the backend serves, however the backend (nginx, Spring, Express) would
// have resolved the path as it came. The normal form of the path of an
// origin-form target (percent-encoded as it came, without its query) is
// made in three steps:
//
//   - percent-encodings of unreserved characters (RFC 3986 2.3: ALPHA
//     DIGIT - . _ ~) are decoded and the others' hex digits upper-cased
//     (RFC 3986 6.2.2.1, 6.2.2.2); a byte no path may hold as it is (not a
//     pchar, RFC 3986 3.3: space, '"', '{', non-ASCII...) is
//     percent-encoded, as net/http's URL would send it;
//   - empty segments are removed: consecutive slashes merge;
//   - dot segments ("." and "..", decoded) are removed (RFC 3986 5.2.4),
//     a final one leaving its slash ("/a/b/.." is "/a/").
//
// Slashes merge before ".." climbs, as nginx's merge_slashes and Go's
// path.Clean read "/a//../b" ("/b"; RFC 3986 alone gives "/a/b"). Whatever
// a backend would make of the path as it came, it gets one with no dot
// segment and no empty one to read otherwise.
//
// A path without a safe normal form is refused (400): an encoded '/' or
// '\' in a segment (one backend splits there, another does not; Envoy's
// path_with_escaped_slashes_action REJECT_REQUEST), a '\' as it is (read
// as '/' by some backends), a ".." above the root (RFC 3986 drops it;
// only a probe sends one), an invalid percent-encoding, a control
// character, and a target that is not a path (asterisk- and
// authority-form: nothing to route; the edge is no CONNECT proxy). The
// query is kept as it came.

// Why a request target has no normal form; each is a 400, its text the
// answer's.
var (
	errNotPath          = errors.New("the request target is not a path")
	errEncodedSeparator = errors.New("the path has an encoded / or \\")
	errBackslash        = errors.New("the path has a \\")
	errAboveRoot        = errors.New("the path climbs above the root")
	errBadEscape        = errors.New("the path has an invalid percent-encoding")
	errControl          = errors.New("the path has a control character")
)

// normalizePath returns the normal form of p, the path of an origin-form
// request target as it came. A path already normal is returned as it is,
// after one scan, without an allocation.
func normalizePath(p string) (string, error) {
	b, err := normalize(p)
	if err != nil {
		return "", err
	}
	if b == nil {
		return p, nil
	}
	return string(b), nil
}

// normalize returns the normal form of p; nil when p is normal as it is.
// It looks for the first byte that needs work (a '%' other than an
// upper-case encoding of a byte that stays encoded, a byte that is not a
// pchar, a slash followed by a slash or a dot segment); only then does
// rebuild make the normal form, from the start, and check it.
func normalize[P string | []byte](p P) ([]byte, error) {
	if len(p) == 0 || p[0] != '/' {
		return nil, errNotPath
	}
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '/':
			if i+1 < len(p) && (p[i+1] == '/' || p[i+1] == '.' && dotSegmentAt(p, i+1)) {
				return rebuild(p)
			}
		case c == '%':
			if i+2 >= len(p) || !isUpperHex(p[i+1]) || !isUpperHex(p[i+2]) {
				return rebuild(p)
			}
			if v := unhex(p[i+1])<<4 | unhex(p[i+2]); unreserved[v] || v == '/' || v == '\\' {
				return rebuild(p)
			}
			i += 2
		case c >= 0x80 || !pathChar[c]:
			return rebuild(p)
		}
	}
	return nil, nil
}

// dotSegmentAt says whether a segment "." or ".." starts at p[i].
func dotSegmentAt[P string | []byte](p P, i int) bool {
	n := 1
	if i+1 < len(p) && p[i+1] == '.' {
		n = 2
	}
	return i+n == len(p) || p[i+n] == '/'
}

// rebuild makes the normal form of p, which starts with '/', segment by
// segment, or says why it has none.
func rebuild[P string | []byte](p P) ([]byte, error) {
	out := make([]byte, 1, len(p)+8)
	out[0] = '/'
	// out ends with a slash before each segment; a segment is written
	// after it, then dropped, or popped with the one before (".."), or
	// followed by its slash.
	for i := 1; i <= len(p); {
		start, j := len(out), i
		for ; j < len(p) && p[j] != '/'; j++ {
			switch c := p[j]; {
			case c == '%':
				if j+2 >= len(p) || !isHex(p[j+1]) || !isHex(p[j+2]) {
					return nil, errBadEscape
				}
				v := unhex(p[j+1])<<4 | unhex(p[j+2])
				switch {
				case v == '/' || v == '\\':
					return nil, errEncodedSeparator
				case unreserved[v]:
					out = append(out, v)
				default:
					out = append(out, '%', upperHex[v>>4], upperHex[v&15])
				}
				j += 2
			case c == '\\':
				return nil, errBackslash
			case c < ' ' || c == 0x7f:
				return nil, errControl
			case c >= 0x80 || !pathChar[c]:
				out = append(out, '%', upperHex[c>>4], upperHex[c&15])
			default:
				out = append(out, c)
			}
		}
		switch seg := out[start:]; {
		case len(seg) == 0:
			// Merged with the slash before.
		case len(seg) == 1 && seg[0] == '.':
			out = out[:start]
		case len(seg) == 2 && seg[0] == '.' && seg[1] == '.':
			if start == 1 {
				return nil, errAboveRoot
			}
			out = out[:bytes.LastIndexByte(out[:start-1], '/')+1]
		case j < len(p):
			out = append(out, '/')
		}
		i = j + 1
	}
	return out, nil
}

const upperHex = "0123456789ABCDEF"

func isUpperHex(c byte) bool { return '0' <= c && c <= '9' || 'A' <= c && c <= 'F' }

// unhex is the value of a hex digit.
func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// unreserved are RFC 3986's unreserved characters (2.3).
var unreserved = func() (u [256]bool) {
	for c := '0'; c <= '9'; c++ {
		u[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		u[c], u[c-'a'+'A'] = true, true
	}
	for _, c := range "-._~" {
		u[c] = true
	}
	return u
}()

// normalizeRequest makes r's path its normal form, the one routes match
// and the endpoint receives (URL.Path, URL.RawPath and RequestURI, which
// the reverse proxy and the stream forwarder write upstream), or answers
// 400 and returns false. The target is taken as it came (RequestURI):
// URL.Path is already decoded, and an encoded slash lost in it.
func normalizeRequest(w http.ResponseWriter, r *http.Request) bool {
	raw, rest, ok := targetPath(r)
	if !ok {
		http.Error(w, errNotPath.Error(), http.StatusBadRequest)
		return false
	}
	norm, err := normalizePath(raw)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return false
	}
	if norm == raw && r.RequestURI[0] == '/' {
		return true // as net/http parsed it
	}
	path, _ := url.PathUnescape(norm) // a normal form's encodings are valid
	r.URL.Path, r.URL.RawPath = path, norm
	r.RequestURI = norm + rest
	return true
}

// targetPath splits r's target as it came into its path and the rest (the
// query with its '?'): an origin-form target, or the path of an
// absolute-form one, which HTTP/1.1 servers must accept (RFC 9112 3.2.2);
// false for the asterisk- and authority-forms.
func targetPath(r *http.Request) (path, rest string, ok bool) {
	t := r.RequestURI
	if !strings.HasPrefix(t, "/") {
		if r.URL == nil || !r.URL.IsAbs() {
			return "", "", false
		}
		i := strings.Index(t, "://")
		if i < 0 {
			return "", "", false
		}
		t = t[i+3:]
		j := strings.IndexAny(t, "/?")
		if j < 0 {
			return "/", "", true
		}
		if t = t[j:]; t[0] == '?' {
			return "/", t, true
		}
	}
	if i := strings.IndexByte(t, '?'); i >= 0 {
		return t[:i], t[i:], true
	}
	return t, "", true
}
