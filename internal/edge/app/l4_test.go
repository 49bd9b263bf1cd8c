package app_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/edge/app"
	"github.com/fleetnet/fleetnet/internal/testkit"

	"github.com/fleetnet/fleetnet/internal/gateway/distribute"
	"github.com/fleetnet/fleetnet/internal/pki"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// The edge serves Gateways and MultiClusterLoadBalancers of one model. A
// model whose load balancer takes a TCP port of a Gateway listener, or a
// port the edge cannot bind, is refused with a reason naming it, and the
// model before stays served, HTTP and TCP alike. A port that a Gateway
// gives up goes to a load balancer in the same model.
func TestEdgeServesLoadBalancers(t *testing.T) {
	srv, opts := startGateway(t)
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "hello from east") }))
	t.Cleanup(web.Close)
	echo := echoServer(t)
	httpPort, tcpPort, otherPort := int32(testkit.FreePort(t)), int32(testkit.FreePort(t)), int32(testkit.FreePort(t))
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = busy.Close() })
	busyPort := int32(busy.Addr().(*net.TCPAddr).Port)

	gateway := httpGateway(t, web.Listener.Addr().String(), httpPort)
	db := loadBalancer("db", echo, tcpPort)
	publish := func(m *edgev1.Model) int64 {
		t.Helper()
		doc, certs, err := edgev1.EncodeModel(m)
		if err != nil {
			t.Fatal(err)
		}
		return srv.Publish(edgev1.ModelContentType, doc, certs)
	}
	servedOrRefused := func(version int64) (refused string) {
		t.Helper()
		testkit.Eventually(t, 10*time.Second, fmt.Sprintf("the edge answers version %d", version), func(context.Context) error {
			_, edges := srv.Status()
			if len(edges) == 1 && (edges[0].Serving == version || edges[0].Refused != "") {
				refused = edges[0].Refused
				return nil
			}
			return fmt.Errorf("edges %+v", edges)
		})
		return refused
	}
	stillServes := func(what string) {
		t.Helper()
		if err := answers(httpPort, "hello from east"); err != nil {
			t.Errorf("%s: HTTP: %v", what, err)
		}
		if err := echoes(tcpPort); err != nil {
			t.Errorf("%s: TCP: %v", what, err)
		}
	}

	v1 := publish(&edgev1.Model{Version: "1", Gateways: []edgev1.Gateway{gateway}, LoadBalancers: []edgev1.LoadBalancer{db}})
	runEdge(t, opts)
	if r := servedOrRefused(v1); r != "" {
		t.Fatalf("version 1 refused: %s", r)
	}
	stillServes("version 1")

	// A listener on a port another process holds: the HTTP proxy refuses
	// the model after the L4 proxy prepared its ports.
	busyHTTP := gateway
	busyHTTP.Listeners = append([]edgev1.Listener{}, gateway.Listeners...)
	busyHTTP.Listeners = append(busyHTTP.Listeners, edgev1.Listener{Name: "busy", Port: busyPort, Protocol: edgev1.ProtocolHTTP})
	tests := []struct {
		name    string
		gateway edgev1.Gateway
		lb      edgev1.LoadBalancer
		want    []string
	}{
		{"a Gateway listener's port", gateway, loadBalancer("clash", echo, httpPort),
			[]string{fmt.Sprintf("port %d/TCP", httpPort), "MultiClusterLoadBalancer demo/clash", "listener http of Gateway demo/edge"}},
		{"a port another process holds", gateway, loadBalancer("busy", echo, busyPort),
			[]string{"MultiClusterLoadBalancer demo/busy", fmt.Sprintf("port %d/TCP", busyPort), "address already in use"}},
		{"a model the HTTP proxy refuses", busyHTTP, loadBalancer("fine", echo, int32(testkit.FreePort(t))),
			[]string{fmt.Sprintf("listening on port %d", busyPort), "address already in use"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The load balancer also asks for a new port, which must not
			// stay bound.
			extra := loadBalancer("extra", echo, otherPort)
			v := publish(&edgev1.Model{Version: tt.name, Gateways: []edgev1.Gateway{tt.gateway}, LoadBalancers: []edgev1.LoadBalancer{tt.lb, db, extra}})
			refused := servedOrRefused(v)
			if refused == "" {
				t.Fatal("served")
			}
			for _, w := range tt.want {
				if !strings.Contains(refused, w) {
					t.Errorf("the reason %q does not say %q", refused, w)
				}
			}
			stillServes("after the refusal")
			if err := echoes(otherPort); err == nil {
				t.Error("a port of the refused model is served")
			}
		})
	}

	// The Gateway goes away and a load balancer takes its port.
	v := publish(&edgev1.Model{Version: "handover", LoadBalancers: []edgev1.LoadBalancer{loadBalancer("web-tcp", echo, httpPort), db}})
	if r := servedOrRefused(v); r != "" {
		t.Fatalf("refused: %s", r)
	}
	if err := echoes(httpPort); err != nil {
		t.Errorf("the port handed over: %v", err)
	}
	if err := echoes(tcpPort); err != nil {
		t.Errorf("the load balancer that stayed: %v", err)
	}
}

