package h2server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/fleetnet/fleetnet/internal/edge/h2server"
	"github.com/fleetnet/fleetnet/internal/testkit"
)

// Clients that stop reading: each test holds the edge's streams the way
// an attacker would, beside a client that keeps being served, and checks
// that the server's send timeout gave back what the attacker held:
// handlers, their upstream connections, goroutines.

// stallTimeout is the tests' send timeout: short, yet long enough that a
// loaded machine (go test -race beside other work) does not keep the
// well-behaved client from reading for as long.
const stallTimeout = time.Second

// endlessUpstream is an endpoint whose answer never ends: each
// connection is sent bytes until the edge closes it. open counts the
// connections open, accepted all those it accepted.
type endlessUpstream struct {
	addr           string
	open, accepted atomic.Int64
}

func startEndlessUpstream(t *testing.T) *endlessUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &endlessUpstream{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.open.Add(1)
			u.accepted.Add(1)
			wg.Go(func() {
				defer u.open.Add(-1)
				defer c.Close()
				chunk := make([]byte, 32<<10)
				for {
					if _, err := c.Write(chunk); err != nil {
						return
					}
				}
			})
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	return u
}

// stallEdge is what the edge does with a stream, reduced: /big is
// forwarded from the endless upstream as the proxy forwards (the
// endpoint's connection is closed when the request's context ends or the
// answer fails), /small and /sized?n= are answered at once, /hold waits
// for release.
type stallEdge struct {
	up *endlessUpstream
	// forwarding counts the handlers forwarding /big.
	forwarding atomic.Int64
	// errs gets the error that ended each /big answer.
	errs    chan error
	release chan struct{}
}

func (e *stallEdge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/small":
		_, _ = io.WriteString(w, "small")
	case "/sized":
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		_, _ = w.Write(make([]byte, n))
	case "/hold":
		<-e.release
	case "/big":
		e.forwarding.Add(1)
		defer e.forwarding.Add(-1)
		up, err := net.Dial("tcp", e.up.addr)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer up.Close()
		stop := context.AfterFunc(r.Context(), func() { _ = up.Close() })
		defer stop()
		w.Header().Set("Content-Type", "application/octet-stream")
		_, err = io.Copy(w, up)
		e.errs <- err
	}
}

func newStallEdge(t *testing.T) (*stallEdge, *http.Client, string) {
	t.Helper()
	e := &stallEdge{up: startEndlessUpstream(t), errs: make(chan error, 1000), release: make(chan struct{})}
	t.Cleanup(func() {
		select {
		case <-e.release:
		default:
			close(e.release)
		}
	})
	s := &h2server.Server{Handler: e, SendTimeout: stallTimeout}
	client, base := serve(t, s)
	return e, client, base
}

// wellBehaved requests answers over its own connection until stop is
// called, which returns how many it got and fails the test for any it
// did not get whole. Each answer fits in the sockets' buffers: the
// server's writes to this client never wait for it to read.
func wellBehaved(t *testing.T, client *http.Client, base string) (stop func() int) {
	t.Helper()
	get := func(path string, want int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r, _ := http.NewRequestWithContext(ctx, "GET", base+path, nil)
		res, err := client.Do(r)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		n, err := io.Copy(io.Discard, res.Body)
		if err == nil && (res.StatusCode != 200 || n != int64(want)) {
			err = fmt.Errorf("%s: %d and %d bytes, want 200 and %d", path, res.StatusCode, n, want)
		}
		return err
	}
	// Its connection is up before the attack.
	if err := get("/small", 5); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	served := make(chan int, 1)
	go func() {
		n := 0
		defer func() { served <- n }()
		for {
			select {
			case <-done:
				return
			default:
			}
			for _, p := range []struct {
				path string
				n    int
			}{{"/small", 5}, {"/sized?n=16384", 16384}} {
				if err := get(p.path, p.n); err != nil {
					t.Errorf("the well-behaved client: %v", err)
					return
				}
				n++
			}
		}
	}()
	var once sync.Once
	stop = func() int {
		n := 0
		once.Do(func() {
			close(done)
			n = <-served
			if n == 0 {
				t.Error("the well-behaved client got no answer during the attack")
			}
		})
		return n
	}
	// Before the server shuts down, should the test end early.
	t.Cleanup(func() { stop() })
	return stop
}

// released checks that the attack left nothing behind: no /big handler,
// no upstream connection, no more goroutines than before it.
func released(t *testing.T, e *stallEdge, goroutines int) {
	t.Helper()
	testkit.Until(t, 15*time.Second, "the stalled streams' handlers returned", func() bool { return e.forwarding.Load() == 0 })
	testkit.Until(t, 15*time.Second, "their upstream connections closed", func() bool { return e.up.open.Load() == 0 })
	testkit.Until(t, 15*time.Second, fmt.Sprintf("goroutines back to %d", goroutines), func() bool { return runtime.NumGoroutine() <= goroutines })
}

