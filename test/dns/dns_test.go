// Package dns_test runs fleetnet-dns against a real API server: the
// ServiceImports and imported EndpointSlices are created by hand (as the
// agent would), and real DNS queries over UDP and TCP on loopback check
// every record type, what is not in the zone, and how soon changes are
// answered. fleetnet-dns runs in this process (internal/dns/app), as the
// ServiceAccount its RBAC markers describe.
//
// Run with the fleet lock, one fleet at a time on a small machine:
//
//	flock -o /tmp/fleetnet-fleet.lock go test ./test/dns/...
package dns_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/controlplane"
	dnsapp "github.com/fleetnet/fleetnet/internal/dns/app"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/test/fleet"
	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

const (
	ns   = "demo"
	zone = "clusterset.local."
	// ttl is short so that the test of changes is quick; the bound it
	// checks is the same as with the default.
	ttl = 3 * time.Second
)

// server is a running fleetnet-dns and where it answers.
type server struct {
	dns, ready string
}

// startDNS runs fleetnet-dns in this process against cluster c, as a
// ServiceAccount bound to nothing but the ClusterRole that
// internal/dns/app's RBAC markers describe.
func startDNS(t *testing.T, c *fleet.Cluster) server {
	t.Helper()
	role := markerRole(t)
	cfg := c.AsServiceAccount(t, "fleetnet-system", "fleetnet-dns", role)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := controlplane.WriteKubeconfig(kubeconfig, map[string]*rest.Config{c.Name: cfg}, c.Name); err != nil {
		t.Fatal(err)
	}
	addr := func() string { return testkit.FreeAddr(t) }
	o := dnsapp.Options{Listen: addr(), Zone: "clusterset.local", TTL: ttl, Kubeconfig: kubeconfig,
		MetricsAddr: addr(), HealthAddr: addr(), ReadyAddr: addr()}
	s, err := dnsapp.Start(o, slog.New(slog.NewTextHandler(testWriter{t}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stopping fleetnet-dns: %v", err)
		}
	})
	srv := server{dns: o.Listen, ready: "http://" + o.ReadyAddr + "/ready"}
	start := time.Now()
	testkit.Eventually(t, 30*time.Second, "fleetnet-dns to be ready", func(ctx context.Context) error {
		resp, err := http.Get(srv.ready)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/ready: %s", resp.Status)
		}
		return nil
	})
	t.Logf("fleetnet-dns ready in %s", time.Since(start).Round(time.Millisecond))
	return srv
}

// markerRole is the ClusterRole that the +kubebuilder:rbac markers of
// internal/dns/app/rbac.go grant, read from the source as controller-gen
// reads it, so that this test runs fleetnet-dns with what the generated
// role will hold.
func markerRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	f, err := os.Open("../../internal/dns/app/rbac.go")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "fleetnet-dns"}}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "// +kubebuilder:rbac:")
		if !ok {
			continue
		}
		var rule rbacv1.PolicyRule
		for field := range strings.SplitSeq(line, ",") {
			k, v, _ := strings.Cut(field, "=")
			values := strings.Split(strings.Trim(v, `"`), ";")
			switch k {
			case "groups":
				rule.APIGroups = values
			case "resources":
				rule.Resources = values
			case "verbs":
				rule.Verbs = values
			default:
				t.Fatalf("rbac.go: marker field %q not understood by this test", k)
			}
		}
		role.Rules = append(role.Rules, rule)
	}
	if len(role.Rules) == 0 {
		t.Fatal("rbac.go has no +kubebuilder:rbac marker")
	}
	return role
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// ask sends one query over network (udp or tcp) and returns the reply.
func ask(t *testing.T, srv server, network, name string, qtype uint16) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: 2 * time.Second}
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	r, _, err := c.Exchange(m, srv.dns)
	if err != nil {
		t.Fatalf("%s %s %s: %v", network, name, dns.TypeToString[qtype], err)
	}
	return r
}

// summary is a reply as "RCODE rdata rdata…" (rdata sorted), e.g.
// "NOERROR 10.96.200.10" or "NXDOMAIN".
func summary(r *dns.Msg) string {
	var data []string
	for _, rr := range r.Answer {
		data = append(data, strings.TrimPrefix(rr.String(), rr.Header().String()))
	}
	slices.Sort(data)
	return strings.TrimSpace(dns.RcodeToString[r.Rcode] + " " + strings.Join(data, " "))
}

