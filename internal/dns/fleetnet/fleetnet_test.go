package fleetnet

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/fleetnet/fleetnet/internal/dns/index"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsfake "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/fake"
)

func TestMain(m *testing.M) {
	// The mcs-api's fake clientset predates watch lists and never sends the
	// bookmark that ends one, so the reflectors list and watch the old way
	// here (client-go reads its feature gates from the environment once).
	os.Setenv("KUBE_FEATURE_WatchListClient", "false")
	os.Exit(m.Run())
}

func query(t *testing.T, h *Handler, name string, qtype uint16) *dns.Msg {
	t.Helper()
	r := new(dns.Msg)
	r.SetQuestion(name, qtype)
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	rcode, err := h.ServeDNS(context.Background(), rec, r)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if rec.Msg == nil {
		// Not written: the server writes the returned rcode.
		m := new(dns.Msg)
		m.SetRcode(r, rcode)
		return m
	}
	return rec.Msg
}

func TestServeDNS(t *testing.T) {
	ix := index.New(slog.New(slog.DiscardHandler), nil)
	ix.SetImport(&mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"},
		Spec:       mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.96.0.10"}},
	})
	h := &Handler{Zones: []string{"clusterset.local."}, TTL: 5, Index: ix,
		Next: test.NextHandler(dns.RcodeRefused, nil)}

	if m := query(t, h, "web.demo.svc.clusterset.local.", dns.TypeA); m.Rcode != dns.RcodeServerFailure {
		t.Fatalf("before the caches sync: %s, want SERVFAIL (an NXDOMAIN would be cached)", dns.RcodeToString[m.Rcode])
	}
	if h.Ready() {
		t.Fatal("ready before the caches synced")
	}
	h.SetSynced()
	if !h.Ready() {
		t.Fatal("not ready once synced")
	}
	m := query(t, h, "web.demo.svc.clusterset.local.", dns.TypeA)
	if m.Rcode != dns.RcodeSuccess || !m.Authoritative || len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != "10.96.0.10" {
		t.Fatalf("answer: %v", m)
	}
	m = query(t, h, "gone.demo.svc.clusterset.local.", dns.TypeA)
	if m.Rcode != dns.RcodeNameError || len(m.Ns) != 1 {
		t.Fatalf("unknown name: %v", m)
	}
	if m := query(t, h, "kubernetes.default.svc.cluster.local.", dns.TypeA); m.Rcode != dns.RcodeRefused {
		t.Fatalf("a name outside the zone should go to the next plugin (which refuses here): %v", m)
	}
}

// TestWatcherFeedsTheIndex runs the real informers against fake clientsets
// (the API server's behaviour is test/dns's business): the first list
// makes the handler ready, a later endpoint shows in the next answer, and
// only imported EndpointSlices are cached.
func TestWatcherFeedsTheIndex(t *testing.T) {
	labels := map[string]string{mcsv1beta1.LabelServiceName: "db", mcsv1beta1.LabelSourceCluster: "east"}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "demo", Name: "db-east", Labels: labels},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.5"}, Hostname: ptr.To("db-0")}},
	}
	local := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "demo", Name: "local-abc", Labels: map[string]string{discoveryv1.LabelServiceName: "local"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.9"}}},
	}
	kc := kubefake.NewClientset(slice, local)
	mc := mcsfake.NewSimpleClientset(&mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "db"},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless,
			Ports: []mcsv1beta1.ServicePort{{Name: "pg", Protocol: corev1.ProtocolTCP, Port: 5432}}},
	})
	// The informers watch after their first list, and a fake sends a watch
	// only the changes made once it is registered (the mcs-api's fake not
	// even those since the list): the changes below wait for both watches.
	slicesWatched := watching(&kc.Fake, "endpointslices", func(a k8stesting.Action) (watch.Interface, error) {
		var opts []metav1.ListOptions
		if wa, ok := a.(k8stesting.WatchActionImpl); ok {
			opts = append(opts, wa.ListOptions)
		}
		return kc.Tracker().Watch(a.GetResource(), a.GetNamespace(), opts...)
	})
	importsWatched := watching(&mc.Fake, "serviceimports", func(a k8stesting.Action) (watch.Interface, error) {
		return mc.Tracker().Watch(a.GetResource(), a.GetNamespace())
	})
	ix := index.New(slog.New(slog.DiscardHandler), nil)
	h := &Handler{Zones: []string{"clusterset.local."}, TTL: 5, Index: ix}
	w, err := NewWatcher(kc, mc, ix, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	w.Start(h.SetSynced)
	defer w.Stop()
	testkit.Until(t, 10*time.Second, "the caches to sync", h.Ready)
	for what, ch := range map[string]<-chan struct{}{"endpointslices": slicesWatched, "serviceimports": importsWatched} {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("the informer of %s does not watch", what)
		}
	}
	if m := query(t, h, "db-0.east.db.demo.svc.clusterset.local.", dns.TypeA); len(m.Answer) != 1 {
		t.Fatalf("after sync: %v", m)
	}
	if _, n := ix.Len(); n != 1 {
		t.Errorf("%d slices indexed, want 1: a local Service's slice has no MCS labels", n)
	}

	slice = slice.DeepCopy()
	slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.244.1.6"}, Hostname: ptr.To("db-1")})
	if _, err := kc.DiscoveryV1().EndpointSlices("demo").Update(context.Background(), slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Until(t, 10*time.Second, "db-1 to resolve", func() bool {
		return len(query(t, h, "db-1.east.db.demo.svc.clusterset.local.", dns.TypeA).Answer) == 1
	})
	if err := mc.MulticlusterV1beta1().ServiceImports("demo").Delete(context.Background(), "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Until(t, 10*time.Second, "the removed import to be NXDOMAIN", func() bool {
		return query(t, h, "db.demo.svc.clusterset.local.", dns.TypeA).Rcode == dns.RcodeNameError
	})
}

