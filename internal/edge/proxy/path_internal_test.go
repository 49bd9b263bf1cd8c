package proxy

import (
	"errors"
	"net/url"
	"path"
	"strings"
	"testing"
)

func TestNormalizePath(t *testing.T) {
	tests := []struct {
		in, want string
		err      error
	}{
		// Normal already.
		{in: "/", want: "/"},
		{in: "/admin", want: "/admin"},
		{in: "/admin/", want: "/admin/"},
		{in: "/a/b.c/..d/d../.../~x-y_z", want: "/a/b.c/..d/d../.../~x-y_z"},
		{in: "/a;b=c/d:e@f!$&'()*+,=", want: "/a;b=c/d:e@f!$&'()*+,="},
		{in: "/a%3Bb/%E2%82%AC/%25", want: "/a%3Bb/%E2%82%AC/%25"},
		// Dot segments, RFC 3986 5.2.4.
		{in: "/x/../admin", want: "/admin"},
		{in: "/./admin", want: "/admin"},
		{in: "/admin/./", want: "/admin/"},
		{in: "/admin/.", want: "/admin/"},
		{in: "/a/b/..", want: "/a/"},
		{in: "/a/..", want: "/"},
		{in: "/.", want: "/"},
		{in: "/a/b/c/./../../g", want: "/a/g"},
		// Slashes merge, before ".." climbs (as path.Clean, nginx).
		{in: "//admin", want: "/admin"},
		{in: "/admin//", want: "/admin/"},
		{in: "///", want: "/"},
		{in: "/a//../b", want: "/b"},
		// Encodings: unreserved decoded, the others upper-cased.
		{in: "/x/%2e%2e/admin", want: "/admin"},
		{in: "/x/%2E%2E/admin/", want: "/admin/"},
		{in: "/x/.%2e/admin", want: "/admin"},
		{in: "/%61dmin", want: "/admin"},
		{in: "/%7euser/%41%5a%30%2D%5F", want: "/~user/AZ0-_"},
		{in: "/a%3bb/%e2%82%ac", want: "/a%3Bb/%E2%82%AC"},
		{in: "/%2e%2ex", want: "/..x"},
		// Bytes no path holds as they are, encoded.
		{in: "/caf\xc3\xa9", want: "/caf%C3%A9"},
		{in: "/a b\"c<d>e^f`g{h|i}j#k?l[m]", want: "/a%20b%22c%3Cd%3Ee%5Ef%60g%7Bh%7Ci%7Dj%23k%3Fl%5Bm%5D"},
		// No safe normal form.
		{in: "", err: errNotPath},
		{in: "*", err: errNotPath},
		{in: "example.com:443", err: errNotPath},
		{in: "/a%2Fb", err: errEncodedSeparator},
		{in: "/a%2fb", err: errEncodedSeparator},
		{in: "/a%5Cb", err: errEncodedSeparator},
		{in: "/a%5cb", err: errEncodedSeparator},
		{in: "/a\\b", err: errBackslash},
		{in: "/..", err: errAboveRoot},
		{in: "/../", err: errAboveRoot},
		{in: "/%2e%2e/x", err: errAboveRoot},
		{in: "/x/../../admin", err: errAboveRoot},
		{in: "/a//../../b", err: errAboveRoot},
		{in: "/a/%zz", err: errBadEscape},
		{in: "/a/%2", err: errBadEscape},
		{in: "/a/%", err: errBadEscape},
		{in: "/a\x00b", err: errControl},
		{in: "/a\x7fb", err: errControl},
	}
	for _, tt := range tests {
		got, err := normalizePath(tt.in)
		if got != tt.want || !errors.Is(err, tt.err) {
			t.Errorf("normalizePath(%q) = %q, %v; want %q, %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

// FuzzNormalizePath checks normalizePath against net/url and path.Clean.
// For a path p (starting with '/') whose decoding d = url.PathUnescape(p)
// succeeds:
//
//   - p has an encoded '/' or '\' (%2F, %5C, either case), a '\' or a
//     control byte, or d climbs above the root (a ".." with no segment
//     left to remove, "" and "." removing none): an error;
//   - otherwise no error, and the normal form n decodes to path.Clean(d),
//     with a slash added when d ends with "/", "/." or "/.." and Clean's
//     result is not "/" (Clean drops it, the normal form keeps it);
//   - n is normal: normalize finds nothing to do in it (returns nil), so
//     it is its own normal form, and rebuild makes it again; it holds only
//     pchars, slashes and upper-case encodings of bytes that are not
//     unreserved; net/url writes it as it is (EscapedPath); and a p that
//     normalize finds normal is n.
//
// A p whose decoding fails (an invalid percent-encoding) is an error.
func FuzzNormalizePath(f *testing.F) {
	for _, s := range []string{
		"/", "/admin", "/x/../admin", "/x/%2e%2e/admin", "/x/%2E%2E/admin/", "//admin", "/./admin", "/admin/./",
		"/%61dmin", "/a%2Fb", "/..", "/%2e%2e/x", "/a/%zz", "/a//../b", "/a/b/..", "/a%3bb/%e2%82%ac", "/caf\xc3\xa9",
		"/a\\b", "/a%5c", "/.%2e/", "/%2E.", "/a/./b/../../c/", "/a b?c#d", "/%", "/%2", "/a\x00", "*", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		n, err := normalizePath(p)
		if !strings.HasPrefix(p, "/") {
			if !errors.Is(err, errNotPath) {
				t.Fatalf("normalizePath(%q) = %q, %v; want %v", p, n, err, errNotPath)
			}
			return
		}
		d, derr := url.PathUnescape(p)
		if derr != nil {
			if err == nil {
				t.Fatalf("normalizePath(%q) = %q, want an error: %v", p, n, derr)
			}
			return
		}
		lower := strings.ToLower(p)
		refused := strings.Contains(lower, "%2f") || strings.Contains(lower, "%5c") || strings.ContainsRune(p, '\\') ||
			strings.ContainsFunc(p, func(r rune) bool { return r < ' ' || r == 0x7f }) || climbs(d)
		if refused {
			if err == nil {
				t.Fatalf("normalizePath(%q) = %q, want an error", p, n)
			}
			return
		}
		if err != nil {
			t.Fatalf("normalizePath(%q): %v", p, err)
		}
		want := path.Clean(d)
		if want != "/" && (strings.HasSuffix(d, "/") || strings.HasSuffix(d, "/.") || strings.HasSuffix(d, "/..")) {
			want += "/"
		}
		if got, err := url.PathUnescape(n); err != nil || got != want {
			t.Fatalf("normalizePath(%q) = %q, which decodes to %q (%v); want %q", p, n, got, err, want)
		}
		if b, err := normalize(n); b != nil || err != nil {
			t.Fatalf("normalizePath(%q) = %q, not normal: %q, %v", p, n, b, err)
		}
		if b, err := rebuild(n); string(b) != n || err != nil {
			t.Fatalf("rebuild(%q) = %q, %v", n, b, err)
		}
		for i := 0; i < len(n); i++ {
			switch c := n[i]; {
			case c == '%':
				v := unhex(n[i+1])<<4 | unhex(n[i+2])
				if !isUpperHex(n[i+1]) || !isUpperHex(n[i+2]) || unreserved[v] {
					t.Fatalf("normalizePath(%q) = %q: %q at %d", p, n, n[i:i+3], i)
				}
				i += 2
			case c >= 0x80 || !pathChar[c]:
				t.Fatalf("normalizePath(%q) = %q: byte %q at %d", p, n, c, i)
			}
		}
		if u := (&url.URL{Path: want, RawPath: n}); u.EscapedPath() != n {
			t.Fatalf("normalizePath(%q) = %q, which net/url writes %q", p, n, u.EscapedPath())
		}
		if b, _ := normalize(p); b == nil && n != p {
			t.Fatalf("normalizePath(%q) = %q, though normalize found it normal", p, n)
		}
	})
}

// climbs says whether the decoded path d has a ".." above the root.
func climbs(d string) bool {
	depth := 0
	for _, seg := range strings.Split(d, "/") {
		switch seg {
		case "", ".":
		case "..":
			if depth--; depth < 0 {
				return true
			}
		default:
			depth++
		}
	}
	return false
}

var sinkPath string

// BenchmarkNormalizePath: a normal path (the common case) costs a scan
// and no allocation; one that needs work is rebuilt.
func BenchmarkNormalizePath(b *testing.B) {
	for _, bb := range []struct{ name, path string }{
		{"normal", "/api/v1/users/12345/orders/67890/items;v=2/caf%C3%A9"},
		{"abnormal", "/api/v1/./users//12345/%7euser/../orders/%2e%2e/items/caf%c3%a9"},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if sinkPath, err = normalizePath(bb.path); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
