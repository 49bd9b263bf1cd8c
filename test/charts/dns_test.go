package charts

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/controlplane"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/types"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// testDNSRBAC runs fleetnet-dns in c as the dns chart's ServiceAccount
// (bound to nothing but the chart's ClusterRole) with the arguments of the
// chart's Deployment, its addresses mapped onto loopback. It gets ready,
// which needs its ServiceImport and EndpointSlice informers synced, and
// answers the import demo/echo with its ClusterSetIP over UDP and TCP,
// with no request forbidden. Then each verb of the chart's role is shown
// needed (testEveryVerbNeeded).
func testDNSRBAC(t *testing.T, binary string, c *cluster) {
	dir := filepath.Join(t.TempDir(), c.Name)
	kubeconfig := serviceAccountKubeconfig(t, c, systemNamespace, "fleetnet-dns", dir)
	a := dnsArgs(t, c, kubeconfig)
	p := startChartProcess(t, "fleetnet-dns-"+c.Name, binary, a.args, dir, "http://"+a.ready+"/ready")
	listen, zone := a.listen, a.zone

	si := &mcsv1beta1.ServiceImport{}
	testkit.Eventually(t, 30*time.Second, fmt.Sprintf("the ClusterSetIP of demo/echo in %s", c.Name), func(ctx context.Context) error {
		if err := c.Client(t).Get(ctx, types.NamespacedName{Namespace: "demo", Name: "echo"}, si); err != nil {
			return err
		}
		if len(si.Spec.IPs) == 0 {
			return fmt.Errorf("%s: ServiceImport demo/echo has no ClusterSetIP yet", c.Name)
		}
		return nil
	})
	name := "echo.demo.svc." + zone + "."
	for _, network := range []string{"udp", "tcp"} {
		testkit.Eventually(t, 10*time.Second, fmt.Sprintf("%s over %s", name, network), func(context.Context) error {
			m := new(dns.Msg)
			m.SetQuestion(name, dns.TypeA)
			r, _, err := (&dns.Client{Net: network, Timeout: 2 * time.Second}).Exchange(m, listen)
			if err != nil {
				return err
			}
			var got []string
			for _, rr := range r.Answer {
				if a, ok := rr.(*dns.A); ok {
					got = append(got, a.A.String())
				}
			}
			if r.Rcode != dns.RcodeSuccess || !slices.Equal(got, si.Spec.IPs) {
				return fmt.Errorf("%s A %s answered %s %v; want the ClusterSetIP %v", network, name, dns.RcodeToString[r.Rcode], got, si.Spec.IPs)
			}
			t.Logf("%s: %s A %s: %s", c.Name, network, name, strings.Join(got, " "))
			return nil
		})
	}
	for _, line := range forbiddenLines(t, p) {
		t.Errorf("fleetnet-dns of %s logged a forbidden request with the chart's role:\n%s", c.Name, line)
	}
	if t.Failed() {
		return
	}
	testEveryVerbNeeded(t, c, "fleetnet-dns", func(t *testing.T, name, kubeconfig, dir string) *controlplane.Process {
		return startChartProcess(t, name, binary, dnsArgs(t, c, kubeconfig).args, dir, "")
	})
}

// dnsProcess is how the chart's fleetnet-dns runs on this machine.
type dnsProcess struct {
	args                []string
	listen, ready, zone string
}

// dnsArgs returns the arguments of the chart's fleetnet-dns Deployment in c,
// with kubeconfig and its addresses on free loopback ports.
func dnsArgs(t *testing.T, c *cluster, kubeconfig string) dnsProcess {
	t.Helper()
	d := dnsProcess{listen: testkit.FreeAddr(t), ready: testkit.FreeAddr(t)}
	args := mapArgs(deploymentArgs(t, c, systemNamespace, "fleetnet-dns"), func(flag, value string) string {
		switch flag {
		case "--listen":
			return d.listen
		case "--ready-addr":
			return d.ready
		case "--metrics-addr", "--health-addr":
			return testkit.FreeAddr(t)
		case "--zone":
			d.zone = value
		}
		return value
	})
	if d.zone == "" {
		t.Fatalf("the chart's fleetnet-dns has no --zone: %v", args)
	}
	d.args = append([]string{"--kubeconfig=" + kubeconfig}, args...)
	return d
}
