package httplimits_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/httplimits"
)

// serve runs h behind the limits on loopback and returns its URL.
func serve(t *testing.T, l httplimits.Limits, h http.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: l.Handler(h)}
	l.Apply(srv)
	go func() { _ = srv.Serve(l.Listener(ln)) }()
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// The body timeout bounds waits for the body, not the handler's work
// after it: a request whose answer takes longer than the timeout once its
// body is read is not cancelled.
func TestBodyTimeoutEndsWithTheBody(t *testing.T) {
	url := serve(t, httplimits.Limits{BodyReadTimeout: 200 * time.Millisecond}, func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case <-time.After(600 * time.Millisecond):
		case <-r.Context().Done():
			return // cancelled: the client sees no answer
		}
		_, _ = w.Write(body)
	})
	resp, err := http.Post(url, "text/plain", strings.NewReader("payload"))
	if err != nil {
		t.Fatalf("a request answered 600 ms after its body (body timeout 200 ms): %v", err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(got) != "payload" {
		t.Fatalf("%d %q, want 200 payload", resp.StatusCode, got)
	}
}

func TestWithDefaults(t *testing.T) {
	got := httplimits.Limits{IdleTimeout: time.Second}.WithDefaults()
	want := httplimits.Default()
	want.IdleTimeout = time.Second
	if got != want {
		t.Fatalf("WithDefaults() = %+v, want %+v", got, want)
	}
}
