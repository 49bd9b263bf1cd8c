package app_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
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

	"github.com/fleetnet/fleetnet/internal/distribute"
	"github.com/fleetnet/fleetnet/internal/pki"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// The edge serves Gateways and MultiClusterLoadBalancers of one model. A
// model whose load balancer takes a TCP port of a Gateway listener is
// refused with a reason naming it, and the model before stays served,
// HTTP and TCP alike. A port that a Gateway gives up goes to a load
// balancer in the same model.
func TestEdgeServesLoadBalancers(t *testing.T) {
	srv, _, opts := startGateway(t)
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "hello from east") }))
	t.Cleanup(web.Close)
	echo := echoServer(t)
	httpPort, tcpPort, otherPort := int32(testkit.FreePort(t)), int32(testkit.FreePort(t)), int32(testkit.FreePort(t))

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

	tests := []struct {
		name    string
		gateway edgev1.Gateway
		lb      edgev1.LoadBalancer
		want    []string
	}{
		{"a Gateway listener's port", gateway, loadBalancer("clash", echo, httpPort),
			[]string{fmt.Sprintf("port %d/TCP", httpPort), "MultiClusterLoadBalancer demo/clash", "listener http of Gateway demo/edge"}},
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

// A listener or a load balancer's port that the edge cannot bind (a port
// another process holds, e.g. the edge's own metrics port) is left out
// and named in the acknowledgement; the rest of the model is served, and
// so is every later model: one object's port never freezes the others.
func TestEdgeServesWithoutWhatItCannotBind(t *testing.T) {
	srv, _, opts := startGateway(t)
	answer := func(text string) string {
		b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, text) }))
		t.Cleanup(b.Close)
		return b.Listener.Addr().String()
	}
	v1Backend, v2Backend, v3Backend := answer("version 1"), answer("version 2"), answer("version 3")
	echo := echoServer(t)
	httpPort, tcpPort := int32(testkit.FreePort(t)), int32(testkit.FreePort(t))
	metricsPort := int32(testkit.FreePort(t))
	opts.MetricsAddr = fmt.Sprintf("127.0.0.1:%d", metricsPort) // the edge's own port
	busy, err := net.Listen("tcp", "127.0.0.1:0")               // another process's
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = busy.Close() })
	busyPort := int32(busy.Addr().(*net.TCPAddr).Port)

	publish := func(version string, gw edgev1.Gateway, lbs ...edgev1.LoadBalancer) int64 {
		t.Helper()
		doc, certs, err := edgev1.EncodeModel(&edgev1.Model{Version: version, Gateways: []edgev1.Gateway{gw}, LoadBalancers: lbs})
		if err != nil {
			t.Fatal(err)
		}
		return srv.Publish(edgev1.ModelContentType, doc, certs)
	}
	served := func(version int64) distribute.EdgeStatus {
		t.Helper()
		var st distribute.EdgeStatus
		testkit.Eventually(t, 10*time.Second, fmt.Sprintf("the edge serves version %d", version), func(context.Context) error {
			_, edges := srv.Status()
			if len(edges) != 1 || edges[0].Serving != version {
				return fmt.Errorf("edges %+v", edges)
			}
			st = edges[0]
			return nil
		})
		return st
	}
	// withMetrics is the Gateway with a second listener on the edge's
	// metrics port.
	withMetrics := func(backend string) edgev1.Gateway {
		gw := httpGateway(t, backend, httpPort)
		gw.Listeners = append(gw.Listeners, edgev1.Listener{Name: "metrics", Port: metricsPort, Protocol: edgev1.ProtocolHTTP,
			VirtualHosts: gw.Listeners[0].VirtualHosts})
		return gw
	}

	publish("1", httpGateway(t, v1Backend, httpPort))
	runEdge(t, opts)
	served(1)
	if err := answers(httpPort, "version 1"); err != nil {
		t.Fatal(err)
	}

	v2 := publish("2", withMetrics(v2Backend), loadBalancer("db", echo, tcpPort), loadBalancer("busy", echo, busyPort))
	st := served(2)
	if st.Refused != "" {
		t.Fatalf("version 2 refused whole: %s", st.Refused)
	}
	got := map[string]string{}
	for _, r := range st.Without {
		got[distribute.Describe(r)] = r.GetReason()
	}
	for part, want := range map[string]string{
		fmt.Sprintf("listener metrics of Gateway demo/edge (port %d)", metricsPort): "address already in use",
		fmt.Sprintf("port %d/TCP of MultiClusterLoadBalancer demo/busy", busyPort):  "address already in use",
	} {
		if !strings.Contains(got[part], want) {
			t.Errorf("the acknowledgement of version %d says %q of %s, want %q (all: %v)", v2, got[part], part, want, got)
		}
	}
	if len(got) != 2 {
		t.Errorf("refused parts %v, want two", got)
	}
	if err := answers(httpPort, "version 2"); err != nil {
		t.Errorf("the rest of the Gateway: %v", err)
	}
	if err := echoes(tcpPort); err != nil {
		t.Errorf("the other load balancer: %v", err)
	}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("the edge's metrics port: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// A later change is served too, with the same part left out.
	publish("3", withMetrics(v3Backend), loadBalancer("db", echo, tcpPort), loadBalancer("busy", echo, busyPort))
	if st := served(3); len(st.Without) != 2 {
		t.Errorf("version 3 served without %d parts, want 2", len(st.Without))
	}
	if err := answers(httpPort, "version 3"); err != nil {
		t.Errorf("version 3: %v", err)
	}
}

