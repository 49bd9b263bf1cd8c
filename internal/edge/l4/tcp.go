package l4

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetnet/fleetnet/internal/eastwest/tunnel"
)

// tcpListener accepts the connections of a TCP port, up to the proxy's
// caps: so many in all, so many of one client address.
type tcpListener struct {
	p      *Proxy
	key    sockKey
	ln     *net.TCPListener
	closed atomic.Bool

	// mu guards the connections the port holds: held in all, byClient
	// by client address (entries of at least one).
	mu       sync.Mutex
	held     int
	byClient map[netip.Addr]int
	// warned: a refusal for that reason was logged (once per port).
	warned map[string]*atomic.Bool
}

// Why a connection is refused when accepted: the reason label of
// fleetnet_edge_l4_connections_refused_total.
const (
	// refusedPortLimit: the port held Options.MaxConnsPerPort.
	refusedPortLimit = "port_limit"
	// refusedClientLimit: the client's address held
	// Options.MaxConnsPerClient on the port.
	refusedClientLimit = "client_limit"
)

func newTCPListener(p *Proxy, k sockKey, ln *net.TCPListener) *tcpListener {
	return &tcpListener{p: p, key: k, ln: ln, byClient: map[netip.Addr]int{},
		warned: map[string]*atomic.Bool{refusedPortLimit: new(atomic.Bool), refusedClientLimit: new(atomic.Bool)}}
}

func (l *tcpListener) addr() net.Addr { return l.ln.Addr() }

func (l *tcpListener) close() {
	l.closed.Store(true)
	_ = l.ln.Close()
}

func (l *tcpListener) serve() {
	defer l.p.loops.Done()
	var backoff time.Duration
	for {
		conn, err := l.ln.AcceptTCP()
		if err != nil {
			if l.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: wait a little, as
			// net/http's server does, instead of spinning.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			l.p.log.Error("accepting a connection failed", "port", l.key.String(), "err", err, "retryIn", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		client := clientAddr(conn)
		if reason := l.admit(client); reason != "" {
			l.refuse(conn, client, reason)
			continue
		}
		l.p.conns.Add(1)
		go func() {
			defer l.release(client)
			l.p.serveTCP(l.key, conn)
		}()
	}
}

// clientAddr is the address a connection came from, IPv4 in IPv6 as
// IPv4; the zero address when unknown.
func clientAddr(conn *net.TCPConn) netip.Addr {
	if a, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// admit counts a connection from client in, or returns why it is refused.
func (l *tcpListener) admit(client netip.Addr) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.byClient[client] >= l.p.opts.MaxConnsPerClient:
		return refusedClientLimit
	case l.held >= l.p.opts.MaxConnsPerPort:
		return refusedPortLimit
	}
	l.held++
	l.byClient[client]++
	return ""
}

// release counts out a connection that admit counted in, once it ended.
func (l *tcpListener) release(client netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held--
	if n := l.byClient[client] - 1; n > 0 {
		l.byClient[client] = n
	} else {
		delete(l.byClient, client)
	}
}

// refuse resets a connection over a cap at once, so that its client knows
// it is not served (as when no endpoint takes it), and counts it; the
// first refusal of each reason on the port is logged.
func (l *tcpListener) refuse(conn *net.TCPConn, client netip.Addr, reason string) {
	_ = conn.SetLinger(0)
	_ = conn.Close()
	lb := ""
	if svc := l.p.table.Load().services[l.key]; svc != nil {
		lb = svc.lb
	}
	l.p.metrics.refused.WithLabelValues(lb, l.key.String(), reason).Inc()
	if l.warned[reason].CompareAndSwap(false, true) {
		l.p.log.Warn("a connection was refused: the port holds its maximum of connections, in all or of the client's address (logged once per port and reason)",
			"loadBalancer", lb, "port", l.key.String(), "client", client, "reason", reason,
			"maxConnections", l.p.opts.MaxConnsPerPort, "maxConnectionsPerClient", l.p.opts.MaxConnsPerClient)
	}
}

