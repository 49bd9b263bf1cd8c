package main

import (
	"bytes"
	"crypto/tls"
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

// nginxConfig proxies like the edge does: HTTP/1.1 to a keep-alive pool
// per upstream, the client's Host kept, X-Forwarded-* set. One server
// without an access log and one with, each plain and TLS; TLS is 1.3 with
// benchCipher only, HTTP/2 by ALPN. Neither a client nor an upstream
// connection is closed after a number of requests (keepalive_requests;
// the edge has no such limit, and h2load does not reconnect).
var nginxConfig = template.Must(template.New("nginx").Parse(`# written by test/edgebench
worker_processes {{.Workers}};
daemon off;
pid {{.Dir}}/nginx.pid;
error_log {{.Dir}}/error.log warn;

events {
	worker_connections 4096;
}

http {
	access_log off;
	client_body_temp_path {{.Dir}}/body;
	proxy_temp_path {{.Dir}}/proxy;
	keepalive_requests 1000000;

	upstream echo {
{{- range .Backends}}
		server {{.}};
{{- end}}
		keepalive 256;
		keepalive_requests 1000000;
	}
{{range .Servers}}
	server {
		listen {{.Plain}} reuseport;
		listen {{.TLS}} ssl{{if not $.HTTP2Directive}} http2{{end}} reuseport;
{{- if $.HTTP2Directive}}
		http2 on;
{{- end}}
{{- if .AccessLog}}
		access_log {{.AccessLog}} combined buffer=64k flush=1s;
{{- end}}
		ssl_certificate {{$.Dir}}/tls.crt;
		ssl_certificate_key {{$.Dir}}/tls.key;
		ssl_protocols TLSv1.3;
		ssl_conf_command Ciphersuites {{$.Cipher}};

		location / {
			proxy_pass http://echo;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_set_header Host $http_host;
			proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
			proxy_set_header X-Forwarded-Host $http_host;
			proxy_set_header X-Forwarded-Proto $scheme;
		}
	}
{{end -}}
}
`))

// nginxServer is one server block: its plain and TLS addresses, and the
// file of its access log ("" for none).
type nginxServer struct {
	Plain, TLS string
	AccessLog  string
}

type nginx struct {
	*testkit.Child
	dir string
}

// renderNginxConfig is the configuration for an nginx of version (as
// nginx -v names it) whose files are in dir.
func renderNginxConfig(version, dir string, workers int, servers []nginxServer, upstreams []string) ([]byte, error) {
	var conf bytes.Buffer
	err := nginxConfig.Execute(&conf, map[string]any{"Workers": workers, "Dir": dir, "Backends": upstreams, "Servers": servers,
		"HTTP2Directive": http2Directive(version), "Cipher": tls.CipherSuiteName(benchCipher)})
	return conf.Bytes(), err
}

// startNginx writes the configuration (and the key pair) into dir, starts
// nginx in the foreground on it and waits until every port accepts.
func startNginx(bin, dir string, workers int, servers []nginxServer, upstreams []string, certPEM, keyPEM []byte) (*nginx, error) {
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), keyPEM, 0o600); err != nil {
		return nil, err
	}
	conf, err := renderNginxConfig(nginxVersion(bin), dir, workers, servers, upstreams)
	if err != nil {
		return nil, err
	}
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, conf, 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-p", dir, "-c", confPath, "-e", filepath.Join(dir, "error.log"))
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	c, err := testkit.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("starting nginx: %w", err)
	}
	n := &nginx{Child: c, dir: dir}
	var addrs []string
	for _, s := range servers {
		addrs = append(addrs, s.Plain, s.TLS)
	}
	if err := n.WaitAccept(10*time.Second, addrs...); err != nil {
		n.stop()
		return nil, fmt.Errorf("nginx: %w: %s%s", err, stderr.String(), n.errorLog())
	}
	return n, nil
}

func (n *nginx) errorLog() string {
	b, _ := os.ReadFile(filepath.Join(n.dir, "error.log"))
	return strings.TrimSpace(string(b))
}

// stop asks nginx to quit, then kills its process group (master and
// workers) if it has not after a few seconds, and workers still draining
// after the master left.
func (n *nginx) stop() { n.Stop(syscall.SIGQUIT, 3*time.Second) }

// nginxPath finds nginx on PATH or where Debian puts it.
func nginxPath() (string, error) {
	for _, p := range []string{"nginx", "/usr/sbin/nginx"} {
		if bin, err := exec.LookPath(p); err == nil {
			return bin, nil
		}
	}
	return "", errors.New("nginx is not installed: apt-get install nginx-light (or nginx)")
}

// http2Directive says whether an nginx version turns HTTP/2 on with the
// http2 directive (1.25.1 and later) rather than the listen parameter.
func http2Directive(version string) bool {
	v := strings.TrimPrefix(version, "nginx/")
	var major, minor, patch int
	if _, err := fmt.Sscanf(v, "%d.%d.%d", &major, &minor, &patch); err != nil {
		return true // not an nginx we know: the current syntax
	}
	return major > 1 || major == 1 && (minor > 25 || minor == 25 && patch >= 1)
}

func nginxVersion(bin string) string {
	out, err := exec.Command(bin, "-v").CombinedOutput()
	if err != nil {
		return "unknown"
	}
	return strings.TrimPrefix(strings.TrimSpace(string(out)), "nginx version: ")
}
