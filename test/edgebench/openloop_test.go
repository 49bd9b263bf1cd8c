package main

import (
	"bufio"
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var values []time.Duration
	for i := 1; i <= 1000; i++ {
		values = append(values, time.Duration(i)*time.Millisecond)
	}
	for p, want := range map[float64]time.Duration{50: 500 * time.Millisecond, 99: 990 * time.Millisecond,
		99.9: 999 * time.Millisecond, 100: time.Second, 0.01: time.Millisecond} {
		if got := percentile(values, p); got != want {
			t.Errorf("p%v: got %v, want %v", p, got, want)
		}
	}
	if got := percentile(values[:1], 99.9); got != time.Millisecond {
		t.Errorf("one value: got %v", got)
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("no values: got %v", got)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestSendTime(t *testing.T) {
	// 1,000 requests a second over 4 connections: each sends every 4 ms,
	// and together they send every millisecond.
	o := openLoop{Rate: 1000, Connections: 4}
	var got []time.Duration
	for k := range 2 {
		for c := range 4 {
			got = append(got, o.sendTime(c, k))
		}
	}
	for i, d := range got {
		if want := time.Duration(i) * time.Millisecond; d != want {
			t.Fatalf("send %d at %v, want %v (all: %v)", i, d, want, got)
		}
	}
}

func TestReadResponse(t *testing.T) {
	stream := "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello" +
		"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nConnection: close\r\n\r\n" +
		"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok" +
		"HTTP/1.0 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok"
	r := bufio.NewReader(strings.NewReader(stream))
	for i, want := range []struct {
		status int
		keep   bool
	}{{200, true}, {503, false}, {200, false}, {200, true}} {
		status, keep, err := readResponse(r)
		if err != nil || status != want.status || keep != want.keep {
			t.Fatalf("response %d: got %d, %v, %v; want %d, %v", i, status, keep, err, want.status, want.keep)
		}
	}
	for _, bad := range []string{
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\n\r\n",
		"SSH-2.0-OpenSSH\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel",
	} {
		if _, _, err := readResponse(bufio.NewReader(strings.NewReader(bad))); err == nil {
			t.Errorf("%q read without an error", bad)
		}
	}
}

func TestOpenLoop(t *testing.T) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(body) })
	plain := httptest.NewServer(handler)
	defer plain.Close()
	secure := httptest.NewUnstartedServer(handler)
	secure.EnableHTTP2 = true
	secure.StartTLS()
	defer secure.Close()
	for _, url := range []string{plain.URL, secure.URL} {
		// 2,000 a second over 4 connections: 200 in the 100 ms warm-up,
		// 600 in the 300 ms measured.
		o := openLoop{URL: url + "/", Rate: 2000, Connections: 4, Warmup: 100 * time.Millisecond, Duration: 300 * time.Millisecond}
		r, err := o.run()
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		if r.Sent != 600 || r.Done != 600 || r.All != 800 || r.Errors != 0 || r.Unfinished != 0 {
			t.Errorf("%s: %+v, want 600 sent and done, 800 in all", url, r)
		}
		if r.P50 <= 0 || r.P50 > r.P99 || r.P99 > r.P999 || r.P999 > r.Max {
			t.Errorf("%s: latencies out of order: %+v", url, r)
		}
	}
}

func TestOpenLoopRefusesAnotherCipher(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.TLS = &tls.Config{MaxVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()
	_, err := openLoop{URL: srv.URL, Rate: 100, Connections: 1, Duration: 50 * time.Millisecond}.run()
	if err == nil {
		t.Fatal("a TLS 1.2 server was measured")
	}
	var ce cipherError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want a cipherError", err)
	}
}
