// Package l4 is fleetnet-edge's L4 data plane: it serves the model's
// MultiClusterLoadBalancers of class edge as TCP listeners and UDP
// sockets, and forwards each TCP connection, or each UDP flow (a client
// address and port), to an endpoint of one of the clusters that export
// the service.
//
// A connection or flow goes to a cluster in proportion to its weight
// times its healthy ready endpoints, then to one of those uniformly
// (internal/edge/pick). TCP endpoints are checked by a TCP connect
// (internal/edge/health, shared with the HTTP proxy) and ejected at once
// when a connection to them fails; the connection is then tried on
// another cluster. TCP is copied both ways with half-close kept, through
// pooled buffers taken only while data moves (tcp.go). UDP flows keep
// their endpoint while it is healthy, end after their idle time, and are
// bounded per port (udp.go).
//
// A model is compiled into an immutable table and swapped whole. A port
// that a new model no longer serves stops accepting at once; its
// established connections, like those to a cluster that starts draining,
// may continue for the load balancer's DrainMillis and are then closed.
package l4

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/eastwest/tunnel"
	"github.com/fleetnet/fleetnet/internal/edge/health"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultMaxUDPFlows bounds the flows of a UDP port unless
// Options.MaxUDPFlows says otherwise.
const DefaultMaxUDPFlows = 65536

// DefaultMaxConnsPerPort caps the TCP connections of a port unless
// Options.MaxConnsPerPort says otherwise: the HTTP listeners' cap
// (httplimits' MaxConnections).
const DefaultMaxConnsPerPort = 16384

// DefaultMaxConnsPerClient caps the TCP connections of one client address
// on a port unless Options.MaxConnsPerClient says otherwise: a quarter of
// the port's, so that one host cannot take them all, while many clients
// behind one address (a NAT gateway, kube-proxy's SNAT with
// externalTrafficPolicy Cluster) still get a fair share.
const DefaultMaxConnsPerClient = DefaultMaxConnsPerPort / 4

// maxAttempts bounds the endpoints a TCP connection tries: the first and
// two more, each on a cluster not tried yet while one remains.
const maxAttempts = 3

// udpEjection is how long a UDP endpoint that refused a datagram (ICMP
// port unreachable) takes no new flow: the passive ejection time of the
// HTTP proxy's default policy. UDP ports have no active check.
var udpEjection = millis(edgev1.DefaultBackendPolicy().Passive.EjectionMillis)

// Options configure a Proxy.
type Options struct {
	// ListenHost is the address the load balancers' ports bind, e.g.
	// 127.0.0.1 or "" for every interface: the host of the HTTP
	// listeners.
	ListenHost string
	Log        *slog.Logger
	// Registerer receives the metrics; none when nil.
	Registerer prometheus.Registerer
	// Health checks the TCP endpoints; a checker shared with the HTTP
	// proxy. The proxy runs its own when nil.
	Health *health.Checker
	// MaxUDPFlows bounds the flows of each UDP port; at the bound a new
	// flow evicts the one idle longest. DefaultMaxUDPFlows when 0.
	MaxUDPFlows int
	// MaxConnsPerPort caps the TCP connections a port holds at once;
	// past it a new connection is refused (reset) and counted.
	// DefaultMaxConnsPerPort when 0.
	MaxConnsPerPort int
	// MaxConnsPerClient caps those of one client address on a port.
	// DefaultMaxConnsPerClient when 0.
	MaxConnsPerClient int
	// Tunnel opens streams to the gateways of clusters on other networks
	// (a model's ClusterEndpoints.Via); nil for an edge without the
	// east-west role, which then cannot reach such clusters.
	Tunnel Tunnel
}

// Tunnel opens a stream through another network's east-west gateway
// (tunnel.Dialer).
type Tunnel interface {
	Dial(ctx context.Context, p tunnel.Peer, t tunnel.Target) (*tunnel.Stream, error)
}

