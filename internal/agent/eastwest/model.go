package eastwest

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Route is an import that goes through this cluster's gateway, as the
// importer last applied it.
type Route struct {
	Key    types.NamespacedName
	Import *registryv1.Import
	// Chunks are the import's endpoint chunks by cluster, then name.
	Chunks   map[string]map[string]*registryv1.EndpointChunk
	Decision Decision
	// Ports are the gateway's ports by service port.
	Ports map[int32]int32
}

// Export is one of this cluster's exports as its gateway serves it to
// other networks' gateways.
type Export struct {
	Namespace, Name string
	// Status is the registry's status of the export: its audience.
	Status *registryv1.ExportStatus
	// Ports are the export's TCP service ports, each with its endpoints
	// (their own address and port).
	Ports map[int32][]edgev1.Endpoint
}

// Resolver turns a gateway's published host into an address; the edge
// dials addresses only.
type Resolver func(host string) (netip.Addr, error)

// Model is the east-west gateway's model: a load balancer per route (a
// TCP port per carried service port, listening on the gateway port) and
// the exports it carries for others. A cluster whose gateway address does
// not resolve is left out of the routes (problems says which).
func Model(routes []Route, exports []Export, resolve Resolver) (*edgev1.Model, []string) {
	m := &edgev1.Model{Gateways: []edgev1.Gateway{}, EastWest: &edgev1.EastWest{Exports: []edgev1.EastWestExport{}}}
	var problems []string
	slices.SortFunc(routes, func(a, b Route) int {
		return cmp.Or(cmp.Compare(a.Key.Namespace, b.Key.Namespace), cmp.Compare(a.Key.Name, b.Key.Name))
	})
	for _, r := range routes {
		lb, p := loadBalancer(r, resolve)
		problems = append(problems, p...)
		m.LoadBalancers = append(m.LoadBalancers, lb)
	}
	slices.SortFunc(exports, func(a, b Export) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	for _, e := range exports {
		ex := edgev1.EastWestExport{Namespace: e.Namespace, Name: e.Name, ToEveryCluster: e.Status.GetToEveryCluster(),
			ImportedBy: slices.Clone(e.Status.GetImportedBy()), Ports: []edgev1.EastWestPort{}}
		for _, sp := range sortedKeys(e.Ports) {
			eps := slices.Clone(e.Ports[sp])
			sortEndpoints(eps)
			ex.Ports = append(ex.Ports, edgev1.EastWestPort{Port: sp, Endpoints: eps})
		}
		m.EastWest.Exports = append(m.EastWest.Exports, ex)
	}
	m.Version = edgev1.VersionOf(*m)
	return m, problems
}

func loadBalancer(r Route, resolve Resolver) (edgev1.LoadBalancer, []string) {
	def := edgev1.DefaultBackendPolicy()
	lb := edgev1.LoadBalancer{
		Namespace: r.Key.Namespace, Name: r.Key.Name, Ports: []edgev1.LoadBalancerPort{},
		HealthCheck: edgev1.HealthCheck{Type: edgev1.HealthCheckTCP, IntervalMillis: def.HealthCheck.IntervalMillis, TimeoutMillis: def.HealthCheck.TimeoutMillis,
			HealthyThreshold: def.HealthCheck.HealthyThreshold, UnhealthyThreshold: def.HealthCheck.UnhealthyThreshold},
		ConnectTimeoutMillis: def.ConnectTimeoutMillis,
		TCPIdleMillis:        edgev1.DefaultTCPIdleMillis,
		UDPIdleMillis:        edgev1.DefaultUDPIdleMillis,
		DrainMillis:          edgev1.DefaultDrainMillis,
	}
	var problems []string
	gateways := map[string]netip.AddrPort{}
	for _, c := range r.Import.GetClusters() {
		if !slices.Contains(r.Decision.Via, c.GetClusterId()) {
			continue
		}
		ap, err := gatewayAddress(c.GetEastwestGateway(), resolve)
		if err != nil {
			problems = append(problems, fmt.Sprintf("import %s: cluster %s's east-west gateway %q: %v", r.Key, c.GetClusterId(), c.GetEastwestGateway(), err))
			continue
		}
		gateways[c.GetClusterId()] = ap
	}
	for _, sp := range r.Decision.Carried {
		name := portName(r.Import, sp)
		port := edgev1.LoadBalancerPort{Port: r.Ports[sp], Protocol: edgev1.ProtocolTCP, TargetPort: sp, Clusters: []edgev1.ClusterEndpoints{}}
		if port.Port == 0 {
			continue // no gateway port (the range is full): the condition says so
		}
		for _, c := range r.Import.GetClusters() {
			id := c.GetClusterId()
			ce := edgev1.ClusterEndpoints{Cluster: id, Region: c.GetRegion(), Weight: int32(min(c.GetWeight(), 1<<31-1)), Endpoints: []edgev1.Endpoint{}}
			eps := endpoints(r.Chunks[id], name)
			ready := int64(0)
			for _, e := range eps {
				if e.Ready {
					ready++
				}
			}
			switch {
			case slices.Contains(r.Decision.Direct, id):
				ce.Endpoints = eps
			case slices.Contains(r.Decision.Via, id):
				gw, ok := gateways[id]
				if !ok {
					continue
				}
				ce.Endpoints = []edgev1.Endpoint{{Address: gw.Addr().String(), Port: int32(gw.Port()), Ready: true, Serving: true}}
				ce.Via = &edgev1.Via{Namespace: r.Key.Namespace, Name: r.Key.Name, Port: sp, ReadyEndpoints: int32(ready)}
			default:
				continue
			}
			ce.EffectiveWeight = int64(ce.Weight) * ready
			port.Clusters = append(port.Clusters, ce)
		}
		lb.Ports = append(lb.Ports, port)
	}
	return lb, problems
}

// gatewayAddress is a published gateway's address, its host resolved.
func gatewayAddress(hostport string, resolve Resolver) (netip.AddrPort, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return netip.AddrPort{}, err
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("port %q: %w", port, err)
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		if resolve == nil {
			return netip.AddrPort{}, fmt.Errorf("host %q is not an address", host)
		}
		if addr, err = resolve(host); err != nil {
			return netip.AddrPort{}, err
		}
	}
	return netip.AddrPortFrom(addr.Unmap(), uint16(n)), nil
}

