package fleetnet

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/fleetnet/fleetnet/internal/dns/index"
	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// FuzzServeDNS sends any question (name, type, class) to a synced handler
// with a ClusterSetIP and a headless import: it never panics, its reply
// packs, answers only the question's name or what an SRV names, in class
// IN only, and a question of another class is refused. `make fuzz` runs it
// longer.
func FuzzServeDNS(f *testing.F) {
	ix := index.New(slog.New(slog.DiscardHandler), nil)
	ix.SetImport(&mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.96.0.10", "fd00::10"},
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}}}})
	ix.SetImport(&mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "db"},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless, Ports: []mcsv1beta1.ServicePort{{Name: "pg", Protocol: "TCP", Port: 5432}}}})
	ix.SetSlice(&discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "db-east", Labels: map[string]string{
			mcsv1beta1.LabelServiceName: "db", mcsv1beta1.LabelSourceCluster: "east"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("pg"), Port: ptr.To[int32](5432), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.5"}, Hostname: ptr.To("db-0"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	})
	h := &Handler{Zones: []string{"clusterset.local."}, TTL: 5, Index: ix, Next: test.NextHandler(dns.RcodeRefused, nil)}
	h.SetSynced()
	for _, s := range []struct {
		name         string
		qtype, class uint16
	}{
		{"web.demo.svc.clusterset.local.", dns.TypeA, dns.ClassINET},
		{"web.demo.svc.clusterset.local.", dns.TypeAAAA, dns.ClassINET},
		{"_http._tcp.web.demo.svc.clusterset.local.", dns.TypeSRV, dns.ClassINET},
		{"db-0.east.db.demo.svc.clusterset.local.", dns.TypeA, dns.ClassINET},
		{"_pg._tcp.db.demo.svc.clusterset.local.", dns.TypeSRV, dns.ClassINET},
		{"clusterset.local.", dns.TypeSOA, dns.ClassINET},
		{"version.bind.", dns.TypeTXT, dns.ClassCHAOS},
		{"web.demo.svc.clusterset.local.", dns.TypeTXT, dns.ClassCHAOS},
		{"a.b.c.d.e.f.g.svc.clusterset.local.", dns.TypeANY, dns.ClassANY},
		{"WEB.Demo.SVC.clusterset.LOCAL.", dns.TypeA, dns.ClassINET},
	} {
		f.Add(s.name, s.qtype, s.class)
	}
	f.Fuzz(func(t *testing.T, name string, qtype, class uint16) {
		if _, ok := dns.IsDomainName(name); !ok {
			return // the server's parser refuses it before any plugin
		}
		r := new(dns.Msg)
		r.SetQuestion(dns.Fqdn(name), qtype)
		r.Question[0].Qclass = class
		if _, err := r.Pack(); err != nil {
			return // not a message a client can send
		}
		rec := dnstest.NewRecorder(&test.ResponseWriter{})
		rcode, err := h.ServeDNS(context.Background(), rec, r)
		if err != nil {
			t.Fatalf("%s %d %d: %v", name, qtype, class, err)
		}
		inZone := dns.IsSubDomain("clusterset.local.", strings.ToLower(dns.Fqdn(name)))
		if class != dns.ClassINET && inZone {
			if rcode != dns.RcodeRefused || rec.Msg != nil {
				t.Fatalf("class %d answered with %d (%v), want REFUSED", class, rcode, rec.Msg)
			}
			return
		}
		if rec.Msg == nil {
			return // the next plugin's, or an rcode the server writes
		}
		m := rec.Msg
		if _, err := m.Pack(); err != nil {
			t.Fatalf("%s: the reply does not pack: %v\n%v", name, err, m)
		}
		for _, rr := range append(append([]dns.RR{}, m.Answer...), m.Ns...) {
			if rr.Header().Class != dns.ClassINET {
				t.Fatalf("%s: record of class %d: %v", name, rr.Header().Class, rr)
			}
		}
		for _, rr := range m.Answer {
			if !strings.EqualFold(rr.Header().Name, r.Question[0].Name) {
				t.Fatalf("%s: answer for another name: %v", name, rr)
			}
		}
	})
}
