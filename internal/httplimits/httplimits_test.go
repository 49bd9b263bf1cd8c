package httplimits_test

import (
	"errors"
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

// A client that stops reading an answer fails the server's write once
// the send timeout passed without progress; the handler ends.
func TestSendTimeout(t *testing.T) {
	ended := make(chan error, 1)
	url := serve(t, httplimits.Limits{SendTimeout: 200 * time.Millisecond}, func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 32<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				ended <- err
				return
			}
		}
	})
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(4 << 10)
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("the handler's write failed with %v, want a timeout", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler still writes to a client that reads nothing, 10 s on (send timeout 200 ms)")
	}
}