func serviceImport(name string, typ mcsv1beta1.ServiceImportType, ips []string, ports ...mcsv1beta1.ServicePort) *mcsv1beta1.ServiceImport {
	return &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       mcsv1beta1.ServiceImportSpec{Type: typ, IPs: ips, Ports: ports},
	}
}

// importedSlice is an EndpointSlice as the agent imports one: labelled with
// the import's name and the source cluster.
func importedSlice(name, service, cluster string, port int32, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			discoveryv1.LabelServiceName:  keys.DerivedServicePrefix + service,
			mcsv1beta1.LabelServiceName:   service,
			mcsv1beta1.LabelSourceCluster: cluster,
			discoveryv1.LabelManagedBy:    keys.EndpointSliceManagedBy,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("pg"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(port)}},
		Endpoints:   eps,
	}
}

func endpoint(addr, hostname string, ready *bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{addr}, Hostname: ptr.To(hostname), Conditions: discoveryv1.EndpointConditions{Ready: ready}}
}

func create(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(t.Context(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// TestAnswersEveryRecordType: every kind of name of the zone, asked over
// UDP and over TCP, with what a local Service that is not imported gives.
func TestAnswersEveryRecordType(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "hub"}}})
	hub := f.Cluster(t, "hub")
	c := hub.Client(t)
	tcp := corev1.ProtocolTCP
	create(t, c,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		serviceImport("web", mcsv1beta1.ClusterSetIP, []string{"10.96.200.10"},
			mcsv1beta1.ServicePort{Name: "http", Protocol: tcp, Port: 80}),
		serviceImport("dual", mcsv1beta1.ClusterSetIP, []string{"10.96.200.11", "fd00:10:96::b"},
			mcsv1beta1.ServicePort{Name: "http", Protocol: tcp, Port: 80}),
		serviceImport("db", mcsv1beta1.Headless, nil, mcsv1beta1.ServicePort{Name: "pg", Protocol: tcp, Port: 5432}),
		importedSlice("db-east", "db", "east", 5432,
			endpoint("10.244.1.5", "db-0", ptr.To(true)),
			endpoint("10.244.1.6", "db-1", ptr.To(false))),
		importedSlice("db-west", "db", "west", 15432, endpoint("10.244.2.5", "db-0", nil)),
		// A Service of this cluster, with endpoints, that nobody imports.
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "local-only"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}},
		&discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "local-only-abcde", Labels: map[string]string{discoveryv1.LabelServiceName: "local-only"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.9"}}},
		},
	)
	srv := startDNS(t, hub)

	web := "web.demo.svc." + zone
	for _, network := range []string{"udp", "tcp"} {
		for _, tc := range []struct {
			name  string
			qtype uint16
			want  string
		}{
			{web, dns.TypeA, "NOERROR 10.96.200.10"},
			{"WEB.Demo.svc.ClusterSet.local.", dns.TypeA, "NOERROR 10.96.200.10"},
			{web, dns.TypeAAAA, "NOERROR"}, // NODATA: the import has no IPv6 ClusterSetIP
			{"dual.demo.svc." + zone, dns.TypeAAAA, "NOERROR fd00:10:96::b"},
			{"_http._tcp." + web, dns.TypeSRV, "NOERROR 0 100 80 web.demo.svc.clusterset.local."},
			{"db.demo.svc." + zone, dns.TypeA, "NOERROR 10.244.1.5 10.244.2.5"}, // db-1 is not ready
			{"db-0.east.db.demo.svc." + zone, dns.TypeA, "NOERROR 10.244.1.5"},
			{"db-0.west.db.demo.svc." + zone, dns.TypeA, "NOERROR 10.244.2.5"},
			{"db-1.east.db.demo.svc." + zone, dns.TypeA, "NXDOMAIN"},
			{"_pg._tcp.db.demo.svc." + zone, dns.TypeSRV,
				"NOERROR 0 50 15432 db-0.west.db.demo.svc.clusterset.local. 0 50 5432 db-0.east.db.demo.svc.clusterset.local."},
			{"local-only.demo.svc." + zone, dns.TypeA, "NXDOMAIN"},
			{"unknown.demo.svc." + zone, dns.TypeA, "NXDOMAIN"},
			{"demo.svc." + zone, dns.TypeA, "NOERROR"},
			{zone, dns.TypeSOA, "NOERROR"}, // checked below
		} {
			r := ask(t, srv, network, tc.name, tc.qtype)
			got := summary(r)
			if tc.qtype == dns.TypeSOA {
				if len(r.Answer) != 1 || r.Answer[0].(*dns.SOA).Minttl != uint32(ttl/time.Second) {
					t.Errorf("%s %s SOA: %v", network, tc.name, r.Answer)
				}
				continue
			}
			if got != tc.want {
				t.Errorf("%s %s %s = %q, want %q", network, tc.name, dns.TypeToString[tc.qtype], got, tc.want)
			}
			if !r.Authoritative {
				t.Errorf("%s %s: not authoritative", network, tc.name)
			}
			if len(r.Answer) == 0 && (len(r.Ns) != 1 || r.Ns[0].Header().Rrtype != dns.TypeSOA) {
				t.Errorf("%s %s: a negative answer without the SOA: %v", network, tc.name, r.Ns)
			}
			for _, rr := range r.Answer {
				if rr.Header().Ttl != uint32(ttl/time.Second) {
					t.Errorf("%s %s: TTL %d, want %d", network, tc.name, rr.Header().Ttl, ttl/time.Second)
				}
			}
		}
	}
	// The SRV answer carries the targets' addresses.
	r := ask(t, srv, "udp", "_pg._tcp.db.demo.svc."+zone, dns.TypeSRV)
	var extra []string
	for _, rr := range r.Extra {
		if a, ok := rr.(*dns.A); ok {
			extra = append(extra, a.Hdr.Name+" "+a.A.String())
		}
	}
	slices.Sort(extra)
	if want := []string{"db-0.east.db.demo.svc.clusterset.local. 10.244.1.5", "db-0.west.db.demo.svc.clusterset.local. 10.244.2.5"}; !slices.Equal(extra, want) {
		t.Errorf("SRV additional section %v, want %v", extra, want)
	}
}