// Proxy serves the load balancers of models.
type Proxy struct {
	opts      Options
	log       *slog.Logger
	health    *health.Checker
	ownHealth bool
	// checks are the units of the served table.
	checks  *health.Set
	metrics *metrics
	table   atomic.Pointer[table]
	// epoch is the origin of now: monotonic nanoseconds, cheap to store
	// in an atomic on every read.
	epoch time.Time
	// dials ends dials in progress when the proxy closes.
	dials      context.Context
	cancelDial context.CancelFunc

	mu      sync.Mutex
	sockets map[sockKey]socket
	pending *Change
	closed  bool
	// loops counts accept loops, UDP readers and flows' reply readers;
	// conns the TCP connections being served.
	loops, conns sync.WaitGroup

	connMu  sync.Mutex
	tcpConn map[*tcpConn]struct{}
	// forced: Close's time is up; a connection that registers now is
	// closed at once.
	forced bool
}

// socket is a bound port: a TCP listener or a UDP socket.
type socket interface {
	// serve accepts or reads until close; run in a goroutine counted in
	// the proxy's loops.
	serve()
	// close stops accepting (TCP; established connections go on) or
	// closes the socket and its flows (UDP).
	close()
	addr() net.Addr
}

// New returns a proxy that serves nothing until Apply.
func New(o Options) *Proxy {
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	if o.MaxUDPFlows <= 0 {
		o.MaxUDPFlows = DefaultMaxUDPFlows
	}
	if o.MaxConnsPerPort <= 0 {
		o.MaxConnsPerPort = DefaultMaxConnsPerPort
	}
	if o.MaxConnsPerClient <= 0 {
		o.MaxConnsPerClient = DefaultMaxConnsPerClient
	}
	p := &Proxy{opts: o, log: log, health: o.Health, epoch: time.Now(), sockets: map[sockKey]socket{}, tcpConn: map[*tcpConn]struct{}{}}
	if p.health == nil {
		p.health, p.ownHealth = health.New(), true
	}
	p.checks = p.health.NewSet()
	p.dials, p.cancelDial = context.WithCancel(context.Background())
	p.table.Store(&table{services: map[sockKey]*service{}, lbs: map[string]*edgev1.LoadBalancer{}})
	p.metrics = newMetrics(o.Registerer, p.table.Load, p.now)
	return p
}

// now is the proxy's clock: nanoseconds since New, monotonic.
func (p *Proxy) now() int64 { return int64(time.Since(p.epoch)) }

// Apply serves m's load balancers from now on. An error (a port that a
// Gateway listener or another load balancer also serves, a port the edge
// cannot bind) leaves what was served before in place. Unlike Prepare, it
// refuses the whole model for a port it cannot bind.
func (p *Proxy) Apply(m *edgev1.Model) error {
	c, err := p.Prepare(m, nil)
	if err != nil {
		return err
	}
	if refused := c.Refused(); len(refused) > 0 {
		c.Abort()
		errs := make([]error, len(refused))
		for i, r := range refused {
			errs[i] = r
		}
		return errors.Join(errs...)
	}
	if err := c.Commit(); err != nil {
		c.Abort()
		return err
	}
	return nil
}

// Refusal is a port of a load balancer that the edge could not bind (in
// use by another process, or by the edge itself): Prepare leaves it out,
// and the change serves the rest of the model.
type Refusal struct {
	// LoadBalancer is its namespace/name.
	LoadBalancer string
	Port         int32
	Protocol     string
	Err          error
}

func (r Refusal) Error() string {
	return fmt.Sprintf("MultiClusterLoadBalancer %s: %v", r.LoadBalancer, r.Err)
}

// Change is a model that Prepare checked and whose new ports it bound,
// not served yet: Commit serves it, Abort forgets it. One change at a
// time.
type Change struct {
	p *Proxy
	t *table
	// skipped are ports of protocols this edge does not know.
	skipped []string
	// opened are the sockets Prepare bound, not serving yet.
	opened map[sockKey]socket
	// deferred are TCP ports that another listener of the edge (the HTTP
	// proxy) holds now and gives up with this model: Commit binds them.
	deferred []sockKey
	// released are TCP listeners of this proxy that Prepare closed
	// because the model gives their ports to HTTP listeners.
	released map[sockKey]bool
	// refused are the new ports Prepare could not bind, left out.
	refused []Refusal
}

