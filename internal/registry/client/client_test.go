package client

import (
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/internal/tlsrefusal"
)

func TestSplitAddresses(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{in: "127.0.0.1:7443", want: []string{"127.0.0.1:7443"}},
		{in: "a.example:7443, b.example:7443", want: []string{"a.example:7443", "b.example:7443"}},
		{in: "[::1]:7443,127.0.0.1:7444", want: []string{"[::1]:7443", "127.0.0.1:7444"}},
		{in: "", err: "no registry address"},
		{in: "127.0.0.1", err: `registry address "127.0.0.1"`},
		{in: "127.0.0.1:7443,", err: `registry address ""`},
		// The registry's certificate is verified against the host.
		{in: ":7443", err: `registry address ":7443": no host`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := SplitAddresses(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestDialRefusesABadAddressList(t *testing.T) {
	if _, _, err := Dial(Options{Address: "127.0.0.1:1,nope", CAFile: "unused"}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("Dial: %v, want the bad address named", err)
	}
}

// replica answers ListClusters with its name in an error's message.
type replica struct {
	registryv1.UnimplementedRegistryServer
	name string
}

func (r replica) ListClusters(context.Context, *registryv1.ListClustersRequest) (*registryv1.ListClustersResponse, error) {
	return nil, status.Error(codes.FailedPrecondition, r.name)
}

// With several replicas, each connection verifies its replica's
// certificate against the host it dialled: a replica dialled as 127.0.0.1
// whose certificate names only localhost is refused (a name mismatch,
// counted) and takes no calls, though the certificate is the fleet CA's
// and valid for the other replica's host.
func TestDialVerifiesEachReplicaAsDialled(t *testing.T) {
	ca, err := pki.NewCA("fleet")
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.ServingCert("registry", []string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	serving, err := kp.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pki.ServerTLS(serving, ca.CertPEM, true)
	if err != nil {
		t.Fatal(err)
	}
	start := func(name string) string {
		srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(cfg)))
		registryv1.RegisterRegistryServer(srv, replica{name: name})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(ln)
		t.Cleanup(srv.Stop)
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		return port
	}
	good, bad := "localhost:"+start("good"), "127.0.0.1:"+start("bad")

	dir := t.TempDir()
	if err := ca.Write(dir, "ca"); err != nil {
		t.Fatal(err)
	}
	cluster, err := ca.ClusterCert("east")
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.Write(dir, "east"); err != nil {
		t.Fatal(err)
	}
	mismatches := func() float64 {
		return testutil.ToFloat64(tlsrefusal.HandshakeErrors.WithLabelValues("registry", "name_mismatch"))
	}
	before := mismatches()
	c, conn, err := Dial(Options{Address: good + "," + bad, CAFile: filepath.Join(dir, "ca.crt"),
		CertFile: filepath.Join(dir, "east.crt"), KeyFile: filepath.Join(dir, "east.key"),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	call := func() string {
		_, err := c.ListClusters(ctx, &registryv1.ListClustersRequest{}, WaitForConnection())
		return status.Convert(err).Message()
	}
	if got := call(); got != "good" {
		t.Fatalf("first call answered by %q, want good", got)
	}
	testkit.Until(t, 10*time.Second, "the replica dialled as 127.0.0.1 refused as a name mismatch", func() bool {
		return mismatches() > before
	})
	for range 10 {
		if got := call(); got != "good" {
			t.Fatalf("a call answered by %q, want good: the replica dialled as 127.0.0.1 was accepted", got)
		}
	}
}
