package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"text/template"
	"time"

	"github.com/fleetnet/fleetnet/internal/testkit"
)

// haproxyConfig balances TCP connections like the edge does: round robin
// over the same backends, each checked by a TCP connect every 500 ms (the
// edge's default), 1 s to connect, long idle timeouts; no logs.
var haproxyConfig = template.Must(template.New("haproxy").Parse(`# written by test/l4bench
global
	maxconn 9000
	pidfile {{.Dir}}/haproxy.pid
{{- if .Threads}}
	nbthread {{.Threads}}
{{- end}}

defaults
	mode tcp
	timeout connect 1s
	timeout client 1h
	timeout server 1h

frontend l4bench
	bind {{.Listen}}
	default_backend echo

backend echo
	balance roundrobin
{{- range $i, $b := .Backends}}
	server s{{$i}} {{$b}} check inter 500ms
{{- end}}
`))

type haproxy struct {
	*testkit.Child
}

// startHAProxy writes the configuration into dir, starts haproxy in the
// foreground on it and waits until its port accepts.
func startHAProxy(bin, dir, listen string, threads int, upstreams []string) (*haproxy, error) {
	var conf bytes.Buffer
	if err := haproxyConfig.Execute(&conf, map[string]any{"Dir": dir, "Listen": listen, "Threads": threads, "Backends": upstreams}); err != nil {
		return nil, err
	}
	return startHAProxyConfig(bin, dir, "haproxy.cfg", conf.Bytes(), listen)
}

// startHAProxyConfig writes conf as dir/name, checks it, starts haproxy in
// the foreground on it and waits until listen accepts.
func startHAProxyConfig(bin, dir, name string, conf []byte, listen string) (*haproxy, error) {
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, conf, 0o644); err != nil {
		return nil, err
	}
	if err := checkHAProxy(bin, path); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-db", "-f", path)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	c, err := testkit.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("starting haproxy: %w", err)
	}
	h := &haproxy{Child: c}
	if err := h.WaitAccept(10*time.Second, listen); err != nil {
		h.stop()
		return nil, fmt.Errorf("haproxy: %w", err)
	}
	return h, nil
}

func (h *haproxy) stop() { h.Stop(syscall.SIGTERM, 5*time.Second) }

func haproxyPath() (string, error) {
	for _, p := range []string{"haproxy", "/usr/sbin/haproxy"} {
		if path, err := exec.LookPath(p); err == nil {
			return path, nil
		}
	}
	return "", errors.New("haproxy not found: apt-get install haproxy")
}

func haproxyVersion(bin string) string {
	out, err := exec.Command(bin, "-v").Output()
	if err != nil {
		return "unknown"
	}
	first, _, _ := strings.Cut(string(out), "\n")
	if f := strings.Fields(first); len(f) >= 3 {
		return f[2] // "HAProxy version 2.6.12-1 ..."
	}
	return "unknown"
}
