package proxy_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/edge/edgetest"
	"github.com/fleetnet/fleetnet/internal/testkit"

	"github.com/fleetnet/fleetnet/internal/edge/proxy"

	"github.com/prometheus/client_golang/prometheus"
)

// server is a backend on loopback whose answers a test sets: status for
// every path but /healthz, health for /healthz. It counts both.
type server struct {
	status, health atomic.Int32
	hits, checks   atomic.Int64
	checkHost      atomic.Pointer[string]
}

func newServer(t *testing.T, name string) (*server, edgev1.Endpoint) {
	t.Helper()
	s := &server{}
	s.status.Store(http.StatusOK)
	s.health.Store(http.StatusOK)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			s.checks.Add(1)
			host := r.Host
			s.checkHost.Store(&host)
			w.WriteHeader(int(s.health.Load()))
			return
		}
		s.hits.Add(1)
		w.Header().Set("X-Backend", name)
		w.WriteHeader(int(s.status.Load()))
		fmt.Fprint(w, name)
	}))
	t.Cleanup(srv.Close)
	return s, endpointOf(srv)
}

func inRegion(c edgev1.ClusterEndpoints, region string) edgev1.ClusterEndpoints {
	c.Region = region
	return c
}

func everything(backends ...edgev1.Backend) edgev1.VirtualHost {
	return edgev1.VirtualHost{Hostname: "*", Routes: []edgev1.Route{{RouteName: "r", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/"}, Backends: backends}}}
}

// answers sends n GETs to path and counts them by answering backend;
// every answer must be 200.
func answers(t *testing.T, port int32, path string, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		resp := get(t, port, "x", path, nil)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d from %q", path, resp.StatusCode, resp.Header.Get("X-Backend"))
		}
		got[resp.Header.Get("X-Backend")]++
	}
	return got
}

// A backend whose HTTP check fails is taken out of that backend's traffic
// while its TCP port still accepts, and back in once the check passes; a
// backend that checks the same endpoint by TCP keeps using it.
func TestHTTPHealthCheck(t *testing.T) {
	east, eastEP := newServer(t, "east")
	_, westEP := newServer(t, "west")
	httpCheck := fastChecks()
	httpCheck.HealthCheck.Type, httpCheck.HealthCheck.Path, httpCheck.HealthCheck.Hostname = edgev1.HealthCheckHTTP, "/healthz", "health.example"
	reg := prometheus.NewRegistry()
	port := freePort(t)
	startWith(t, proxy.Options{Registerer: reg}, oneListener(port, edgev1.ProtocolHTTP, edgev1.VirtualHost{Hostname: "*", Routes: []edgev1.Route{
		{RouteName: "http", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/http"}, Backends: []edgev1.Backend{
			withPolicy(backend("web", 1, inCluster("east", 1, eastEP), inCluster("west", 1, westEP)), httpCheck),
		}},
		{RouteName: "tcp", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/tcp"}, Backends: []edgev1.Backend{
			withPolicy(backend("web-tcp", 1, inCluster("east", 1, eastEP), inCluster("west", 1, westEP)), fastChecks()),
		}},
	}}), nil)
	eastOf := func(health string) float64 {
		return edgetest.Metric(t, reg, "fleetnet_edge_backend_endpoints", "backend", "ServiceImport/demo/web", "cluster", "east", "health", health)
	}

	testkit.Eventually(t, 10*time.Second, "a check with Host health.example", func(context.Context) error {
		if h := east.checkHost.Load(); h == nil || *h != "health.example" {
			return fmt.Errorf("no check with that Host yet")
		}
		return nil
	})
	east.health.Store(http.StatusServiceUnavailable)
	testkit.Eventually(t, 10*time.Second, "east ejected", func(context.Context) error {
		if got := eastOf("ejected"); got != 1 {
			return fmt.Errorf("%v of east's endpoints ejected", got)
		}
		return nil
	})
	if got := answers(t, port, "/http", 50); got["west"] != 50 {
		t.Errorf("with east's check failing: %v, want every answer from west", got)
	}
	if got := answers(t, port, "/tcp", 50); got["east"] == 0 {
		t.Errorf("by the TCP check of the same endpoint: %v, want east too", got)
	}

	east.health.Store(http.StatusOK)
	testkit.Eventually(t, 10*time.Second, "east healthy again", func(context.Context) error {
		if got := eastOf("healthy"); got != 1 {
			return fmt.Errorf("%v of east's endpoints healthy", got)
		}
		return nil
	})
	if got := answers(t, port, "/http", 50); got["east"] == 0 {
		t.Errorf("with east's check passing again: %v, want east too", got)
	}
}

