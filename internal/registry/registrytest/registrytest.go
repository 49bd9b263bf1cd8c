// Package registrytest runs a real registry (gRPC over mTLS on loopback, on
// a memory store) inside a test process, with certificate files for agents.
package registrytest

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/fleetnet/fleetnet/internal/registry/auth"
	"github.com/fleetnet/fleetnet/internal/registry/client"
	"github.com/fleetnet/fleetnet/internal/registry/server"
	"github.com/fleetnet/fleetnet/internal/registry/store"
	"google.golang.org/grpc"
	"k8s.io/utils/clock"
)

// Registry is a running registry.
type Registry struct {
	Addr string
	// Store is the registry's memory store (nil from StartOnStore).
	Store *store.Memory
	// CertDir holds ca.crt and <id>.crt/.key for every client made.
	CertDir string

	t      testing.TB
	st     store.Store
	ca     *pki.KeyPair
	gs     *grpc.Server
	reg    *server.Registry
	cancel context.CancelFunc
	cfg    server.Config
	tls    *tls.Config
}

// Start serves a registry on a memory store until the test ends. Set
// cfg.Registerer to read its metrics.
func Start(t testing.TB, cfg server.Config) *Registry {
	t.Helper()
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	mem := store.NewMemory(cfg.Clock, 1000000)
	t.Cleanup(func() { mem.Close() })
	r := StartOnStore(t, mem, cfg)
	r.Store = mem
	return r
}

// StartOnStore serves a registry on st (which the caller closes) until the
// test ends.
func StartOnStore(t testing.TB, st store.Store, cfg server.Config) *Registry {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.NewCA("registrytest-ca")
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Write(dir, "ca"); err != nil {
		t.Fatal(err)
	}
	serving, err := ca.ServingCert("registry", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	servingTLS, _ := serving.TLSCertificate()
	tlsCfg, err := pki.ServerTLS(servingTLS, ca.CertPEM, true)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	r := &Registry{Addr: "127.0.0.1:0", st: st, CertDir: dir, t: t, ca: ca, cfg: cfg, tls: tlsCfg}
	r.serve()
	t.Cleanup(r.Stop)
	return r
}

// CA is the fleet's certificate authority, which signed the registry's
// serving certificate, for clients that make their own certificates.
func (r *Registry) CA() *pki.KeyPair { return r.ca }

func (r *Registry) serve() {
	r.t.Helper()
	r.reg = server.New(r.st, r.cfg)
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go r.reg.Run(ctx)
	r.gs, _ = server.NewGRPCServer(r.reg, r.tls, &auth.Authenticator{})
	lis, err := net.Listen("tcp", r.Addr)
	if err != nil {
		r.t.Fatal(err)
	}
	r.Addr = lis.Addr().String()
	go r.gs.Serve(lis)
}

// Stop makes the registry unreachable; its store stays.
func (r *Registry) Stop() {
	if r.gs == nil {
		return
	}
	r.reg.Stop()
	r.gs.Stop()
	r.cancel()
	r.gs = nil
}

// Restart serves again on the same address, from the same store.
func (r *Registry) Restart() { r.serve() }

// ClientOptions writes a client certificate for cluster id (an admin one
// when admin is set) and returns options to dial with it; with an empty id,
// options to dial without a certificate.
func (r *Registry) ClientOptions(id string, admin bool) client.Options {
	r.t.Helper()
	if id == "" {
		return client.Options{Address: r.Addr, CAFile: filepath.Join(r.CertDir, "ca.crt")}
	}
	var kp *pki.KeyPair
	var err error
	if admin {
		kp, err = r.ca.AdminCert(id)
	} else {
		kp, err = r.ca.ClusterCert(id)
	}
	if err != nil {
		r.t.Fatal(err)
	}
	if err := kp.Write(r.CertDir, id); err != nil {
		r.t.Fatal(err)
	}
	return client.Options{Address: r.Addr, CAFile: filepath.Join(r.CertDir, "ca.crt"),
		CertFile: filepath.Join(r.CertDir, id+".crt"), KeyFile: filepath.Join(r.CertDir, id+".key")}
}

// Client dials as cluster id (or admin), with extra dial options.
func (r *Registry) Client(id string, admin bool, opts ...grpc.DialOption) registryv1.RegistryClient {
	r.t.Helper()
	o := r.ClientOptions(id, admin)
	o.DialOptions = opts
	c, conn, err := client.Dial(o)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { conn.Close() })
	return c
}
