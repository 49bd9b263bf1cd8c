package h2server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/edge/h2server"
)

// serve runs s on a loopback listener, each connection through
// ServeConn, and returns an HTTP/2 (prior knowledge) client of it.
func serve(t *testing.T, s *h2server.Server) (*http.Client, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { s.ServeConn(context.Background(), c, nil) })
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		wg.Wait()
	})
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}, "http://" + ln.Addr().String()
}

func TestAnswers(t *testing.T) {
	s := &h2server.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/html":
			_, _ = io.WriteString(w, "<html><body>hi</body></html>")
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		case "/echo":
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("X-Proto", r.Proto)
			w.Header().Set("X-Host", r.Host)
			w.Header().Set("X-Cookie", r.Header.Get("Cookie"))
			w.Header().Set("X-Length", fmt.Sprint(r.ContentLength))
			_, _ = io.Copy(w, r.Body)
		case "/trailers":
			w.Header().Set("Trailer", "X-Sum")
			// Read before the trailers arrive: they reach r.Trailer on
			// this goroutine, at the body's end (go test -race).
			if r.Trailer.Get("X-In") != "" {
				panic("trailers before the body's end")
			}
			_, _ = io.Copy(io.Discard, r.Body)
			_, _ = io.WriteString(w, "body")
			w.Header().Set("X-Sum", r.Trailer.Get("X-In"))
			w.Header().Set(http.TrailerPrefix+"X-Late", "late")
		case "/flushonly":
			w.(http.Flusher).Flush()
		case "/flush":
			_, _ = io.WriteString(w, "first")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}
	})}
	client, base := serve(t, s)
	big := make([]byte, 3<<20)
	_, _ = rand.Read(big)
	cases := []struct {
		name    string
		req     func() *http.Request
		status  int
		body    []byte
		headers map[string]string
	}{{
		name:    "sniffed type and length",
		req:     func() *http.Request { r, _ := http.NewRequest("GET", base+"/html", nil); return r },
		status:  200,
		body:    []byte("<html><body>hi</body></html>"),
		headers: map[string]string{"Content-Type": "text/html; charset=utf-8", "Content-Length": "28"},
	}, {
		name:   "flushed, then nothing",
		req:    func() *http.Request { r, _ := http.NewRequest("GET", base+"/flushonly", nil); return r },
		status: 200,
	}, {
		name:   "no content",
		req:    func() *http.Request { r, _ := http.NewRequest("GET", base+"/empty", nil); return r },
		status: 204,
	}, {
		name: "large body both ways (flow control)",
		req: func() *http.Request {
			r, _ := http.NewRequest("POST", base+"/echo", bytes.NewReader(big))
			r.Header.Add("Cookie", "a=1")
			r.Header.Add("Cookie", "b=2")
			return r
		},
		status:  200,
		body:    big,
		headers: map[string]string{"X-Proto": "HTTP/2.0", "X-Cookie": "a=1; b=2", "X-Length": fmt.Sprint(len(big))},
	}, {
		name: "body of unknown length",
		req: func() *http.Request {
			r, _ := http.NewRequest("POST", base+"/echo", io.NopCloser(strings.NewReader("streamed")))
			return r
		},
		status:  200,
		body:    []byte("streamed"),
		headers: map[string]string{"X-Length": "-1"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := client.Do(tc.req())
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			body, err := io.ReadAll(res.Body)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != tc.status || !bytes.Equal(body, tc.body) {
				t.Errorf("got %d and %d bytes, want %d and %d bytes", res.StatusCode, len(body), tc.status, len(tc.body))
			}
			for k, v := range tc.headers {
				if got := res.Header.Get(k); got != v {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}
			if res.Header.Get("Date") == "" {
				t.Error("no Date")
			}
		})
	}

	t.Run("trailers both ways", func(t *testing.T) {
		pr, pw := io.Pipe()
		r, _ := http.NewRequest("POST", base+"/trailers", pr)
		r.Trailer = http.Header{"X-In": nil}
		go func() {
			_, _ = io.WriteString(pw, "data")
			r.Trailer.Set("X-In", "42")
			_ = pw.Close()
		}()
		res, err := client.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if string(body) != "body" || res.Trailer.Get("X-Sum") != "42" || res.Trailer.Get("X-Late") != "late" {
			t.Errorf("body %q, trailers %v", body, res.Trailer)
		}
	})

	t.Run("flush, then the client cancels", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		r, _ := http.NewRequestWithContext(ctx, "GET", base+"/flush", nil)
		res, err := client.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 5)
		if _, err := io.ReadFull(res.Body, buf); err != nil || string(buf) != "first" {
			t.Fatalf("read %q: %v", buf, err)
		}
		// The handler returns only when its request is canceled.
		cancel()
		_ = res.Body.Close()
	})
}