// watching makes fake's watches of resource with start (as its default
// reactor would) and returns a channel closed once the first is registered.
func watching(fake *k8stesting.Fake, resource string, start func(k8stesting.Action) (watch.Interface, error)) <-chan struct{} {
	ch := make(chan struct{})
	var once sync.Once
	fake.PrependWatchReactor(resource, func(a k8stesting.Action) (bool, watch.Interface, error) {
		w, err := start(a)
		if err != nil {
			return false, nil, err
		}
		once.Do(func() { close(ch) })
		return true, w, nil
	})
	return ch
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		input string
		want  config
		err   bool
	}{
		{input: "fleetnet", want: config{zones: []string{"clusterset.local."}, ttl: DefaultTTL}},
		{input: "fleetnet example.org {\n ttl 30\n kubeconfig /k east\n}", want: config{zones: []string{"example.org."}, ttl: 30, kubeconfig: "/k", context: "east"}},
		{input: "fleetnet {\n kubeconfig \"/path with space/k\"\n}", want: config{zones: []string{"clusterset.local."}, ttl: DefaultTTL, kubeconfig: "/path with space/k"}},
		{input: "fleetnet {\n ttl -1\n}", err: true},
		{input: "fleetnet {\n ttl 3601\n}", err: true},
		{input: "fleetnet {\n ttl\n}", err: true},
		{input: "fleetnet {\n kubeconfig\n}", err: true},
		{input: "fleetnet {\n upstream 1.1.1.1\n}", err: true},
		{input: "fleetnet\nfleetnet", err: true},
	} {
		c := caddy.NewTestController("dns", tc.input)
		c.ServerBlockKeys = []string{"clusterset.local.:53"}
		got, err := parse(c)
		if tc.err {
			if err == nil {
				t.Errorf("%q: no error", tc.input)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.input, err)
			continue
		}
		if !slices.Equal(got.zones, tc.want.zones) || got.ttl != tc.want.ttl || got.kubeconfig != tc.want.kubeconfig || got.context != tc.want.context {
			t.Errorf("%q: got %+v, want %+v", tc.input, got, tc.want)
		}
	}
}

// TestDirectiveOrder: fleetnet runs after cache (cache hits skip it) and
// the plugins that observe every query.
func TestDirectiveOrder(t *testing.T) {
	at := func(name string) int { return slices.Index(dnsserver.Directives, name) }
	if at(Name) < 0 {
		t.Fatal("fleetnet is not a directive")
	}
	for _, before := range []string{"cache", "log", "errors", "prometheus"} {
		if at(before) > at(Name) {
			t.Errorf("%s comes after fleetnet", before)
		}
	}
}
