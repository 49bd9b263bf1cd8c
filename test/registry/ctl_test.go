package registry_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/ctl"
	"github.com/fleetnet/fleetnet/internal/eastwest/tunnel"
	"github.com/fleetnet/fleetnet/internal/registry/client"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/internal/version"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func fleetnetctl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := ctl.NewRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// asClusterA are the flags of fleetnetctl's registry connection as cluster a.
func asClusterA(dir, addr string) []string {
	return []string{"--registry", addr, "--ca-file", filepath.Join(dir, "ca.crt"), "--cert-file", filepath.Join(dir, "a.crt"), "--key-file", filepath.Join(dir, "a.key")}
}

func TestFleetnetctlCertsRegistryCommandsMetricsAndTokens(t *testing.T) {
	dir := t.TempDir()
	if out, err := fleetnetctl(t, "certs", "--dir", dir, "--registry-hosts", "127.0.0.1", "--cluster", "a", "--cluster", "probe", "--admin", "ops"); err != nil {
		t.Fatalf("fleetnetctl certs: %v\n%s", err, out)
	}
	token := "0123456789abcdef-token-of-b"
	tokenFile := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(token+",b,cluster\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	metricsAddr := testkit.FreeAddr(t)
	_, addr := startRegistry(t, certs{dir}, t.TempDir(), "--data-dir="+t.TempDir(), "--metrics-listen="+metricsAddr, "--token-file="+tokenFile)
	ctx := context.Background()
	a := certs{dir}.client(t, addr, "a")
	if _, err := a.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Cluster: &registryv1.Cluster{Id: "a", ClustersetId: "fleet", Region: "eu-west-1"}}); err != nil {
		t.Fatal(err)
	}

	// b authenticates with a bearer token and may write only its own records.
	b, conn, err := client.Dial(client.Options{Address: addr, CAFile: filepath.Join(dir, "ca.crt"), Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := b.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Cluster: &registryv1.Cluster{Id: "b", ClustersetId: "fleet"}}); err != nil {
		t.Fatalf("token-authenticated registration: %v", err)
	}
	if _, err := b.RenewLease(ctx, &registryv1.RenewLeaseRequest{ClusterId: "a"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("b renewing a's lease: %v, want PermissionDenied", err)
	}

	// The same token from a file, read at each call: a rotated file is
	// used at once, and an emptied one fails the call with its cause.
	bTokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(bTokenFile, []byte("wrong-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bf, fconn, err := client.Dial(client.Options{Address: addr, CAFile: filepath.Join(dir, "ca.crt"), TokenFile: bTokenFile})
	if err != nil {
		t.Fatal(err)
	}
	defer fconn.Close()
	if _, err := bf.RenewLease(ctx, &registryv1.RenewLeaseRequest{ClusterId: "b"}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("renewing with a wrong token from a file: %v, want Unauthenticated", err)
	}
	if err := os.WriteFile(bTokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := bf.RenewLease(ctx, &registryv1.RenewLeaseRequest{ClusterId: "b"}); err != nil {
		t.Fatalf("renewing with the rotated token file: %v", err)
	}
	if err := os.WriteFile(bTokenFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := bf.RenewLease(ctx, &registryv1.RenewLeaseRequest{ClusterId: "b"}); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Fatalf("renewing with an empty token file: %v", err)
	}
	if _, _, err := client.Dial(client.Options{Address: addr, CAFile: filepath.Join(dir, "ca.crt"), TokenFile: bTokenFile, Token: token}); err == nil {
		t.Fatal("a token and a token file were both accepted")
	}

	common := []string{"--registry", addr, "--ca-file", filepath.Join(dir, "ca.crt")}
	admin := append(common, "--cert-file", filepath.Join(dir, "ops.crt"), "--key-file", filepath.Join(dir, "ops.key"))
	out, err := fleetnetctl(t, append([]string{"registry", "clusters"}, admin...)...)
	if err != nil || !strings.Contains(out, "eu-west-1") || !strings.HasPrefix(out, "CLUSTER") {
		t.Fatalf("registry clusters: %v\n%s", err, out)
	}
	// The agent's version (this test's client announces this build's).
	this := version.Get().Version
	if !strings.Contains(out, "AGENT") || !strings.Contains(out, this) {
		t.Errorf("registry clusters shows no agent version %s:\n%s", this, out)
	}
	// fleetnetctl version: its own, the registry's as it answers, and
	// the registry's build from its /metrics.
	out, err = fleetnetctl(t, append([]string{"version", "--metrics", "http://" + metricsAddr + "/metrics"}, asClusterA(dir, addr)...)...)
	if err != nil || !strings.Contains(out, "registry  ") || !strings.Contains(out, "fleetnet-registry") || strings.Count(out, this) != 3 {
		t.Errorf("fleetnetctl version: %v, want fleetnetctl, the registry and fleetnet-registry's metrics at %s:\n%s", err, this, out)
	}
	if out, err := fleetnetctl(t, "version", "--metrics", "http://"+metricsAddr+"/healthz"); err == nil || !strings.Contains(err.Error(), metricsAddr+"/healthz") {
		t.Errorf("fleetnetctl version on a URL that is not /metrics: %v, want an error naming it\n%s", err, out)
	}
	for _, format := range []string{"json", "yaml"} {
		out, err := fleetnetctl(t, append([]string{"registry", "clusters", "-o", format}, admin...)...)
		if err != nil || !strings.Contains(out, "clustersetId") {
			t.Fatalf("registry clusters -o %s: %v\n%s", format, err, out)
		}
	}
	// An export of a scoped to b: the administrator lists it, and lists
	// it for b; not for a cluster outside the scope.
	scoped := &registryv1.Export{Key: &registryv1.ExportKey{Namespace: "demo", Name: "scoped", ClusterId: "a"}, ExportedSince: timestamppb.Now(),
		Type: "ClusterSetIP", Weight: 1, IpFamilies: []string{"IPv4"}, Ports: []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}}, ExportTo: []string{"b"}}
	if _, err := a.PutExport(ctx, &registryv1.PutExportRequest{Export: scoped}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want bool
	}{{nil, true}, {[]string{"b"}, true}, {[]string{"probe"}, false}} {
		testkit.Eventually(t, 10*time.Second, fmt.Sprintf("registry imports %v", tc.args), func(context.Context) error {
			out, err := fleetnetctl(t, append(append([]string{"registry", "imports"}, tc.args...), admin...)...)
			if err != nil {
				return err
			}
			if strings.Contains(out, "scoped") != tc.want {
				return fmt.Errorf("lists the import scoped to b: %v, want %v\n%s", !tc.want, tc.want, out)
			}
			return nil
		})
	}
	asCluster := append(common, "--cert-file", filepath.Join(dir, "a.crt"), "--key-file", filepath.Join(dir, "a.key"))
	if _, err := fleetnetctl(t, append([]string{"registry", "evict", "b"}, asCluster...)...); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("evict as a cluster: %v, want PermissionDenied", err)
	}
	if out, err := fleetnetctl(t, append([]string{"registry", "evict", "b"}, admin...)...); err != nil {
		t.Fatalf("evict as admin: %v\n%s", err, out)
	}
	if _, err := fleetnetctl(t, append([]string{"registry", "imports", "-o", "xml"}, admin...)...); err == nil || !strings.Contains(err.Error(), "--output=xml") {
		t.Fatalf("bad output format: %v", err)
	}

	for _, probe := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get("http://" + metricsAddr + probe)
		if err != nil {
			t.Fatalf("GET %s: %v", probe, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s, want 200 OK", probe, resp.Status)
		}
	}
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`fleetnet_registry_requests_total{code="OK",method="/fleetnet.registry.v1.Registry/RegisterCluster"}`,
		`fleetnet_registry_requests_total{code="PermissionDenied"`,
		"fleetnet_registry_live_clusters 1",
		"fleetnet_registry_store_operations_total",
		"fleetnet_registry_request_duration_seconds_bucket",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestFleetnetctlCertsForEastWestGateways: `fleetnetctl certs --eastwest`
// issues a certificate a peer gateway takes for the cluster (both usages,
// the cluster's identity), and --eastwest-model-hosts the agent's model
// stream's serving certificate for the name the edges dial.
func TestFleetnetctlCertsForEastWestGateways(t *testing.T) {
	dir := t.TempDir()
	host := "fleetnet-agent-eastwest.fleetnet-system.svc"
	if out, err := fleetnetctl(t, "certs", "--dir", dir, "--eastwest", "east", "--eastwest-model-hosts", host); err != nil {
		t.Fatalf("fleetnetctl certs: %v\n%s", err, out)
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	leaf := func(name string) *x509.Certificate {
		t.Helper()
		pair, err := tls.LoadX509KeyPair(filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key"))
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	gw := leaf("east-eastwest")
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := gw.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("east's gateway certificate for usage %v: %v", usage, err)
		}
	}
	if got, err := tunnel.ClusterOf(&tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{gw}}}); err != nil || got != "east" {
		t.Errorf("the tunnel takes east's gateway certificate for cluster %q (%v), want east", got, err)
	}
	model := leaf("eastwest-model")
	if _, err := model.Verify(x509.VerifyOptions{Roots: pool, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("the model stream's certificate for %s: %v", host, err)
	}
}