// startGateway serves a distribution server on loopback with the fleet's
// certificates, and returns its gRPC server (to stop it) and the edge's
// options to reach it.
func startGateway(t *testing.T) (*distribute.Server, *grpc.Server, app.Options) {
	t.Helper()
	ca, err := pki.NewCA("fleet")
	if err != nil {
		t.Fatal(err)
	}
	srv, g, opts, _ := startGatewayOf(t, ca, "edge-eu")
	return srv, g, opts
}

// startGatewayOf is startGateway on the fleet CA given, for the edge
// named; it returns the folder of the edge's files too.
func startGatewayOf(t *testing.T, ca *pki.KeyPair, edgeName string) (*distribute.Server, *grpc.Server, app.Options, string) {
	t.Helper()
	dir := t.TempDir()
	serving, _ := ca.ServingCert("gateway", []string{"127.0.0.1"})
	edge, _ := ca.EdgeCert(edgeName)
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
	return srv, g, app.Options{
		Gateway: lis.Addr().String(), CAFile: filepath.Join(dir, "ca.crt"), CertFile: filepath.Join(dir, "edge.crt"), KeyFile: filepath.Join(dir, "edge.key"),
		Region: "eu", ListenHost: "127.0.0.1",
		MetricsAddr: fmt.Sprintf("127.0.0.1:%d", testkit.FreePort(t)), HealthAddr: fmt.Sprintf("127.0.0.1:%d", testkit.FreePort(t)),
	}, dir
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

// A Gateway and a MultiClusterLoadBalancer the gateway holds (refused, and
// their last accepted configuration unknown to it after a restart) keep
// being served as the edge served them, HTTPS certificate included; only
// a model without them withdraws them.
func TestHeldObjectsKeepBeingServed(t *testing.T) {
	srv, _, opts := startGateway(t)
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "hello from east") }))
	t.Cleanup(web.Close)
	echo := echoServer(t)
	httpPort, tlsPort, tcpPort := int32(testkit.FreePort(t)), int32(testkit.FreePort(t)), int32(testkit.FreePort(t))
	ca, err := pki.NewCA("tenant")
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.ServingCert("shop.example", []string{"shop.example"})
	if err != nil {
		t.Fatal(err)
	}
	gw := httpGateway(t, web.Listener.Addr().String(), httpPort)
	gw.Listeners = append(gw.Listeners, edgev1.Listener{Name: "https", Port: tlsPort, Protocol: edgev1.ProtocolHTTPS, Hostname: "shop.example",
		Certificates: []edgev1.ListenerCertificate{{Namespace: "demo", Name: "shop", Digest: "shop", CertPEM: kp.CertPEM, KeyPEM: kp.KeyPEM}},
		VirtualHosts: gw.Listeners[0].VirtualHosts})
	publish := func(version string, m *edgev1.Model) {
		t.Helper()
		m.Version = version
		doc, certs, err := edgev1.EncodeModel(m)
		if err != nil {
			t.Fatal(err)
		}
		v := srv.Publish(edgev1.ModelContentType, doc, certs)
		testkit.Eventually(t, 10*time.Second, fmt.Sprintf("the edge serves version %d", v), func(context.Context) error {
			if _, edges := srv.Status(); len(edges) != 1 || edges[0].Serving != v || edges[0].Refused != "" {
				return fmt.Errorf("edges %+v", edges)
			}
			return nil
		})
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	https := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "shop.example"}}}
	serves := func() error {
		if err := answers(httpPort, "hello from east"); err != nil {
			return fmt.Errorf("HTTP: %w", err)
		}
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/", tlsPort), nil)
		req.Host = "shop.example"
		resp, err := https.Do(req)
		if err != nil {
			return fmt.Errorf("HTTPS: %w", err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("HTTPS: %d", resp.StatusCode)
		}
		if err := echoes(tcpPort); err != nil {
			return fmt.Errorf("TCP: %w", err)
		}
		return nil
	}

	runEdge(t, opts)
	publish("1", &edgev1.Model{Gateways: []edgev1.Gateway{gw}, LoadBalancers: []edgev1.LoadBalancer{loadBalancer("db", echo, tcpPort)}})
	if err := serves(); err != nil {
		t.Fatalf("version 1: %v", err)
	}
	held := edgev1.Gateway{Namespace: gw.Namespace, Name: gw.Name, Generation: 2, Listeners: []edgev1.Listener{}, Refused: "spec.listeners[0].port: bad", Hold: true}
	heldLB := edgev1.LoadBalancer{Namespace: "demo", Name: "db", Generation: 2, Class: "edge", Ports: []edgev1.LoadBalancerPort{}, Refused: "bad", Hold: true}
	publish("2", &edgev1.Model{Gateways: []edgev1.Gateway{held}, LoadBalancers: []edgev1.LoadBalancer{heldLB}})
	if err := serves(); err != nil {
		t.Errorf("held: %v", err)
	}
	publish("3", &edgev1.Model{Gateways: []edgev1.Gateway{held}, LoadBalancers: []edgev1.LoadBalancer{heldLB}}) // held twice
	if err := serves(); err != nil {
		t.Errorf("held again: %v", err)
	}
	publish("4", &edgev1.Model{Gateways: []edgev1.Gateway{}})
	if err := answers(httpPort, "hello from east"); err == nil {
		t.Error("the Gateway is served after it left the model")
	}
	if err := echoes(tcpPort); err == nil {
		t.Error("the load balancer is served after it left the model")
	}
}
