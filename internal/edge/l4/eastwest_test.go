package l4_test

import (
	"context"
	"crypto/x509"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/eastwest/tunnel"
	"github.com/fleetnet/fleetnet/internal/edge/l4"
	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/fleetnet/fleetnet/internal/testkit"
)

// westGateway runs cluster west's east-west gateway in front of backends,
// carrying demo/echo:9000 for every cluster and refusing anything else,
// and returns its address and a dialer for cluster hub.
func westGateway(t *testing.T, backends ...*tcpBackend) (string, *tunnel.Dialer) {
	t.Helper()
	ca, err := pki.NewCA("fleet")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	certOf := func(cluster string) tunnel.Credentials {
		kp, err := ca.EastWestCert(cluster)
		if err != nil {
			t.Fatal(err)
		}
		c, err := kp.TLSCertificate()
		if err != nil {
			t.Fatal(err)
		}
		return tunnel.StaticCredentials{Cert: &c, Pool: pool}
	}
	var eps []string
	for _, b := range backends {
		eps = append(eps, net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port)))
	}
	srv := &tunnel.Server{Authorize: func(_ string, tg tunnel.Target) ([]string, *tunnel.Refusal) {
		if tg != (tunnel.Target{Namespace: "demo", Name: "echo", Port: 9000}) {
			return nil, &tunnel.Refusal{Status: http.StatusNotFound, Reason: tunnel.ReasonNotExported, Message: tg.String() + " is not exported"}
		}
		return eps, nil
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, tunnel.ServerConfig(certOf("west"))) }()
	t.Cleanup(func() { cancel(); <-done })
	d := &tunnel.Dialer{Credentials: certOf("hub")}
	t.Cleanup(func() { _ = d.Close() })
	return ln.Addr().String(), d
}

// viaGateway is cluster west behind its gateway at gw, with ready
// endpoints there, for the service port named.
func viaGateway(gw string, weight, ready int32, name string) edgev1.ClusterEndpoints {
	host, port, _ := net.SplitHostPort(gw)
	p, _ := strconv.Atoi(port)
	return edgev1.ClusterEndpoints{Cluster: "west", Weight: weight, EffectiveWeight: int64(weight) * int64(ready),
		Endpoints: []edgev1.Endpoint{{Address: host, Port: int32(p), Ready: true, Serving: true}},
		Via:       &edgev1.Via{Namespace: "demo", Name: name, Port: 9000, ReadyEndpoints: ready}}
}

// A cluster of another network is reached through its gateway, and takes
// its share by the ready endpoints behind the gateway, as a cluster
// reached directly does by its own: here east has 1 endpoint and west 3
// behind its gateway, so west takes three quarters of the connections, ±10 %
// (over 4,000, so that ±10 % is 3.6 standard deviations of the random
// pick and the test does not flake).
func TestClustersOfAnotherNetworkTakeTheirShareThroughTheirGateway(t *testing.T) {
	gw, dialer := westGateway(t, startTCP(t, "west"), startTCP(t, "west"), startTCP(t, "west"))
	p, _ := newProxy(t, func(o *l4.Options) { o.Tunnel = dialer })
	port := int32(testkit.FreePort(t))
	if err := p.Apply(modelOf("1", lb("echo", port, edgev1.ProtocolTCP, cluster("east", 1, startTCP(t, "east").endpoint()), viaGateway(gw, 1, 3, "echo")))); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	const n = 4000
	for i := range n {
		name, err := once(port)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		got[name]++
	}
	if w := got["west"]; w < n*3/4*9/10 || w > n*3/4*11/10 || got["east"]+w != n {
		t.Errorf("answers by cluster %v, want west about %d of %d", got, n*3/4, n)
	}
}

// A stream the gateway refuses fails that attempt at once, and the
// connection goes to another cluster; an edge without the east-west role
// does the same rather than dial the gateway's address as an endpoint.
func TestARefusedStreamGoesElsewhere(t *testing.T) {
	gw, dialer := westGateway(t, startTCP(t, "west"))
	for _, tc := range []struct {
		name   string
		tunnel l4.Tunnel
	}{
		{"refused by the gateway", dialer},
		{"no east-west role", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs testkit.SyncBuffer
			p, _ := newProxy(t, func(o *l4.Options) {
				o.Log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
				if tc.tunnel != nil {
					o.Tunnel = tc.tunnel
				}
			})
			port := int32(testkit.FreePort(t))
			// demo/other is not carried by west's gateway.
			other := lb("other", port, edgev1.ProtocolTCP, cluster("east", 1, startTCP(t, "east").endpoint()), viaGateway(gw, 100, 1, "other"))
			if err := p.Apply(modelOf("1", other)); err != nil {
				t.Fatal(err)
			}
			for i := range 20 {
				if name, err := once(port); err != nil || name != "east" {
					t.Fatalf("connection %d: %q, %v; want east", i, name, err)
				}
			}
			// The gateway answered (or was never dialled): it is not
			// ejected, so that its other services keep it.
			if strings.Contains(logs.String(), "ejected") {
				t.Errorf("west's gateway was ejected:\n%s", logs.String())
			}
		})
	}
}
