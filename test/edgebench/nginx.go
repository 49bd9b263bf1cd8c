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

// nginxConfig proxies like the edge does: HTTP/1.1 to a keep-alive pool
// per upstream, the client's Host kept, X-Forwarded-* set; no access log
// on either side.
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

	upstream echo {
{{- range .Backends}}
		server {{.}};
{{- end}}
		keepalive 256;
	}

	server {
		listen {{.Plain}} reuseport;
		listen {{.TLS}} ssl reuseport;
		ssl_certificate {{.Dir}}/tls.crt;
		ssl_certificate_key {{.Dir}}/tls.key;
		ssl_protocols TLSv1.2 TLSv1.3;

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
}
`))

type nginx struct {
	*testkit.Child
	dir string
}

// startNginx writes the configuration (and the key pair) into dir, starts
// nginx in the foreground on it and waits until both ports accept.
func startNginx(bin, dir, workers, plain, tlsAddr string, upstreams []string, certPEM, keyPEM []byte) (*nginx, error) {
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), keyPEM, 0o600); err != nil {
		return nil, err
	}
	var conf bytes.Buffer
	if err := nginxConfig.Execute(&conf, map[string]any{"Workers": workers, "Dir": dir, "Backends": upstreams, "Plain": plain, "TLS": tlsAddr}); err != nil {
		return nil, err
	}
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, conf.Bytes(), 0o644); err != nil {
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
	if err := n.WaitAccept(10*time.Second, plain, tlsAddr); err != nil {
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

func nginxVersion(bin string) string {
	out, err := exec.Command(bin, "-v").CombinedOutput()
	if err != nil {
		return "unknown"
	}
	return strings.TrimPrefix(strings.TrimSpace(string(out)), "nginx version: ")
}
