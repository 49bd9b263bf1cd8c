package zone

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// fakeLookup is a zone.Lookup over a fixed set of services.
type fakeLookup map[string]*Service

func (f fakeLookup) Service(ns, name string) *Service { return f[ns+"/"+name] }
func (f fakeLookup) Namespace(ns string) bool {
	for k := range f {
		if strings.HasPrefix(k, ns+"/") {
			return true
		}
	}
	return false
}
func (f fakeLookup) Serial() uint32 { return 7 }

func port(name string, proto corev1.Protocol, number int32) mcsv1beta1.ServicePort {
	return mcsv1beta1.ServicePort{Name: name, Protocol: proto, Port: number}
}

func clusterSetIP(ns, name string, ips []string, ports ...mcsv1beta1.ServicePort) *mcsv1beta1.ServiceImport {
	return &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: ips, Ports: ports},
	}
}

func headless(ns, name string, ports ...mcsv1beta1.ServicePort) *mcsv1beta1.ServiceImport {
	return &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless, Ports: ports},
	}
}

func slicePort(name string, proto corev1.Protocol, number int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: ptr.To(name), Protocol: ptr.To(proto), Port: ptr.To(number)}
}

func importedSlice(name, service, cluster string, family discoveryv1.AddressType, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name, Labels: map[string]string{
			mcsv1beta1.LabelServiceName: service, mcsv1beta1.LabelSourceCluster: cluster,
		}},
		AddressType: family, Ports: ports, Endpoints: eps,
	}
}

// endpoint is one endpoint; ready nil is the API's "unknown", which means
// ready.
func endpoint(addr, hostname string, ready *bool) discoveryv1.Endpoint {
	e := discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
	if hostname != "" {
		e.Hostname = ptr.To(hostname)
	}
	return e
}

// fixture is a clusterset of six imports in namespace demo:
//   - web: ClusterSetIP, dual-stack, ports http/TCP 80, dns/UDP 53 and an
//     unnamed 8443;
//   - v4only: ClusterSetIP with an IPv4 ClusterSetIP only;
//   - pending: ClusterSetIP without a ClusterSetIP yet;
//   - hello: ClusterSetIP serving 42 over TCP (tcp) and UDP (udp), as the
//     mcs-api conformance suite's hello does;
//   - db: headless, port pg/TCP 5432, endpoints in east (db-0 ready, db-1
//     not ready, an unnamed one with ready unset) and west (db-0 in IPv4 and
//     IPv6 slices), a west slice serving the port on 15432, an FQDN slice
//     that is ignored;
//   - peers: headless, hello's ports, two endpoints in east.
func fixture() fakeLookup {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	db := headless("demo", "db", port("pg", tcp, 5432), port("", tcp, 9000))
	pg := []discoveryv1.EndpointPort{slicePort("pg", tcp, 5432)}
	return fakeLookup{
		"demo/hello": Build(clusterSetIP("demo", "hello", []string{"10.96.0.12"}, port("tcp", tcp, 42), port("udp", udp, 42)), nil),
		"demo/peers": Build(headless("demo", "peers", port("tcp", tcp, 42), port("udp", udp, 42)), []*discoveryv1.EndpointSlice{
			importedSlice("peers-east", "peers", "east", discoveryv1.AddressTypeIPv4,
				[]discoveryv1.EndpointPort{slicePort("tcp", tcp, 42), slicePort("udp", udp, 42)},
				endpoint("10.244.1.8", "peers-0", nil), endpoint("10.244.1.9", "peers-1", nil)),
		}),
		"demo/web": Build(clusterSetIP("demo", "web", []string{"10.96.0.10", "fd00:10:96::a"},
			port("http", tcp, 80), port("dns", corev1.ProtocolUDP, 53), port("", tcp, 8443)), nil),
		"demo/v4only":  Build(clusterSetIP("demo", "v4only", []string{"10.96.0.11"}, port("http", tcp, 80)), nil),
		"demo/pending": Build(clusterSetIP("demo", "pending", nil, port("http", tcp, 80)), nil),
		"demo/db": Build(db, []*discoveryv1.EndpointSlice{
			importedSlice("db-east", "db", "east", discoveryv1.AddressTypeIPv4, pg,
				endpoint("10.244.1.5", "db-0", ptr.To(true)),
				endpoint("10.244.1.6", "db-1", ptr.To(false)),
				endpoint("10.244.1.7", "", nil)),
			importedSlice("db-west-v4", "db", "west", discoveryv1.AddressTypeIPv4,
				[]discoveryv1.EndpointPort{slicePort("pg", tcp, 15432)},
				endpoint("10.244.2.5", "db-0", nil)),
			importedSlice("db-west-v6", "db", "west", discoveryv1.AddressTypeIPv6,
				[]discoveryv1.EndpointPort{slicePort("pg", tcp, 15432)},
				endpoint("fd00:10:244:2::5", "db-0", nil)),
			importedSlice("db-west-fqdn", "db", "west", discoveryv1.AddressTypeFQDN, pg,
				endpoint("db.example.com", "ext", nil)),
		}),
	}
}