var get = []string{":method", "GET", ":scheme", "http", ":authority", "example.com", ":path"}

// TestStalledStreamsAreReset: a client that gives its streams no window
// (SETTINGS_INITIAL_WINDOW_SIZE 0) but keeps another stream busy sees
// each stalled stream reset with CANCEL once the send timeout passed;
// their handlers' writes fail with a timeout, and the connection serves
// on.
func TestStalledStreamsAreReset(t *testing.T) {
	e, client, base := newStallEdge(t)
	stop := wellBehaved(t, client, base)
	c := dialRaw(t, base, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	goroutines := runtime.NumGoroutine()

	// One stream whose handler waits for something else: not every
	// stream of the connection waits for window.
	start := time.Now()
	c.headers(1, true, append(get, "/hold")...)
	const stalled = 249
	for i := range stalled {
		c.headers(uint32(3+2*i), true, append(get, "/big")...)
	}
	reset := map[uint32]bool{}
	for len(reset) < stalled {
		f, err := c.fr.ReadFrame()
		if err != nil {
			t.Fatalf("after %d streams reset: %v", len(reset), err)
		}
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			if f.ErrCode != http2.ErrCodeCancel || f.StreamID == 1 {
				t.Fatalf("stream %d reset with %v, want the stalled streams with CANCEL", f.StreamID, f.ErrCode)
			}
			reset[f.StreamID] = true
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v: a connection with a stream not waiting for window was closed", f.ErrCode)
		}
	}
	if waited := time.Since(start); waited < stallTimeout {
		t.Errorf("streams reset after %v, before the send timeout", waited)
	}
	if n := e.up.accepted.Load(); n != stalled {
		t.Errorf("%d upstream connections, want one per stalled stream", n)
	}
	for range stalled {
		if err := <-e.errs; !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("a stalled stream's handler's write: %v, want a timeout", err)
		}
	}
	c.sync() // the connection serves on
	close(e.release)
	c.next(func(f http2.Frame) bool {
		h, ok := f.(*http2.MetaHeadersFrame)
		return ok && h.StreamID == 1 && h.StreamEnded()
	})
	if n := stop(); n > 0 {
		t.Logf("the well-behaved client got %d answers during the attack", n)
	}
	released(t, e, goroutines)
}

// TestStalledConnectionIsClosed: a client that opens 250 streams to an
// endless answer with SETTINGS_INITIAL_WINDOW_SIZE 0 and then sends
// nothing gets GOAWAY ENHANCE_YOUR_CALM and its connection closed; what
// it held is given back.
func TestStalledConnectionIsClosed(t *testing.T) {
	e, client, base := newStallEdge(t)
	stop := wellBehaved(t, client, base)
	goroutines := runtime.NumGoroutine()
	c := dialRaw(t, base, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	const streams = 250
	for i := range streams {
		c.headers(uint32(1+2*i), true, append(get, "/big")...)
	}
	var goAway *http2.GoAwayFrame
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			if goAway == nil {
				t.Fatalf("the connection ended without GOAWAY: %v", err)
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("the connection stayed open after its GOAWAY")
			}
			break // closed
		}
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			goAway = f
			if f.ErrCode != http2.ErrCodeEnhanceYourCalm || f.LastStreamID != 2*streams-1 {
				t.Fatalf("GOAWAY %v, last stream %d; want ENHANCE_YOUR_CALM, %d", f.ErrCode, f.LastStreamID, 2*streams-1)
			}
		case *http2.RSTStreamFrame:
			// A stream whose time ran out before the client's silence
			// was long enough to show is reset on its own.
			if f.ErrCode != http2.ErrCodeCancel {
				t.Fatalf("stream %d reset with %v", f.StreamID, f.ErrCode)
			}
		}
	}
	stop()
	released(t, e, goroutines)
}

// TestUnreadSocketEndsConnection: a client that grants every window but
// does not read its socket blocks the server's writes; the write that
// makes no progress for the send timeout ends the connection.
func TestUnreadSocketEndsConnection(t *testing.T) {
	e, client, base := newStallEdge(t)
	stop := wellBehaved(t, client, base)
	goroutines := runtime.NumGoroutine()
	c := dialRaw(t, base, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
	_ = c.nc.(*net.TCPConn).SetReadBuffer(4 << 10)
	if err := c.fr.WriteWindowUpdate(0, 1<<31-1-uint32(c.window)); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		c.headers(uint32(1+2*i), true, append(get, "/big")...)
	}
	testkit.Until(t, 15*time.Second, "every /big handler forwarded", func() bool { return e.up.accepted.Load() == 8 })
	// The client reads nothing more.
	released(t, e, goroutines)
	stop()
	for range 8 {
		if err := <-e.errs; err == nil {
			t.Error("an endless answer ended without an error")
		}
	}
}
