package httpserve

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/httplimits"
)

func TestListenServeShutdown(t *testing.T) {
	hello := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hello") })
	s, err := Listen("test", httplimits.Default(), nil,
		Endpoint{Flag: "--listen", Addr: "127.0.0.1:0", Handler: hello},
		Endpoint{Flag: "--metrics-addr", Addr: ""},
	)
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 1 || s.Addr("--metrics-addr") != nil {
		t.Fatalf("an endpoint without an address was bound: %d listeners", s.Len())
	}
	errc := make(chan error, 1)
	s.Serve(errc)
	resp, err := http.Get("http://" + s.Addr("--listen").String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello" {
		t.Errorf("body %q", body)
	}
	s.Shutdown(time.Second)
	select {
	case err := <-errc:
		t.Errorf("a shutdown reported an error: %v", err)
	default:
	}
	if _, err := http.Get("http://" + s.Addr("--listen").String() + "/"); err == nil {
		t.Error("still serving after the shutdown")
	}
}

func TestListenNamesTheFlag(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	_, err = Listen("test", httplimits.Default(), nil,
		Endpoint{Flag: "--listen", Addr: "127.0.0.1:0", Handler: http.NotFoundHandler()},
		Endpoint{Flag: "--health-addr", Addr: busy.Addr().String(), Handler: http.NotFoundHandler()},
	)
	if err == nil || !strings.HasPrefix(err.Error(), "--health-addr="+busy.Addr().String()+": ") {
		t.Errorf("error %v, want one naming --health-addr and its address", err)
	}
}
