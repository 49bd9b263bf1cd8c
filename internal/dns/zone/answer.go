package zone

import (
	"strings"

	"github.com/miekg/dns"
)

// Zone answers questions in one clusterset zone.
type Zone struct {
	// Name is the zone, fully qualified and in lower case
	// ("clusterset.local.").
	Name string
	// TTL is every record's TTL and the SOA's minimum, which bounds how long
	// a resolver caches a negative answer (RFC 2308), so that a new import
	// is seen as quickly as a withdrawn one.
	TTL uint32
}

// maxLabels is the most labels a name of the zone has below the zone:
// <host>.<cluster>.<svc>.<ns>.svc and _<port>._<proto>.<svc>.<ns>.svc.
const maxLabels = 5

// Lookup is what answering needs from the index of imports.
type Lookup interface {
	// Service returns the records of the import namespace/name, nil when
	// there is none. Both are in lower case.
	Service(namespace, name string) *Service
	// Namespace reports whether namespace holds an import.
	Namespace(namespace string) bool
	// Serial is the zone's SOA serial: it changes when the zone does.
	Serial() uint32
}

// Reply is the content of an answer: its rcode and sections.
type Reply struct {
	Rcode int
	// Answer, Ns (authority) and Extra (additional) are the sections.
	Answer, Ns, Extra []dns.RR
}

// Answer answers a question for qname (in any case; DNS names are case
// insensitive, and the answer's owner names keep the question's case, which
// resolvers using 0x20 randomisation check) and qtype. The names of the
// zone, after the Kubernetes DNS specification adapted to a clusterset as
// KEP-1645 does:
//
//	<svc>.<ns>.svc.<zone>                     A/AAAA: ClusterSetIPs; headless: every ready endpoint
//	                                          SRV: every port, once per target and number (NameSRV)
//	<host>.<cluster>.<svc>.<ns>.svc.<zone>    A/AAAA: that endpoint of a headless import
//	_<port>._<proto>.<svc>.<ns>.svc.<zone>    SRV: <svc>.<ns>.svc.<zone>; headless: one per endpoint
//
// A name that is not in the zone is NXDOMAIN; a name that is, but has no
// record of qtype, is NODATA (NOERROR with no answer). Both carry the SOA in
// the authority section for negative caching. The names between the zone
// and the records (svc.<zone>, <ns>.svc.<zone>, _<proto>.<svc>… and
// <cluster>.<svc>…) exist when something below them does: an NXDOMAIN for
// them would tell a resolver that minimises query names (RFC 9156) that
// nothing below exists either (RFC 8020).
func (z Zone) Answer(qname string, qtype uint16, l Lookup) Reply {
	lower := strings.ToLower(qname)
	if !dns.IsSubDomain(z.Name, lower) {
		return Reply{Rcode: dns.RcodeRefused}
	}
	// The labels below the zone, from the zone down (svc, ns, name, …),
	// in an array: a query allocates only its answer.
	var labels [maxLabels + 1]string
	r := labels[:0]
	for rel := strings.TrimSuffix(strings.TrimSuffix(lower, z.Name), "."); rel != "" && len(r) <= maxLabels; {
		i := strings.LastIndexByte(rel, '.')
		r = append(r, rel[i+1:])
		rel = rel[:max(i, 0)]
	}
	switch {
	case len(r) == 0:
		if qtype == dns.TypeSOA {
			return Reply{Rcode: dns.RcodeSuccess, Answer: []dns.RR{z.soa(l)}}
		}
		return z.noData(l)
	case r[0] != "svc" || len(r) > maxLabels:
		return z.nxDomain(l)
	case len(r) == 1:
		return z.noData(l)
	case len(r) == 2:
		if l.Namespace(r[1]) {
			return z.noData(l)
		}
		return z.nxDomain(l)
	}
	svc := l.Service(r[1], r[2])
	if svc == nil {
		return z.nxDomain(l)
	}
	switch len(r) {
	case 3:
		if qtype == dns.TypeSRV {
			if len(svc.NameSRV) == 0 {
				return z.noData(l)
			}
			return z.srv(qname, r[2]+"."+r[1]+".svc."+z.Name, svc, svc.NameSRV)
		}
		return z.addresses(qname, qtype, svc.Addrs, l)
	case 4:
		if svc.Protocols[r[3]] || svc.Clusters[r[3]] {
			return z.noData(l)
		}
		return z.nxDomain(l)
	}
	// Five labels: a port (_<port>._<proto>) or a host (<host>.<cluster>).
	if strings.HasPrefix(r[3], "_") {
		targets, ok := svc.SRV[r[4]+"."+r[3]]
		if !ok {
			return z.nxDomain(l)
		}
		if qtype != dns.TypeSRV || len(targets) == 0 {
			return z.noData(l)
		}
		return z.srv(qname, r[2]+"."+r[1]+".svc."+z.Name, svc, targets)
	}
	host, ok := svc.Hosts[r[4]+"."+r[3]]
	if !ok {
		return z.nxDomain(l)
	}
	return z.addresses(qname, qtype, host, l)
}

