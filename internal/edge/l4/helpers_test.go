package l4_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/edge/l4"
	"github.com/fleetnet/fleetnet/internal/testkit"

	"github.com/prometheus/client_golang/prometheus"
)

// tcpBackend is a line echo server on loopback: every line it reads is
// answered with "<name> <line>"; the end of the client's stream with
// "<name> bye", after which it closes. Health checks connect and send
// nothing; they are not counted.
type tcpBackend struct {
	name string
	ln   net.Listener
	port int

	mu     sync.Mutex
	conns  map[net.Conn]bool
	served int
}

func startTCP(t *testing.T, name string) *tcpBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &tcpBackend{name: name, ln: ln, port: ln.Addr().(*net.TCPAddr).Port, conns: map[net.Conn]bool{}}
	go b.accept()
	t.Cleanup(b.stop)
	return b
}

func (b *tcpBackend) accept() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		b.conns[c] = true
		b.mu.Unlock()
		go b.serve(c)
	}
}

func (b *tcpBackend) serve(c net.Conn) {
	defer func() {
		b.mu.Lock()
		delete(b.conns, c)
		b.mu.Unlock()
		_ = c.Close()
	}()
	r := bufio.NewReader(c)
	first := true
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) && line == "" {
				fmt.Fprintf(c, "%s bye\n", b.name)
			}
			return
		}
		if first {
			first = false
			b.mu.Lock()
			b.served++
			b.mu.Unlock()
		}
		fmt.Fprintf(c, "%s %s", b.name, line)
	}
}

// stop closes the listener and every connection: the endpoint is gone.
func (b *tcpBackend) stop() {
	_ = b.ln.Close()
	b.mu.Lock()
	defer b.mu.Unlock()
	for c := range b.conns {
		_ = c.Close()
	}
}

func (b *tcpBackend) endpoint() edgev1.Endpoint {
	return edgev1.Endpoint{Address: "127.0.0.1", Port: int32(b.port), Ready: true, Serving: true}
}

// udpBackend answers every datagram with "<name> <client port> <payload>".
type udpBackend struct {
	name string
	conn *net.UDPConn
	port int
}

func startUDP(t *testing.T, name string) *udpBackend {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	b := &udpBackend{name: name, conn: c, port: c.LocalAddr().(*net.UDPAddr).Port}
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			_, _ = c.WriteToUDPAddrPort(fmt.Appendf(nil, "%s %d %s", name, from.Port(), buf[:n]), from)
		}
	}()
	t.Cleanup(func() { _ = c.Close() })
	return b
}

func (b *udpBackend) endpoint() edgev1.Endpoint {
	return edgev1.Endpoint{Address: "127.0.0.1", Port: int32(b.port), Ready: true, Serving: true}
}

// cluster is a cluster of weight w with the endpoints given.
func cluster(name string, w int32, eps ...edgev1.Endpoint) edgev1.ClusterEndpoints {
	return edgev1.ClusterEndpoints{Cluster: name, Weight: w, EffectiveWeight: int64(w) * int64(len(eps)), Endpoints: eps}
}

// lb is a load balancer demo/<name> of one port; mod adjusts it.
func lb(name string, port int32, proto string, clusters ...edgev1.ClusterEndpoints) edgev1.LoadBalancer {
	return edgev1.LoadBalancer{
		Namespace: "demo", Name: name, Generation: 1, Class: l4.ClassEdge,
		Ports: []edgev1.LoadBalancerPort{{Port: port, Protocol: proto, TargetPort: 9000, Clusters: clusters}},
		// Checks often, so that endpoints come back quickly.
		HealthCheck:          edgev1.HealthCheck{Type: edgev1.HealthCheckTCP, IntervalMillis: 50, TimeoutMillis: 40, HealthyThreshold: 1, UnhealthyThreshold: 1},
		ConnectTimeoutMillis: 1000, TCPIdleMillis: 60_000, UDPIdleMillis: 60_000, DrainMillis: 30_000,
	}
}

func modelOf(version string, lbs ...edgev1.LoadBalancer) *edgev1.Model {
	return &edgev1.Model{Version: version, LoadBalancers: lbs}
}

// newProxy starts a proxy on loopback, closed by the test's cleanup.
func newProxy(t *testing.T, mod func(*l4.Options)) (*l4.Proxy, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	o := l4.Options{ListenHost: "127.0.0.1", Registerer: reg, Log: testLog()}
	if mod != nil {
		mod(&o)
	}
	p := l4.New(o)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p, reg
}

func testLog() *slog.Logger {
	level := slog.LevelWarn + 4 // quiet unless L4_TEST_LOG is set
	if os.Getenv("L4_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

func addr(port int32) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))) }

// client is a connection through the proxy, line by line.
type client struct {
	c *net.TCPConn
	r *bufio.Reader
}

func dial(port int32) (*client, error) {
	c, err := net.DialTimeout("tcp", addr(port), 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &client{c: c.(*net.TCPConn), r: bufio.NewReader(c)}, nil
}

func mustDial(t *testing.T, port int32) *client {
	t.Helper()
	c, err := dial(port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.c.Close() })
	return c
}

// say sends a line and returns the answering backend's name.
func (c *client) say(line string) (string, error) {
	_ = c.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c.c, "%s\n", line); err != nil {
		return "", err
	}
	got, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	name, rest, _ := strings.Cut(strings.TrimSuffix(got, "\n"), " ")
	if rest != line {
		return "", fmt.Errorf("sent %q, got %q", line, got)
	}
	return name, nil
}

// once connects, says one line and closes: which backend answered.
func once(port int32) (string, error) {
	c, err := dial(port)
	if err != nil {
		return "", err
	}
	defer c.c.Close()
	return c.say("hi")
}

// closedByProxy waits until the proxy closes the connection: a read ends
// with EOF or a reset.
func (c *client) closedByProxy() error {
	_ = c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := c.r.ReadString('\n')
	if err == nil {
		return errors.New("the connection still answers")
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return errors.New("the connection was not closed")
	}
	return nil
}

// udpClient sends datagrams through the proxy from one address.
type udpClient struct{ c *net.UDPConn }

func newUDPClient(t *testing.T, port int32) *udpClient {
	t.Helper()
	c, err := net.DialUDP("udp", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(port)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &udpClient{c: c}
}

// ask sends payload and waits a little for the answer: the backend's
// name and the source port it saw (the flow's socket). UDP may lose a
// datagram, so callers retry through eventually.
func (u *udpClient) ask(payload string) (name string, port int, err error) {
	if _, err := u.c.Write([]byte(payload)); err != nil {
		return "", 0, err
	}
	_ = u.c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	buf := make([]byte, 64<<10)
	n, err := u.c.Read(buf)
	if err != nil {
		return "", 0, err
	}
	f := strings.SplitN(string(buf[:n]), " ", 3)
	if len(f) != 3 || f[2] != payload {
		return "", 0, fmt.Errorf("sent %q, got %q", payload, buf[:n])
	}
	port, err = strconv.Atoi(f[1])
	return f[0], port, err
}

// mustAsk asks until an answer comes.
func (u *udpClient) mustAsk(t *testing.T, payload string) (name string, port int) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, "an answer to "+payload, func(context.Context) (err error) {
		name, port, err = u.ask(payload)
		return err
	})
	return name, port
}
