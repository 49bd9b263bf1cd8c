package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/edge/proxy"
	"github.com/fleetnet/fleetnet/internal/testkit"
)

// dial opens a raw connection to the edge's port.
func dial(t *testing.T, port int32) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedWithin reports whether the edge closes c within d (the read ends
// with an error before the deadline).
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return true
}

// Slowloris: many connections dripping a request head byte by byte. The
// edge keeps answering other clients, and closes each dripping connection
// when its header timeout ends, however often it sends a byte.
func TestSlowClients(t *testing.T) {
	port := freePort(t)
	limits := proxy.ClientLimits{ReadHeaderTimeout: 600 * time.Millisecond, IdleTimeout: 600 * time.Millisecond}
	startWith(t, proxy.Options{Clients: limits}, oneListener(port, edgev1.ProtocolHTTP, everything(backend("web", 1, inCluster("east", 1, echo(t, "east"))))), nil)

	const drippers = 100
	head := "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("a", 200) + "\r\n\r\n"
	var wg sync.WaitGroup
	var closedInTime, stillOpen atomic.Int32
	start := time.Now()
	for range drippers {
		c := dial(t, port)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Never more than the head minus its end: the request never
			// completes.
			for i := 0; i < len(head)-2; i++ {
				if _, err := c.Write([]byte{head[i]}); err != nil {
					break
				}
				time.Sleep(50 * time.Millisecond)
				if time.Since(start) > 5*time.Second {
					stillOpen.Add(1)
					return
				}
			}
			if closedWithin(c, 5*time.Second) {
				closedInTime.Add(1)
			}
		}()
	}
	// Meanwhile, others are served.
	for i := range 20 {
		resp := get(t, port, "x", "/", nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d while slow clients drip: %d", i, resp.StatusCode)
		}
	}
	wg.Wait()
	if n := stillOpen.Load(); n > 0 {
		t.Fatalf("%d of %d dripping connections were still open 5 s after they started (header timeout 600 ms)", n, drippers)
	}
	t.Logf("%d dripping connections closed by the edge", closedInTime.Load())

	// A keep-alive connection without a next request is closed after the
	// idle timeout.
	c := dial(t, port)
	fmt.Fprint(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if !closedWithin(c, 3*time.Second) {
		t.Fatal("an idle keep-alive connection was not closed within 3 s (idle timeout 600 ms)")
	}
}

// A request head larger than MaxHeaderBytes is refused with 431.
func TestHeadTooLarge(t *testing.T) {
	port := freePort(t)
	startWith(t, proxy.Options{Clients: proxy.ClientLimits{MaxHeaderBytes: 4 << 10}},
		oneListener(port, edgev1.ProtocolHTTP, everything(backend("web", 1, inCluster("east", 1, echo(t, "east"))))), nil)
	c := dial(t, port)
	// net/http allows 4 KiB over MaxHeaderBytes.
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("b", 16<<10))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("a 16 KiB head with MaxHeaderBytes 4 KiB: %d, want 431", resp.StatusCode)
	}
}

// MaxConnections caps a port's connections: one more waits until another
// ends.
func TestConnectionCap(t *testing.T) {
	port := freePort(t)
	startWith(t, proxy.Options{Clients: proxy.ClientLimits{MaxConnections: 2}},
		oneListener(port, edgev1.ProtocolHTTP, everything(backend("web", 1, inCluster("east", 1, echo(t, "east"))))), nil)
	held := []net.Conn{dial(t, port), dial(t, port)}
	for _, c := range held {
		fmt.Fprint(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		if _, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil {
			t.Fatal(err)
		}
	}
	third := dial(t, port)
	fmt.Fprint(third, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(third)
	_ = third.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := br.Peek(1); err == nil {
		t.Fatal("a third connection was served while two were open (MaxConnections 2)")
	}
	held[0].Close()
	_ = third.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the third connection after one of two closed: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("third connection: %d", resp.StatusCode)
	}
}

// closingBackend answers each request and then closes its connection,
// without saying so (no Connection: close): a kept-alive connection the
// edge pooled is dead when it is next used.
func closingBackend(t *testing.T) (edgev1.Endpoint, *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var served atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					c.Close()
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				c.Close()
				served.Add(1) // counted once closed
			}()
		}
	}()
	host, p, _ := net.SplitHostPort(l.Addr().String())
	n, _ := strconv.Atoi(p)
	return edgev1.Endpoint{Address: host, Port: int32(n), Ready: true, Serving: true}, &served
}

// A pooled connection the endpoint closed is never the end of a request:
// one that can be sent again is (GET), one that cannot (POST with a body)
// is sent on a live connection in the first place.
func TestClosedPooledConnections(t *testing.T) {
	ep, served := closingBackend(t)
	port := freePort(t)
	pol := edgev1.DefaultBackendPolicy()
	pol.Retry.Attempts = 0 // the policy's retries are not what saves these
	pol.HealthCheck.IntervalMillis = 300_000
	startWith(t, proxy.Options{}, oneListener(port, edgev1.ProtocolHTTP, everything(withPolicy(backend("web", 1, inCluster("east", 1, ep)), pol))), nil)
	for i := range 10 {
		method := http.MethodGet
		var body io.Reader
		if i%2 == 1 {
			method, body = http.MethodPost, strings.NewReader("payload")
		}
		req, err := http.NewRequest(method, fmt.Sprintf("http://127.0.0.1:%d/", port), body)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "x"
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %d: %d, want 200", method, i, resp.StatusCode)
		}
		// The next request starts once the backend closed this one's
		// connection.
		testkit.Eventually(t, 5*time.Second, "the backend to have closed", func(context.Context) error {
			if served.Load() < int32(i+1) {
				return fmt.Errorf("%d answered", served.Load())
			}
			return nil
		})
	}
}
