package l4

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// udpSocket serves a UDP port. Each flow (a client address and port) has
// a socket of its own connected to its endpoint, so that the endpoint's
// replies can be told apart; they go back to the client from the port's
// socket.
type udpSocket struct {
	p      *Proxy
	key    sockKey
	conn   *net.UDPConn
	max    int
	closed atomic.Bool

	mu    sync.Mutex
	flows map[netip.AddrPort]*flow
	// head is the flow whose client sent last, tail the one whose client
	// sent least recently: where eviction looks.
	head, tail *flow
}

// flow is one client's traffic through a UDP port.
type flow struct {
	s      *udpSocket
	client netip.AddrPort
	// lb and cluster say what the flow was created for; drainGone is the
	// load balancer's drain then, for when the port changes hands.
	lb, cluster string
	drainGone   time.Duration
	idle        time.Duration
	up          *net.UDPConn
	m           *clusterMetrics
	// last is when a datagram last passed, either way.
	last atomic.Int64

	// Under s.mu.
	ep                    *endpoint
	prev, next            *flow
	idleTimer, drainTimer *time.Timer
	removed               bool
}

func newUDPSocket(p *Proxy, k sockKey, conn *net.UDPConn) *udpSocket {
	return &udpSocket{p: p, key: k, conn: conn, max: p.opts.MaxUDPFlows, flows: map[netip.AddrPort]*flow{}}
}

func (s *udpSocket) addr() net.Addr { return s.conn.LocalAddr() }

func (s *udpSocket) close() {
	s.closed.Store(true)
	_ = s.conn.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.flows {
		s.removeLocked(f)
	}
}

// serve reads the clients' datagrams; one reader per port.
func (s *udpSocket) serve() {
	defer s.p.loops.Done()
	buf := make([]byte, 64<<10)
	var backoff time.Duration
	for {
		n, from, err := s.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if s.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.p.log.Error("reading a datagram failed", "port", s.key.String(), "err", err, "retryIn", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		s.forward(buf[:n], from)
	}
}

// forward sends a client's datagram to its flow's endpoint: the flow's
// endpoint while it is healthy, or one picked for a new flow.
func (s *udpSocket) forward(b []byte, from netip.AddrPort) {
	now := s.p.now()
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return
	}
	f := s.flows[from]
	if f != nil && !f.ep.healthy(now) {
		// Another endpoint, if one is healthy; otherwise the flow stays
		// where it is rather than moving on every datagram.
		if svc := s.p.table.Load().services[s.key]; svc != nil && svc.hasHealthy(now) {
			s.removeLocked(f)
			f = nil
		}
	}
	if f == nil {
		if f = s.newFlowLocked(from, now); f == nil {
			s.mu.Unlock()
			return
		}
	} else {
		s.moveToFrontLocked(f)
	}
	up, ep := f.up, f.ep
	s.mu.Unlock()
	f.last.Store(now)
	if _, err := up.Write(b); err != nil {
		if isRefused(err) {
			ep.refuse(now)
			f.m.dialFailures.Inc()
		}
		return
	}
	f.m.dgramIn.Inc()
	f.m.bytesIn.Add(float64(len(b)))
}

// newFlowLocked picks an endpoint for a new flow and connects a socket
// to it; at the port's bound of flows it first evicts one. It returns nil
// when no endpoint can take the flow: the datagram is dropped. Callers
// hold s.mu.
func (s *udpSocket) newFlowLocked(from netip.AddrPort, now int64) *flow {
	svc := s.p.table.Load().services[s.key]
	if svc == nil {
		return nil
	}
	cl, ep := svc.pick(0, nil, now)
	if ep == nil {
		svc.unserved.dgramIn.Inc()
		if svc.warned.CompareAndSwap(false, true) {
			s.p.log.Warn("a datagram found no endpoint and was dropped (logged once per model)", "loadBalancer", svc.lb, "port", s.key.String())
		}
		return nil
	}
	if len(s.flows) >= s.max {
		s.evictLocked()
	}
	up, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(ep.addr))
	if err != nil {
		cl.m.dialFailures.Inc()
		s.p.log.Error("opening a flow's socket failed", "loadBalancer", svc.lb, "port", s.key.String(), "endpoint", ep.hostport, "err", err)
		return nil
	}
	f := &flow{s: s, client: from, lb: svc.lb, cluster: cl.name, drainGone: svc.drain, idle: svc.udpIdle, up: up, m: cl.m, ep: ep}
	f.last.Store(now)
	s.flows[from] = f
	s.pushFrontLocked(f)
	cl.m.flows.Inc()
	f.idleTimer = time.AfterFunc(f.idle, f.checkIdle)
	s.p.loops.Add(1)
	go f.replies()
	return f
}