func TestManyStreams(t *testing.T) {
	// Handlers at once, by connection (the client opens another
	// connection when one's streams are all in use).
	var mu sync.Mutex
	inFlight := map[string]int{}
	most := 0
	s := &h2server.Server{MaxConcurrentStreams: 20, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inFlight[r.RemoteAddr]++
		most = max(most, inFlight[r.RemoteAddr])
		mu.Unlock()
		defer func() {
			mu.Lock()
			inFlight[r.RemoteAddr]--
			mu.Unlock()
		}()
		time.Sleep(time.Millisecond)
		_, _ = io.WriteString(w, r.URL.Path)
	})}
	client, base := serve(t, s)
	var wg sync.WaitGroup
	errs := make(chan error, 500)
	for i := range 500 {
		wg.Go(func() {
			res, err := client.Get(fmt.Sprintf("%s/%d", base, i))
			if err != nil {
				errs <- err
				return
			}
			body, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			if string(body) != fmt.Sprintf("/%d", i) {
				errs <- fmt.Errorf("request %d answered %q", i, body)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if most > 20 {
		t.Errorf("%d handlers of a connection at once, over the 20 advertised", most)
	}
}

func TestPanicResetsOnlyItsStream(t *testing.T) {
	s := &h2server.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			_, _ = io.WriteString(w, "partial")
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}
		_, _ = io.WriteString(w, "ok")
	})}
	client, base := serve(t, s)
	res, err := client.Get(base + "/panic")
	if err == nil {
		_, err = io.ReadAll(res.Body)
		_ = res.Body.Close()
	}
	if err == nil {
		t.Fatal("an aborted answer read as complete")
	}
	res, err = client.Get(base + "/ok")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if string(body) != "ok" {
		t.Errorf("next request: %q", body)
	}
}

func TestExpectContinue(t *testing.T) {
	s := &h2server.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("read") == "" {
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		_, _ = io.Copy(w, r.Body)
	})}
	client, base := serve(t, s)
	client.Transport.(*http.Transport).ExpectContinueTimeout = 5 * time.Second
	for _, tc := range []struct {
		query  string
		status int
	}{{"?read=1", 200}, {"", 403}} {
		r, _ := http.NewRequest("PUT", base+"/"+tc.query, strings.NewReader("payload"))
		r.Header.Set("Expect", "100-continue")
		start := time.Now()
		res, err := client.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadAll(res.Body)
		_ = res.Body.Close()
		if res.StatusCode != tc.status || time.Since(start) > 4*time.Second {
			t.Errorf("%q: %d after %v, want %d without waiting for the continue timeout", tc.query, res.StatusCode, time.Since(start), tc.status)
		}
	}
}

func TestLimits(t *testing.T) {
	s := &h2server.Server{MaxHeaderBytes: 4 << 10, IdleTimeout: 200 * time.Millisecond,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})}
	client, base := serve(t, s)
	// A head over the limit is answered 431, or refused by the client
	// once it knows the limit; the connection serves on.
	for range 2 {
		r, _ := http.NewRequest("GET", base+"/", nil)
		for i := range 10 {
			r.Header.Set(fmt.Sprintf("X-Big-%d", i), strings.Repeat("x", 600))
		}
		if res, err := client.Do(r); err == nil {
			_ = res.Body.Close()
			if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
				t.Errorf("a head over the limit: %d, want 431", res.StatusCode)
			}
		}
		res, err := client.Get(base + "/")
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
	}

	// The idle timeout closes a connection without streams.
	addr := strings.TrimPrefix(base, "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Error("an idle connection stayed open past the idle timeout")
		}
	}
}

func TestShutdownLetsStreamsFinish(t *testing.T) {
	h, started, release := heldHandler("done")
	s := &h2server.Server{Handler: h}
	client, base := serve(t, s)
	got := make(chan string, 1)
	go func() {
		res, err := client.Get(base + "/")
		if err != nil {
			got <- err.Error()
			return
		}
		body, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		got <- string(body)
	}()
	<-started
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	time.Sleep(50 * time.Millisecond)
	close(release)
	if b := <-got; b != "done" {
		t.Errorf("the stream in flight got %q", b)
	}
	if err := <-shut; err != nil {
		t.Error(err)
	}
}