// serveTCP forwards one accepted connection, on the table served when it
// was accepted.
func (p *Proxy) serveTCP(key sockKey, client *net.TCPConn) {
	defer p.conns.Done()
	t := p.table.Load()
	svc := t.services[key]
	if svc == nil {
		// The port is going away.
		_ = client.Close()
		return
	}
	cl, backend := p.dial(svc)
	if backend == nil {
		svc.unserved.conns.Inc()
		// A reset tells the client at once that nothing answers here.
		_ = client.SetLinger(0)
		_ = client.Close()
		return
	}
	c := &tcpConn{p: p, client: tcpSide{client}, backend: backend, key: key, lb: svc.lb, cluster: cl.name,
		drainGone: svc.drain, idle: svc.tcpIdle, m: cl.m}
	cl.m.conns.Inc()
	cl.m.active.Inc()
	defer cl.m.active.Dec()
	p.connMu.Lock()
	if p.forced {
		p.connMu.Unlock()
		c.close()
		return
	}
	p.tcpConn[c] = struct{}{}
	// A model served since this connection was accepted may already
	// drain its cluster or port: the swap's pass over the connections
	// came before this one registered.
	if cur := p.table.Load(); cur != t {
		c.rebind(cur)
	}
	p.connMu.Unlock()
	c.run()
	p.connMu.Lock()
	delete(p.tcpConn, c)
	p.connMu.Unlock()
}

// dial connects to an endpoint of svc: up to maxAttempts endpoints, each
// of a cluster not tried yet while one remains (pick's rules). An endpoint
// that fails is ejected until its check passes again. A cluster of
// another network is reached by a stream through its gateway.
func (p *Proxy) dial(svc *service) (*cluster, side) {
	var tried uint64
	var last *endpoint
	for range maxAttempts {
		cl, ep := svc.pick(tried, last, p.now())
		if ep == nil {
			break
		}
		conn, err := p.dialEndpoint(svc, cl, ep)
		if err == nil {
			return cl, conn
		}
		if p.dials.Err() != nil {
			return nil, nil
		}
		cl.m.dialFailures.Inc()
		tried |= cl.bit
		last = ep
		if connErr := (*tunnel.ConnectError)(nil); ep.via != nil && !errors.As(err, &connErr) {
			// The gateway was reached: it refused the stream, or its
			// service answered too slowly (or this edge has no east-west
			// role). That says something about one service behind it,
			// not about the gateway, which its other services keep.
			p.log.Debug("a stream through a gateway was refused", "loadBalancer", svc.lb, "port", svc.key.String(), "cluster", cl.name, "err", err)
			continue
		}
		// Logged when it ejects the endpoint: once per failure of an
		// endpoint, not once per connection while every one is down.
		if ep.health.Healthy() {
			p.log.Warn("connecting to an endpoint failed: ejected until its health check passes", "loadBalancer", svc.lb, "port", svc.key.String(),
				"cluster", cl.name, "endpoint", ep.hostport, "err", err)
		}
		ep.health.FailedToConnect()
	}
	if svc.warned.CompareAndSwap(false, true) {
		p.log.Warn("a connection found no endpoint to connect to and was reset (logged once per model)", "loadBalancer", svc.lb, "port", svc.key.String())
	}
	return nil, nil
}

// dialEndpoint connects to ep of cl: a TCP connection, or a stream
// through the gateway of cl's network.
func (p *Proxy) dialEndpoint(svc *service, cl *cluster, ep *endpoint) (side, error) {
	if ep.via != nil {
		if p.opts.Tunnel == nil {
			return nil, errNoTunnel
		}
		ctx, cancel := context.WithTimeout(p.dials, svc.connect)
		defer cancel()
		st, err := p.opts.Tunnel.Dial(ctx, tunnel.Peer{Cluster: cl.name, Address: ep.hostport}, *ep.via)
		if err != nil {
			return nil, err
		}
		return streamSide{st}, nil
	}
	d := net.Dialer{Timeout: svc.connect}
	conn, err := d.DialContext(p.dials, "tcp", ep.hostport)
	if err != nil {
		return nil, err
	}
	return tcpSide{conn.(*net.TCPConn)}, nil
}

// errNoTunnel: a model names a cluster behind a gateway, and this edge
// has no east-west role.
var errNoTunnel = errors.New("the cluster is on another network and this edge has no east-west gateway certificate (Options.Tunnel)")

// TCP keep-alive on both sides of a forwarded connection: a peer that
// vanished without a word is noticed within about 2.5 minutes rather than
// at the idle timeout (an hour by default). Go's own defaults.
const (
	keepAliveSeconds = 15
	keepAliveProbes  = 9
)

