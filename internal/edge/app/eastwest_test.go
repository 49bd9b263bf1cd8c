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
	"github.com/fleetnet/fleetnet/internal/distribute"
	"github.com/fleetnet/fleetnet/internal/edge/app"
	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/fleetnet/fleetnet/internal/testkit"
)

// eastWestEdge runs an edge with the east-west role for cluster, on a
// fleet CA shared with the other clusters' edges, fed by a distribution
// server of its own (its agent's, in a real cluster).
func eastWestEdge(t *testing.T, ca *pki.KeyPair, cluster string) (*distribute.Server, app.Options) {
	t.Helper()
	srv, _, opts, dir := startGatewayOf(t, ca, "edge-"+cluster)
	ewKP, err := ca.EastWestCert(cluster)
	if err != nil {
		t.Fatal(err)
	}
	if err := ewKP.Write(dir, "eastwest"); err != nil {
		t.Fatal(err)
	}
	opts.Region, opts.EndpointRanges = "", []string{"127.0.0.0/8"}
	opts.EastWestListen = fmt.Sprintf("127.0.0.1:%d", testkit.FreePort(t))
	opts.EastWestCertFile, opts.EastWestKeyFile = filepath.Join(dir, "eastwest.crt"), filepath.Join(dir, "eastwest.key")
	return srv, opts
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
