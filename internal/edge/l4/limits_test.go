package l4_test

import (
	"bufio"
	"fmt"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/edge/edgetest"
	"github.com/fleetnet/fleetnet/internal/edge/l4"
	"github.com/fleetnet/fleetnet/internal/testkit"
)

// dialFrom connects to the proxy's port from a loopback address of its
// own (127.0.0.0/8 is all loopback): one client host each.
func dialFrom(ip string, port int32) (*client, error) {
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c, err := d.Dial("tcp", addr(port))
	if err != nil {
		return nil, err
	}
	return &client{c: c.(*net.TCPConn), r: bufio.NewReader(c)}, nil
}

// open returns the connections the backend holds.
func (b *tcpBackend) open() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.conns)
}

// servedThroughout connects from ip, says a line and closes, again and
// again until stop is called, which fails the test for any connection not
// served.
func servedThroughout(t *testing.T, ip string, port int32) (stop func()) {
	t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	served := 0
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			c, err := dialFrom(ip, port)
			if err == nil {
				_, err = c.say("hi")
				_ = c.c.Close()
			}
			if err != nil {
				t.Errorf("the well-behaved client %s: %v", ip, err)
				return
			}
			served++
		}
	})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			close(done)
			wg.Wait()
			if served == 0 {
				t.Errorf("the well-behaved client %s was not served", ip)
			}
		})
	}
	// Before the proxy closes, should the test end early.
	t.Cleanup(stop)
	return stop
}

// attack opens n connections from ip and says a line on each: those
// served are returned, open; the others were reset (on loopback the reset
// may come before the dial returns).
func attack(t *testing.T, ip string, port int32, n int) (served []*client) {
	t.Helper()
	for range n {
		c, err := dialFrom(ip, port)
		if err != nil {
			continue
		}
		if _, err := c.say("hi"); err != nil {
			_ = c.c.Close()
			continue
		}
		t.Cleanup(func() { _ = c.c.Close() })
		served = append(served, c)
	}
	return served
}

// One client address holds at most its cap of a port's connections; the
// rest are reset and counted, while another address is served
// throughout. Once the attacker lets go, what it held is given back.
func TestTCPClientCap(t *testing.T) {
	east := startTCP(t, "east-1")
	port := int32(testkit.FreePort(t))
	p, reg := newProxy(t, func(o *l4.Options) { o.MaxConnsPerClient = 4 })
	if err := p.Apply(modelOf("1", lb("db", port, edgev1.ProtocolTCP, cluster("east", 1, east.endpoint())))); err != nil {
		t.Fatal(err)
	}
	if _, err := once(port); err != nil {
		t.Fatal(err)
	}
	testkit.Until(t, 10*time.Second, "the first connection ended", func() bool { return east.open() == 0 })
	goroutines := runtime.NumGoroutine()
	stop := servedThroughout(t, "127.0.0.2", port)
	held := attack(t, "127.0.0.1", port, 10)
	stop()
	if len(held) != 4 {
		t.Errorf("the attacker holds %d connections, want its cap of 4", len(held))
	}
	refused := []string{"load_balancer", "demo/db", "port", fmt.Sprintf("%d/TCP", port), "reason", "client_limit"}
	if got := edgetest.Metric(t, reg, "fleetnet_edge_l4_connections_refused_total", refused...); got != 6 {
		t.Errorf("refused for the client's cap: %v, want 6", got)
	}
	// The well-behaved client's last connection may still be closing.
	testkit.Until(t, 10*time.Second, "the backend holds the attacker's 4 connections", func() bool { return east.open() == 4 })

	for _, c := range held {
		_ = c.c.Close()
	}
	testkit.Until(t, 10*time.Second, "the backend's connections closed", func() bool { return east.open() == 0 })
	testkit.Until(t, 10*time.Second, fmt.Sprintf("goroutines back to %d", goroutines), func() bool { return runtime.NumGoroutine() <= goroutines })
	if again := attack(t, "127.0.0.1", port, 4); len(again) != 4 {
		t.Errorf("after it let go, the attacker's address got %d connections, want 4", len(again))
	}
}

// A port holds at most its cap of connections, whatever their addresses;
// past it a connection is reset and counted, until one ends.
func TestTCPPortCap(t *testing.T) {
	east := startTCP(t, "east-1")
	port := int32(testkit.FreePort(t))
	p, reg := newProxy(t, func(o *l4.Options) { o.MaxConnsPerPort, o.MaxConnsPerClient = 4, 2 })
	if err := p.Apply(modelOf("1", lb("db", port, edgev1.ProtocolTCP, cluster("east", 1, east.endpoint())))); err != nil {
		t.Fatal(err)
	}
	first := attack(t, "127.0.0.1", port, 2)
	if second := attack(t, "127.0.0.3", port, 2); len(first)+len(second) != 4 {
		t.Fatalf("%d and %d connections served, want 2 and 2", len(first), len(second))
	}
	if late := attack(t, "127.0.0.4", port, 1); len(late) != 0 {
		t.Error("a connection past the port's cap was served")
	}
	refused := []string{"load_balancer", "demo/db", "port", fmt.Sprintf("%d/TCP", port), "reason", "port_limit"}
	if got := edgetest.Metric(t, reg, "fleetnet_edge_l4_connections_refused_total", refused...); got != 1 {
		t.Errorf("refused for the port's cap: %v, want 1", got)
	}
	_ = first[0].c.Close()
	testkit.Until(t, 10*time.Second, "a connection is served once one ended", func() bool {
		c, err := dialFrom("127.0.0.4", port)
		if err != nil {
			return false
		}
		_, err = c.say("hi")
		_ = c.c.Close()
		return err == nil
	})
}