const zone = "clusterset.local."

// soa is the SOA of every negative answer.
const soa = "clusterset.local. 5 IN SOA ns.dns.clusterset.local. hostmaster.clusterset.local. 7 7200 1800 86400 5"

func TestAnswer(t *testing.T) {
	l := fixture()
	for _, tc := range []struct {
		name   string
		qname  string
		qtype  uint16
		rcode  int
		answer []string
		ns     []string
		extra  []string
	}{
		{name: "ClusterSetIP A", qname: "web.demo.svc.clusterset.local.", qtype: dns.TypeA,
			answer: []string{"web.demo.svc.clusterset.local. 5 IN A 10.96.0.10"}},
		{name: "ClusterSetIP AAAA", qname: "web.demo.svc.clusterset.local.", qtype: dns.TypeAAAA,
			answer: []string{"web.demo.svc.clusterset.local. 5 IN AAAA fd00:10:96::a"}},
		{name: "ANY gives both families", qname: "web.demo.svc.clusterset.local.", qtype: dns.TypeANY,
			answer: []string{"web.demo.svc.clusterset.local. 5 IN A 10.96.0.10", "web.demo.svc.clusterset.local. 5 IN AAAA fd00:10:96::a"}},
		{name: "the question's case is kept", qname: "Web.DEMO.svc.ClusterSet.local.", qtype: dns.TypeA,
			answer: []string{"Web.DEMO.svc.ClusterSet.local. 5 IN A 10.96.0.10"}},
		{name: "a family the import lacks is NODATA", qname: "v4only.demo.svc.clusterset.local.", qtype: dns.TypeAAAA,
			ns: []string{soa}},
		{name: "an import without a ClusterSetIP yet is NODATA", qname: "pending.demo.svc.clusterset.local.", qtype: dns.TypeA,
			ns: []string{soa}},
		{name: "TXT of an import is NODATA", qname: "web.demo.svc.clusterset.local.", qtype: dns.TypeTXT,
			ns: []string{soa}},
		{name: "ClusterSetIP SRV", qname: "_http._tcp.web.demo.svc.clusterset.local.", qtype: dns.TypeSRV,
			answer: []string{"_http._tcp.web.demo.svc.clusterset.local. 5 IN SRV 0 100 80 web.demo.svc.clusterset.local."},
			extra:  []string{"web.demo.svc.clusterset.local. 5 IN A 10.96.0.10", "web.demo.svc.clusterset.local. 5 IN AAAA fd00:10:96::a"}},
		{name: "ClusterSetIP SRV over UDP", qname: "_dns._udp.web.demo.svc.clusterset.local.", qtype: dns.TypeSRV,
			answer: []string{"_dns._udp.web.demo.svc.clusterset.local. 5 IN SRV 0 100 53 web.demo.svc.clusterset.local."},
			extra:  []string{"web.demo.svc.clusterset.local. 5 IN A 10.96.0.10", "web.demo.svc.clusterset.local. 5 IN AAAA fd00:10:96::a"}},
		{name: "A of an SRV name is NODATA", qname: "_http._tcp.web.demo.svc.clusterset.local.", qtype: dns.TypeA,
			ns: []string{soa}},
		{name: "a port over another protocol is NXDOMAIN", qname: "_http._udp.web.demo.svc.clusterset.local.", qtype: dns.TypeSRV,
			rcode: dns.RcodeNameError, ns: []string{soa}},
		{name: "an unknown port is NXDOMAIN", qname: "_https._tcp.web.demo.svc.clusterset.local.", qtype: dns.TypeSRV,
			rcode: dns.RcodeNameError, ns: []string{soa}},
		{name: "the protocol label is an empty non-terminal", qname: "_tcp.web.demo.svc.clusterset.local.", qtype: dns.TypeSRV,
			ns: []string{soa}},
		{name: "an unused protocol label is NXDOMAIN", qname: "_sctp.web.demo.svc.clusterset.local.", qtype: dns.TypeSRV,
			rcode: dns.RcodeNameError, ns: []string{soa}},
		{name: "headless A: every ready endpoint of every cluster", qname: "db.demo.svc.clusterset.local.", qtype: dns.TypeA,
			answer: []string{"db.demo.svc.clusterset.local. 5 IN A 10.244.1.5", "db.demo.svc.clusterset.local. 5 IN A 10.244.1.7", "db.demo.svc.clusterset.local. 5 IN A 10.244.2.5"}},
		{name: "headless AAAA", qname: "db.demo.svc.clusterset.local.", qtype: dns.TypeAAAA,
			answer: []string{"db.demo.svc.clusterset.local. 5 IN AAAA fd00:10:244:2::5"}},
		{name: "headless host in a cluster", qname: "db-0.east.db.demo.svc.clusterset.local.", qtype: dns.TypeA,
			answer: []string{"db-0.east.db.demo.svc.clusterset.local. 5 IN A 10.244.1.5"}},
		{name: "the same hostname in another cluster", qname: "db-0.west.db.demo.svc.clusterset.local.", qtype: dns.TypeA,
			answer: []string{"db-0.west.db.demo.svc.clusterset.local. 5 IN A 10.244.2.5"}},
		{name: "a host's IPv6 address from the cluster's IPv6 slice", qname: "db-0.west.db.demo.svc.clusterset.local.", qtype: dns.TypeAAAA,
			answer: []string{"db-0.west.db.demo.svc.clusterset.local. 5 IN AAAA fd00:10:244:2::5"}},
		{name: "a host without the family is NODATA", qname: "db-0.east.db.demo.svc.clusterset.local.", qtype: dns.TypeAAAA,
			ns: []string{soa}},
		{name: "a not ready endpoint's host is NXDOMAIN", qname: "db-1.east.db.demo.svc.clusterset.local.", qtype: dns.TypeA,
			rcode: dns.RcodeNameError, ns: []string{soa}},
		{name: "an endpoint without hostname is named by its address", qname: "10-244-1-7.east.db.demo.svc.clusterset.local.", qtype: dns.TypeA,
			answer: []string{"10-244-1-7.east.db.demo.svc.clusterset.local. 5 IN A 10.244.1.7"}},
		{name: "a host in another cluster is NXDOMAIN", qname: "db-0.north.db.demo.svc.clusterset.local.", qtype: dns.TypeA,
			rcode: dns.RcodeNameError, ns: []string{soa}},
		{name: "the cluster label is an empty non-terminal", qname: "east.db.demo.svc.clusterset.local.", qtype: dns.TypeA,
			ns: []string{soa}},
		{name: "an FQDN slice's endpoint is not answered", qname: "ext.west.db.demo.svc.clusterset.local.", qtype: dns.TypeA,
			rcode: dns.RcodeNameError, ns: []string{soa}},
		{name: "headless SRV: one per ready endpoint, on its cluster's port", qname: "_pg._tcp.db.demo.svc.clusterset.local.", qtype: dns.TypeSRV,
			answer: []string{
				"_pg._tcp.db.demo.svc.clusterset.local. 5 IN SRV 0 33 5432 10-244-1-7.east.db.demo.svc.clusterset.local.",
				"_pg._tcp.db.demo.svc.clusterset.local. 5 IN SRV 0 33 5432 db-0.east.db.demo.svc.clusterset.local.",
				"_pg._tcp.db.demo.svc.clusterset.local. 5 IN SRV 0 33 15432 db-0.west.db.demo.svc.clusterset.local.",
			},
			extra: []string{
				"10-244-1-7.east.db.demo.svc.clusterset.local. 5 IN A 10.244.1.7",
				"db-0.east.db.demo.svc.clusterset.local. 5 IN A 10.244.1.5",
				"db-0.west.db.demo.svc.clusterset.local. 5 IN A 10.244.2.5",
				"db-0.west.db.demo.svc.clusterset.local. 5 IN AAAA fd00:10:244:2::5",
			}},
		{name: "SRV of a ClusterSetIP import's own name: every port, once per number", qname: "web.demo.svc.clusterset.local.", qtype: dns.TypeSRV,
			answer: []string{
				"web.demo.svc.clusterset.local. 5 IN SRV 0 33 53 web.demo.svc.clusterset.local.",
				"web.demo.svc.clusterset.local. 5 IN SRV 0 33 80 web.demo.svc.clusterset.local.",
				"web.demo.svc.clusterset.local. 5 IN SRV 0 33 8443 web.demo.svc.clusterset.local.",
			},
			extra: []string{"web.demo.svc.clusterset.local. 5 IN A 10.96.0.10", "web.demo.svc.clusterset.local. 5 IN AAAA fd00:10:96::a"}},
		{name: "a port over TCP and UDP is one SRV record of the name", qname: "hello.demo.svc.clusterset.local.", qtype: dns.TypeSRV,
			answer: []string{"hello.demo.svc.clusterset.local. 5 IN SRV 0 100 42 hello.demo.svc.clusterset.local."},
			extra:  []string{"hello.demo.svc.clusterset.local. 5 IN A 10.96.0.12"}},
		{name: "headless SRV of the name: one per ready endpoint and port it serves", qname: "db.demo.svc.clusterset.local.", qtype: dns.TypeSRV,
			answer: []string{
				"db.demo.svc.clusterset.local. 5 IN SRV 0 33 5432 10-244-1-7.east.db.demo.svc.clusterset.local.",
				"db.demo.svc.clusterset.local. 5 IN SRV 0 33 5432 db-0.east.db.demo.svc.clusterset.local.",
				"db.demo.svc.clusterset.local. 5 IN SRV 0 33 15432 db-0.west.db.demo.svc.clusterset.local.",
			},
			extra: []string{
				"10-244-1-7.east.db.demo.svc.clusterset.local. 5 IN A 10.244.1.7",
				"db-0.east.db.demo.svc.clusterset.local. 5 IN A 10.244.1.5",
				"db-0.west.db.demo.svc.clusterset.local. 5 IN A 10.244.2.5",
				"db-0.west.db.demo.svc.clusterset.local. 5 IN AAAA fd00:10:244:2::5",
			}},
		{name: "headless SRV of the name: a port over TCP and UDP once per endpoint", qname: "peers.demo.svc.clusterset.local.", qtype: dns.TypeSRV,
			answer: []string{
				"peers.demo.svc.clusterset.local. 5 IN SRV 0 50 42 peers-0.east.peers.demo.svc.clusterset.local.",
				"peers.demo.svc.clusterset.local. 5 IN SRV 0 50 42 peers-1.east.peers.demo.svc.clusterset.local.",
			},
			extra: []string{
				"peers-0.east.peers.demo.svc.clusterset.local. 5 IN A 10.244.1.8",
				"peers-1.east.peers.demo.svc.clusterset.local. 5 IN A 10.244.1.9",
			}},
		{name: "an unnamed port has no SRV", qname: "_._tcp.db.demo.svc.clusterset.local.", qtype: dns.TypeSRV,
			rcode: dns.RcodeNameError, ns: []string{soa}},
		{name: "a non-imported service is NXDOMAIN", qname: "local-only.demo.svc.clusterset.local.", qtype: dns.TypeA,
			rcode: dns.RcodeNameError, ns: []string{soa}},
		{name: "an import's name in another namespace is NXDOMAIN", qname: "web.other.svc.clusterset.local.", qtype: dns.TypeA,
			rcode: dns.RcodeNameError, ns: []string{soa}},
		{name: "a namespace with imports is an empty non-terminal", qname: "demo.svc.clusterset.local.", qtype: dns.TypeA,
			ns: []string{soa}},
		{name: "a namespace without imports is NXDOMAIN", qname: "other.svc.clusterset.local.", qtype: dns.TypeA,
			rcode: dns.RcodeNameError, ns: []string{soa}},
		{name: "svc is an empty non-terminal", qname: "svc.clusterset.local.", qtype: dns.TypeA,
			ns: []string{soa}},
		{name: "pod names are not in the clusterset zone", qname: "10-244-1-5.demo.pod.clusterset.local.", qtype: dns.TypeA,
			rcode: dns.RcodeNameError, ns: []string{soa}},
		{name: "too many labels is NXDOMAIN", qname: "a.db-0.east.db.demo.svc.clusterset.local.", qtype: dns.TypeA,
			rcode: dns.RcodeNameError, ns: []string{soa}},
		{name: "apex SOA", qname: "clusterset.local.", qtype: dns.TypeSOA,
			answer: []string{soa}},
		{name: "apex A is NODATA", qname: "clusterset.local.", qtype: dns.TypeA,
			ns: []string{soa}},
		{name: "a name out of the zone is refused", qname: "web.demo.svc.cluster.local.", qtype: dns.TypeA,
			rcode: dns.RcodeRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Zone{Name: zone, TTL: 5}.Answer(tc.qname, tc.qtype, l)
			if got.Rcode != tc.rcode {
				t.Errorf("rcode %s, want %s", dns.RcodeToString[got.Rcode], dns.RcodeToString[tc.rcode])
			}
			for _, s := range []struct {
				name      string
				got, want []string
			}{{"answer", text(got.Answer), tc.answer}, {"authority", text(got.Ns), tc.ns}, {"additional", text(got.Extra), tc.extra}} {
				if diff := cmp.Diff(s.want, s.got); diff != "" {
					t.Errorf("%s section (-want +got):\n%s", s.name, diff)
				}
			}
		})
	}
}

