package l4_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/edge/edgetest"
	"github.com/fleetnet/fleetnet/internal/edge/l4"
	"github.com/fleetnet/fleetnet/internal/testkit"
)

// Datagrams go through the proxy and back from the port's socket; a
// client's datagrams stay on one endpoint (one flow, one socket towards
// it) while other clients spread; a flow without datagrams for
// UDPIdleMillis is removed.
func TestUDPFlows(t *testing.T) {
	b1, b2 := startUDP(t, "east-1"), startUDP(t, "east-2")
	port := int32(testkit.FreePort(t))
	p, reg := newProxy(t, nil)
	m := lb("dns", port, edgev1.ProtocolUDP, cluster("east", 1, b1.endpoint(), b2.endpoint()))
	m.UDPIdleMillis = 200
	if err := p.Apply(modelOf("1", m)); err != nil {
		t.Fatal(err)
	}
	if got := p.Addr(port, edgev1.ProtocolUDP); got == nil || got.String() != addr(port) {
		t.Fatalf("Addr = %v", got)
	}
	flows := func() float64 {
		return edgetest.Metric(t, reg, "fleetnet_edge_l4_udp_flows_active", "load_balancer", "demo/dns", "port", fmt.Sprintf("%d/UDP", port), "cluster", "east")
	}
	seen := map[string]bool{}
	for i := range 16 {
		c := newUDPClient(t, port)
		name, src := c.mustAsk(t, "q0")
		seen[name] = true
		for j := 1; j < 5; j++ {
			n2, s2 := c.mustAsk(t, fmt.Sprintf("q%d", j))
			if n2 != name || s2 != src {
				t.Fatalf("client %d, datagram %d: answered by %s from flow port %d, the first by %s from %d", i, j, n2, s2, name, src)
			}
		}
	}
	if !seen["east-1"] || !seen["east-2"] {
		t.Errorf("16 clients' flows all went to %v", seen)
	}
	// Polled: the proxy counts an answer after sending it, so the client
	// may read it before the count moves.
	testkit.Eventually(t, 10*time.Second, "80 datagrams counted out", func(context.Context) error {
		if got := edgetest.Metric(t, reg, "fleetnet_edge_l4_datagrams_total", "load_balancer", "demo/dns", "cluster", "east", "direction", "out"); got < 80 {
			return fmt.Errorf("%v datagrams out, want at least 80", got)
		}
		return nil
	})
	testkit.Eventually(t, 10*time.Second, "idle flows are removed", func(context.Context) error {
		if got := flows(); got != 0 {
			return fmt.Errorf("%v flows", got)
		}
		return nil
	})
	c := newUDPClient(t, port)
	c.mustAsk(t, "again")
	if got := flows(); got != 1 {
		t.Errorf("%v flows after a new client's datagram, want 1", got)
	}
}

// A port holds at most MaxUDPFlows flows: a new one evicts the flow idle
// longest, and an evicted client that sends again is a new flow.
func TestUDPFlowBound(t *testing.T) {
	b := startUDP(t, "east-1")
	port := int32(testkit.FreePort(t))
	p, reg := newProxy(t, func(o *l4.Options) { o.MaxUDPFlows = 4 })
	if err := p.Apply(modelOf("1", lb("dns", port, edgev1.ProtocolUDP, cluster("east", 1, b.endpoint())))); err != nil {
		t.Fatal(err)
	}
	labels := []string{"load_balancer", "demo/dns", "port", fmt.Sprintf("%d/UDP", port)}
	evicted := func() float64 { return edgetest.Metric(t, reg, "fleetnet_edge_l4_udp_flows_evicted_total", labels...) }
	flows := func() float64 { return edgetest.Metric(t, reg, "fleetnet_edge_l4_udp_flows_active", labels...) }
	var clients []*udpClient
	srcs := map[*udpClient]int{}
	for i := range 6 {
		c := newUDPClient(t, port)
		clients = append(clients, c)
		_, srcs[c] = c.mustAsk(t, fmt.Sprint("hello ", i))
		if got := flows(); got > 4 {
			t.Fatalf("%v flows, more than the bound", got)
		}
	}
	if got := evicted(); got != 2 {
		t.Fatalf("%v flows evicted, want 2", got)
	}
	// Clients 2 to 5 still have their flows.
	for i, c := range clients[2:] {
		if _, src := c.mustAsk(t, "still?"); src != srcs[c] {
			t.Errorf("client %d moved to another flow", i+2)
		}
	}
	if got := evicted(); got != 2 {
		t.Fatalf("%v flows evicted after datagrams of held flows, want 2", got)
	}
	// Client 0 was evicted: its datagram makes a new flow, which evicts
	// the flow idle longest, client 2's.
	clients[0].mustAsk(t, "back")
	if got := evicted(); got != 3 {
		t.Fatalf("%v flows evicted, want 3", got)
	}
	clients[3].mustAsk(t, "held?")
	if got := evicted(); got != 3 {
		t.Errorf("client 3's flow was evicted instead of client 2's")
	}
}

