package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/dev"
	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/internal/tlsrefusal"
	"github.com/fleetnet/fleetnet/test/fleet"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// The fleet's certificates rotate under traffic, without a restart, as a
// cert-manager renewal and a CA roll would do them: new leaf certificates
// for every component, then a CA roll (the new CA trusted beside the old
// one, leaves from the new CA, then the new CA alone). Throughout, every
// request through the edge is answered, no cluster's lease lapses and no
// import is rewritten. This test runs last (its file sorts last): it
// leaves the fleet on the new CA.
func TestCertificateRotationUnderTraffic(t *testing.T) {
	if err := dev.NodeRequirements(); err != nil {
		t.Fatalf("%v (the e2e suite runs as root in CI)", err)
	}
	ns := namespace(t, "e2e-rotation")
	ctx := context.Background()
	for _, c := range []string{"east", "west"} {
		serveEcho(t, c, ns, "echo", 1, false)
		if err := kube(t, c).Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}}); err != nil {
			t.Fatal(err)
		}
	}
	hub := kube(t, "hub")
	port := gatewayToEcho(t, ns, "e2e-rotation")
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	httpc := &http.Client{Timeout: 3 * time.Second}
	get := func() error { return getEcho(httpc, url) }
	testkit.Eventually(t, 60*time.Second, "the Gateway to be programmed and answer", func(ctx context.Context) error {
		gw := &gwv1.Gateway{}
		if err := hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: "edge"}, gw); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(gw.Status.Conditions, string(gwv1.GatewayConditionProgrammed)) {
			return fmt.Errorf("Gateway conditions %+v", gw.Status.Conditions)
		}
		for range 10 {
			if err := get(); err != nil {
				return err
			}
		}
		return nil
	})
	before := map[string]map[string]string{}
	for _, c := range clusters {
		cl := kube(t, c)
		testkit.Eventually(t, 60*time.Second, "the import of echo in "+c+" from east and west", func(ctx context.Context) error {
			imp, err := getImport(ctx, cl, ns, "echo")
			if err != nil {
				return err
			}
			if got := statusClusters(imp.si); !slices.Equal(got, []string{"east", "west"}) || len(imp.addresses["east"]) == 0 || len(imp.addresses["west"]) == 0 {
				return fmt.Errorf("clusters %v, addresses %v", got, imp.addresses)
			}
			before[c] = resourceVersions(imp)
			return nil
		})
	}

	// Traffic through the edge and the registry's count of live leases,
	// throughout.
	var mu sync.Mutex
	var total int
	var failures []string
	minLive := float64(len(clusters))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			err := get()
			mu.Lock()
			total++
			if err != nil {
				failures = append(failures, fmt.Sprintf("%s: %v", time.Now().Format(time.StampMilli), err))
			}
			mu.Unlock()
		}
	})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
			}
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			families, err := fleet.ScrapeMetrics(sctx, "http://"+state.MetricsAddresses()[dev.ComponentRegistry]+"/metrics")
			cancel()
			if err != nil {
				continue // the registry's metrics say nothing about its leases
			}
			if f, ok := families["fleetnet_registry_live_clusters"]; ok && len(f.GetMetric()) == 1 {
				mu.Lock()
				minLive = min(minLive, f.GetMetric()[0].GetGauge().GetValue())
				mu.Unlock()
			}
		}
	})
	stopped := false
	stopTraffic := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	t.Cleanup(stopTraffic)

	certs := state.CertDir()
	caFile := filepath.Join(certs, "ca.crt")
	oldCA, err := pki.LoadCA(caFile, filepath.Join(certs, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	oldAdmin, err := tlsCertificate(filepath.Join(certs, "admin.crt"), filepath.Join(certs, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	servers := []string{state.RegistryAddress(), state.GatewayEdgesAddress(), strings.TrimPrefix(state.DiscoveryURL(), "https://")}

	// 1. New leaf certificates from the same CA, as a renewal.
	start := time.Now()
	renew(t, oldCA)
	t.Logf("leaf certificates renewed and in use in %s", time.Since(start).Round(100*time.Millisecond))

	// 2. The new CA trusted beside the old one: a client certificate of the
	// new CA is accepted by every server.
	newCA, err := pki.NewCA("fleetnet-dev-ca-2")
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	reloads := reloadCounts(t)
	writeFile(t, caFile, append(slices.Clone(oldCA.CertPEM), newCA.CertPEM...))
	newAdmin, err := newCA.AdminCert("admin")
	if err != nil {
		t.Fatal(err)
	}
	newAdminCert, err := newAdmin.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	waitTrusted(t, servers, oldCA.CertPEM, newAdminCert, true)
	// Clients trust it too before any server presents a certificate of
	// it: every component has read the bundle again.
	waitReloaded(t, reloads)
	t.Logf("both CAs trusted everywhere in %s", time.Since(start).Round(100*time.Millisecond))

	// 3. Leaf certificates from the new CA.
	start = time.Now()
	renew(t, newCA)
	t.Logf("leaf certificates of the new CA in use in %s", time.Since(start).Round(100*time.Millisecond))

	// 4. The new CA alone: the old CA's certificates are refused.
	start = time.Now()
	writeFile(t, caFile, newCA.CertPEM)
	t.Cleanup(func() {
		// Kubernetes' own components (the process nodes' kubelet API) keep
		// certificates of the old CA: trust both again for what follows.
		_ = os.WriteFile(caFile, append(slices.Clone(oldCA.CertPEM), newCA.CertPEM...), 0o644)
	})
	waitTrusted(t, servers, newCA.CertPEM, oldAdmin, false)
	t.Logf("the old CA refused everywhere in %s", time.Since(start).Round(100*time.Millisecond))
	// Traffic a little longer on the new CA alone.
	time.Sleep(2 * time.Second)
	stopTraffic()

	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d requests through the edge during the rotation, %d failed; fewest live leases %v", total, len(failures), minLive)
	if len(failures) > 0 {
		t.Errorf("%d of %d requests failed during the rotation, first: %v", len(failures), total, failures[:min(5, len(failures))])
	}
	if minLive < float64(len(clusters)) {
		t.Errorf("the registry counted %v live leases at one point, want %d throughout", minLive, len(clusters))
	}
	for _, c := range clusters {
		imp, err := getImport(ctx, kube(t, c), ns, "echo")
		if err != nil {
			t.Fatal(err)
		}
		if after := resourceVersions(imp); !maps.Equal(before[c], after) {
			t.Errorf("%s: the import was rewritten during the rotation: %v, then %v", c, before[c], after)
		}
	}
}

// renew issues every fleetnet certificate again from ca and waits until
// every component uses the new ones (its expiry gauges all show them).
func renew(t *testing.T, ca *pki.KeyPair) {
	t.Helper()
	if err := dev.RenewCertificates(state, ca); err != nil {
		t.Fatal(err)
	}
	leaf, err := os.ReadFile(filepath.Join(state.CertDir(), "registry.crt"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(leaf)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	// Every new certificate was issued within a second of this one; the
	// old ones at least as long before as the fleet has been up.
	threshold := float64(cert.NotAfter.Add(-5 * time.Second).Unix())
	testkit.Eventually(t, 60*time.Second, "every component to use the new certificates", func(ctx context.Context) error {
		var old []string
		for component, addr := range state.MetricsAddresses() {
			families, err := fleet.ScrapeMetrics(ctx, "http://"+addr+"/metrics")
			if err != nil {
				return fmt.Errorf("%s: %w", component, err)
			}
			for _, m := range families["fleetnet_certificate_expiry_seconds"].GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["usage"] != "ca" && m.GetGauge().GetValue() < threshold {
					old = append(old, fmt.Sprintf("%s (%s %s)", component, labels["component"], labels["usage"]))
				}
			}
		}
		if len(old) > 0 {
			slices.Sort(old)
			return fmt.Errorf("still on the previous certificates: %v", old)
		}
		return nil
	})
}

// waitTrusted waits until each server accepts (or refuses) a client
// certificate, checking the servers' certificates against caPEM.
func waitTrusted(t *testing.T, servers []string, caPEM []byte, cert tls.Certificate, accepted bool) {
	t.Helper()
	cfg, err := pki.ClientTLS(caPEM, &cert)
	if err != nil {
		t.Fatal(err)
	}
	what := "accept"
	if !accepted {
		what = "refuse"
	}
	testkit.Eventually(t, 60*time.Second, "every server to "+what+" the client certificate", func(ctx context.Context) error {
		for _, s := range servers {
			err := tlsrefusal.Probe(ctx, s, cfg)
			var refused *tlsrefusal.CertificateRefused
			switch {
			case accepted && err != nil:
				return fmt.Errorf("%s: %w", s, err)
			case !accepted && !errors.As(err, &refused):
				return fmt.Errorf("%s accepts it still (%v)", s, err)
			}
		}
		return nil
	})
}

// reloadCounts counts the "TLS files reloaded" lines in each component's
// log.
func reloadCounts(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for name, p := range state.Processes {
		data, err := os.ReadFile(p.Log)
		if err != nil {
			continue
		}
		if n := strings.Count(string(data), "TLS files reloaded"); n > 0 {
			out[name] = n
		}
	}
	return out
}

// waitReloaded waits until every component that reloaded its TLS files
// before has done so once more since counts were taken.
func waitReloaded(t *testing.T, counts map[string]int) {
	t.Helper()
	testkit.Eventually(t, 60*time.Second, "every component to read its CA bundle again", func(context.Context) error {
		now := reloadCounts(t)
		var behind []string
		for name, n := range counts {
			if now[name] <= n {
				behind = append(behind, name)
			}
		}
		if len(behind) > 0 {
			slices.Sort(behind)
			return fmt.Errorf("not yet: %v", behind)
		}
		return nil
	})
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

func tlsCertificate(certFile, keyFile string) (tls.Certificate, error) {
	return tls.LoadX509KeyPair(certFile, keyFile)
}
