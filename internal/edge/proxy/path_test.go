package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
)

// uriEcho is a backend on loopback that answers with its name and the
// request target it read, as it read it.
func uriEcho(t *testing.T, name string) edgev1.Endpoint {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Backend", name)
		w.Header().Set("X-Seen-Uri", r.RequestURI)
		fmt.Fprint(w, name)
	}))
	t.Cleanup(srv.Close)
	return endpointOf(srv)
}

// rawGet sends target as it is on the request line of a GET, on a
// connection of its own, and reads the answer.
func rawGet(t *testing.T, port int32, host, target string) *http.Response {
	t.Helper()
	return rawDo(t, port, http.MethodGet, host, target)
}

func rawDo(t *testing.T, port int32, method, host, target string) *http.Response {
	t.Helper()
	c := dial(t, port)
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", method, target, host); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// h2Get sends target as the :path of a GET over HTTP/2 with prior
// knowledge.
func h2Get(tr *http.Transport, port int32, host, target string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", port), nil)
	if err != nil {
		return nil, err
	}
	req.Host = host
	if strings.HasPrefix(target, "//") {
		req.URL.Path = target // as Opaque it would read as an authority
	} else {
		req.URL.Opaque = target // sent as it is
	}
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second, CheckRedirect: client.CheckRedirect}).Do(req)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}

// TestPathNormalization: routes match the normal form of a request's path
// (dot segments removed, slashes merged, unreserved characters decoded),
// the endpoint receives that form, and a path without a safe one is
// refused with 400. With a rule /admin that redirects ahead of a rule /
// to echo, no spelling of /admin reaches echo: it reaches the redirect,
// or is refused. Over HTTP/1.1 (the fast path, then net/http's) and
// HTTP/2 (the edge's server, then net/http's).
func TestPathNormalization(t *testing.T) {
	const host = "shop.example.com"
	to := func(ep edgev1.Endpoint) []edgev1.Backend {
		return []edgev1.Backend{backend("b", 1, inCluster("east", 1, ep))}
	}
	port := freePort(t)
	start(t, oneListener(port, edgev1.ProtocolHTTP, edgev1.VirtualHost{Hostname: "*", Routes: []edgev1.Route{
		{RouteName: "admin", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/admin"}, Filters: []edgev1.Filter{{
			Type: edgev1.FilterRequestRedirect, RequestRedirect: &edgev1.Redirect{Scheme: "https", StatusCode: http.StatusFound},
		}}},
		{RouteName: "cart", Path: edgev1.PathMatch{Type: edgev1.PathExact, Value: "/cart"}, Backends: to(uriEcho(t, "cart"))},
		{RouteName: "v1", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/v1"}, Filters: []edgev1.Filter{{
			Type: edgev1.FilterURLRewrite, URLRewrite: &edgev1.Rewrite{Path: &edgev1.PathModifier{Type: edgev1.PathReplacePrefix, Value: "/api"}},
		}}, Backends: to(uriEcho(t, "v1"))},
		{RouteName: "echo", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/"}, Backends: to(uriEcho(t, "echo"))},
	}}), nil)

	cases := []struct {
		target string
		// redirect is the path of the redirect's Location; backend and
		// uri the backend that answers and the target it read; neither:
		// a 400.
		redirect, backend, uri string
	}{
		// Every spelling of /admin reaches its rule.
		{target: "/admin", redirect: "/admin"},
		{target: "/x/../admin", redirect: "/admin"},
		{target: "/x/%2e%2e/admin", redirect: "/admin"},
		{target: "/x/%2E%2E/admin/", redirect: "/admin/"},
		{target: "/public/../admin", redirect: "/admin"},
		{target: "/public/%2e%2e/admin?q=1", redirect: "/admin?q=1"},
		{target: "//admin", redirect: "/admin"},
		{target: "/./admin", redirect: "/admin"},
		{target: "/admin/./", redirect: "/admin/"},
		{target: "/%61dmin", redirect: "/admin"},
		{target: "/%2e/admin//x/", redirect: "/admin/x/"},
		// Exact and the rewrite of a prefix act on the normal form; the
		// endpoint reads it, the query as it came.
		{target: "/shop/../cart", backend: "cart", uri: "/cart"},
		{target: "/cart/.", backend: "echo", uri: "/cart/"},
		{target: "/v1/./items//1?a=%2e%2e/x", backend: "v1", uri: "/api/items/1?a=%2e%2e/x"},
		{target: "/x/%2E%2E/v1/items", backend: "v1", uri: "/api/items"},
		{target: "/public/./a//b/../c?q=/../admin", backend: "echo", uri: "/public/a/c?q=/../admin"},
		{target: "/%7euser/a%3bb/%41", backend: "echo", uri: "/~user/a%3Bb/A"},
		{target: "/admins", backend: "echo", uri: "/admins"},
		{target: "/public/..admin/...", backend: "echo", uri: "/public/..admin/..."},
		// No safe normal form: refused.
		{target: "/a%2Fb"},
		{target: "/a%2fb"},
		{target: "/admin%2F"},
		{target: "/a%5Cb"},
		{target: "/.."},
		{target: "/%2e%2e/x"},
		{target: "/x/../../admin"},
		{target: "/a/%zz"},
		{target: "/a/%2"},
	}
	// Targets that are no path: nothing to route. (net/http answers
	// OPTIONS * itself, forwarding nothing.)
	for _, r := range [][2]string{{http.MethodGet, "*"}, {http.MethodConnect, "shop.example.com:443"}} {
		if resp := rawDo(t, port, r[0], host, r[1]); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s %s: %d from %q, want 400", r[0], r[1], resp.StatusCode, resp.Header.Get("X-Backend"))
		}
	}
	for _, tc := range cases {
		check := func(t *testing.T, resp *http.Response) {
			t.Helper()
			switch {
			case tc.redirect != "":
				if loc := "https://" + host + tc.redirect; resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != loc {
					t.Errorf("GET %s: %d from %q to %q, want a redirect to %q", tc.target, resp.StatusCode, resp.Header.Get("X-Backend"), resp.Header.Get("Location"), loc)
				}
			case tc.backend != "":
				if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Backend") != tc.backend || resp.Header.Get("X-Seen-Uri") != tc.uri {
					t.Errorf("GET %s: %d from %q, which read %q; want 200 from %q, which reads %q", tc.target, resp.StatusCode, resp.Header.Get("X-Backend"), resp.Header.Get("X-Seen-Uri"), tc.backend, tc.uri)
				}
			default:
				if resp.StatusCode != http.StatusBadRequest {
					t.Errorf("GET %s: %d from %q, which read %q; want 400", tc.target, resp.StatusCode, resp.Header.Get("X-Backend"), resp.Header.Get("X-Seen-Uri"))
				}
			}
		}
		t.Run("HTTP/1.1 "+tc.target, func(t *testing.T) {
			check(t, rawGet(t, port, host, tc.target))
		})
		if _, err := url.ParseRequestURI(tc.target); err != nil {
			// No HTTP/2 case: both HTTP/2 servers reset the stream of a
			// :path that net/url cannot parse before any handler sees it
			// (and net/http's client tries again until its timeout).
			continue
		}
		t.Run("HTTP/2 "+tc.target, func(t *testing.T) {
			tr := &http.Transport{Protocols: new(http.Protocols)}
			tr.Protocols.SetUnencryptedHTTP2(true)
			t.Cleanup(tr.CloseIdleConnections)
			resp, err := h2Get(tr, port, host, tc.target)
			if err != nil {
				t.Fatalf("GET %s: %v", tc.target, err)
			}
			check(t, resp)
		})
	}
}