// TestBuildIsOrderIndependent: the same slices in another order give the
// same records, so answers do not depend on the order of informer events.
func TestBuildIsOrderIndependent(t *testing.T) {
	tcp := corev1.ProtocolTCP
	imp := headless("demo", "db", port("pg", tcp, 5432))
	pg := []discoveryv1.EndpointPort{slicePort("pg", tcp, 5432)}
	a := importedSlice("a", "db", "east", discoveryv1.AddressTypeIPv4, pg, endpoint("10.244.1.9", "x", nil), endpoint("10.244.1.1", "y", nil))
	b := importedSlice("b", "db", "west", discoveryv1.AddressTypeIPv4, pg, endpoint("10.244.2.1", "x", nil), endpoint("10.244.1.1", "y", nil))
	one := Build(imp, []*discoveryv1.EndpointSlice{a, b})
	two := Build(imp, []*discoveryv1.EndpointSlice{b, a})
	if diff := cmp.Diff(one, two, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
		t.Fatalf("order changed the records (-ab +ba):\n%s", diff)
	}
	if len(one.Addrs.V4) != 3 {
		t.Fatalf("want 3 distinct addresses (10.244.1.1 twice is once), got %v", one.Addrs.V4)
	}
}

// TestHeadlessImportWithoutEndpoints: a declared port of a headless import
// without a ready endpoint is NODATA, not NXDOMAIN, and so is the import.
func TestHeadlessImportWithoutEndpoints(t *testing.T) {
	l := fakeLookup{"demo/db": Build(headless("demo", "db", port("pg", corev1.ProtocolTCP, 5432)), nil)}
	for _, q := range []string{"db.demo.svc.clusterset.local.", "_pg._tcp.db.demo.svc.clusterset.local."} {
		for _, qt := range []uint16{dns.TypeA, dns.TypeSRV} {
			got := Zone{Name: zone, TTL: 5}.Answer(q, qt, l)
			if got.Rcode != dns.RcodeSuccess || len(got.Answer) != 0 {
				t.Errorf("%s %s: rcode %s with %d answers, want NODATA", q, dns.TypeToString[qt], dns.RcodeToString[got.Rcode], len(got.Answer))
			}
		}
	}
}

func text(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		out = append(out, strings.ReplaceAll(rr.String(), "\t", " "))
	}
	return out
}

// BenchmarkAnswer is the lookup work of one query, without CoreDNS around
// it: a ClusterSetIP A answer and a headless SRV answer.
func BenchmarkAnswer(b *testing.B) {
	l := fixture()
	z := Zone{Name: zone, TTL: 5}
	for _, q := range []struct {
		name  string
		qtype uint16
	}{{"web.demo.svc.clusterset.local.", dns.TypeA}, {"_pg._tcp.db.demo.svc.clusterset.local.", dns.TypeSRV}} {
		b.Run(dns.TypeToString[q.qtype], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if r := z.Answer(q.name, q.qtype, l); len(r.Answer) == 0 {
					b.Fatal("no answer")
				}
			}
		})
	}
}
