package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/dev"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/miekg/dns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// dnsTTL is fleetnet-dns' default TTL: withdrawal must stop traffic within
// it and two seconds (issue 15). The ClusterSetIP itself does not change,
// so what is measured is the withdrawal reaching hub's kube-proxy (agents,
// registry, imported slices); the TTL bounds how long a client may keep a
// name that is gone.
const dnsTTL = 5 * time.Second

// Names through each cluster's fleetnet-dns, and TCP through the ClusterSetIP
// from a pod via its node's kube-proxy, in the dev fleet's data plane.
// Needs root.
func TestClustersetDNSAndClusterSetIP(t *testing.T) {
	if err := dev.NodeRequirements(); err != nil {
		t.Fatalf("%v (the e2e suite runs as root in CI)", err)
	}
	ns := namespace(t, "e2e-dns")
	ctx := context.Background()
	exportName := func(cluster, name string) {
		t.Helper()
		se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if err := kube(t, cluster).Create(ctx, se); err != nil {
			t.Fatal(err)
		}
	}
	serveEcho(t, "east", ns, "echo", 2, false)
	serveEcho(t, "west", ns, "echo", 1, false)
	serveEcho(t, "east", ns, "db", 2, true)
	serveEcho(t, "hub", ns, "local", 1, false) // never exported
	runPod(t, "hub", ns, "client")
	exportName("east", "echo")
	exportName("west", "echo")
	exportName("east", "db")

	s := state
	var dbPods []string
	dbPodsByName := map[string]string{}
	for name, p := range appPods(t, ns, "db") {
		dbPods = append(dbPods, p.pod.Status.PodIP)
		dbPodsByName[name] = p.pod.Status.PodIP
	}
	sort.Strings(dbPods)
	echoPods := appPods(t, ns, "echo")

	zone := "svc." + keys.ClustersetZone + "."
	echo, db, local := "echo."+ns+"."+zone, "db."+ns+"."+zone, "local."+ns+"."+zone
	for _, c := range s.Clusters {
		t.Run("dns from "+c.Name, func(t *testing.T) {
			server := c.DNSAddress()
			// The import's ClusterSetIP in this cluster is what A answers.
			var ips []string
			testkit.Eventually(t, 30*time.Second, fmt.Sprintf("the ClusterSetIP of echo in %s", c.Name), func(ctx context.Context) error {
				var si mcsv1beta1.ServiceImport
				if err := kube(t, c.Name).Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: "echo"}, &si); err != nil {
					return err
				}
				if len(si.Status.Clusters) != 2 || len(si.Spec.IPs) == 0 {
					return fmt.Errorf("ServiceImport %s/echo in %s: clusters %v, ips %v; want east and west and a ClusterSetIP", ns, c.Name, statusClusters(&si), si.Spec.IPs)
				}
				ips = nil
				for _, ip := range si.Spec.IPs {
					if !strings.Contains(ip, ":") {
						ips = append(ips, ip)
					}
				}
				return nil
			})
			testkit.Eventually(t, 30*time.Second, fmt.Sprintf("%s to answer", echo), func(ctx context.Context) error {
				return expectAnswer(ctx, server, echo, dns.TypeA, dns.RcodeSuccess, ips)
			})
			testkit.Eventually(t, 30*time.Second, fmt.Sprintf("%s to answer", db), func(ctx context.Context) error {
				return expectAnswer(ctx, server, db, dns.TypeA, dns.RcodeSuccess, dbPods)
			})
			// A headless endpoint's own name: <hostname>.<cluster>.<svc>...
			testkit.Eventually(t, 30*time.Second, fmt.Sprintf("db-1.east.%s to answer", db), func(ctx context.Context) error {
				return expectAnswer(ctx, server, "db-1.east."+db, dns.TypeA, dns.RcodeSuccess, []string{dbPodsByName["db-1"]})
			})
			checks := []struct {
				name  string
				qtype uint16
				rcode int
				want  []string
			}{
				{"SRV of the named port", dns.TypeSRV, dns.RcodeSuccess, []string{"0 100 80 " + echo}},
				{"no IPv6 ClusterSetIP: NODATA", dns.TypeAAAA, dns.RcodeSuccess, nil},
				{"a Service that is not exported: NXDOMAIN", dns.TypeA, dns.RcodeNameError, nil},
			}
			for _, tc := range checks {
				name := echo
				switch tc.qtype {
				case dns.TypeSRV:
					name = "_http._tcp." + echo
				}
				if tc.rcode == dns.RcodeNameError {
					name = local
				}
				if c.DualStack && tc.qtype == dns.TypeAAAA {
					continue // the derived Service may take an IPv6 ClusterIP there
				}
				if err := expectAnswer(ctx, server, name, tc.qtype, tc.rcode, tc.want); err != nil {
					t.Errorf("%s: %v", tc.name, err)
				}
			}
		})
	}

	// TCP from hub's client pod through the ClusterSetIP (hub's node's
	// kube-proxy) reaches both exporting clusters. The client runs curl in
	// a loop (kubectl exec through the API), printing when each answer
	// came and which pod gave it.
	hub, err := s.Cluster("hub")
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		at      time.Time
		cluster string
	}
	// fromClient runs loop, a shell loop whose body is $get, in the client
	// pod and returns its answers.
	fromClient := func(ctx context.Context, loop string) ([]answer, error) {
		ip, err := resolveA(ctx, hub.DNSAddress(), echo)
		if err != nil {
			return nil, err
		}
		get := fmt.Sprintf(`r=$(curl -sS --max-time 3 http://%s/ | tr -d '\n'); echo "$(date +%%s%%3N) $r"`, net.JoinHostPort(ip, "80"))
		out, errOut, err := execIn(ctx, t, "hub", ns, "client", "client", false, "sh", "-c", strings.ReplaceAll(loop, "$get", get))
		if err != nil {
			return nil, fmt.Errorf("curl in the client pod: %w: %s", err, errOut)
		}
		var answers []answer
		for line := range strings.Lines(out) {
			ms, body, _ := strings.Cut(strings.TrimSpace(line), " ")
			a, err := parseEcho([]byte(body))
			if err != nil {
				return nil, fmt.Errorf("%w (curl: %s)", err, errOut)
			}
			p, ok := echoPods[a.Pod]
			if !ok {
				return nil, fmt.Errorf("answer from pod %q, which is no echo pod of east or west", a.Pod)
			}
			at, err := strconv.ParseInt(ms, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("line %q: %w", line, err)
			}
			answers = append(answers, answer{time.UnixMilli(at), p.cluster})
		}
		return answers, nil
	}
	testkit.Eventually(t, 30*time.Second, "answers from both clusters", func(ctx context.Context) error {
		answers, err := fromClient(ctx, "for i in $(seq 30); do $get; done")
		if err != nil {
			return err
		}
		seen := map[string]int{}
		for _, a := range answers {
			seen[a.cluster]++
		}
		if len(answers) != 30 || seen["east"] == 0 || seen["west"] == 0 {
			return fmt.Errorf("30 requests through the ClusterSetIP were answered by %v; want east and west", seen)
		}
		return nil
	})

	// West withdraws: no connection reaches west within TTL + 2 s.
	withdrawn := time.Now()
	if err := kube(t, "west").Delete(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}}); err != nil {
		t.Fatal(err)
	}
	watch := dnsTTL + 2*time.Second + 3*time.Second
	answers, err := fromClient(ctx, fmt.Sprintf("end=$(($(date +%%s) + %d)); while [ $(date +%%s) -lt $end ]; do $get; done", int(watch.Seconds())))
	if err != nil {
		t.Fatalf("after west's withdrawal: %v", err)
	}
	var last time.Time
	for _, a := range answers {
		if a.cluster == "west" {
			last = a.at
		}
	}
	t.Logf("%d requests in the %s after west's withdrawal", len(answers), watch)
	if last.IsZero() {
		t.Logf("no answer from west after its export was deleted")
	} else {
		t.Logf("west's last answer came %s after its export was deleted", last.Sub(withdrawn).Round(time.Millisecond))
	}
	if !last.IsZero() && last.Sub(withdrawn) > dnsTTL+2*time.Second {
		t.Errorf("west answered %s after its export was withdrawn; want none after %s", last.Sub(withdrawn).Round(time.Millisecond), dnsTTL+2*time.Second)
	}
}

