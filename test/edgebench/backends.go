package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
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
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addrs []string
}

func startBackends(n int) (*backends, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), backendEnv+"="+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = childAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the backends: %w", err)
	}
	b := &backends{cmd: cmd, stdin: stdin}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.stop()
		return nil, fmt.Errorf("the backends did not start: %w", err)
	}
	b.addrs = strings.Fields(line)
	return b, nil
}

func (b *backends) stop() {
	_ = b.stdin.Close()
	done := make(chan struct{})
	go func() { _ = b.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		_ = b.cmd.Process.Kill()
		<-done
	}
}
