package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/dev"
	"github.com/fleetnet/fleetnet/internal/netns"
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
	serve := func(cluster, name string, replicas int, headless, client bool) {
		t.Helper()
		o := dev.ServeOptions{
			Dir: fleetDir, Cluster: cluster, Namespace: ns, Name: name, Replicas: replicas, PortName: "http", Port: 80, TargetPort: 8080,
			EchoCommand: []string{filepath.Join(fleetnet, "fleetnetctl"), "dev", "echo"}, Headless: headless, Client: client,
		}
		if err := dev.Serve(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			o.Replicas = 0
			_ = dev.Serve(context.Background(), o)
		})
	}
	exportName := func(cluster, name string) {
		t.Helper()
		se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if err := kube(t, cluster).Create(ctx, se); err != nil {
			t.Fatal(err)
		}
	}
	serve("east", "echo", 2, false, false)
	serve("west", "echo", 1, false, false)
	serve("east", "db", 2, true, false)
	serve("hub", "local", 1, false, false) // never exported
	serve("hub", "client", 1, false, true)
	exportName("east", "echo")
	exportName("west", "echo")
	exportName("east", "db")

	s, err := dev.Load(fleetDir)
	if err != nil {
		t.Fatal(err)
	}
	var dbPods []string
	dbPodsByName := map[string]string{}
	for _, p := range s.Pods {
		if p.Cluster == "east" && p.Namespace == ns && p.Service == "db" {
			dbPods = append(dbPods, p.Address)
			dbPodsByName[p.Name] = p.Address
		}
	}
	sort.Strings(dbPods)
	client := s.Pods["hub/"+ns+"/client-0"]

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
	// kube-proxy) reaches both exporting clusters.
	hub, err := s.Cluster("hub")
	if err != nil {
		t.Fatal(err)
	}
	httpc := &http.Client{
		Timeout:   3 * time.Second,
		Transport: &http.Transport{DialContext: netns.Dialer(client.NetNS), DisableKeepAlives: true},
	}
	get := func(ctx context.Context) (string, error) {
		ip, err := resolveA(ctx, hub.DNSAddress(), echo)
		if err != nil {
			return "", err
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(ip, "80")+"/", nil)
		resp, err := httpc.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return "", err
		}
		cluster, _, _ := strings.Cut(strings.TrimPrefix(string(body), "cluster="), " ")
		return cluster, nil
	}
	testkit.Eventually(t, 30*time.Second, "answers from both clusters", func(ctx context.Context) error {
		seen := map[string]int{}
		for range 30 {
			c, err := get(ctx)
			if err != nil {
				return err
			}
			seen[c]++
		}
		if seen["east"] == 0 || seen["west"] == 0 {
			return fmt.Errorf("30 requests through the ClusterSetIP were answered by %v; want east and west", seen)
		}
		return nil
	})

	// West withdraws: no connection reaches west within TTL + 2 s.
	withdrawn := time.Now()
	if err := kube(t, "west").Delete(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}}); err != nil {
		t.Fatal(err)
	}
	var last time.Time
	for time.Since(withdrawn) < dnsTTL+2*time.Second+3*time.Second {
		c, err := get(ctx)
		if err != nil {
			t.Fatalf("after west's withdrawal: %v", err)
		}
		if c == "west" {
			last = time.Now()
		}
	}
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
