package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/discovery/app"
	"github.com/fleetnet/fleetnet/internal/discovery/discoverytest"
	"github.com/fleetnet/fleetnet/internal/testkit"
)

// The API's clients are bounded as the edge's are (internal/httplimits):
// connections that drip a request head, or a body, are closed when their
// timeout ends, while other clients are served.
func TestSlowClients(t *testing.T) {
	o := defaults()
	o.TokensFile = filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(o.TokensFile, []byte(discoverytest.ReadToken+",routers,read\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o.Listen, o.MetricsAddr, o.HealthAddr = testkit.FreeAddr(t), "", ""
	o.Clients.ReadHeaderTimeout, o.Clients.BodyReadTimeout = 500*time.Millisecond, 500*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	var runErr error
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		runErr = app.Run(ctx, o, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	t.Cleanup(func() { cancel(); <-finished })
	testkit.Eventually(t, 10*time.Second, "the API to listen", func(context.Context) error {
		select {
		case <-finished:
			t.Fatalf("discovery ended: %v", runErr)
		default:
		}
		c, err := net.Dial("tcp", o.Listen)
		if err == nil {
			c.Close()
		}
		return err
	})

	tests := []struct {
		name string
		// sent is what each connection sends at once, then drip byte by
		// byte (never the whole).
		sent, drip string
	}{
		{"head", "", "GET /v1/pools HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
		{"body", "POST /v1/registrations HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n", "{\"name\":\"" + string(make([]byte, 100))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var wg sync.WaitGroup
			open := make(chan string, 50)
			for i := range 50 {
				c, err := net.Dial("tcp", o.Listen)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				wg.Add(1)
				go func() {
					defer wg.Done()
					fmt.Fprint(c, tt.sent)
					start := time.Now()
					for j := 0; j < len(tt.drip); j++ {
						if _, err := c.Write([]byte{tt.drip[j]}); err != nil {
							return // closed by the server
						}
						if time.Since(start) > 5*time.Second {
							open <- fmt.Sprintf("connection %d", i)
							return
						}
						time.Sleep(100 * time.Millisecond)
					}
					// Whatever the server answered, the connection ends.
					_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
					if _, err := io.Copy(io.Discard, c); err != nil {
						open <- fmt.Sprintf("connection %d: %v", i, err)
					}
				}()
			}
			for range 10 {
				req, _ := http.NewRequest(http.MethodGet, "http://"+o.Listen+"/v1/pools", nil)
				req.Header.Set("Authorization", "Bearer "+discoverytest.ReadToken)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("a request while slow clients drip: %v", err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("a request while slow clients drip: %d", resp.StatusCode)
				}
			}
			wg.Wait()
			close(open)
			for s := range open {
				t.Errorf("still open 5 s after it started dripping (timeout 500 ms): %s", s)
			}
		})
	}
}

// Negative limits are refused, naming the flag.
func TestValidateClientLimits(t *testing.T) {
	o := defaults()
	o.Clients.IdleTimeout = -time.Second
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--client-idle-timeout=-1s") {
		t.Fatalf("Validate() = %v, want the flag named", err)
	}
}
