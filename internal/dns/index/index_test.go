package index

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/dns/zone"
	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

var testZone = zone.Zone{Name: "clusterset.local.", TTL: 5}

func serviceImport(name string, typ mcsv1beta1.ServiceImportType, ips ...string) *mcsv1beta1.ServiceImport {
	return &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name},
		Spec: mcsv1beta1.ServiceImportSpec{Type: typ, IPs: ips,
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}
}

func slice(name, service, cluster string, addrs ...string) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name, Labels: map[string]string{
			mcsv1beta1.LabelServiceName: service, mcsv1beta1.LabelSourceCluster: cluster,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
	}
	for _, a := range addrs {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}})
	}
	return es
}

// answer is the answer section of an A query as "rcode addr addr…".
func answer(ix *Index, qname string) string {
	r := testZone.Answer(qname, dns.TypeA, ix)
	out := []string{dns.RcodeToString[r.Rcode]}
	for _, rr := range r.Answer {
		out = append(out, rr.(*dns.A).A.String())
	}
	return strings.Join(out, " ")
}

// TestEventsChangeAnswersAtOnce feeds informer events through the index's
// handlers, as an informer calls them, and checks that the answer after
// each single event already reflects it.
func TestEventsChangeAnswersAtOnce(t *testing.T) {
	now := time.Unix(1000, 0)
	ix := New(slog.New(slog.DiscardHandler), func() time.Time { return now })
	imports, slices := ix.ImportHandler(), ix.SliceHandler()
	const web, db = "web.demo.svc.clusterset.local.", "db.demo.svc.clusterset.local."

	steps := []struct {
		name  string
		event func()
		qname string
		want  string
	}{
		{"before any event: NXDOMAIN", func() {}, web, "NXDOMAIN"},
		{"import added", func() { imports.OnAdd(serviceImport("web", mcsv1beta1.ClusterSetIP, "10.96.0.10"), false) }, web, "NOERROR 10.96.0.10"},
		{"ClusterSetIP changed", func() {
			imports.OnUpdate(serviceImport("web", mcsv1beta1.ClusterSetIP, "10.96.0.10"), serviceImport("web", mcsv1beta1.ClusterSetIP, "10.96.0.20"))
		}, web, "NOERROR 10.96.0.20"},
		{"import removed", func() { imports.OnDelete(serviceImport("web", mcsv1beta1.ClusterSetIP, "10.96.0.20")) }, web, "NXDOMAIN"},
		{"a slice before its import: still NXDOMAIN", func() { slices.OnAdd(slice("db-east", "db", "east", "10.244.1.5"), false) }, db, "NXDOMAIN"},
		{"headless import added: the slice already counts", func() { imports.OnAdd(serviceImport("db", mcsv1beta1.Headless), false) }, db, "NOERROR 10.244.1.5"},
		{"endpoint added in another cluster", func() { slices.OnAdd(slice("db-west", "db", "west", "10.244.2.5"), false) }, db, "NOERROR 10.244.1.5 10.244.2.5"},
		{"endpoint added to a slice", func() {
			slices.OnUpdate(slice("db-east", "db", "east", "10.244.1.5"), slice("db-east", "db", "east", "10.244.1.5", "10.244.1.6"))
		}, db, "NOERROR 10.244.1.5 10.244.1.6 10.244.2.5"},
		{"slice deleted through a tombstone (a delete missed while the watch was down)", func() {
			slices.OnDelete(cache.DeletedFinalStateUnknown{Key: "demo/db-west", Obj: slice("db-west", "db", "west", "10.244.2.5")})
		}, db, "NOERROR 10.244.1.5 10.244.1.6"},
		{"slice relabelled to another service leaves db", func() {
			slices.OnUpdate(slice("db-east", "db", "east"), slice("db-east", "other", "east", "10.244.1.5"))
		}, db, "NOERROR"},
		{"import tombstone", func() {
			imports.OnDelete(cache.DeletedFinalStateUnknown{Key: "demo/db", Obj: serviceImport("db", mcsv1beta1.Headless)})
		}, db, "NXDOMAIN"},
	}
	for _, s := range steps {
		s.event()
		if got := answer(ix, s.qname); got != s.want {
			t.Fatalf("%s: %s A = %q, want %q", s.name, s.qname, got, s.want)
		}
	}
	if i, sl := ix.Len(); i != 0 || sl != 1 {
		t.Errorf("Len() = %d imports, %d slices; want 0 and 1 (db-east, now under other)", i, sl)
	}
}

