package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"text/template"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/eastwest/tunnel"
	"github.com/fleetnet/fleetnet/internal/edge/l4"
	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/fleetnet/fleetnet/internal/testkit"
)

// The east-west comparison (-eastwest, make bench-eastwest; issue 45): a
// connection from one network to a service of another, through two
// gateways over mutual TLS 1.3. fleetnet: the importing side's edge (the
// L4 proxy, its cluster reached via the peer's gateway) and the exporting
// side's gateway (tunnel.Server), both in this process, streams of HTTP/2
// connections. haproxy: the same two hops in one haproxy process, a TLS
// connection per client connection (haproxy has no multiplexed TCP
// tunnel), TLS 1.3 with the same certificates both ways.

// haproxyPairConfig is the haproxy pair: frontend egress → TLS → frontend
// ingress → the backends.
var haproxyPairConfig = template.Must(template.New("haproxy-pair").Parse(`# written by test/l4bench -eastwest
global
	maxconn 9000
	pidfile {{.Dir}}/haproxy.pid
	ssl-default-bind-options ssl-min-ver TLSv1.3
	ssl-default-server-options ssl-min-ver TLSv1.3
{{- if .Threads}}
	nbthread {{.Threads}}
{{- end}}

defaults
	mode tcp
	timeout connect 1s
	timeout client 1h
	timeout server 1h

frontend egress
	bind {{.Listen}}
	default_backend west_gateway

backend west_gateway
	server west {{.Ingress}} ssl crt {{.Dir}}/hub.pem ca-file {{.Dir}}/ca.crt verify required verifyhost west

frontend ingress
	bind {{.Ingress}} ssl crt {{.Dir}}/west.pem ca-file {{.Dir}}/ca.crt verify required
	default_backend echo

backend echo
	balance roundrobin
{{- range $i, $b := .Backends}}
	server s{{$i}} {{$b}} check inter 500ms
{{- end}}
`))

// eastWest is both pairs of gateways, running.
type eastWest struct {
	edge    *l4.Proxy
	dialer  *tunnel.Dialer
	stopGW  context.CancelFunc
	gwDone  chan error
	haproxy *haproxy
	// fleetnet and haproxy are the addresses clients connect to.
	fleetnet, haproxyAddr string
}

func startEastWest(haproxyBin, dir string, threads int, backends []string) (*eastWest, error) {
	ports, err := testkit.PickFreePorts(4)
	if err != nil {
		return nil, err
	}
	ca, err := pki.NewCA("l4bench")
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), ca.CertPEM, 0o644); err != nil {
		return nil, err
	}
	certs := map[string]tunnel.Credentials{}
	for _, cluster := range []string{"hub", "west"} {
		kp, err := ca.EastWestCert(cluster)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, cluster+".pem"), append(append([]byte{}, kp.CertPEM...), kp.KeyPEM...), 0o600); err != nil {
			return nil, err
		}
		c, err := kp.TLSCertificate()
		if err != nil {
			return nil, err
		}
		certs[cluster] = tunnel.StaticCredentials{Cert: &c, Pool: pool}
	}
	ew := &eastWest{fleetnet: addr(ports[0]), haproxyAddr: addr(ports[2]), gwDone: make(chan error, 1)}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	// fleetnet: west's gateway, then hub's edge reaching west through it.
	gwLn, err := net.Listen("tcp", addr(ports[1]))
	if err != nil {
		return nil, err
	}
	target := tunnel.Target{Namespace: "bench", Name: "echo", Port: 7000}
	gw := &tunnel.Server{Log: log, Authorize: func(_ string, t tunnel.Target) ([]string, *tunnel.Refusal) {
		if t != target {
			return nil, &tunnel.Refusal{Status: http.StatusNotFound, Reason: tunnel.ReasonNotExported, Message: t.String() + " is not exported"}
		}
		return backends, nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	ew.stopGW = cancel
	go func() { ew.gwDone <- gw.Serve(ctx, gwLn, tunnel.ServerConfig(certs["west"])) }()
	ew.dialer = &tunnel.Dialer{Credentials: certs["hub"]}
	ew.edge = l4.New(l4.Options{ListenHost: "127.0.0.1", Log: log, Tunnel: ew.dialer})
	if err := ew.edge.Apply(eastWestModel(ports[0], addr(ports[1]), target, len(backends))); err != nil {
		ew.stop()
		return nil, fmt.Errorf("applying the edge's model: %w", err)
	}

	var conf bytes.Buffer
	if err := haproxyPairConfig.Execute(&conf, map[string]any{"Dir": dir, "Listen": ew.haproxyAddr, "Ingress": addr(ports[3]), "Threads": threads, "Backends": backends}); err != nil {
		ew.stop()
		return nil, err
	}
	hp, err := startHAProxyConfig(haproxyBin, dir, "haproxy-pair.cfg", conf.Bytes(), ew.haproxyAddr)
	if err != nil {
		ew.stop()
		return nil, err
	}
	ew.haproxy = hp
	return ew, nil
}

func (ew *eastWest) stop() {
	if ew.haproxy != nil {
		ew.haproxy.stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = ew.edge.Close(ctx)
	_ = ew.dialer.Close()
	ew.stopGW()
	<-ew.gwDone
}

// eastWestModel is one load balancer port whose one cluster, west, is
// reached through its gateway at gw, with ready endpoints behind it.
func eastWestModel(port int, gw string, t tunnel.Target, ready int) *edgev1.Model {
	host, p, _ := net.SplitHostPort(gw)
	gwPort, _ := strconv.Atoi(p)
	return &edgev1.Model{Version: "l4bench-eastwest", LoadBalancers: []edgev1.LoadBalancer{{
		Namespace: "bench", Name: "eastwest", Generation: 1, Class: l4.ClassEdge,
		Ports: []edgev1.LoadBalancerPort{{Port: int32(port), Protocol: edgev1.ProtocolTCP, TargetPort: t.Port, Clusters: []edgev1.ClusterEndpoints{{
			Cluster: "west", Weight: 1, EffectiveWeight: int64(ready),
			Endpoints: []edgev1.Endpoint{{Address: host, Port: int32(gwPort), Ready: true, Serving: true}},
			Via:       &edgev1.Via{Namespace: t.Namespace, Name: t.Name, Port: t.Port, ReadyEndpoints: int32(ready)},
		}}}},
		HealthCheck:          edgev1.DefaultBackendPolicy().HealthCheck,
		ConnectTimeoutMillis: 1000, TCPIdleMillis: edgev1.DefaultTCPIdleMillis, UDPIdleMillis: edgev1.DefaultUDPIdleMillis, DrainMillis: edgev1.DefaultDrainMillis,
	}}}
}

// checkHAProxy runs haproxy's own check of a configuration file.
func checkHAProxy(bin, path string) error {
	if out, err := exec.Command(bin, "-c", "-q", "-f", path).CombinedOutput(); err != nil {
		return fmt.Errorf("haproxy -c: %w: %s", err, out)
	}
	return nil
}