// addresses answers A, AAAA (and ANY, with both: RFC 8482 allows a subset)
// for a name that has addrs; any other type is NODATA, and so is a family
// the name lacks.
func (z Zone) addresses(qname string, qtype uint16, addrs Addrs, l Lookup) Reply {
	var rrs []dns.RR
	if qtype == dns.TypeA || qtype == dns.TypeANY {
		rrs = z.appendAddrs(rrs, qname, Addrs{V4: addrs.V4})
	}
	if qtype == dns.TypeAAAA || qtype == dns.TypeANY {
		rrs = z.appendAddrs(rrs, qname, Addrs{V6: addrs.V6})
	}
	if len(rrs) == 0 {
		return z.noData(l)
	}
	return Reply{Rcode: dns.RcodeSuccess, Answer: rrs}
}

// srv answers one SRV record per target, with the targets' addresses in the
// additional section so that a client needs no second query. Priority 0 and
// equal weights summing to about 100, as CoreDNS's kubernetes plugin does:
// every target is as good as another.
func (z Zone) srv(qname, service string, svc *Service, targets []Target) Reply {
	weight := uint16(max(1, 100/len(targets)))
	rep := Reply{Rcode: dns.RcodeSuccess}
	seen := map[string]bool{}
	for _, t := range targets {
		target := service
		addrs := svc.Addrs
		if t.Host != "" {
			target = t.Host + "." + service
			addrs = svc.Hosts[t.Host]
		}
		rep.Answer = append(rep.Answer, &dns.SRV{
			Hdr:      dns.RR_Header{Name: qname, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: z.TTL},
			Priority: 0, Weight: weight, Port: t.Port, Target: target,
		})
		if !seen[target] {
			seen[target] = true
			rep.Extra = z.appendAddrs(rep.Extra, target, addrs)
		}
	}
	return rep
}

func (z Zone) appendAddrs(rrs []dns.RR, name string, addrs Addrs) []dns.RR {
	for _, a := range addrs.V4 {
		rrs = append(rrs, &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: z.TTL}, A: a.AsSlice()})
	}
	for _, a := range addrs.V6 {
		rrs = append(rrs, &dns.AAAA{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: z.TTL}, AAAA: a.AsSlice()})
	}
	return rrs
}

func (z Zone) nxDomain(l Lookup) Reply {
	return Reply{Rcode: dns.RcodeNameError, Ns: []dns.RR{z.soa(l)}}
}

func (z Zone) noData(l Lookup) Reply {
	return Reply{Rcode: dns.RcodeSuccess, Ns: []dns.RR{z.soa(l)}}
}

// soa is the zone's SOA record. Its names follow CoreDNS's kubernetes
// plugin (ns.dns.<zone>, hostmaster.<zone>); its minimum is the TTL.
func (z Zone) soa(l Lookup) dns.RR {
	return &dns.SOA{
		Hdr:     dns.RR_Header{Name: z.Name, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: z.TTL},
		Ns:      "ns.dns." + z.Name,
		Mbox:    "hostmaster." + z.Name,
		Serial:  l.Serial(),
		Refresh: 7200,
		Retry:   1800,
		Expire:  86400,
		Minttl:  z.TTL,
	}
}
