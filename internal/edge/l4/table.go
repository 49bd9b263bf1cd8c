package l4

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/eastwest/tunnel"
	"github.com/fleetnet/fleetnet/internal/edge/health"
)

// ClassEdge is the class of the load balancers the edge serves; a model
// may carry those of other providers' classes too, which it leaves alone.
// "" (a controller older than the field) is the edge's.
const ClassEdge = "edge"

// sockKey names a bound socket: a port and its protocol.
type sockKey struct {
	port  int32
	proto string
}

func (k sockKey) String() string { return strconv.Itoa(int(k.port)) + "/" + k.proto }

// table is one model's load balancers compiled for serving: immutable
// once served, swapped whole, so a connection is routed on the table it
// was accepted with.
type table struct {
	version  string
	services map[sockKey]*service
	// lbs are the served load balancers by namespace/name.
	lbs map[string]*edgev1.LoadBalancer
}

// service is one port of one load balancer.
type service struct {
	key sockKey
	// lb is the load balancer's namespace/name.
	lb       string
	clusters []*cluster
	byName   map[string]*cluster
	// check is the load balancer's health check with every field set.
	check                     edgev1.HealthCheck
	connect, tcpIdle, udpIdle time.Duration
	drain                     time.Duration
	// unserved counts connections and datagrams no endpoint took.
	unserved *clusterMetrics
	// warned: the missing endpoints were logged once for this table.
	warned atomic.Bool
}

type cluster struct {
	name     string
	weight   int64
	draining bool
	// bit marks the cluster in an attempt's set of tried clusters;
	// clusters past the 64th have none.
	bit   uint64
	ready []endpoint
	m     *clusterMetrics
}

// endpoint is a ready endpoint of a cluster.
type endpoint struct {
	// address is the model's, hostport address:port for dials.
	address  string
	hostport string
	addr     netip.AddrPort
	// health is the state of the load balancer's check of a TCP
	// endpoint, set by track before the table is served; nil for UDP.
	health *health.Target
	// refusedUntil (UDP) ends a passive ejection after the endpoint
	// answered with ICMP port unreachable, in the proxy's nanoseconds.
	refusedUntil atomic.Int64
	// via, for a cluster of another network, is the service port a
	// stream through its gateway (hostport) is for.
	via *tunnel.Target
}

// healthy reports whether picks may choose e at now (the proxy's
// nanoseconds).
func (e *endpoint) healthy(now int64) bool {
	if e.health != nil {
		return e.health.Healthy()
	}
	return e.refusedUntil.Load() <= now
}

// served reports whether the edge serves a load balancer of class.
func served(class string) bool { return class == "" || class == ClassEdge }