// Consecutive5xx answers of 5xx in a row eject an endpoint for
// EjectionMillis, however many active checks pass meanwhile; 0 never
// ejects.
func TestPassive5xxEjection(t *testing.T) {
	tests := []struct {
		name        string
		consecutive int32
		ejected     bool
	}{
		{"3 in a row eject for the ejection time", 3, true},
		{"0 never ejects", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			east, eastEP := newServer(t, "east")
			east.status.Store(http.StatusInternalServerError)
			_, westEP := newServer(t, "west")
			pol := fastChecks()
			pol.HealthCheck.Type, pol.HealthCheck.Path = edgev1.HealthCheckHTTP, "/healthz"
			pol.Passive = edgev1.PassiveHealthCheck{Consecutive5xx: tt.consecutive, EjectionMillis: 60_000}
			pol.Retry = edgev1.Retry{}
			var now atomic.Int64
			now.Store(time.Now().UnixNano())
			port := freePort(t)
			startWith(t, proxy.Options{}, oneListener(port, edgev1.ProtocolHTTP, everything(
				withPolicy(backend("web", 1, inCluster("east", 1, eastEP), inCluster("west", 1, westEP)), pol),
			)), nil, func(p *proxy.Proxy) { proxy.SetNow(p, func() time.Time { return time.Unix(0, now.Load()) }) })

			send := func() string {
				resp := get(t, port, "x", "/", nil)
				from := resp.Header.Get("X-Backend")
				if want := map[string]int{"east": 500, "west": 200}[from]; resp.StatusCode != want {
					t.Fatalf("%d from %q", resp.StatusCode, from)
				}
				return from
			}
			for east.hits.Load() < 3 {
				send()
			}
			if !tt.ejected {
				for range 50 {
					send()
				}
				if east.hits.Load() == 3 {
					t.Errorf("no request went to east after its third 500")
				}
				return
			}
			checks := east.checks.Load()
			testkit.Eventually(t, 10*time.Second, "three checks of east pass while it is ejected", func(context.Context) error {
				if from := send(); from != "west" {
					t.Fatalf("a request went to east while ejected")
				}
				if n := east.checks.Load() - checks; n < 3 {
					return fmt.Errorf("%d checks", n)
				}
				return nil
			})
			now.Add(int64(61 * time.Second))
			testkit.Eventually(t, 10*time.Second, "east back once its ejection time has passed", func(context.Context) error {
				if send() != "east" {
					return fmt.Errorf("no request to east")
				}
				return nil
			})
		})
	}
}

// Idempotent requests are sent again by the backend's Retry policy, each
// time to a cluster not tried yet; others are not.
func TestRetryPolicy(t *testing.T) {
	tests := []struct {
		name     string
		method   string
		attempts int32
		codes    []int32
		statuses []int32 // of each cluster
		// wantCode is every answer's status, 0 for any; wantHits the
		// attempts per request, 0 for any.
		wantCode, wantHits int
	}{
		{"a GET past two 503s", http.MethodGet, 2, []int32{503}, []int32{503, 503, 200}, 200, 0},
		{"a POST is not retried", http.MethodPost, 2, []int32{503}, []int32{503, 503, 200}, 0, 1},
		{"no attempts", http.MethodGet, 0, []int32{503}, []int32{503, 503, 200}, 0, 1},
		{"a code not listed", http.MethodGet, 2, []int32{502}, []int32{503, 503, 200}, 0, 1},
		{"the last attempt's answer as it is", http.MethodGet, 1, []int32{503}, []int32{503, 503}, 503, 2},
	}
	const n = 30
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var servers []*server
			var clusters []edgev1.ClusterEndpoints
			for i, status := range tt.statuses {
				name := fmt.Sprintf("c%d", i)
				s, ep := newServer(t, name)
				s.status.Store(status)
				servers = append(servers, s)
				clusters = append(clusters, inCluster(name, 1, ep))
			}
			pol := edgev1.DefaultBackendPolicy()
			pol.Retry = edgev1.Retry{Attempts: tt.attempts, Codes: tt.codes}
			pol.Passive.Consecutive5xx = 0 // no ejection to change the picks
			reg := prometheus.NewRegistry()
			port := freePort(t)
			startWith(t, proxy.Options{Registerer: reg}, oneListener(port, edgev1.ProtocolHTTP, everything(withPolicy(backend("web", 1, clusters...), pol))), nil)

			for range n {
				resp := do(t, tt.method, port, "x", "/", nil)
				if tt.wantCode != 0 && resp.StatusCode != tt.wantCode {
					t.Errorf("%s: %d from %q, want %d", tt.method, resp.StatusCode, resp.Header.Get("X-Backend"), tt.wantCode)
				}
			}
			var hits int64
			for _, s := range servers {
				hits += s.hits.Load()
			}
			if tt.wantHits != 0 && hits != int64(tt.wantHits*n) {
				t.Errorf("%d attempts for %d requests, want %d", hits, n, tt.wantHits*n)
			}
			if got := edgetest.Metric(t, reg, "fleetnet_edge_retries_total", "backend", "ServiceImport/demo/web"); got != float64(hits-n) {
				t.Errorf("retries_total %v, want %d (attempts past the first)", got, hits-n)
			}
		})
	}
}

