package l4_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/edge/edgetest"
	"github.com/fleetnet/fleetnet/internal/testkit"
)

// Lines go through the proxy and back, and the metrics count the
// connection, its bytes both ways and its cluster.
func TestTCPForwards(t *testing.T) {
	east := startTCP(t, "east-1")
	port := int32(testkit.FreePort(t))
	p, reg := newProxy(t, nil)
	if err := p.Apply(modelOf("1", lb("db", port, edgev1.ProtocolTCP, cluster("east", 1, east.endpoint())))); err != nil {
		t.Fatal(err)
	}
	if got := p.Addr(port, edgev1.ProtocolTCP); got == nil || got.String() != addr(port) {
		t.Fatalf("Addr = %v, want %s", got, addr(port))
	}
	c := mustDial(t, port)
	for _, line := range []string{"one", "two", strings.Repeat("x", 100_000)} {
		name, err := c.say(line)
		if err != nil || name != "east-1" {
			t.Fatalf("%.10s: %q %v", line, name, err)
		}
	}
	labels := []string{"load_balancer", "demo/db", "port", fmt.Sprintf("%d/TCP", port), "cluster", "east"}
	if got := edgetest.Metric(t, reg, "fleetnet_edge_l4_connections_active", labels...); got != 1 {
		t.Errorf("active connections %v, want 1", got)
	}
	in := edgetest.Metric(t, reg, "fleetnet_edge_l4_bytes_total", append(labels, "direction", "in")...)
	out := edgetest.Metric(t, reg, "fleetnet_edge_l4_bytes_total", append(labels, "direction", "out")...)
	if in != 4+4+100_001 || out != in+float64(3*len("east-1 ")) {
		t.Errorf("bytes in %v, out %v", in, out)
	}
	_ = c.c.Close()
	testkit.Eventually(t, 10*time.Second, "the connection ends", func(context.Context) error {
		if got := edgetest.Metric(t, reg, "fleetnet_edge_l4_connections_active", labels...); got != 0 {
			return fmt.Errorf("%v active", got)
		}
		return nil
	})
	if got := edgetest.Metric(t, reg, "fleetnet_edge_l4_connections_total", labels...); got != 1 {
		t.Errorf("connections %v, want 1", got)
	}
}

// A client that closes its writing half still reads the backend's
// answer, which the backend sends after it saw the end of the stream;
// then the backend's close reaches the client.
func TestTCPHalfClose(t *testing.T) {
	east := startTCP(t, "east-1")
	port := int32(testkit.FreePort(t))
	p, _ := newProxy(t, nil)
	if err := p.Apply(modelOf("1", lb("db", port, edgev1.ProtocolTCP, cluster("east", 1, east.endpoint())))); err != nil {
		t.Fatal(err)
	}
	c := mustDial(t, port)
	if _, err := fmt.Fprint(c.c, "last words\n"); err != nil {
		t.Fatal(err)
	}
	if err := c.c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(c.r)
	if err != nil {
		t.Fatalf("reading after the half-close: %v (read %q)", err, got)
	}
	if want := "east-1 last words\neast-1 bye\n"; string(got) != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// Connections spread over clusters in proportion to weight × healthy
// ready endpoints; a draining cluster and a cluster of weight 0 get none,
// and endpoints that are not ready get none.
func TestTCPWeights(t *testing.T) {
	e1, e2, e3 := startTCP(t, "east-1"), startTCP(t, "east-2"), startTCP(t, "east-3")
	w1 := startTCP(t, "west-1")
	d1, z1 := startTCP(t, "drained-1"), startTCP(t, "zero-1")
	notReady := startTCP(t, "west-notready").endpoint()
	notReady.Ready = false
	port := int32(testkit.FreePort(t))
	p, _ := newProxy(t, nil)
	drained := cluster("drained", 5, d1.endpoint())
	drained.Draining, drained.EffectiveWeight = true, 0
	// east: 1 × 3 endpoints, west: 1 × 1 (the other is not ready).
	m := modelOf("1", lb("db", port, edgev1.ProtocolTCP,
		drained, cluster("east", 1, e1.endpoint(), e2.endpoint(), e3.endpoint()), cluster("west", 1, w1.endpoint(), notReady), cluster("zero", 0, z1.endpoint())))
	if err := p.Apply(m); err != nil {
		t.Fatal(err)
	}
	const n = 1000
	counts := map[string]int{}
	for range n {
		name, err := once(port)
		if err != nil {
			t.Fatal(err)
		}
		counts[name]++
	}
	east := counts["east-1"] + counts["east-2"] + counts["east-3"]
	// 0.75 with a binomial standard deviation of 0.014 over 1,000.
	if share := float64(east) / n; math.Abs(share-0.75) > 0.06 {
		t.Errorf("east got %.3f of the connections, want 0.75 ± 0.06 (%v)", share, counts)
	}
	for _, name := range []string{"east-1", "east-2", "east-3"} {
		if share := float64(counts[name]) / n; math.Abs(share-0.25) > 0.06 {
			t.Errorf("%s got %.3f, want 0.25 ± 0.06 (endpoints of a cluster uniformly)", name, share)
		}
	}
	for _, name := range []string{"drained-1", "zero-1", "west-notready"} {
		if counts[name] != 0 {
			t.Errorf("%s got %d connections, want none", name, counts[name])
		}
	}
}

// When a cluster's endpoints stop, a connection that tries one is retried
// on another cluster: no client sees a failure, the failed endpoint is
// ejected and no longer tried. With every endpoint gone, a connection is
// reset.
func TestTCPFailover(t *testing.T) {
	east, west := startTCP(t, "east-1"), startTCP(t, "west-1")
	port := int32(testkit.FreePort(t))
	p, reg := newProxy(t, nil)
	m := lb("db", port, edgev1.ProtocolTCP, cluster("east", 1, east.endpoint()), cluster("west", 1, west.endpoint()))
	// The active check would find the stopped endpoint only after a
	// minute: what ejects it here is the failed connection.
	m.HealthCheck.IntervalMillis, m.HealthCheck.TimeoutMillis = 60_000, 1000
	if err := p.Apply(modelOf("1", m)); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "both clusters answer", func(context.Context) error {
		seen := map[string]bool{}
		for range 40 {
			name, err := once(port)
			if err != nil {
				return err
			}
			seen[name] = true
		}
		if !seen["east-1"] || !seen["west-1"] {
			return fmt.Errorf("answered by %v", seen)
		}
		return nil
	})
	east.stop()
	for i := range 200 {
		name, err := once(port)
		if err != nil || name != "west-1" {
			t.Fatalf("connection %d after east stopped: %q %v", i, name, err)
		}
	}
	eastLabels := []string{"load_balancer", "demo/db", "cluster", "east"}
	if got := edgetest.Metric(t, reg, "fleetnet_edge_l4_connect_failures_total", eastLabels...); got != 1 {
		t.Errorf("%v failed connections to east, want 1: the failure ejects the endpoint", got)
	}
	if got := edgetest.Metric(t, reg, "fleetnet_edge_l4_endpoints", append(eastLabels, "health", "ejected")...); got != 1 {
		t.Errorf("east's endpoint: %v ejected, want 1", got)
	}

	west.stop()
	// The reset may come before the dial returns, or at the first read.
	if c, err := dial(port); err == nil {
		defer c.c.Close()
		if _, err := c.say("anyone?"); err == nil {
			t.Fatal("a connection with every endpoint stopped was answered")
		}
	}
	if got := edgetest.Metric(t, reg, "fleetnet_edge_l4_connections_total", "load_balancer", "demo/db", "cluster", ""); got != 1 {
		t.Errorf("%v connections without an endpoint, want 1", got)
	}
}

