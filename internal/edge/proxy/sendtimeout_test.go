package proxy_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/edge/proxy"
	"github.com/fleetnet/fleetnet/internal/testkit"
)

// endless is a backend whose /big answer never ends (the rest is answered
// "small"); relaying counts the /big answers it is sending, each over a
// connection of the edge's.
func endless(t *testing.T) (ep edgev1.Endpoint, relaying *atomic.Int64) {
	t.Helper()
	relaying = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/big" {
			fmt.Fprint(w, "small")
			return
		}
		relaying.Add(1)
		defer relaying.Add(-1)
		chunk := make([]byte, 32<<10)
		for {
			// Fails once the edge closed the connection.
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return endpointOf(srv), relaying
}

// A client that asks for an endless answer and never reads it blocks the
// edge's write to it: the send timeout ends that write and the connection,
// and the endpoint's connection is closed. Another client is served
// throughout.
func TestClientThatStopsReading(t *testing.T) {
	port := freePort(t)
	ep, upstream := endless(t)
	startWith(t, proxy.Options{Clients: proxy.ClientLimits{SendTimeout: time.Second}},
		oneListener(port, edgev1.ProtocolHTTP, everything(backend("web", 1, inCluster("east", 1, ep)))), nil)
	if resp := get(t, port, "x", "/small", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /small: %d", resp.StatusCode)
	}
	goroutines := runtime.NumGoroutine()

	done := make(chan struct{})
	var wg sync.WaitGroup
	served := 0
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/small", port))
			if err != nil {
				t.Errorf("the well-behaved client: %v", err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			served++
		}
	})

	const attackers = 20
	for range attackers {
		c := dial(t, port)
		_ = c.(*net.TCPConn).SetReadBuffer(4 << 10)
		fmt.Fprint(c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	testkit.Until(t, 10*time.Second, "every attacker's answer started", func() bool { return upstream.Load() == attackers })
	testkit.Until(t, 15*time.Second, "the attackers' upstream connections closed", func() bool { return upstream.Load() == 0 })
	close(done)
	wg.Wait()
	if served == 0 {
		t.Error("the well-behaved client was not served during the attack")
	}
	client.CloseIdleConnections()
	testkit.Until(t, 15*time.Second, fmt.Sprintf("goroutines back to %d", goroutines), func() bool { return runtime.NumGoroutine() <= goroutines })
}