// TestLargeHeadlessAnswerFallsBackToTCP: 200 endpoints do not fit a UDP
// reply; the UDP answer is truncated (TC), and TCP gives all of them.
func TestLargeHeadlessAnswerFallsBackToTCP(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "hub"}}})
	hub := f.Cluster(t, "hub")
	c := hub.Client(t)
	var eps []discoveryv1.Endpoint
	for i := range 200 {
		eps = append(eps, endpoint(fmt.Sprintf("10.244.%d.%d", 1+i/100, 1+i%100), fmt.Sprintf("big-%d", i), nil))
	}
	create(t, c,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		serviceImport("big", mcsv1beta1.Headless, nil, mcsv1beta1.ServicePort{Name: "pg", Protocol: corev1.ProtocolTCP, Port: 5432}),
		importedSlice("big-east-1", "big", "east", 5432, eps[:100]...),
		importedSlice("big-east-2", "big", "east", 5432, eps[100:]...),
	)
	srv := startDNS(t, hub)
	name := "big.demo.svc." + zone
	udp := ask(t, srv, "udp", name, dns.TypeA)
	if !udp.Truncated || len(udp.Answer) >= 200 {
		t.Errorf("UDP: truncated=%v with %d answers; want TC set and fewer than 200", udp.Truncated, len(udp.Answer))
	}
	tcpReply := ask(t, srv, "tcp", name, dns.TypeA)
	if tcpReply.Truncated || len(tcpReply.Answer) != 200 {
		t.Errorf("TCP: truncated=%v with %d answers; want all 200", tcpReply.Truncated, len(tcpReply.Answer))
	}
}

