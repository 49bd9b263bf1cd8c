package h2server_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/controlplane"
	"github.com/fleetnet/fleetnet/internal/edge/h2server"
)

// TestH2spec runs h2spec, the HTTP/2 conformance suite (built into bin/ by
// `make tools`), against the server; every case must pass.
func TestH2spec(t *testing.T) {
	bins, err := controlplane.FindBinaries()
	if err != nil {
		t.Fatal(err)
	}
	h2spec, err := bins.Path("h2spec")
	if err != nil {
		t.Fatal(err) // says to run `make tools`
	}
	s := &h2server.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "hello from h2server\n")
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.ServeConn(context.Background(), c, nil)
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	port := ln.Addr().(*net.TCPAddr).Port
	out, err := exec.Command(h2spec, "--strict", "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-o", "5").CombinedOutput()
	summary := regexp.MustCompile(`(\d+) tests, (\d+) passed, (\d+) skipped, (\d+) failed`).FindSubmatch(out)
	if err != nil || summary == nil || string(summary[4]) != "0" {
		t.Fatalf("h2spec: %v\n%s", err, out)
	}
	t.Logf("h2spec: %s", summary[0])
}
