// Package zone turns a ServiceImport and its imported EndpointSlices into
// the DNS records of the clusterset zone (KEP-1645, "DNS"), and answers
// questions from them. It is pure: no client, no clock, no network; the
// index that keeps the inputs up to date and the CoreDNS plugin that writes
// the replies live in internal/dns/index and internal/dns/fleetnet.
package zone

import (
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Service is everything the zone holds below <svc>.<ns>.svc.<zone> for one
// import. It is built once per change of its inputs and never modified
// afterwards, so queries read it without a lock.
type Service struct {
	// Headless is true for an import of type Headless.
	Headless bool
	// Addrs answer A and AAAA for <svc>.<ns>.svc.<zone>: the ClusterSetIPs
	// (spec.ips), or for a headless import the ready address of every
	// imported endpoint, sorted and without duplicates.
	Addrs Addrs
	// Hosts answer <host>.<cluster>.<svc>.<ns>.svc.<zone> of a headless
	// import, keyed by "<host>.<cluster>".
	Hosts map[string]Addrs
	// Clusters are the clusters that have a host, so that
	// <cluster>.<svc>.<ns>.svc.<zone> exists (an empty non-terminal).
	Clusters map[string]bool
	// SRV holds the targets of _<port>._<proto>.<svc>.<ns>.svc.<zone>,
	// keyed by "_<port>._<proto>" in lower case.
	SRV map[string][]Target
	// NameSRV holds the targets of an SRV query of <svc>.<ns>.svc.<zone>
	// itself: every port of the import, named or not, once per target and
	// port number, as CoreDNS's kubernetes plugin answers a Service's own
	// name. A port served over TCP and UDP is one record: one for a
	// ClusterSetIP import that serves 42 over both, one per endpoint for a
	// headless one, which is what the mcs-api conformance suite asks.
	NameSRV []Target
	// Protocols are the "_<proto>" labels the ports use, so that
	// _<proto>.<svc>.<ns>.svc.<zone> exists (an empty non-terminal).
	Protocols map[string]bool
}

// Addrs are addresses by family.
type Addrs struct {
	V4, V6 []netip.Addr
}

// Target is one SRV record's target and port.
type Target struct {
	// Host is the target relative to <svc>.<ns>.svc.<zone>: empty for the
	// service itself (a ClusterSetIP import), "<host>.<cluster>" for a
	// headless endpoint.
	Host string
	Port uint16
}

// Build returns the records of imp. slices are the imported EndpointSlices
// labelled with imp's name (multicluster.kubernetes.io/service-name) in its
// namespace; only a headless import uses them, because a ClusterSetIP
// import answers with its ClusterSetIPs, which kube-proxy balances over the
// same endpoints.
func Build(imp *mcsv1beta1.ServiceImport, slices []*discoveryv1.EndpointSlice) *Service {
	s := &Service{
		Headless:  imp.Spec.Type == mcsv1beta1.Headless,
		Hosts:     map[string]Addrs{},
		Clusters:  map[string]bool{},
		SRV:       map[string][]Target{},
		Protocols: map[string]bool{},
	}
	if !s.Headless {
		for _, ip := range imp.Spec.IPs {
			if a, err := netip.ParseAddr(ip); err == nil {
				s.Addrs.add(a)
			}
		}
	}
	// Every named port of the import has its SRV name, even while a
	// headless import has no ready endpoint for it (NODATA, not NXDOMAIN).
	for _, p := range imp.Spec.Ports {
		if !s.Headless && p.Port > 0 && p.Port <= 65535 {
			s.NameSRV = append(s.NameSRV, Target{Port: uint16(p.Port)})
		}
		key, ok := srvKey(p.Name, p.Protocol)
		if !ok {
			continue
		}
		s.Protocols[protoLabel(p.Protocol)] = true
		if !s.Headless && p.Port > 0 && p.Port <= 65535 {
			s.SRV[key] = append(s.SRV[key], Target{Port: uint16(p.Port)})
		} else if s.SRV[key] == nil {
			s.SRV[key] = []Target{}
		}
	}
	if s.Headless {
		s.buildHeadless(imp.Spec.Ports, slices)
	}
	s.Addrs.normalize()
	for k, h := range s.Hosts {
		h.normalize()
		s.Hosts[k] = h
	}
	for k, ts := range s.SRV {
		s.SRV[k] = normalizeTargets(ts)
	}
	s.NameSRV = normalizeTargets(s.NameSRV)
	return s
}

// buildHeadless adds every ready endpoint of slices: its address to the
// service's, a host name in its cluster, and an SRV target per port of the
// import that its slice serves. The import's ports decide which SRV names
// exist (they are what the registry merged across clusters); each slice
// says on which port its endpoints serve them.
func (s *Service) buildHeadless(declared []mcsv1beta1.ServicePort, eps []*discoveryv1.EndpointSlice) {
	// The import's ports, named or not, by name and protocol: the ports
	// of a slice that the service's own name answers SRV with.
	imported := map[string]bool{}
	for _, p := range declared {
		imported[strings.ToLower(p.Name)+"."+protoLabel(p.Protocol)] = true
	}
	// Slices in name order: the answers do not depend on event order.
	eps = slices.Clone(eps)
	slices.SortFunc(eps, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	for _, es := range eps {
		if es.AddressType != discoveryv1.AddressTypeIPv4 && es.AddressType != discoveryv1.AddressTypeIPv6 {
			continue // FQDN endpoints have no address to answer with.
		}
		cluster := strings.ToLower(es.Labels[mcsv1beta1.LabelSourceCluster])
		if !isLabel(cluster) {
			continue // not a name a query could ask for
		}
		ports := map[string]uint16{}
		var numbers []uint16
		for _, p := range es.Ports {
			if p.Port == nil || *p.Port <= 0 || *p.Port > 65535 {
				continue
			}
			name, proto := ptrString(p.Name), ptrProtocol(p.Protocol)
			if imported[strings.ToLower(name)+"."+protoLabel(proto)] {
				numbers = append(numbers, uint16(*p.Port))
			}
			if key, ok := srvKey(name, proto); ok && s.SRV[key] != nil {
				ports[key] = uint16(*p.Port)
			}
		}
		for _, ep := range es.Endpoints {
			// nil means ready: "a nil value should be interpreted as true"
			// (discovery/v1 EndpointConditions.Ready).
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready || len(ep.Addresses) == 0 {
				continue
			}
			// Consumers may use the first address only (discovery/v1
			// Endpoint.Addresses); kube-proxy does, and so do we.
			addr, err := netip.ParseAddr(ep.Addresses[0])
			addr = addr.Unmap()
			if err != nil || addr.Is4() != (es.AddressType == discoveryv1.AddressTypeIPv4) {
				continue
			}
			host := hostLabel(ep.Hostname, addr)
			name := host + "." + cluster
			s.Addrs.add(addr)
			h := s.Hosts[name]
			h.add(addr)
			s.Hosts[name] = h
			s.Clusters[cluster] = true
			for key, port := range ports {
				s.SRV[key] = append(s.SRV[key], Target{Host: name, Port: port})
			}
			for _, port := range numbers {
				s.NameSRV = append(s.NameSRV, Target{Host: name, Port: port})
			}
		}
	}
}

// hostLabel is an endpoint's host name: its hostname when it has a valid
// one, otherwise its address with dashes ("10-244-1-5", "fd00-10-244-1--5"),
// as CoreDNS's kubernetes plugin names endpoints without a hostname, so that
// every SRV target of a headless import resolves.
func hostLabel(hostname *string, addr netip.Addr) string {
	if hostname != nil {
		if h := strings.ToLower(*hostname); isLabel(h) {
			return h
		}
	}
	r := strings.NewReplacer(".", "-", ":", "-")
	return r.Replace(addr.String())
}

// srvKey is "_<port>._<proto>" of a named port, in lower case. Unnamed ports
// have no SRV record (Kubernetes DNS specification, 2.4.2).
func srvKey(name string, proto corev1.Protocol) (string, bool) {
	name = strings.ToLower(name)
	if name == "" || !isLabel(name) {
		return "", false
	}
	return "_" + name + "." + protoLabel(proto), true
}

// protoLabel is "_tcp", "_udp" or "_sctp"; an empty protocol is TCP, the
// API's default.
func protoLabel(p corev1.Protocol) string {
	if p == "" {
		p = corev1.ProtocolTCP
	}
	return "_" + strings.ToLower(string(p))
}

func isLabel(s string) bool { return len(validation.IsDNS1123Label(s)) == 0 }

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func ptrProtocol(p *corev1.Protocol) corev1.Protocol {
	if p == nil {
		return ""
	}
	return *p
}

func (a *Addrs) add(addr netip.Addr) {
	addr = addr.Unmap()
	if addr.Is4() {
		a.V4 = append(a.V4, addr)
	} else {
		a.V6 = append(a.V6, addr)
	}
}

// normalize sorts and removes duplicates, which dual slices of one cluster
// (an update in flight) or a shared address can produce.
func (a *Addrs) normalize() {
	slices.SortFunc(a.V4, netip.Addr.Compare)
	a.V4 = slices.Compact(a.V4)
	slices.SortFunc(a.V6, netip.Addr.Compare)
	a.V6 = slices.Compact(a.V6)
}

func normalizeTargets(ts []Target) []Target {
	slices.SortFunc(ts, func(a, b Target) int {
		if c := strings.Compare(a.Host, b.Host); c != 0 {
			return c
		}
		return int(a.Port) - int(b.Port)
	})
	return slices.Compact(ts)
}