func expectAnswer(ctx context.Context, server, name string, qtype uint16, rcode int, want []string) error {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	resp, _, err := (&dns.Client{Timeout: 2 * time.Second}).ExchangeContext(ctx, m, server)
	if err != nil {
		return fmt.Errorf("%s %s @%s: %w", dns.TypeToString[qtype], name, server, err)
	}
	var got []string
	for _, rr := range resp.Answer {
		switch rr := rr.(type) {
		case *dns.A:
			got = append(got, rr.A.String())
		case *dns.AAAA:
			got = append(got, rr.AAAA.String())
		case *dns.SRV:
			got = append(got, fmt.Sprintf("%d %d %d %s", rr.Priority, rr.Weight, rr.Port, rr.Target))
		}
	}
	sort.Strings(got)
	want = slices.Sorted(slices.Values(want))
	if resp.Rcode != rcode || !slices.Equal(got, want) {
		return fmt.Errorf("%s %s @%s: %s %v, want %s %v", dns.TypeToString[qtype], name, server,
			dns.RcodeToString[resp.Rcode], got, dns.RcodeToString[rcode], want)
	}
	return nil
}

func resolveA(ctx context.Context, server, name string) (string, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	resp, _, err := (&dns.Client{Timeout: 2 * time.Second}).ExchangeContext(ctx, m, server)
	if err != nil {
		return "", fmt.Errorf("A %s @%s: %w", name, server, err)
	}
	for _, rr := range resp.Answer {
		if a, ok := rr.(*dns.A); ok {
			return a.A.String(), nil
		}
	}
	return "", fmt.Errorf("A %s @%s: %s with no address", name, server, dns.RcodeToString[resp.Rcode])
}