// portName is the name the import gives service port sp (chunks name
// their ports as the import does).
func portName(imp *registryv1.Import, sp int32) string {
	for _, p := range imp.GetPorts() {
		if p.GetPort() == sp {
			return p.GetName()
		}
	}
	return ""
}

// endpoints are a cluster's endpoints of the port named name, their
// IP addresses only, sorted.
func endpoints(chunks map[string]*registryv1.EndpointChunk, name string) []edgev1.Endpoint {
	out := []edgev1.Endpoint{}
	for _, c := range chunks {
		if c.GetAddressType() == string(discoveryv1.AddressTypeFQDN) {
			continue
		}
		i := slices.IndexFunc(c.GetPorts(), func(p *registryv1.EndpointPort) bool { return p.GetName() == name })
		if i < 0 {
			continue
		}
		port := c.GetPorts()[i].GetPort()
		for _, e := range c.GetEndpoints() {
			cond := e.GetConditions()
			for _, a := range e.GetAddresses() {
				out = append(out, edgev1.Endpoint{Address: a, Port: port, Ready: cond.GetReady() && !cond.GetTerminating(), Serving: cond.GetServing()})
			}
		}
	}
	sortEndpoints(out)
	return out
}

func sortEndpoints(eps []edgev1.Endpoint) {
	slices.SortFunc(eps, func(a, b edgev1.Endpoint) int {
		return cmp.Or(cmp.Compare(a.Address, b.Address), cmp.Compare(a.Port, b.Port))
	})
}

func sortedKeys[V any](m map[int32]V) []int32 {
	out := make([]int32, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
