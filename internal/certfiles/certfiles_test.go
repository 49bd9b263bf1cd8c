package certfiles_test

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fleetnet/fleetnet/internal/certfiles"
	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/internal/tlsrefusal"
)

// write puts the pair and bundle where the Files point, as a Secret's
// update does: whole files replaced.
func write(t *testing.T, dir, name string, kp *pki.KeyPair, bundle ...*pki.KeyPair) {
	t.Helper()
	var ca []byte
	for _, c := range bundle {
		ca = append(ca, c.CertPEM...)
	}
	for file, data := range map[string][]byte{name + ".crt": kp.CertPEM, name + ".key": kp.KeyPEM, name + "-ca.crt": ca} {
		tmp := filepath.Join(dir, "."+file)
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, file)); err != nil {
			t.Fatal(err)
		}
	}
}

func files(dir, name, usage string) certfiles.Files {
	return certfiles.Files{CertFile: filepath.Join(dir, name+".crt"), KeyFile: filepath.Join(dir, name+".key"), CAFile: filepath.Join(dir, name+"-ca.crt"),
		Component: "test-" + name, Usage: usage, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// A server and a client on reloading files: new leaf certificates, then a
// CA roll (both CAs trusted during the overlap, then only the new one),
// each picked up without a restart, while a connection made before stays
// open; a broken rotation keeps the last good files.
func TestRotation(t *testing.T) {
	dir := t.TempDir()
	oldCA, _ := pki.NewCA("old")
	newCA, _ := pki.NewCA("new")
	serving := func(ca *pki.KeyPair) *pki.KeyPair {
		kp, err := ca.ServingCert("registry", []string{"127.0.0.1"})
		if err != nil {
			t.Fatal(err)
		}
		return kp
	}
	client := func(ca *pki.KeyPair) *pki.KeyPair {
		kp, err := ca.ClusterCert("east")
		if err != nil {
			t.Fatal(err)
		}
		return kp
	}
	write(t, dir, "server", serving(oldCA), oldCA)
	write(t, dir, "client", client(oldCA), oldCA)
	srv, err := certfiles.Load(files(dir, "server", "serving"))
	if err != nil {
		t.Fatal(err)
	}
	cli, err := certfiles.Load(files(dir, "client", "client"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go srv.Run(ctx, 10*time.Millisecond)
	go cli.Run(ctx, 10*time.Millisecond)

	ln, err := tls.Listen("tcp", "127.0.0.1:0", srv.ServerConfig(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	// dial makes a round trip and returns the connection and the serial
	// of the server's certificate.
	dial := func() (*tls.Conn, string, error) {
		cfg, err := cli.ClientConfig("127.0.0.1")
		if err != nil {
			return nil, "", err
		}
		c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
		if err != nil {
			return nil, "", err
		}
		if _, err := c.Write([]byte("x")); err != nil {
			c.Close()
			return nil, "", err
		}
		if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
			c.Close()
			return nil, "", err
		}
		return c, c.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
	}
	first, serial, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.Close() })
	expiry := testutil.ToFloat64(certfiles.Expiry.WithLabelValues("test-server", "serving"))
	if expiry < float64(time.Now().Unix()) {
		t.Errorf("serving expiry %v is not in the future", expiry)
	}

	served := func(what string, ok func(string) bool) {
		t.Helper()
		testkit.Until(t, 10*time.Second, what, func() bool {
			c, s, err := dial()
			if err != nil {
				return false
			}
			c.Close()
			return ok(s)
		})
	}
	// New leaves, same CA.
	write(t, dir, "server", serving(oldCA), oldCA)
	write(t, dir, "client", client(oldCA), oldCA)
	served("the new serving certificate", func(s string) bool { return s != serial })

	// A broken rotation: the last good files stay.
	if err := os.WriteFile(filepath.Join(dir, "server.crt"), []byte("half written"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // several reload attempts; nothing to poll for
	if c, _, err := dial(); err != nil {
		t.Fatalf("a broken file broke the server: %v", err)
	} else {
		c.Close()
	}

	// CA roll: both trusted, leaves from the new CA, then the old CA gone.
	write(t, dir, "server", serving(newCA), oldCA, newCA)
	write(t, dir, "client", client(newCA), oldCA, newCA)
	var newSerial string
	served("the new CA's serving certificate", func(s string) bool { newSerial = s; return s != serial })
	write(t, dir, "server", serving(newCA), newCA)
	write(t, dir, "client", client(newCA), newCA)
	served("only the new CA", func(s string) bool { return s != newSerial })

	// The connection made before every rotation still works.
	if _, err := first.Write([]byte("y")); err != nil {
		t.Fatalf("the first connection: %v", err)
	}
	if _, err := io.ReadFull(first, make([]byte, 1)); err != nil {
		t.Fatalf("the first connection: %v", err)
	}
	// An old-CA client is refused once the server has read the new CA
	// bundle: the serving pair and the bundle are separate files, so the
	// new certificate above may be served a poll before the bundle
	// changes (seen under load).
	oldOnly := t.TempDir()
	write(t, oldOnly, "client", client(oldCA), oldCA, newCA)
	stale, err := certfiles.Load(files(oldOnly, "client", "client"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := stale.ClientConfig("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	testkit.Until(t, 10*time.Second, "a client of the retired CA refused", func() bool {
		c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
		if err != nil {
			return true
		}
		defer c.Close()
		if _, err := c.Write([]byte("z")); err != nil {
			return true
		}
		_, err = io.ReadFull(c, make([]byte, 1))
		return err != nil
	})
}

// serve serves a certificate of ca for hosts on 127.0.0.1, with HTTP/2 by
// ALPN as gRPC requires, and returns its address.
func serve(t *testing.T, ca *pki.KeyPair, hosts ...string) string {
	t.Helper()
	kp, err := ca.ServingCert("server", hosts)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := kp.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(io.Discard, c) }()
		}
	}()
	return ln.Addr().String()
}

// A client verifies the server's certificate against the host it dialled,
// an IP literal included (crypto/tls reports no server name for one), by
// ClientConfig and by gRPC's ClientCredentials: a serving certificate of
// the fleet CA for another address or name is refused as a name mismatch.
func TestClientVerifiesTheHostDialled(t *testing.T) {
	ca, err := pki.NewCA("fleet")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kp, err := ca.ClusterCert("east")
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, "client", kp, ca)
	cli, err := certfiles.Load(files(dir, "client", "client"))
	if err != nil {
		t.Fatal(err)
	}
	// Each server listens on 127.0.0.1; dialAs is the host the client
	// dialled (for a DNS name, as if it resolved to 127.0.0.1).
	tests := []struct {
		name    string
		certFor []string
		dialAs  string
		want    string // "" accepted, else the tlsrefusal reason
	}{
		{"a certificate for the IP dialled", []string{"127.0.0.1"}, "127.0.0.1", ""},
		{"a certificate for another IP", []string{"127.0.0.2"}, "127.0.0.1", "name_mismatch"},
		{"a certificate for a DNS name only, dialled as an IP", []string{"registry.example"}, "127.0.0.1", "name_mismatch"},
		{"a certificate for the DNS name dialled", []string{"registry.example"}, "registry.example", ""},
		{"a certificate for another DNS name", []string{"registry.example"}, "other.example", "name_mismatch"},
	}
	for _, tt := range tests {
		addr := serve(t, ca, tt.certFor...)
		_, port, _ := net.SplitHostPort(addr)
		check := func(t *testing.T, err error) {
			t.Helper()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && err == nil:
				t.Fatalf("a certificate for %v accepted as %s", tt.certFor, tt.dialAs)
			case tt.want != "" && tlsrefusal.Reason(err) != tt.want:
				t.Fatalf("reason %s (%v), want %s", tlsrefusal.Reason(err), err, tt.want)
			}
		}
		t.Run(tt.name+"/ClientConfig", func(t *testing.T) {
			cfg, err := cli.ClientConfig(tt.dialAs)
			if err != nil {
				t.Fatal(err)
			}
			conn, err := tls.Dial("tcp", addr, cfg)
			if err == nil {
				conn.Close()
			}
			check(t, err)
		})
		t.Run(tt.name+"/ClientCredentials", func(t *testing.T) {
			raw, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { raw.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			t.Cleanup(cancel)
			// The authority gRPC hands the handshake: the target's
			// host:port, or a resolver address's ServerName.
			conn, _, err := cli.ClientCredentials().ClientHandshake(ctx, net.JoinHostPort(tt.dialAs, port), raw)
			if err == nil {
				conn.Close()
			}
			check(t, err)
		})
	}
}

// Without a host there is nothing to verify the server against: an error,
// not a configuration that accepts any certificate of the CA.
func TestClientNeedsAHost(t *testing.T) {
	ca, err := pki.NewCA("fleet")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kp, err := ca.ClusterCert("east")
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, "client", kp, ca)
	cli, err := certfiles.Load(files(dir, "client", "client"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", "127.0.0.1:7443"} {
		if _, err := cli.ClientConfig(name); err == nil {
			t.Errorf("ClientConfig(%q): no error, want one", name)
		}
	}
	addr := serve(t, ca, "127.0.0.1")
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	if _, _, err := cli.ClientCredentials().ClientHandshake(context.Background(), ":7443", raw); err == nil {
		t.Error("a handshake for authority \":7443\" succeeded, want an error")
	}
}
