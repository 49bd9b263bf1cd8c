package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"text/template"
	"time"
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
	cmd  *exec.Cmd
	dir  string
	done chan struct{}
	err  error
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
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting nginx: %w", err)
	}
	n := &nginx{cmd: cmd, dir: dir, done: make(chan struct{})}
	go func() { n.err = cmd.Wait(); close(n.done) }()
	deadline := time.Now().Add(10 * time.Second)
	for _, addr := range []string{plain, tlsAddr} {
		for {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				c.Close()
				break
			}
			select {
			case <-n.done:
				return nil, fmt.Errorf("nginx exited (%v): %s%s", n.err, stderr.String(), n.errorLog())
			default:
			}
			if time.Now().After(deadline) {
				n.stop()
				return nil, fmt.Errorf("nginx does not accept on %s after 10s: %s", addr, n.errorLog())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return n, nil
}

func (n *nginx) errorLog() string {
	b, _ := os.ReadFile(filepath.Join(n.dir, "error.log"))
	return strings.TrimSpace(string(b))
}

// stop asks nginx to quit, then kills its process group (master and
// workers) if it has not after a few seconds.
func (n *nginx) stop() {
	_ = n.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-n.done:
	case <-time.After(3 * time.Second):
		_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
		<-n.done
	}
	// Workers still draining after the master left.
	_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
}

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