// With LocalFirst, an edge sends everything to its region's cluster while
// it is healthy, to the others while it is not, and back when it
// recovers, with no request failed.
func TestLocalFirst(t *testing.T) {
	eu := newFlaky(t, "eu")
	pol := fastChecks()
	pol.Locality = edgev1.LocalityLocalFirst
	port := freePort(t)
	startWith(t, proxy.Options{Region: "eu"}, oneListener(port, edgev1.ProtocolHTTP, everything(withPolicy(backend("web", 1,
		inRegion(inCluster("eu", 1, eu.endpoint()), "eu"),
		inRegion(inCluster("us", 1, echo(t, "us")), "us"),
		inRegion(inCluster("ap", 1, echo(t, "ap")), "ap"),
	), pol))), nil)

	if got := answers(t, port, "/", 50); got["eu"] != 50 {
		t.Errorf("eu healthy: %v, want everything to eu", got)
	}
	eu.stop()
	testkit.Eventually(t, 10*time.Second, "everything to the other regions", func(context.Context) error {
		if got := answers(t, port, "/", 20); got["eu"] != 0 {
			return fmt.Errorf("%v", got)
		}
		return nil
	})
	if got := answers(t, port, "/", 50); got["us"] == 0 || got["ap"] == 0 {
		t.Errorf("eu stopped: %v, want both other regions by weight", got)
	}
	eu.start(t)
	testkit.Eventually(t, 10*time.Second, "eu in traffic again", func(context.Context) error {
		if got := answers(t, port, "/", 1); got["eu"] == 0 {
			return fmt.Errorf("%v", got)
		}
		return nil
	})
	if got := answers(t, port, "/", 50); got["eu"] != 50 {
		t.Errorf("eu back: %v, want everything to eu", got)
	}
}

// With a failover order, traffic leaves the edge's region for the order's
// steps in turn: ap before us, though both serve.
func TestLocalFirstFailoverOrder(t *testing.T) {
	eu, ap := newFlaky(t, "eu"), newFlaky(t, "ap")
	pol := fastChecks()
	pol.Locality = edgev1.LocalityLocalFirst
	pol.Failover = []edgev1.FailoverStep{{Region: "ap"}, {Cluster: "us"}}
	port := freePort(t)
	startWith(t, proxy.Options{Region: "eu"}, oneListener(port, edgev1.ProtocolHTTP, everything(withPolicy(backend("web", 1,
		inRegion(inCluster("eu", 1, eu.endpoint()), "eu"),
		inRegion(inCluster("us", 1, echo(t, "us")), "us"),
		inRegion(inCluster("ap", 1, ap.endpoint()), "ap"),
	), pol))), nil)

	if got := answers(t, port, "/", 20); got["eu"] != 20 {
		t.Errorf("eu healthy: %v, want everything to eu", got)
	}
	eu.stop()
	testkit.Eventually(t, 10*time.Second, "everything to ap, the order's first step", func(context.Context) error {
		if got := answers(t, port, "/", 20); got["ap"] != 20 {
			return fmt.Errorf("%v", got)
		}
		return nil
	})
	ap.stop()
	testkit.Eventually(t, 10*time.Second, "everything to us, the next step", func(context.Context) error {
		if got := answers(t, port, "/", 20); got["us"] != 20 {
			return fmt.Errorf("%v", got)
		}
		return nil
	})
	eu.start(t)
	testkit.Eventually(t, 10*time.Second, "eu in traffic again", func(context.Context) error {
		if got := answers(t, port, "/", 20); got["eu"] != 20 {
			return fmt.Errorf("%v", got)
		}
		return nil
	})
}

