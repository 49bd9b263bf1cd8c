package diagnose

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/registry/registrytest"
	"github.com/fleetnet/fleetnet/internal/registry/server"
	"github.com/fleetnet/fleetnet/test/fleet"
	"github.com/miekg/dns"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// TestGatherBrokenSetups builds broken set-ups on real API servers and a
// real registry, one after the other (one fleet keeps the test short), and
// checks that Gather reads them so that Diagnose names the broken step. No
// agent runs: the test writes what an agent would, so that each set-up is
// exactly the one named.
func TestGatherBrokenSetups(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "east"}, {Name: "hub", GatewayAPI: true}}})
	clk := clocktesting.NewFakeClock(time.Now())
	reg := registrytest.Start(t, server.Config{LeaseTTL: 30 * time.Second, Clock: clk})
	readers := map[string]client.Reader{}
	for _, c := range f.Clusters {
		readers[c.Name] = c.Client(t)
	}
	east, hub := f.Cluster(t, "east").Client(t), f.Cluster(t, "hub").Client(t)

	// The registry: east exports demo/echo, hub imports; both live.
	for _, id := range []string{"east", "hub"} {
		c := reg.Client(id, false)
		if _, err := c.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Cluster: &registryv1.Cluster{Id: id, ClustersetId: "fleet"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := reg.Client("east", false).PutExport(ctx, &registryv1.PutExportRequest{Export: &registryv1.Export{
		Key:           &registryv1.ExportKey{Namespace: "demo", Name: "echo", ClusterId: "east"},
		ExportedSince: timestamppb.New(clk.Now()), Type: "ClusterSetIP", Weight: 1, IpFamilies: []string{"IPv4"},
		Ports: []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}},
	}}); err != nil {
		t.Fatal(err)
	}
	admin := reg.Client("admin", true)
	waitFor(ctx, t, "the registry's import", func() bool {
		r, err := admin.ListImports(ctx, &registryv1.ListImportsRequest{})
		return err == nil && len(r.GetImports()) == 1
	})

	// east: the exported namespace and a ServiceExport the agent accepted.
	mustCreate(ctx, t, east, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}})
	se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "echo"}}
	mustCreate(ctx, t, east, se)
	se.Status.Conditions = []metav1.Condition{
		condAt("Valid", metav1.ConditionTrue, "Valid", ""),
		condAt("Ready", metav1.ConditionTrue, "Ready", ""),
		condAt("Conflict", metav1.ConditionFalse, "NoConflicts", ""),
	}
	if err := east.Status().Update(ctx, se); err != nil {
		t.Fatal(err)
	}

	fleetnetDNS := serveDNS(t, map[string]string{})
	forwarding := serveDNS(t, map[string]string{}) // the cluster's CoreDNS, forwarding
	notForwarding := serveDNS(t, nil)              // a CoreDNS without the clusterset block
	silent := closedUDPAddr(t)

	target := Target{Cluster: "hub", Namespace: "demo", Name: "echo"}
	sources := Sources{
		Registry: admin, RegistryAddress: reg.Addr, Now: clk.Now,
		Cluster: func(id string) (client.Reader, error) {
			if r, ok := readers[id]; ok {
				return r, nil
			}
			return nil, fmt.Errorf("no kube context for %s", id)
		},
		DNS: fleetnetDNS.addr, ClusterDNS: forwarding.addr, DNSTimeout: 300 * time.Millisecond,
	}
	check := func(name string, src Sources, wantFail map[string]string) {
		t.Helper()
		facts := Gather(ctx, target, src)
		steps := Diagnose(facts)
		var b bytes.Buffer
		_ = Write(&b, target, steps)
		for step, word := range wantFail {
			s, ok := find(steps, step)
			if !ok || s.Status != Fail || !strings.Contains(s.Detail+" "+s.Fix, word) {
				t.Errorf("%s: step %q is not ✗ with %q:\n%s", name, step, word, b.String())
			}
		}
		for _, s := range steps {
			if _, want := wantFail[s.Name]; !want && s.Status == Fail {
				t.Errorf("%s: step %q fails unexpectedly:\n%s", name, s.Name, b.String())
			}
		}
	}

	check("namespace missing", sources, map[string]string{"namespace in hub": "create namespace demo",
		"fleetnet-dns (" + fleetnetDNS.addr + ")": "NXDOMAIN", "cluster DNS (" + forwarding.addr + ")": "NXDOMAIN"})

	mustCreate(ctx, t, hub, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}})
	check("not imported by the cluster", sources, map[string]string{"ServiceImport in hub": "has not imported it",
		"fleetnet-dns (" + fleetnetDNS.addr + ")": "NXDOMAIN", "cluster DNS (" + forwarding.addr + ")": "NXDOMAIN"})

	// What the agent of hub makes: ServiceImport, derived Service, slice;
	// and what fleetnet-dns then answers.
	derived := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "derived-test",
		Labels: map[string]string{keys.LabelManagedBy: keys.ManagedByAgent, mcsv1beta1.LabelServiceName: "echo"}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}}
	mustCreate(ctx, t, hub, derived)
	si := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "echo", Annotations: map[string]string{keys.AnnotationDerivedService: derived.Name}},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: derived.Spec.ClusterIPs,
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}
	mustCreate(ctx, t, hub, si)
	si.Status.Clusters = []mcsv1beta1.ClusterStatus{{Cluster: "east"}}
	si.Status.Conditions = []metav1.Condition{condAt("Ready", metav1.ConditionTrue, "Ready", "")}
	if err := hub.Status().Update(ctx, si); err != nil {
		t.Fatal(err)
	}
	mustCreate(ctx, t, hub, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "imported-east", Labels: map[string]string{
			mcsv1beta1.LabelServiceName: "echo", mcsv1beta1.LabelSourceCluster: "east",
			discoveryv1.LabelManagedBy: keys.EndpointSliceManagedBy, discoveryv1.LabelServiceName: derived.Name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.5"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	})
	name := serviceName(target)
	fleetnetDNS.set(name, derived.Spec.ClusterIPs[0])
	forwarding.set(name, derived.Spec.ClusterIPs[0])
	check("healthy", sources, nil)

	silentDNS := sources
	silentDNS.DNS, silentDNS.ClusterDNS = silent, notForwarding.addr
	check("DNS not answering, not forwarded", silentDNS, map[string]string{
		"fleetnet-dns (" + silent + ")": "listens at", "cluster DNS (" + notForwarding.addr + ")": "does not forward clusterset.local"})

	se.Status.Conditions[2] = condAt("Conflict", metav1.ConditionTrue, "PortConflict", "east and west disagree on port 80")
	if err := east.Status().Update(ctx, se); err != nil {
		t.Fatal(err)
	}
	check("conflict", sources, map[string]string{"ServiceExport in east": "PortConflict"})
	se.Status.Conditions[2] = condAt("Conflict", metav1.ConditionFalse, "NoConflicts", "")
	if err := east.Status().Update(ctx, se); err != nil {
		t.Fatal(err)
	}

	// The edge's part: hub's HTTPRoute with the ServiceImport as its
	// backend, its Gateway, and an edge's metrics, written as
	// fleetnet-gateway and fleetnet-edge would.
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "gw"}, Spec: gwv1.GatewaySpec{GatewayClassName: "fleetnet",
		Listeners: []gwv1.Listener{{Name: "http", Protocol: gwv1.HTTPProtocolType, Port: 8080}}}}
	mustCreate(ctx, t, hub, gw)
	gw.Status.Conditions = []metav1.Condition{condAt("Accepted", metav1.ConditionTrue, "Accepted", ""), condAt("Programmed", metav1.ConditionTrue, "Programmed", "")}
	if err := hub.Status().Update(ctx, gw); err != nil {
		t.Fatal(err)
	}
	route := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "echo"}, Spec: gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}},
		Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
			Group: ptr.To(gwv1.Group(mcsv1beta1.GroupName)), Kind: ptr.To(gwv1.Kind("ServiceImport")), Name: "echo", Port: ptr.To(gwv1.PortNumber(80))}}}}}},
	}}
	mustCreate(ctx, t, hub, route)
	setRoute := func(accepted metav1.Condition) {
		t.Helper()
		route.Status.Parents = []gwv1.RouteParentStatus{{ParentRef: gwv1.ParentReference{Name: "gw"}, ControllerName: keys.GatewayControllerName,
			Conditions: []metav1.Condition{accepted, condAt("ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs", "")}}}
		if err := hub.Status().Update(ctx, route); err != nil {
			t.Fatal(err)
		}
	}
	setRoute(condAt("Accepted", metav1.ConditionTrue, "Accepted", ""))
	var metricsMu sync.Mutex
	endpoints := func(healthy, ejected int) string {
		return fmt.Sprintf("# TYPE fleetnet_edge_backend_endpoints gauge\n"+
			"fleetnet_edge_backend_endpoints{backend=\"ServiceImport/demo/echo\",cluster=\"east\",health=\"healthy\"} %d\n"+
			"fleetnet_edge_backend_endpoints{backend=\"ServiceImport/demo/echo\",cluster=\"east\",health=\"ejected\"} %d\n", healthy, ejected)
	}
	metrics := endpoints(1, 0)
	edge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		metricsMu.Lock()
		defer metricsMu.Unlock()
		_, _ = io.WriteString(w, metrics)
	}))
	t.Cleanup(edge.Close)
	withEdge := sources
	withEdge.Hub, withEdge.EdgeMetrics = "hub", []string{edge.URL + "/metrics"}
	check("published through the edge", withEdge, nil)
	setRoute(condAt("Accepted", metav1.ConditionFalse, "NotAllowedByListeners", "no listener allows HTTPRoutes from namespace demo"))
	metricsMu.Lock()
	metrics = endpoints(0, 1)
	metricsMu.Unlock()
	check("route refused, endpoints ejected at the edge", withEdge, map[string]string{
		"HTTPRoute demo/echo": "allowedRoutes", "edge " + edge.Listener.Addr().String() + ", backend": "ejected"})
	closed := closedAddr(t)
	withEdge.EdgeMetrics = []string{"http://" + closed + "/metrics"}
	check("edge metrics unreachable", withEdge, map[string]string{"HTTPRoute demo/echo": "allowedRoutes", "edge " + closed: "--edge-metrics"})

	// Leases expire: nobody renews them while the clock moves on.
	clk.Step(time.Minute)
	reg.Store.ExpireLeases()
	waitFor(ctx, t, "expired leases", func() bool {
		r, err := admin.ListClusters(ctx, &registryv1.ListClustersRequest{})
		return err == nil && len(r.GetClusters()) == 2 && !r.GetClusters()[0].GetLive() && !r.GetClusters()[1].GetLive()
	})
	check("leases expired", sources, map[string]string{"lease of east": "expired", "lease of hub": "expired",
		"registry export from east": "not participating", "registry merge": "no live cluster"})
}