// TestChangesAreAnsweredWithinTheTTL: an import removed, an import added
// (after its name was answered NXDOMAIN, which the cache holds) and an
// endpoint added are each answered within the TTL, cache included.
func TestChangesAreAnsweredWithinTheTTL(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "hub"}}})
	hub := f.Cluster(t, "hub")
	c := hub.Client(t)
	tcp := corev1.ProtocolTCP
	web := serviceImport("web", mcsv1beta1.ClusterSetIP, []string{"10.96.200.10"}, mcsv1beta1.ServicePort{Name: "http", Protocol: tcp, Port: 80})
	dbWest := importedSlice("db-west", "db", "west", 5432, endpoint("10.244.2.5", "db-0", nil))
	create(t, c,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		web,
		serviceImport("db", mcsv1beta1.Headless, nil, mcsv1beta1.ServicePort{Name: "pg", Protocol: tcp, Port: 5432}),
		dbWest,
	)
	srv := startDNS(t, hub)

	// within asks until the answer is want, and fails past the TTL plus a
	// second for the watch event to arrive.
	within := func(what, name string, want string) {
		t.Helper()
		start := time.Now()
		for {
			got := summary(ask(t, srv, "udp", name, dns.TypeA))
			if got == want {
				t.Logf("%s: answered after %s (TTL %s)", what, time.Since(start).Round(time.Millisecond), ttl)
				return
			}
			if time.Since(start) > ttl+time.Second {
				t.Fatalf("%s: %s is still %q after %s, want %q", what, name, got, time.Since(start).Round(time.Millisecond), want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// Each change comes right after its name was answered, so that the
	// old answer is in the cache for the whole TTL.
	change := func(what, name, before, after string, apply func()) {
		t.Helper()
		if got := summary(ask(t, srv, "udp", name, dns.TypeA)); got != before {
			t.Fatalf("%s: %s = %q before the change, want %q", what, name, got, before)
		}
		apply()
		within(what, name, after)
	}
	change("import removed", "web.demo.svc."+zone, "NOERROR 10.96.200.10", "NXDOMAIN", func() {
		if err := c.Delete(t.Context(), web); err != nil {
			t.Fatal(err)
		}
	})
	// The NXDOMAIN is cached too (RFC 2308, bounded by the SOA's minimum,
	// the TTL).
	change("import added", "new.demo.svc."+zone, "NXDOMAIN", "NOERROR 10.96.200.12", func() {
		create(t, c, serviceImport("new", mcsv1beta1.ClusterSetIP, []string{"10.96.200.12"}, mcsv1beta1.ServicePort{Name: "http", Protocol: tcp, Port: 80}))
	})
	change("endpoint added", "db.demo.svc."+zone, "NOERROR 10.244.2.5", "NOERROR 10.244.2.5 10.244.2.6", func() {
		dbWest.Endpoints = append(dbWest.Endpoints, endpoint("10.244.2.6", "db-1", nil))
		if err := c.Update(t.Context(), dbWest); err != nil {
			t.Fatal(err)
		}
	})
}

// TestBinary runs the fleetnet-dns command as the dev fleet will: flags for
// every address and a kubeconfig. A wrong flag exits 2 naming it; the
// server answers, logs JSON lines with the import's key, and exits 0 on
// SIGTERM.
func TestBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fleetnet-dns")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/fleetnet-dns").CombinedOutput(); err != nil {
		t.Fatalf("building fleetnet-dns: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--ttl", "1500ms").CombinedOutput()
	if code := exitCode(err); code != 2 || !strings.Contains(string(out), "--ttl=1.5s") {
		t.Fatalf("--ttl=1500ms: exit %d, %s; want 2 naming the flag", code, out)
	}

	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "hub"}}})
	hub := f.Cluster(t, "hub")
	c := hub.Client(t)
	create(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		serviceImport("web", mcsv1beta1.ClusterSetIP, []string{"10.96.200.10"}, mcsv1beta1.ServicePort{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}))
	addr := func() string { return testkit.FreeAddr(t) }
	srv := server{dns: addr()}
	ready := addr()
	cmd := exec.Command(bin, "--kubeconfig", hub.KubeconfigPath, "--context", hub.Name, "--listen", srv.dns,
		"--metrics-addr", addr(), "--health-addr", addr(), "--ready-addr", ready)
	stderr := &testkit.SyncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	testkit.Eventually(t, 30*time.Second, "fleetnet-dns to be ready", func(ctx context.Context) error {
		resp, err := http.Get("http://" + ready + "/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/ready: %s", resp.Status)
		}
		return nil
	})
	if got := summary(ask(t, srv, "udp", "web.demo.svc."+zone, dns.TypeA)); got != "NOERROR 10.96.200.10" {
		t.Fatalf("web: %q", got)
	}
	create(t, c, serviceImport("late", mcsv1beta1.ClusterSetIP, []string{"10.96.200.13"}, mcsv1beta1.ServicePort{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}))
	testkit.Eventually(t, 10*time.Second, "the JSON log line of demo/late", func(ctx context.Context) error {
		if !strings.Contains(stderr.String(), `"serviceimport":"demo/late"`) {
			return fmt.Errorf("no JSON log line with serviceimport demo/late in:\n%s", stderr.String())
		}
		return nil
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
		}
		t.Logf("fleetnet-dns' log:\n%s", stderr.String())
	case <-time.After(15 * time.Second):
		t.Fatalf("still running 15s after SIGTERM\n%s", stderr.String())
	}
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