// The dial to an endpoint is bounded by the connect timeout of the
// backend's policy: a short one lets a request reach another cluster
// after an endpoint that drops connections; a long one holds it until the
// route's timeout ends it (so the dial did not use a fixed default).
func TestConnectTimeoutFromPolicy(t *testing.T) {
	tests := []struct {
		name          string
		connectMillis int64
		requestMillis int64
		retried       bool
	}{
		{"200 ms: retried on another cluster", 200, 0, true},
		{"60 s: the route's 3 s timeout ends the request first", 60_000, 3_000, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hole := edgetest.Blackhole(t)
			pol := edgev1.DefaultBackendPolicy()
			pol.ConnectTimeoutMillis = tt.connectMillis
			// No active check within the test: only the dial matters.
			pol.HealthCheck.IntervalMillis, pol.HealthCheck.UnhealthyThreshold = 300_000, 10
			reg := prometheus.NewRegistry()
			port := freePort(t)
			vh := everything(withPolicy(backend("web", 1, inCluster("east", 1000, hole), inCluster("west", 1, echo(t, "west"))), pol))
			vh.Routes[0].Timeouts.RequestMillis = tt.requestMillis
			startWith(t, proxy.Options{Registerer: reg}, oneListener(port, edgev1.ProtocolHTTP, vh), nil)
			retries := func() float64 {
				return edgetest.Metric(t, reg, "fleetnet_edge_retries_total", "backend", "ServiceImport/demo/web")
			}

			// Nearly every request goes to east first; one that goes to
			// west at once says nothing, and the next is sent.
			for range 20 {
				resp := get(t, port, "x", "/", nil)
				if resp.StatusCode == http.StatusOK && retries() == 0 {
					continue
				}
				if tt.retried {
					if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Backend") != "west" || retries() != 1 {
						t.Fatalf("%d from %q after %v retries, want 200 from west after 1", resp.StatusCode, resp.Header.Get("X-Backend"), retries())
					}
					if got := edgetest.Metric(t, reg, "fleetnet_edge_backend_endpoints", "cluster", "east", "health", "ejected"); got != 1 {
						t.Errorf("%v of east's endpoints ejected after a failed connection, want 1", got)
					}
				} else if resp.StatusCode != http.StatusGatewayTimeout || retries() != 0 {
					t.Fatalf("%d after %v retries, want 504 without a retry", resp.StatusCode, retries())
				}
				return
			}
			t.Fatal("no request went to east")
		})
	}
}

// Clients may speak HTTP/2: negotiated by ALPN on HTTPS listeners, with
// prior knowledge (h2c) on HTTP ones.
func TestHTTP2FromClients(t *testing.T) {
	cert, pool := servingCert(t, "shop.example.com")

	tests := []struct {
		name string
		tls  bool
	}{
		{"over TLS", true},
		{"h2c", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			port := freePort(t)
			vh := everything(backend("web", 1, inCluster("east", 1, echo(t, "web"))))
			tr := &http.Transport{Protocols: new(http.Protocols)}
			url := fmt.Sprintf("http://127.0.0.1:%d/", port)
			if tt.tls {
				m := oneListener(port, edgev1.ProtocolHTTPS, vh)
				m.Gateways[0].Listeners[0].Certificates = []edgev1.ListenerCertificate{{Name: "shop", Digest: "d"}}
				start(t, m, map[string]*tls.Certificate{"d": &cert})
				tr.Protocols.SetHTTP2(true)
				tr.TLSClientConfig = &tls.Config{RootCAs: pool, ServerName: "shop.example.com"}
				url = fmt.Sprintf("https://127.0.0.1:%d/", port)
			} else {
				start(t, oneListener(port, edgev1.ProtocolHTTP, vh), nil)
				tr.Protocols.SetUnencryptedHTTP2(true)
			}
			t.Cleanup(tr.CloseIdleConnections)
			resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get(url)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusOK || resp.Header.Get("X-Backend") != "web" {
				t.Errorf("%s %d from %q, want HTTP/2 200 from web", resp.Proto, resp.StatusCode, resp.Header.Get("X-Backend"))
			}
		})
	}
}