// A connection whose first endpoint never completes the handshake (a
// stopped pod's address) is tried on another cluster after the connect
// timeout.
func TestTCPConnectTimeoutRetried(t *testing.T) {
	west := startTCP(t, "west-1")
	port := int32(testkit.FreePort(t))
	p, reg := newProxy(t, nil)
	m := lb("db", port, edgev1.ProtocolTCP, cluster("east", 1, edgetest.Blackhole(t)), cluster("west", 1, west.endpoint()))
	m.ConnectTimeoutMillis = 100
	m.HealthCheck.IntervalMillis, m.HealthCheck.TimeoutMillis = 60_000, 1000
	if err := p.Apply(modelOf("1", m)); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if name, err := once(port); err != nil || name != "west-1" {
			t.Fatalf("connection %d: %q %v", i, name, err)
		}
	}
	if got := edgetest.Metric(t, reg, "fleetnet_edge_l4_connect_failures_total", "load_balancer", "demo/db", "cluster", "east"); got > 1 {
		t.Errorf("%v failed connections to east, want at most 1", got)
	}
}

// A cluster that starts draining gets no new connection; its established
// connections go on, then are closed after DrainMillis. A cluster that
// stops draining keeps its connections.
func TestTCPDrain(t *testing.T) {
	east, west := startTCP(t, "east-1"), startTCP(t, "west-1")
	port := int32(testkit.FreePort(t))
	p, reg := newProxy(t, nil)
	base := lb("db", port, edgev1.ProtocolTCP, cluster("east", 1, east.endpoint()), cluster("west", 1, west.endpoint()))
	if err := p.Apply(modelOf("1", base)); err != nil {
		t.Fatal(err)
	}
	// Two connections on east: one to keep through an undrain, one to
	// see closed.
	var onEast []*client
	for len(onEast) < 2 {
		c := mustDial(t, port)
		name, err := c.say("who?")
		if err != nil {
			t.Fatal(err)
		}
		if name == "east-1" {
			onEast = append(onEast, c)
		} else {
			_ = c.c.Close()
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
	for i, c := range onEast {
		if name, err := c.say("still there?"); err != nil || name != "east-1" {
			t.Fatalf("established connection %d right after the drain started: %q %v", i, name, err)
		}
	}
	for i := range 50 {
		if name, err := once(port); err != nil || name != "west-1" {
			t.Fatalf("new connection %d while east drains: %q %v", i, name, err)
		}
	}
	if err := onEast[0].closedByProxy(); err != nil {
		t.Fatalf("after DrainMillis: %v", err)
	}
	testkit.Eventually(t, 10*time.Second, "east's connections are closed", func(context.Context) error {
		if got := edgetest.Metric(t, reg, "fleetnet_edge_l4_connections_active", "cluster", "east"); got != 0 {
			return fmt.Errorf("%v active on east", got)
		}
		return nil
	})
	_ = onEast[1].c.Close()

	// Undrained before the deadline: the connection stays.
	if err := p.Apply(modelOf("3", base)); err != nil {
		t.Fatal(err)
	}
	var kept *client
	for kept == nil {
		c := mustDial(t, port)
		if name, err := c.say("who?"); err != nil {
			t.Fatal(err)
		} else if name == "east-1" {
			kept = c
		}
	}
	draining.DrainMillis = 60_000
	if err := p.Apply(modelOf("4", draining)); err != nil {
		t.Fatal(err)
	}
	if err := p.Apply(modelOf("5", base)); err != nil {
		t.Fatal(err)
	}
	if name, err := kept.say("kept?"); err != nil || name != "east-1" {
		t.Fatalf("a connection of a cluster drained and undrained: %q %v", name, err)
	}
}

// A connection with no byte either way for TCPIdleMillis is closed; one
// that keeps talking is not.
func TestTCPIdleTimeout(t *testing.T) {
	east := startTCP(t, "east-1")
	port := int32(testkit.FreePort(t))
	p, _ := newProxy(t, nil)
	m := lb("db", port, edgev1.ProtocolTCP, cluster("east", 1, east.endpoint()))
	m.TCPIdleMillis = 500
	if err := p.Apply(modelOf("1", m)); err != nil {
		t.Fatal(err)
	}
	quiet := mustDial(t, port)
	if _, err := quiet.say("hello"); err != nil {
		t.Fatal(err)
	}
	if err := quiet.closedByProxy(); err != nil {
		t.Fatalf("idle connection: %v", err)
	}
	busy := mustDial(t, port)
	// The busy one talks for longer than the idle time, in steps
	// shorter than it, then falls silent.
	start := time.Now()
	for time.Since(start) < 1200*time.Millisecond {
		if _, err := busy.say("tick"); err != nil {
			t.Fatalf("a busy connection was closed after %s: %v", time.Since(start), err)
		}
		time.Sleep(30 * time.Millisecond)
	}
	if err := busy.closedByProxy(); err != nil {
		t.Fatalf("after falling silent: %v", err)
	}
}

// Model swaps under load: connections to ports that stay are not
// dropped; a port that goes away refuses new connections at once and
// closes its established ones after its DrainMillis.
func TestTCPSwapUnderLoad(t *testing.T) {
	east, west := startTCP(t, "east-1"), startTCP(t, "west-1")
	stay, gone := int32(testkit.FreePort(t)), int32(testkit.FreePort(t))
	p, _ := newProxy(t, nil)
	stayLB := lb("db", stay, edgev1.ProtocolTCP, cluster("east", 1, east.endpoint()))
	goneLB := lb("cache", gone, edgev1.ProtocolTCP, cluster("east", 1, east.endpoint()))
	goneLB.DrainMillis = 200
	if err := p.Apply(modelOf("0", goneLB, stayLB)); err != nil {
		t.Fatal(err)
	}
	onGone := mustDial(t, gone)
	if _, err := onGone.say("hi"); err != nil {
		t.Fatal(err)
	}

	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	var exchanged atomic.Int64
	for i := range 8 {
		c := mustDial(t, stay)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; !stop.Load(); n++ {
				if _, err := c.say(fmt.Sprintf("c%d-%d", i, n)); err != nil {
					errs <- fmt.Errorf("connection %d, line %d: %w", i, n, err)
					return
				}
				exchanged.Add(1)
			}
		}()
	}
	// Endpoints come and go, the other port goes away: 20 swaps while
	// the connections talk.
	for v := range 20 {
		withWest := stayLB
		withWest.Ports = []edgev1.LoadBalancerPort{stayLB.Ports[0]}
		if v%2 == 0 {
			withWest.Ports[0].Clusters = append([]edgev1.ClusterEndpoints{}, stayLB.Ports[0].Clusters[0], cluster("west", 1, west.endpoint()))
		}
		withWest.Generation = int64(v + 2)
		if err := p.Apply(modelOf(fmt.Sprint(v+1), withWest)); err != nil {
			t.Fatal(err)
		}
		before := exchanged.Load()
		testkit.Eventually(t, 10*time.Second, "lines go on after the swap", func(context.Context) error {
			if exchanged.Load() < before+8 {
				return errors.New("no lines since the swap")
			}
			return nil
		})
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if _, err := net.DialTimeout("tcp", addr(gone), time.Second); err == nil {
		t.Error("the port no longer served still accepts")
	}
	if err := onGone.closedByProxy(); err != nil {
		t.Errorf("an established connection of the port gone: %v", err)
	}
}
