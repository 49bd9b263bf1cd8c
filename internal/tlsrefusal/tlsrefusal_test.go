package tlsrefusal_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
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
	registryclient "github.com/fleetnet/fleetnet/internal/registry/client"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/internal/tlsrefusal"
)

type fleet struct {
	ca, other *pki.KeyPair
	serving   tls.Certificate
}

func newFleet(t *testing.T) fleet {
	t.Helper()
	ca, err := pki.NewCA("fleet")
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("someone else")
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.ServingCert("registry", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	serving, err := kp.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	return fleet{ca: ca, other: other, serving: serving}
}

// A gRPC server of ours counts and logs the handshakes it refuses, by
// reason and with the peer; a registry client whose certificate is
// refused gets Unauthenticated naming the problem and the flags, not
// Unavailable.
func TestGRPCRefusals(t *testing.T) {
	f := newFleet(t)
	cfg, err := pki.ServerTLS(f.serving, f.ca.CertPEM, true)
	if err != nil {
		t.Fatal(err)
	}
	var logs testkit.SyncBuffer
	o := &tlsrefusal.Observer{Server: "test-grpc", Log: slog.New(slog.NewTextHandler(&logs, nil))}
	srv := grpc.NewServer(grpc.Creds(o.Credentials(credentials.NewTLS(cfg))))
	registryv1.RegisterRegistryServer(srv, registryv1.UnimplementedRegistryServer{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)

	dir := t.TempDir()
	if err := f.ca.Write(dir, "ca"); err != nil {
		t.Fatal(err)
	}
	foreign, err := f.other.ClusterCert("east")
	if err != nil {
		t.Fatal(err)
	}
	good, err := f.ca.ClusterCert("east")
	if err != nil {
		t.Fatal(err)
	}
	for name, kp := range map[string]*pki.KeyPair{"foreign": foreign, "good": good} {
		if err := kp.Write(dir, name); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, cert string
		want       codes.Code
		reason     string
	}{
		{"no certificate", "", codes.Unauthenticated, "no_certificate"},
		// The client presents its certificate whatever CAs the server
		// names (certfiles' GetClientCertificate), so the server tells why.
		{"another CA's", "foreign", codes.Unauthenticated, "unknown_authority"},
		{"the fleet's", "good", codes.Unimplemented, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := registryclient.Options{Address: ln.Addr().String(), CAFile: filepath.Join(dir, "ca.crt")}
			if tt.cert != "" {
				o.CertFile, o.KeyFile = filepath.Join(dir, tt.cert+".crt"), filepath.Join(dir, tt.cert+".key")
			}
			c, conn, err := registryclient.Dial(o)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			before := 0.0
			if tt.reason != "" {
				before = testutil.ToFloat64(tlsrefusal.HandshakeErrors.WithLabelValues("test-grpc", tt.reason))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err = c.ListClusters(ctx, &registryv1.ListClustersRequest{})
			if status.Code(err) != tt.want {
				t.Fatalf("call: %v, want %s", err, tt.want)
			}
			if tt.reason == "" {
				return
			}
			if msg := status.Convert(err).Message(); !strings.Contains(msg, "refused this client's certificate") || !strings.Contains(msg, "--cert-file") {
				t.Errorf("message %q does not name the refusal and the flags", msg)
			}
			testkit.Until(t, 10*time.Second, "the refusal counted", func() bool {
				return testutil.ToFloat64(tlsrefusal.HandshakeErrors.WithLabelValues("test-grpc", tt.reason)) > before
			})
		})
	}
	if got := logs.String(); !strings.Contains(got, "TLS handshake refused") || !strings.Contains(got, "peer=127.0.0.1:") {
		t.Errorf("log:\n%s", got)
	}
}

// An HTTP server's refused handshakes are counted and logged from its
// ErrorLog, at most once per reason per LogEvery.
func TestHTTPRefusals(t *testing.T) {
	f := newFleet(t)
	cfg, err := pki.ServerTLS(f.serving, f.ca.CertPEM, true)
	if err != nil {
		t.Fatal(err)
	}
	var logs testkit.SyncBuffer
	o := &tlsrefusal.Observer{Server: "test-http", Log: slog.New(slog.NewTextHandler(&logs, nil))}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.TLS, srv.Config.ErrorLog = cfg, o.ErrorLog()
	srv.StartTLS()
	t.Cleanup(srv.Close)
	clientCfg, err := pki.ClientTLS(f.ca.CertPEM, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := testutil.ToFloat64(tlsrefusal.HandshakeErrors.WithLabelValues("test-http", "no_certificate"))
	for i := range 3 {
		conn, err := tls.Dial("tcp", srv.Listener.Addr().String(), clientCfg)
		if err == nil {
			// TLS 1.3: the refusal comes with the first read.
			fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			_, err = conn.Read(make([]byte, 1))
			conn.Close()
		}
		if err == nil {
			t.Fatalf("request %d without a certificate was served", i)
		}
	}
	testkit.Until(t, 10*time.Second, "three refusals counted", func() bool {
		return testutil.ToFloat64(tlsrefusal.HandshakeErrors.WithLabelValues("test-http", "no_certificate"))-before == 3
	})
	if n := strings.Count(logs.String(), "TLS handshake refused"); n != 1 {
		t.Errorf("%d log lines for three refusals within LogEvery, want 1:\n%s", n, logs.String())
	}
}

func TestReason(t *testing.T) {
	for err, want := range map[string]string{
		"tls: client didn't provide a certificate":                                                           "no_certificate",
		"tls: failed to verify certificate: x509: certificate signed by unknown authority":                   "unknown_authority",
		"tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time": "expired",
		"tls: failed to verify certificate: x509: certificate is valid for 127.0.0.2, not 127.0.0.1":         "name_mismatch",
		"tls: failed to verify certificate: x509: certificate is valid for a.example, not b.example":         "name_mismatch",
		"x509: cannot validate certificate for 127.0.0.1 because it doesn't contain any IP SANs":             "name_mismatch",
		"remote error: tls: bad certificate":                                                                 "bad_certificate",
		"tls: first record does not look like a TLS handshake":                                               "not_tls",
		"tls: client offered only unsupported versions: [302]":                                               "protocol",
		"EOF": "closed",
		"read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer": "closed",
		"something else": "other",
	} {
		if got := tlsrefusal.Reason(fmt.Errorf("%s", err)); got != want {
			t.Errorf("Reason(%q) = %s, want %s", err, got, want)
		}
	}
	// x509's own error, whatever its wording.
	err := &tls.CertificateVerificationError{Err: x509.HostnameError{Certificate: &x509.Certificate{}, Host: "127.0.0.1"}}
	if got := tlsrefusal.Reason(fmt.Errorf("dial: %w", err)); got != "name_mismatch" {
		t.Errorf("Reason(%v) = %s, want name_mismatch", err, got)
	}
}

// Probe names a server certificate that is not valid for the address
// dialled apart from one of an unknown CA.
func TestProbeNamesANameMismatch(t *testing.T) {
	f := newFleet(t)
	for _, tt := range []struct {
		name, host, want string
	}{
		{"another address", "127.0.0.2", "for other names than the one dialled"},
		{"the address dialled", "127.0.0.1", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			kp, err := f.ca.ServingCert("registry", []string{tt.host})
			if err != nil {
				t.Fatal(err)
			}
			cert, err := kp.TLSCertificate()
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}}
			srv.Config.ErrorLog = log.New(io.Discard, "", 0)
			srv.StartTLS()
			t.Cleanup(srv.Close)
			cfg, err := pki.ClientTLS(f.ca.CertPEM, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = tlsrefusal.Probe(context.Background(), srv.Listener.Addr().String(), cfg)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Probe: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Probe: %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

// An Observer with IgnoreClosed records refusals but not connections
// closed before a handshake (a TCP health check).
func TestIgnoreClosed(t *testing.T) {
	var logs bytes.Buffer
	o := &tlsrefusal.Observer{Server: "test-ignore-closed", Log: slog.New(slog.NewTextHandler(&logs, nil)), IgnoreClosed: true}
	o.Refused("127.0.0.1:1", errors.New("EOF"))
	o.Refused("127.0.0.1:2", errors.New("remote error: tls: bad certificate"))
	if got := testutil.ToFloat64(tlsrefusal.HandshakeErrors.WithLabelValues("test-ignore-closed", "closed")); got != 0 {
		t.Errorf("closed counted %v times, want 0", got)
	}
	if got := testutil.ToFloat64(tlsrefusal.HandshakeErrors.WithLabelValues("test-ignore-closed", "bad_certificate")); got != 1 {
		t.Errorf("bad_certificate counted %v times, want 1", got)
	}
	if strings.Contains(logs.String(), "reason=closed") {
		t.Errorf("a closed connection was logged: %s", logs.String())
	}
}
