package app_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/edge/app"
	"github.com/fleetnet/fleetnet/internal/gateway/distribute"
	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// eastWestEdge runs an edge with the east-west role for cluster, on a
// fleet CA shared with the other clusters' edges, fed by a distribution
// server of its own (its agent's, in a real cluster).
func eastWestEdge(t *testing.T, ca *pki.KeyPair, cluster string) (*distribute.Server, app.Options) {
	t.Helper()
	dir := t.TempDir()
	if err := ca.Write(dir, "ca"); err != nil {
		t.Fatal(err)
	}
	edgeKP, err := ca.EdgeCert("edge-" + cluster)
	if err != nil {
		t.Fatal(err)
	}
	ewKP, err := ca.EastWestCert(cluster)
	if err != nil {
		t.Fatal(err)
	}
	for name, kp := range map[string]*pki.KeyPair{"edge": edgeKP, "eastwest": ewKP} {
		if err := kp.Write(dir, name); err != nil {
			t.Fatal(err)
		}
	}
	serving, _ := ca.ServingCert("gateway", []string{"127.0.0.1"})
	servingCert, _ := serving.TLSCertificate()
	tlsCfg, _ := pki.ServerTLS(servingCert, ca.CertPEM, true)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := distribute.NewServer(nil)
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(tlsCfg)))
	edgev1.RegisterModelDistributionServer(g, srv)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	return srv, app.Options{
		Gateway: lis.Addr().String(), CAFile: filepath.Join(dir, "ca.crt"), CertFile: filepath.Join(dir, "edge.crt"), KeyFile: filepath.Join(dir, "edge.key"),
		ListenHost: "127.0.0.1", EndpointRanges: []string{"127.0.0.0/8"},
		MetricsAddr: fmt.Sprintf("127.0.0.1:%d", testkit.FreePort(t)), HealthAddr: fmt.Sprintf("127.0.0.1:%d", testkit.FreePort(t)),
		EastWestListen: fmt.Sprintf("127.0.0.1:%d", testkit.FreePort(t)), EastWestCertFile: filepath.Join(dir, "eastwest.crt"), EastWestKeyFile: filepath.Join(dir, "eastwest.key"),
	}
}

// Two fleetnet-edge processes in the east-west role: hub's reaches
// west's echo through west's gateway, which carries the stream to its
// export's endpoint; an export scoped away from hub is refused by west's
// gateway, and hub's connection fails at once rather than hanging.
func TestEdgesCarryConnectionsBetweenNetworks(t *testing.T) {
	ca, err := pki.NewCA("fleet")
	if err != nil {
		t.Fatal(err)
	}
	westSrv, westOpts := eastWestEdge(t, ca, "west")
	hubSrv, hubOpts := eastWestEdge(t, ca, "hub")
	echo := echoServer(t)

	// west exports demo/echo:80 to every cluster and demo/db:80 to south
	// alone, both served by the echo server.
	publishModel(t, westSrv, &edgev1.Model{Version: "w1", Gateways: []edgev1.Gateway{}, EastWest: &edgev1.EastWest{Exports: []edgev1.EastWestExport{
		{Namespace: "demo", Name: "db", ImportedBy: []string{"south"}, Ports: []edgev1.EastWestPort{{Port: 80, Endpoints: []edgev1.Endpoint{echo}}}},
		{Namespace: "demo", Name: "echo", ToEveryCluster: true, Ports: []edgev1.EastWestPort{{Port: 80, Endpoints: []edgev1.Endpoint{echo}}}},
	}}})
	runEdge(t, westOpts)

	gwHost, gwPort, _ := net.SplitHostPort(westOpts.EastWestListen)
	p, _ := strconv.Atoi(gwPort)
	via := func(name string, lbPort int32) edgev1.LoadBalancer {
		return edgev1.LoadBalancer{Namespace: "demo", Name: name, Generation: 1, Class: "edge",
			Ports: []edgev1.LoadBalancerPort{{Port: lbPort, Protocol: edgev1.ProtocolTCP, TargetPort: 80, Clusters: []edgev1.ClusterEndpoints{{
				Cluster: "west", Weight: 1, EffectiveWeight: 1,
				Endpoints: []edgev1.Endpoint{{Address: gwHost, Port: int32(p), Ready: true, Serving: true}},
				Via:       &edgev1.Via{Namespace: "demo", Name: name, Port: 80, ReadyEndpoints: 1},
			}}}}}
	}
	echoPort, dbPort := int32(testkit.FreePort(t)), int32(testkit.FreePort(t))
	publishModel(t, hubSrv, &edgev1.Model{Version: "h1", Gateways: []edgev1.Gateway{}, LoadBalancers: []edgev1.LoadBalancer{via("db", dbPort), via("echo", echoPort)}})
	runEdge(t, hubOpts)

	testkit.Eventually(t, 10*time.Second, "hub's edge reaches west's echo through west's gateway", func(context.Context) error { return echoes(echoPort) })
	start := time.Now()
	err = echoes(dbPort)
	if err == nil || time.Since(start) > 3*time.Second {
		t.Errorf("demo/db, exported to south alone, through hub's edge: %v after %v; want a failed connection at once", err, time.Since(start))
	}
	for _, series := range []string{
		`fleetnet_eastwest_streams_total{peer="hub",service="demo/echo"}`,
		`fleetnet_eastwest_streams_refused_total{reason="out_of_scope"}`,
	} {
		if got := metricValue(t, westOpts.MetricsAddr, series); got == "0" {
			t.Errorf("west's gateway: %s is 0, want counted", series)
		}
	}
}