// TestNamespacesFollowImports: <ns>.svc.<zone> exists while the namespace
// has an import, and the SOA serial follows changes.
func TestNamespacesFollowImports(t *testing.T) {
	now := time.Unix(1000, 0)
	ix := New(slog.New(slog.DiscardHandler), func() time.Time { return now })
	ns := "demo.svc.clusterset.local."
	if got := answer(ix, ns); got != "NXDOMAIN" {
		t.Fatalf("empty namespace: %s", got)
	}
	now = now.Add(time.Minute)
	ix.SetImport(serviceImport("a", mcsv1beta1.ClusterSetIP))
	ix.SetImport(serviceImport("b", mcsv1beta1.ClusterSetIP))
	ix.SetImport(serviceImport("b", mcsv1beta1.ClusterSetIP, "10.96.0.1")) // an update counts once
	if got := answer(ix, ns); got != "NOERROR" {
		t.Fatalf("namespace with imports: %s, want NODATA", got)
	}
	if ix.Serial() != 1060 {
		t.Errorf("serial %d, want 1060 (the time of the last change)", ix.Serial())
	}
	ix.DeleteImport("demo", "a")
	if got := answer(ix, ns); got != "NOERROR" {
		t.Fatalf("namespace with one import left: %s", got)
	}
	ix.DeleteImport("demo", "b")
	ix.DeleteImport("demo", "b") // a second delete is harmless
	if got := answer(ix, ns); got != "NXDOMAIN" {
		t.Fatalf("namespace without imports: %s", got)
	}
}

// TestLogsOnlyAfterSync: the first list is summarised in one line; later
// changes are logged one by one with the import's key.
func TestLogsOnlyAfterSync(t *testing.T) {
	var buf bytes.Buffer
	ix := New(slog.New(slog.NewTextHandler(&buf, nil)), nil)
	ix.SetImport(serviceImport("a", mcsv1beta1.ClusterSetIP, "10.96.0.1"))
	if buf.Len() != 0 {
		t.Fatalf("logged during the first list: %s", buf.String())
	}
	ix.Synced()
	ix.SetImport(serviceImport("b", mcsv1beta1.ClusterSetIP, "10.96.0.2"))
	ix.SetImport(serviceImport("b", mcsv1beta1.ClusterSetIP, "10.96.0.2")) // no change: no line
	ix.DeleteImport("demo", "b")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 lines (synced, added, removed), got:\n%s", buf.String())
	}
	for i, want := range []string{"imports=1", "serviceimport=demo/b", "serviceimport=demo/b"} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d lacks %s: %s", i, want, lines[i])
		}
	}
}

// TestOnChangeCounts: the metrics hook sees the counts after each change.
func TestOnChangeCounts(t *testing.T) {
	ix := New(slog.New(slog.DiscardHandler), nil)
	var imports, slices int
	ix.OnChange = func(i, s int) { imports, slices = i, s }
	ix.SetImport(serviceImport("db", mcsv1beta1.Headless))
	ix.SetSlice(slice("db-east", "db", "east", "10.244.1.5"))
	ix.SetSlice(slice("unlabelled", "", "east", "10.244.1.6"))
	if imports != 1 || slices != 1 {
		t.Fatalf("OnChange saw %d imports, %d slices; want 1 and 1 (a slice without service name is not indexed)", imports, slices)
	}
	ix.DeleteSlice("demo", "db-east")
	if slices != 0 {
		t.Fatalf("after the delete OnChange saw %d slices", slices)
	}
}