// compile checks and compiles the load balancers of m. Its errors name
// what the edge cannot serve: a port that a Gateway listener also serves,
// two load balancers on one port, a port out of range. The edge then
// refuses the model (NACK) and keeps serving the one before. A protocol
// this edge does not know (from a newer controller) leaves that port out,
// reported in skipped: refusing the model over it would stop every other
// update.
func compile(m *edgev1.Model, met *metrics) (t *table, skipped []string, err error) {
	t = &table{version: m.Version, services: map[sockKey]*service{}, lbs: map[string]*edgev1.LoadBalancer{}}
	listeners := map[int32]string{}
	for _, gw := range m.Gateways {
		for _, l := range gw.Listeners {
			if _, ok := listeners[l.Port]; !ok {
				listeners[l.Port] = fmt.Sprintf("listener %s of Gateway %s/%s", l.Name, gw.Namespace, gw.Name)
			}
		}
	}
	var errs []error
	for i := range m.LoadBalancers {
		lb := &m.LoadBalancers[i]
		if !served(lb.Class) {
			continue
		}
		name := lb.Namespace + "/" + lb.Name
		t.lbs[name] = lb
		for _, p := range lb.Ports {
			if p.Protocol != edgev1.ProtocolTCP && p.Protocol != edgev1.ProtocolUDP {
				skipped = append(skipped, fmt.Sprintf("MultiClusterLoadBalancer %s port %d: protocol %q", name, p.Port, p.Protocol))
				continue
			}
			k := sockKey{port: p.Port, proto: p.Protocol}
			switch other := t.services[k]; {
			case p.Port < 1 || p.Port > 65535:
				errs = append(errs, fmt.Errorf("MultiClusterLoadBalancer %s: port %d is not between 1 and 65535", name, p.Port))
				continue
			case other != nil:
				errs = append(errs, fmt.Errorf("port %s: MultiClusterLoadBalancers %s and %s both serve it", k, other.lb, name))
				continue
			case p.Protocol == edgev1.ProtocolTCP && listeners[p.Port] != "":
				errs = append(errs, fmt.Errorf("port %s: MultiClusterLoadBalancer %s and %s both serve it", k, name, listeners[p.Port]))
				continue
			}
			t.services[k] = compileService(name, lb, p, met)
		}
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	return t, skipped, nil
}

func compileService(name string, lb *edgev1.LoadBalancer, p edgev1.LoadBalancerPort, met *metrics) *service {
	def := edgev1.DefaultBackendPolicy()
	hc := lb.HealthCheck
	s := &service{
		key: sockKey{port: p.Port, proto: p.Protocol}, lb: name, byName: map[string]*cluster{},
		// Always a TCP connect: no path or host, so that a load balancer
		// and an HTTP backend checking an endpoint alike share its unit.
		check: edgev1.HealthCheck{
			Type:               edgev1.HealthCheckTCP,
			IntervalMillis:     orDefault(hc.IntervalMillis, def.HealthCheck.IntervalMillis),
			TimeoutMillis:      orDefault(hc.TimeoutMillis, def.HealthCheck.TimeoutMillis),
			HealthyThreshold:   orDefault(hc.HealthyThreshold, def.HealthCheck.HealthyThreshold),
			UnhealthyThreshold: orDefault(hc.UnhealthyThreshold, def.HealthCheck.UnhealthyThreshold),
		},
		connect: millis(orDefault(lb.ConnectTimeoutMillis, def.ConnectTimeoutMillis)),
		tcpIdle: millis(orDefault(lb.TCPIdleMillis, edgev1.DefaultTCPIdleMillis)),
		udpIdle: millis(orDefault(lb.UDPIdleMillis, edgev1.DefaultUDPIdleMillis)),
		// 0 is a valid drain: established connections close at once.
		drain: millis(max(lb.DrainMillis, 0)),
	}
	port := s.key.String()
	s.unserved = met.cluster(name, port, "")
	for i, c := range p.Clusters {
		cc := &cluster{name: c.Cluster, weight: int64(max(c.Weight, 0)), draining: c.Draining, m: met.cluster(name, port, c.Cluster)}
		if i < 64 {
			cc.bit = 1 << i
		}
		var via *tunnel.Target
		if c.Via != nil && p.Protocol == edgev1.ProtocolUDP {
			// Streams carry TCP only: the cluster takes no flow.
			s.clusters = append(s.clusters, cc)
			s.byName[cc.name] = cc
			continue
		}
		if c.Via != nil {
			// One gateway address stands for the cluster's ready
			// endpoints: its share is its weight times those.
			via = &tunnel.Target{Namespace: c.Via.Namespace, Name: c.Via.Name, Port: c.Via.Port}
			cc.weight *= int64(max(c.Via.ReadyEndpoints, 0))
		}
		for _, e := range c.Endpoints {
			if !e.Ready || (via != nil && len(cc.ready) == 1) {
				continue
			}
			addr, err := netip.ParseAddr(e.Address)
			if err != nil || e.Port < 1 || e.Port > 65535 {
				// The model builder takes addresses from EndpointSlices,
				// which the API server validates; an endpoint the edge
				// cannot dial is left out rather than refusing the model.
				continue
			}
			ap := netip.AddrPortFrom(addr.Unmap(), uint16(e.Port))
			cc.ready = append(cc.ready, endpoint{address: e.Address, hostport: net.JoinHostPort(e.Address, strconv.Itoa(int(e.Port))), addr: ap, via: via})
		}
		s.clusters = append(s.clusters, cc)
		s.byName[cc.name] = cc
	}
	return s
}

// track makes the units of t's TCP endpoints the ones s holds and points
// each endpoint at its unit's state. UDP endpoints have no active check:
// a TCP connect says nothing about a UDP port.
func track(s *health.Set, t *table) {
	s.Track(func(unit func(health.Key) *health.Target) {
		for _, svc := range t.services {
			if svc.key.proto != edgev1.ProtocolTCP {
				continue
			}
			for _, c := range svc.clusters {
				for i := range c.ready {
					e := &c.ready[i]
					e.health = unit(health.Key{Address: e.address, Port: int32(e.addr.Port()), Check: svc.check})
				}
			}
		}
	})
}

// carryOver keeps the passive ejections of UDP endpoints that t still has.
func carryOver(old, t *table) {
	for k, svc := range t.services {
		prev := old.services[k]
		if k.proto != edgev1.ProtocolUDP || prev == nil {
			continue
		}
		refused := map[string]int64{}
		for _, c := range prev.clusters {
			for i := range c.ready {
				if until := c.ready[i].refusedUntil.Load(); until != 0 {
					refused[c.name+" "+c.ready[i].hostport] = until
				}
			}
		}
		if len(refused) == 0 {
			continue
		}
		for _, c := range svc.clusters {
			for i := range c.ready {
				c.ready[i].refusedUntil.Store(refused[c.name+" "+c.ready[i].hostport])
			}
		}
	}
}

// endpointOf finds the endpoint of cluster that serves hostport.
func (c *cluster) endpointOf(hostport string) *endpoint {
	for i := range c.ready {
		if c.ready[i].hostport == hostport {
			return &c.ready[i]
		}
	}
	return nil
}

// ports lists a load balancer's served ports, e.g. "5432/TCP,53/UDP".
func (t *table) ports(lb string) string {
	var ks []sockKey
	for k, s := range t.services {
		if s.lb == lb {
			ks = append(ks, k)
		}
	}
	slices.SortFunc(ks, func(a, b sockKey) int { return cmp.Or(cmp.Compare(a.port, b.port), cmp.Compare(a.proto, b.proto)) })
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.String()
	}
	return strings.Join(out, ",")
}

// draining lists the draining clusters of a load balancer's ports.
func (t *table) draining(lb string) string {
	names := map[string]bool{}
	for _, s := range t.services {
		if s.lb != lb {
			continue
		}
		for _, c := range s.clusters {
			if c.draining {
				names[c.name] = true
			}
		}
	}
	return strings.Join(slices.Sorted(maps.Keys(names)), ",")
}

// gatewayPorts are the ports of m's Gateway listeners.
func gatewayPorts(m *edgev1.Model) map[int32]bool {
	ports := map[int32]bool{}
	for _, gw := range m.Gateways {
		for _, l := range gw.Listeners {
			ports[l.Port] = true
		}
	}
	return ports
}

// orDefault is v, or def when v is not positive.
func orDefault[T int32 | int64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

func millis(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
