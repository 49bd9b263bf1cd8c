// Package endpointranges keeps an edge from dialling what its operator has
// not allowed. The endpoints an edge dials come from the member clusters'
// exports, so a member could otherwise point a public edge at an address
// of the edge's own network (server-side request forgery through the
// entry point). Endpoints outside the allowed ranges are left out of a
// model before either data plane or the health checker sees it.
package endpointranges

import (
	"fmt"
	"net/netip"
	"strings"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
)

// Private are the unicast ranges of private networks: RFC 1918, the
// shared address space of RFC 6598 (carrier-grade NAT, some pod networks)
// and IPv6 unique local addresses (RFC 4193). Every pod network of a
// Kubernetes cluster on a private network lies in them; an edge that
// allows only these cannot be made to dial the internet.
var Private = []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7"}

// Ranges are the address ranges an edge may dial. The zero value allows
// every address.
type Ranges struct {
	prefixes []netip.Prefix
}

// Parse reads CIDR ranges; an error names the value that is not one. No
// ranges allow every address.
func Parse(cidrs []string) (Ranges, error) {
	var r Ranges
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(strings.TrimSpace(c))
		if err != nil {
			return Ranges{}, fmt.Errorf("%q is not a CIDR range: %w", c, err)
		}
		if p != p.Masked() {
			return Ranges{}, fmt.Errorf("%q has bits set past its prefix length (did you mean %s?)", c, p.Masked())
		}
		r.prefixes = append(r.prefixes, p)
	}
	return r, nil
}

// All says whether every address is allowed.
func (r Ranges) All() bool { return len(r.prefixes) == 0 }

// String lists the ranges, comma-separated.
func (r Ranges) String() string {
	if r.All() {
		return "every address"
	}
	s := make([]string, len(r.prefixes))
	for i, p := range r.prefixes {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// Allows says whether address is an IP address in one of the ranges. A
// name is never allowed: the edge dials addresses, and a name could
// resolve anywhere.
func (r Ranges) Allows(address string) bool {
	a, err := netip.ParseAddr(address)
	if err != nil {
		return false
	}
	if r.All() {
		return true
	}
	a = a.Unmap() // ::ffff:10.0.0.1 is 10.0.0.1 to the kernel
	for _, p := range r.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Withheld is an endpoint left out of a model.
type Withheld struct {
	// Object is the Gateway or MultiClusterLoadBalancer ("namespace/name")
	// whose backend named it.
	Object  string
	Cluster string
	Address string
}

// Filter removes from m, in place, every endpoint outside the ranges and
// returns them, each once per object. A cluster's effective weight counts
// its remaining ready addresses only, and a backend left without any is
// marked so (503), as the gateway does for a backend without endpoints.
func (r Ranges) Filter(m *edgev1.Model) []Withheld {
	if r.All() {
		return nil
	}
	f := filter{r: r, seen: map[Withheld]bool{}}
	for i := range m.Gateways {
		gw := &m.Gateways[i]
		f.object = gw.Namespace + "/" + gw.Name
		for j := range gw.Listeners {
			for k := range gw.Listeners[j].VirtualHosts {
				routes := gw.Listeners[j].VirtualHosts[k].Routes
				for l := range routes {
					f.filters(routes[l].Filters)
					for b := range routes[l].Backends {
						f.backend(&routes[l].Backends[b])
					}
				}
			}
		}
	}
	for i := range m.LoadBalancers {
		lb := &m.LoadBalancers[i]
		f.object = lb.Namespace + "/" + lb.Name
		for j := range lb.Ports {
			f.clusters(lb.Ports[j].Clusters)
		}
	}
	if m.EastWest != nil {
		// The exports an east-west gateway carries streams to: its own
		// cluster's endpoints, dialled the same way.
		for i := range m.EastWest.Exports {
			e := &m.EastWest.Exports[i]
			f.object = e.Namespace + "/" + e.Name
			for j := range e.Ports {
				f.clusters([]edgev1.ClusterEndpoints{{Endpoints: e.Ports[j].Endpoints}})
				e.Ports[j].Endpoints = f.last
			}
		}
	}
	return f.out
}

type filter struct {
	r      Ranges
	object string
	seen   map[Withheld]bool
	out    []Withheld
	// last are the endpoints the last cluster kept.
	last []edgev1.Endpoint
}

func (f *filter) filters(fs []edgev1.Filter) {
	for i := range fs {
		if fs[i].RequestMirror != nil {
			f.backend(&fs[i].RequestMirror.Backend)
		}
	}
}

func (f *filter) backend(b *edgev1.Backend) {
	f.filters(b.Filters)
	if !f.clusters(b.Clusters) || b.Invalid != nil {
		return
	}
	var total int64
	for _, c := range b.Clusters {
		total += c.EffectiveWeight
	}
	b.NoReadyEndpoints = total == 0
}

// clusters filters each cluster's endpoints and says whether any was
// removed.
func (f *filter) clusters(cs []edgev1.ClusterEndpoints) bool {
	removed := false
	for i := range cs {
		c := &cs[i]
		if c.Via != nil {
			// Another network's gateway, not an endpoint: the edge talks
			// to it only through TLS that must show that cluster's
			// certificate (internal/eastwest/tunnel), and its address is
			// usually outside the pod ranges.
			continue
		}
		kept := c.Endpoints[:0:0]
		for _, e := range c.Endpoints {
			if f.r.Allows(e.Address) {
				kept = append(kept, e)
				continue
			}
			if w := (Withheld{Object: f.object, Cluster: c.Cluster, Address: e.Address}); !f.seen[w] {
				f.seen[w] = true
				f.out = append(f.out, w)
			}
		}
		f.last = kept
		if len(kept) == len(c.Endpoints) {
			f.last = c.Endpoints
			continue
		}
		removed = true
		ready := map[string]bool{}
		for _, e := range kept {
			if e.Ready {
				ready[e.Address] = true
			}
		}
		// EffectiveWeight is weight × ready addresses (0 while draining).
		if c.EffectiveWeight != 0 {
			c.EffectiveWeight = int64(c.Weight) * int64(len(ready))
		}
		c.Endpoints = kept
	}
	return removed
}