// Refused are the ports of the model that Prepare could not bind: the
// change serves the model without them.
func (c *Change) Refused() []Refusal { return c.refused }

// Prepare checks m and binds the ports it adds, so that Commit cannot
// fail for a port it can bind, and nothing changes for traffic if the
// edge's other data plane then refuses the model. A port it cannot bind
// is left out of the change and reported (Change.Refused): one load
// balancer's port in use must not stop every other update of the edge.
// heldElsewhere reports the TCP ports another listener of the edge holds
// now (the HTTP proxy's listeners, which a model may hand over to a load
// balancer): those are bound by Commit, after the HTTP proxy let them go.
// The proxy's own TCP ports that m gives to a Gateway listener stop
// accepting now, so that the HTTP proxy can bind them; Abort listens on
// them again.
func (p *Proxy) Prepare(m *edgev1.Model, heldElsewhere func(port int32) bool) (*Change, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return nil, errors.New("the L4 proxy is closed")
	case p.pending != nil:
		return nil, errors.New("another L4 change is pending")
	}
	t, skipped, err := compile(m, p.metrics)
	if err != nil {
		return nil, err
	}
	c := &Change{p: p, t: t, skipped: skipped, opened: map[sockKey]socket{}, released: map[sockKey]bool{}}
	for _, k := range sortedKeys(t.services) {
		if _, ok := p.sockets[k]; ok {
			continue
		}
		if k.proto == edgev1.ProtocolTCP && heldElsewhere != nil && heldElsewhere(k.port) {
			c.deferred = append(c.deferred, k)
			continue
		}
		s, err := p.bind(k)
		if err != nil {
			c.refused = append(c.refused, Refusal{LoadBalancer: t.services[k].lb, Port: k.port, Protocol: k.proto, Err: err})
			delete(t.services, k)
			continue
		}
		c.opened[k] = s
	}
	http := gatewayPorts(m)
	for k, s := range p.sockets {
		if k.proto == edgev1.ProtocolTCP && http[k.port] && t.services[k] == nil {
			s.close()
			c.released[k] = true
		}
	}
	p.pending = c
	return c, nil
}

// Commit serves the change's model: binds the deferred ports (an error
// changes nothing more; Abort then), swaps the table, starts accepting on
// the new ports, stops accepting on those gone, and gives the
// connections and flows of ports gone and of clusters that drain their
// deadline.
func (c *Change) Commit() error {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pending != c {
		return errors.New("the L4 change is not pending")
	}
	late := map[sockKey]socket{}
	for _, k := range c.deferred {
		s, err := p.bind(k)
		if err != nil {
			for _, s := range late {
				s.close()
			}
			return fmt.Errorf("MultiClusterLoadBalancer %s: %w", c.t.services[k].lb, err)
		}
		late[k] = s
	}
	p.pending = nil
	t := c.t
	// Health before the swap: picks read it through the table.
	track(p.checks, t)
	old := p.table.Load()
	carryOver(old, t)
	p.table.Store(t)
	for k, s := range p.sockets {
		if t.services[k] == nil {
			if !c.released[k] {
				s.close()
			}
			delete(p.sockets, k)
		}
	}
	for _, opened := range []map[sockKey]socket{c.opened, late} {
		for k, s := range opened {
			p.sockets[k] = s
			p.loops.Add(1)
			go s.serve()
		}
	}
	p.rebindConns(t)
	for _, s := range p.sockets {
		if u, ok := s.(*udpSocket); ok {
			u.rebind(t)
		}
	}
	p.logChanges(old, t, c.skipped)
	return nil
}