func condAt(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	c := cond(typ, status, reason, msg)
	c.LastTransitionTime = metav1.Now()
	return c
}

func mustCreate(ctx context.Context, t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(ctx, obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func waitFor(ctx context.Context, t *testing.T, what string, ok func() bool) {
	t.Helper()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// dnsServer answers A questions from records (name -> address) and
// NXDOMAIN for other names; with nil records it answers NXDOMAIN to all,
// as a CoreDNS does that has no server block for the zone.
type dnsServer struct {
	addr    string
	mu      sync.Mutex
	records map[string]string
}

func (s *dnsServer) set(name, addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records[name] = addr
}

func serveDNS(t *testing.T, records map[string]string) *dnsServer {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &dnsServer{addr: pc.LocalAddr().String(), records: records}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		q := r.Question[0]
		s.mu.Lock()
		addr, ok := s.records[q.Name]
		s.mu.Unlock()
		switch {
		case !ok:
			m.Rcode = dns.RcodeNameError
		case q.Qtype == dns.TypeA:
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.ParseIP(addr)})
		}
		_ = w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return s
}

// closedAddr returns a loopback TCP address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// closedUDPAddr returns a loopback address nothing listens on.
func closedUDPAddr(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close()
	return addr
}

// TestReadEdgeMetrics: an edge's page gives the target backend's health
// per cluster and its namespace's load balancers' per port; other
// backends are left out; a page without TYPE lines reads the same.
func TestReadEdgeMetrics(t *testing.T) {
	page := `fleetnet_edge_backend_endpoints{backend="ServiceImport/demo/echo",cluster="east",health="healthy"} 2
fleetnet_edge_backend_endpoints{backend="ServiceImport/demo/echo",cluster="west",health="ejected"} 1
fleetnet_edge_backend_endpoints{backend="ServiceImport/demo/other",cluster="east",health="healthy"} 5
fleetnet_edge_l4_endpoints{load_balancer="demo/echo-lb",port="5432/TCP",cluster="east",health="healthy"} 1
fleetnet_edge_l4_endpoints{load_balancer="demo/echo-lb",port="53/UDP",cluster="east",health="healthy"} 1
fleetnet_edge_l4_endpoints{load_balancer="web/other",port="80/TCP",cluster="east",health="healthy"} 1
`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, page) }))
	defer srv.Close()
	m := readEdgeMetrics(context.Background(), Target{Cluster: "hub", Namespace: "demo", Name: "echo"}, srv.URL+"/metrics", nil)
	if m.Err != nil {
		t.Fatal(m.Err)
	}
	if want := map[string]EndpointHealth{"east": {Healthy: 2}, "west": {Ejected: 1}}; fmt.Sprint(m.Backend) != fmt.Sprint(want) {
		t.Errorf("backend health %v, want %v", m.Backend, want)
	}
	if want := map[string]map[string]map[string]EndpointHealth{"demo/echo-lb": {"5432/TCP": {"east": {Healthy: 1}}, "53/UDP": {"east": {Healthy: 1}}}}; fmt.Sprint(m.LoadBalancers) != fmt.Sprint(want) {
		t.Errorf("load balancers' health %v, want %v", m.LoadBalancers, want)
	}
}