// tcpConn is a connection being forwarded.
type tcpConn struct {
	p               *Proxy
	client, backend side
	key             sockKey
	lb, cluster     string
	// drainGone is the drain of the load balancer the connection was
	// accepted for, for when its port goes away.
	drainGone time.Duration
	idle      time.Duration
	m         *clusterMetrics
	// last is when a byte last moved, either way (the proxy's clock).
	last atomic.Int64

	mu                    sync.Mutex
	idleTimer, drainTimer *time.Timer
	closed                bool
}

// run copies both ways until both sides have closed their writing half,
// either side fails, or the connection is closed (idle, drained).
func (c *tcpConn) run() {
	c.last.Store(c.p.now())
	c.mu.Lock()
	if !c.closed {
		c.idleTimer = time.AfterFunc(c.idle, c.checkIdle)
	}
	c.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.copy(c.backend, c.client, c.m.bytesIn)
	}()
	c.copy(c.client, c.backend, c.m.bytesOut)
	<-done
	c.close()
}

// copy forwards what src sends to dst. The end of src's stream is passed
// on as a half-close (dst's writing half closes; the other direction goes
// on); a reset is passed on as a reset of both sides.
func (c *tcpConn) copy(dst, src side, bytes prometheus.Counter) {
	r, err := src.reader()
	if err != nil {
		c.closeWith(false)
		return
	}
	for {
		buf, n, err := r.read(&tcpBuffers)
		if err != nil {
			c.closeWith(isReset(err))
			return
		}
		if n == 0 {
			if err := dst.CloseWrite(); err != nil {
				c.closeWith(false)
			}
			return
		}
		c.last.Store(c.p.now())
		bytes.Add(float64(n))
		_, err = dst.Write((*buf)[:n])
		tcpBuffers.Put(buf)
		if err != nil {
			c.closeWith(isReset(err))
			return
		}
	}
}

// checkIdle closes the connection when no byte moved for its idle time,
// and otherwise looks again when that time will have passed.
func (c *tcpConn) checkIdle() {
	quiet := time.Duration(c.p.now() - c.last.Load())
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	if quiet >= c.idle {
		c.closeLocked(false)
		return
	}
	c.idleTimer.Reset(c.idle - quiet)
}

// rebind applies a new table to an established connection: it may go on
// while its load balancer still serves its port and its cluster is there
// and not draining; otherwise it is closed after the drain time. Callers
// hold p.connMu.
func (c *tcpConn) rebind(t *table) {
	svc := t.services[c.key]
	switch {
	case svc == nil || svc.lb != c.lb:
		c.drainWithin(c.drainGone)
	case svc.byName[c.cluster] == nil || svc.byName[c.cluster].draining:
		c.drainWithin(svc.drain)
	default:
		c.undrain()
	}
}

// drainWithin closes the connection after d, unless a drain already
// runs (the first drain's deadline holds).
func (c *tcpConn) drainWithin(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.drainTimer != nil {
		return
	}
	if d <= 0 {
		c.closeLocked(false)
		return
	}
	c.drainTimer = time.AfterFunc(d, c.close)
}

// undrain cancels a drain: the cluster serves again.
func (c *tcpConn) undrain() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.drainTimer != nil {
		c.drainTimer.Stop()
		c.drainTimer = nil
	}
}

func (c *tcpConn) close() { c.closeWith(false) }

func (c *tcpConn) closeWith(reset bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeLocked(reset)
}

func (c *tcpConn) closeLocked(reset bool) {
	if c.closed {
		return
	}
	c.closed = true
	if c.idleTimer != nil {
		c.idleTimer.Stop()
	}
	if c.drainTimer != nil {
		c.drainTimer.Stop()
	}
	if reset {
		c.client.reset()
		c.backend.reset()
	}
	_ = c.client.Close()
	_ = c.backend.Close()
}

// rebindConns applies a new table to every established connection.
func (p *Proxy) rebindConns(t *table) {
	p.connMu.Lock()
	defer p.connMu.Unlock()
	for c := range p.tcpConn {
		c.rebind(t)
	}
}

// tcpBuffers lend the copies their buffers, only while data moves.
var tcpBuffers = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}