// startGateway serves a distribution server on loopback with the fleet's
// certificates, and returns the edge's options to reach it.
func startGateway(t *testing.T) (*distribute.Server, app.Options) {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.NewCA("fleet")
	if err != nil {
		t.Fatal(err)
	}
	serving, _ := ca.ServingCert("gateway", []string{"127.0.0.1"})
	edge, _ := ca.EdgeCert("edge-eu")
	if err := ca.Write(dir, "ca"); err != nil {
		t.Fatal(err)
	}
	if err := edge.Write(dir, "edge"); err != nil {
		t.Fatal(err)
	}
	srv := distribute.NewServer(nil)
	servingCert, _ := serving.TLSCertificate()
	tlsCfg, _ := pki.ServerTLS(servingCert, ca.CertPEM, true)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(tlsCfg)))
	edgev1.RegisterModelDistributionServer(g, srv)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	return srv, app.Options{
		Gateway: lis.Addr().String(), CAFile: filepath.Join(dir, "ca.crt"), CertFile: filepath.Join(dir, "edge.crt"), KeyFile: filepath.Join(dir, "edge.key"),
		Region: "eu", ListenHost: "127.0.0.1",
		MetricsAddr: fmt.Sprintf("127.0.0.1:%d", testkit.FreePort(t)), HealthAddr: fmt.Sprintf("127.0.0.1:%d", testkit.FreePort(t)),
	}
}

func endpointOf(t *testing.T, hostport string) edgev1.Endpoint {
	t.Helper()
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(p)
	return edgev1.Endpoint{Address: host, Port: int32(port), Ready: true, Serving: true}
}

func httpGateway(t *testing.T, backend string, port int32) edgev1.Gateway {
	return edgev1.Gateway{Namespace: "demo", Name: "edge", Listeners: []edgev1.Listener{{
		Name: "http", Port: port, Protocol: edgev1.ProtocolHTTP, VirtualHosts: []edgev1.VirtualHost{{Hostname: "*", Routes: []edgev1.Route{{
			RouteName: "echo", Path: edgev1.PathMatch{Type: edgev1.PathPrefix, Value: "/"},
			Backends: []edgev1.Backend{{Kind: edgev1.KindServiceImport, Namespace: "demo", Name: "echo", Weight: 1, Clusters: []edgev1.ClusterEndpoints{{
				Cluster: "east", Weight: 1, EffectiveWeight: 1, Endpoints: []edgev1.Endpoint{endpointOf(t, backend)},
			}}}},
		}}}},
	}}}
}

func loadBalancer(name string, backend edgev1.Endpoint, port int32) edgev1.LoadBalancer {
	return edgev1.LoadBalancer{
		Namespace: "demo", Name: name, Generation: 1, Class: "edge",
		Ports: []edgev1.LoadBalancerPort{{Port: port, Protocol: edgev1.ProtocolTCP, TargetPort: 7000, Clusters: []edgev1.ClusterEndpoints{{
			Cluster: "east", Weight: 1, EffectiveWeight: 1, Endpoints: []edgev1.Endpoint{backend},
		}}}},
		HealthCheck:          edgev1.DefaultBackendPolicy().HealthCheck,
		ConnectTimeoutMillis: 1000, TCPIdleMillis: edgev1.DefaultTCPIdleMillis, UDPIdleMillis: edgev1.DefaultUDPIdleMillis, DrainMillis: 1000,
	}
}

// echoServer answers each line with "echo <line>".
func echoServer(t *testing.T) edgev1.Endpoint {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					fmt.Fprintf(c, "echo %s", line)
				}
			}()
		}
	}()
	return endpointOf(t, ln.Addr().String())
}

// echoes checks that a TCP port answers as the echo server does.
func echoes(port int32) error {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprint(c, "ping\n")
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if got != "echo ping\n" {
		return fmt.Errorf("got %q", got)
	}
	return nil
}