// An endpoint that refuses a datagram (ICMP port unreachable: nothing
// listens there) takes no new flow, and the refused client's next
// datagram goes to one that answers.
func TestUDPRefusedEndpoint(t *testing.T) {
	live := startUDP(t, "east-1")
	deadConn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	dead := edgev1.Endpoint{Address: "127.0.0.1", Port: int32(deadConn.LocalAddr().(*net.UDPAddr).Port), Ready: true}
	_ = deadConn.Close()
	port := int32(testkit.FreePort(t))
	p, reg := newProxy(t, nil)
	if err := p.Apply(modelOf("1", lb("dns", port, edgev1.ProtocolUDP, cluster("east", 1, live.endpoint(), dead)))); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		c := newUDPClient(t, port)
		if name, _ := c.mustAsk(t, fmt.Sprint("q", i)); name != "east-1" {
			t.Fatalf("answered by %q", name)
		}
	}
	// 20 flows all missing the dead endpoint: one chance in a million.
	if got := edgetest.Metric(t, reg, "fleetnet_edge_l4_connect_failures_total", "load_balancer", "demo/dns", "cluster", "east"); got < 1 {
		t.Errorf("%v refusals counted, want at least 1", got)
	}
	if got := edgetest.Metric(t, reg, "fleetnet_edge_l4_endpoints", "load_balancer", "demo/dns", "health", "ejected"); got != 1 {
		t.Errorf("%v endpoints ejected, want the dead one", got)
	}
}

// A UDP flow of a cluster that starts draining goes on until DrainMillis,
// then the client's next datagram is a new flow on another cluster.
func TestUDPDrain(t *testing.T) {
	east, west := startUDP(t, "east-1"), startUDP(t, "west-1")
	port := int32(testkit.FreePort(t))
	p, reg := newProxy(t, nil)
	base := lb("dns", port, edgev1.ProtocolUDP, cluster("east", 1, east.endpoint()), cluster("west", 1, west.endpoint()))
	if err := p.Apply(modelOf("1", base)); err != nil {
		t.Fatal(err)
	}
	var c *udpClient
	for c == nil {
		cand := newUDPClient(t, port)
		if name, _ := cand.mustAsk(t, "who?"); name == "east-1" {
			c = cand
		}
	}
	draining := base
	draining.Ports = []edgev1.LoadBalancerPort{base.Ports[0]}
	draining.Ports[0].Clusters = []edgev1.ClusterEndpoints{base.Ports[0].Clusters[0], base.Ports[0].Clusters[1]}
	draining.Ports[0].Clusters[0].Draining = true
	draining.DrainMillis = 300
	if err := p.Apply(modelOf("2", draining)); err != nil {
		t.Fatal(err)
	}
	if name, _ := c.mustAsk(t, "still east?"); name != "east-1" {
		t.Fatalf("right after the drain started: %s", name)
	}
	for range 10 {
		if name, _ := newUDPClient(t, port).mustAsk(t, "new"); name != "west-1" {
			t.Fatalf("a new flow went to draining %s", name)
		}
	}
	testkit.Eventually(t, 10*time.Second, "the drained flow is removed", func(context.Context) error {
		if got := edgetest.Metric(t, reg, "fleetnet_edge_l4_udp_flows_active", "cluster", "east"); got != 0 {
			return fmt.Errorf("%v flows on east", got)
		}
		return nil
	})
	if name, _ := c.mustAsk(t, "now?"); name != "west-1" {
		t.Fatalf("after the drain: %s", name)
	}
}