// Abort forgets the change: closes what Prepare bound and listens again
// on the ports it released.
func (c *Change) Abort() {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pending != c {
		return
	}
	p.pending = nil
	for _, s := range c.opened {
		s.close()
	}
	for k := range c.released {
		s, err := p.bind(k)
		if err != nil {
			p.log.Error("a port released for a refused model could not be bound again", "port", k.String(), "loadBalancer", p.table.Load().services[k].lb, "err", err)
			delete(p.sockets, k)
			continue
		}
		p.sockets[k] = s
		p.loops.Add(1)
		go s.serve()
	}
}

// bind opens a port's socket; it serves nothing until its serve runs.
// Callers hold p.mu.
func (p *Proxy) bind(k sockKey) (socket, error) {
	addr := net.JoinHostPort(p.opts.ListenHost, strconv.Itoa(int(k.port)))
	if k.proto == edgev1.ProtocolUDP {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, fmt.Errorf("listening on port %s: %w", k, err)
		}
		return newUDPSocket(p, k, pc.(*net.UDPConn)), nil
	}
	lc := tcpListenConfig()
	ln, err := lc.Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on port %s: %w", k, err)
	}
	return newTCPListener(p, k, ln.(*net.TCPListener)), nil
}

// Addr returns the address a port of the model is bound to (protocol
// edgev1.ProtocolTCP or edgev1.ProtocolUDP), nil when it is not.
func (p *Proxy) Addr(port int32, protocol string) net.Addr {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.sockets[sockKey{port: port, proto: protocol}]; s != nil {
		return s.addr()
	}
	return nil
}

// Close stops accepting on every port and closes every UDP flow, lets
// the established TCP connections finish until ctx ends, then closes
// them, and stops the health checks of the proxy's endpoints.
func (p *Proxy) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	if c := p.pending; c != nil {
		for _, s := range c.opened {
			s.close()
		}
		p.pending = nil
	}
	for k, s := range p.sockets {
		s.close()
		delete(p.sockets, k)
	}
	p.mu.Unlock()
	p.loops.Wait()
	if p.ownHealth {
		p.health.Close()
	} else {
		p.checks.Release()
	}
	done := make(chan struct{})
	go func() { p.conns.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("closing TCP connections still open: %w", ctx.Err())
		p.cancelDial()
		p.connMu.Lock()
		p.forced = true
		for c := range p.tcpConn {
			c.close()
		}
		p.connMu.Unlock()
		<-done
	}
	p.cancelDial()
	return err
}

// logChanges logs, at info, the load balancers that the new table starts,
// changes (generation, ports, draining clusters) or stops serving.
func (p *Proxy) logChanges(old, t *table, skipped []string) {
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range t.lbs {
			if !yield(n) {
				return
			}
		}
	}) {
		lb, prev := t.lbs[name], old.lbs[name]
		ports, draining := t.ports(name), t.draining(name)
		switch {
		case prev == nil:
			p.log.Info("serving load balancer", "loadBalancer", name, "generation", lb.Generation, "ports", ports, "drainingClusters", draining)
		case prev.Generation != lb.Generation || old.ports(name) != ports || old.draining(name) != draining:
			p.log.Info("load balancer changed", "loadBalancer", name, "generation", lb.Generation, "ports", ports, "drainingClusters", draining)
		}
	}
	for name, lb := range old.lbs {
		if t.lbs[name] == nil {
			p.log.Info("stopped serving load balancer", "loadBalancer", name, "ports", old.ports(name), "drain", millis(max(lb.DrainMillis, 0)))
		}
	}
	for _, s := range skipped {
		p.log.Warn("port left out: this edge does not know its protocol", "port", s)
	}
}

func sortedKeys(m map[sockKey]*service) []sockKey {
	ks := make([]sockKey, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(a, b sockKey) int {
		if a.port != b.port {
			return int(a.port - b.port)
		}
		if a.proto < b.proto {
			return -1
		}
		if a.proto > b.proto {
			return 1
		}
		return 0
	})
	return ks
}
