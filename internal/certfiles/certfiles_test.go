package certfiles_test

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fleetnet/fleetnet/internal/certfiles"
	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/fleetnet/fleetnet/internal/testkit"
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
		cfg := cli.ClientConfig()
		cfg.ServerName = "127.0.0.1"
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
	cfg := stale.ClientConfig()
	cfg.ServerName = "127.0.0.1"
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