// replies sends the endpoint's datagrams back to the client, until the
// flow's socket closes.
func (f *flow) replies() {
	s := f.s
	defer s.p.loops.Done()
	r, err := newReader(f.up)
	if err != nil {
		return
	}
	for {
		buf, n, err := r.read(&udpBuffers)
		if err != nil {
			if isRefused(err) {
				// ICMP port unreachable: nothing listens there.
				s.mu.Lock()
				ep := f.ep
				s.mu.Unlock()
				ep.refuse(s.p.now())
				f.m.dialFailures.Inc()
				continue
			}
			return
		}
		f.last.Store(s.p.now())
		var b []byte
		if buf != nil {
			b = (*buf)[:n]
		}
		_, err = s.conn.WriteToUDPAddrPort(b, f.client)
		if buf != nil {
			udpBuffers.Put(buf)
		}
		if err == nil {
			f.m.dgramOut.Inc()
			f.m.bytesOut.Add(float64(n))
		}
	}
}

// refuse ejects a UDP endpoint from new flows for udpEjection.
func (e *endpoint) refuse(now int64) {
	if e.health == nil {
		e.refusedUntil.Store(now + int64(udpEjection))
	}
}

// checkIdle removes the flow when no datagram passed for its idle time,
// and otherwise looks again when that time will have passed.
func (f *flow) checkIdle() {
	s := f.s
	quiet := time.Duration(s.p.now() - f.last.Load())
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.removed {
		return
	}
	if quiet >= f.idle {
		s.removeLocked(f)
		return
	}
	f.idleTimer.Reset(f.idle - quiet)
}

// evictLocked removes the flow idle longest among the few that sent
// least recently: the list is ordered by the clients' datagrams, and a
// reply may have kept one of them busy since. Callers hold s.mu.
func (s *udpSocket) evictLocked() {
	victim := s.tail
	if victim == nil {
		return
	}
	for i, f := 0, s.tail.prev; i < 3 && f != nil; i, f = i+1, f.prev {
		if f.last.Load() < victim.last.Load() {
			victim = f
		}
	}
	victim.m.evicted.Inc()
	s.removeLocked(victim)
}

// rebind applies a new table to the port's flows: a flow goes on while
// its load balancer still serves the port, its cluster is there and not
// draining, and its endpoint is still ready; it is removed after the
// drain time when its cluster drains or the port changed hands, and at
// once when its endpoint left (its client's next datagram picks another).
func (s *udpSocket) rebind(t *table) {
	svc := t.services[s.key]
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.flows {
		var cl *cluster
		if svc != nil && svc.lb == f.lb {
			cl = svc.byName[f.cluster]
		}
		switch {
		case svc == nil || svc.lb != f.lb:
			s.drainLocked(f, f.drainGone)
		case cl == nil || cl.draining:
			s.drainLocked(f, svc.drain)
		default:
			ep := cl.endpointOf(f.ep.hostport)
			if ep == nil {
				s.removeLocked(f)
				continue
			}
			f.ep = ep
			if f.drainTimer != nil {
				f.drainTimer.Stop()
				f.drainTimer = nil
			}
		}
	}
}

// drainLocked removes f after d, unless a drain already runs. Callers
// hold s.mu.
func (s *udpSocket) drainLocked(f *flow, d time.Duration) {
	if f.drainTimer != nil {
		return
	}
	if d <= 0 {
		s.removeLocked(f)
		return
	}
	f.drainTimer = time.AfterFunc(d, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.removeLocked(f)
	})
}

// removeLocked ends a flow: its socket closes, which ends its replies.
// Callers hold s.mu.
func (s *udpSocket) removeLocked(f *flow) {
	if f.removed {
		return
	}
	f.removed = true
	if s.flows[f.client] == f {
		delete(s.flows, f.client)
	}
	if f.prev != nil {
		f.prev.next = f.next
	} else if s.head == f {
		s.head = f.next
	}
	if f.next != nil {
		f.next.prev = f.prev
	} else if s.tail == f {
		s.tail = f.prev
	}
	f.prev, f.next = nil, nil
	if f.idleTimer != nil {
		f.idleTimer.Stop()
	}
	if f.drainTimer != nil {
		f.drainTimer.Stop()
	}
	_ = f.up.Close()
	f.m.flows.Dec()
}

func (s *udpSocket) pushFrontLocked(f *flow) {
	f.prev, f.next = nil, s.head
	if s.head != nil {
		s.head.prev = f
	}
	s.head = f
	if s.tail == nil {
		s.tail = f
	}
}

func (s *udpSocket) moveToFrontLocked(f *flow) {
	if s.head == f {
		return
	}
	// Unlink; f is not the head, so it has a prev.
	f.prev.next = f.next
	if f.next != nil {
		f.next.prev = f.prev
	} else {
		s.tail = f.prev
	}
	s.pushFrontLocked(f)
}

// udpBuffers hold replies on their way back: up to the largest datagram.
var udpBuffers = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}
