package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fleetnet/fleetnet/internal/testkit"
)

// backendEnv makes this program the backends' process: a separate process
// so that the edge's runtime (and its CPU profile) holds only the edge.
const backendEnv = "FLEETNET_EDGEBENCH_BACKENDS"

// body is every backend's answer: small and fixed.
var body = []byte(strings.Repeat("fleetnet echo\n", 8))

// serveBackends listens on n loopback ports, prints their addresses on one
// line and serves until its standard input closes (the parent is gone).
func serveBackends(n int) error {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	})
	var addrs []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		addrs = append(addrs, ln.Addr().String())
		srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
	}
	fmt.Println(strings.Join(addrs, " "))
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// backends is the running backends' process.
type backends struct {
	*testkit.Child
	addrs []string
}

func startBackends(n int) (*backends, error) {
	cmd, err := testkit.SelfCommand(backendEnv + "=" + strconv.Itoa(n))
	if err != nil {
		return nil, err
	}
	c, line, err := testkit.StartReadLine(cmd)
	if err != nil {
		return nil, fmt.Errorf("the backends did not start: %w", err)
	}
	return &backends{Child: c, addrs: strings.Fields(line)}, nil
}

// stop closes the backends' input, which ends them.
func (b *backends) stop() { b.Stop(nil, 3*time.Second) }
