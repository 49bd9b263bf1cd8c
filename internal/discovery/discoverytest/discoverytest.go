// Package discoverytest runs a real fleetnet-discovery API server on
// loopback for tests: the memory pool source on a fake clock (or a source
// the test gives), TLS with a fleet CA, bearer tokens for both roles, and
// HTTP clients that validate every response against the OpenAPI document
// the server serves.
package discoverytest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
	"github.com/fleetnet/fleetnet/internal/discovery/client"
	"github.com/fleetnet/fleetnet/internal/discovery/memory"
	"github.com/fleetnet/fleetnet/internal/discovery/server"
	"github.com/fleetnet/fleetnet/internal/discovery/store"
	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"
)

// Tokens of the test server.
const (
	ReadToken     = "read-token-0123456789"
	RegisterToken = "register-token-0123456789"
)

// Options vary the test server.
type Options struct {
	// Grace is the memory source's grace period after the start; zero
	// makes it synced at once.
	Grace time.Duration
	// TTL is the default lease; zero is 10s.
	TTL     time.Duration
	Routers []discoveryv1.Router
	// History and Buffer are the store's; zero takes its defaults.
	History, Buffer int
	// BookmarkInterval is the server's; zero is an hour (no bookmarks in
	// the test's lifetime).
	BookmarkInterval time.Duration
	// NoRegistrar serves as a source that takes no registrations would.
	NoRegistrar bool
	// MaxRegistrations is the memory source's cap per identity; zero is
	// its default.
	MaxRegistrations int
	// Source, when set, serves instead of the memory source (which is then
	// not made, and no registrations are taken): it is built on the
	// server's store and metrics, and the test runs it.
	Source func(*store.Store, prometheus.Registerer) server.Backend
}

// Env is a running test server.
type Env struct {
	URL        string
	HTTPServer *httptest.Server
	CA         *pki.KeyPair
	Store      *store.Store
	Memory     *memory.Memory
	Server     *server.Server
	Clock      *clocktesting.FakeClock
	Metrics    *prometheus.Registry
	Validator  *Validator
}

// Start runs a server until the test ends.
func Start(t testing.TB, o Options) *Env {
	t.Helper()
	if o.TTL == 0 {
		o.TTL = 10 * time.Second
	}
	if o.BookmarkInterval == 0 {
		o.BookmarkInterval = time.Hour
	}
	ca, err := pki.NewCA("fleet")
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.ServingCert("discovery", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	servingCert, err := serving.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg, err := pki.ServerTLS(servingCert, ca.CertPEM, false)
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	st := store.New(store.Options{History: o.History, Buffer: o.Buffer, Base: 1000})
	reg := prometheus.NewRegistry()
	var (
		mem     *memory.Memory
		backend server.Backend
	)
	if o.Source != nil {
		backend = o.Source(st, reg)
	} else {
		mem = memory.New(memory.Config{Store: st, TTL: o.TTL, Grace: o.Grace, Routers: o.Routers, Clock: clk, MaxPerOwner: o.MaxRegistrations, Registerer: reg})
		backend = mem
	}
	cfg := server.Config{
		Store: st, Backend: backend, Registrar: mem, SourceName: "memory",
		Auth: &server.Authenticator{Tokens: map[string]server.Identity{
			ReadToken:     {Name: "reader", Role: server.RoleRead, Via: "token"},
			RegisterToken: {Name: "registrar", Role: server.RoleRegister, Via: "token"},
		}},
		Log:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		Registerer: reg, BookmarkInterval: o.BookmarkInterval,
	}
	switch {
	case o.Source != nil:
		cfg.Registrar, cfg.SourceName = nil, "test"
	case o.NoRegistrar:
		cfg.Registrar, cfg.SourceName = nil, "kubernetes"
	}
	srv := server.New(cfg)
	hs := httptest.NewUnstartedServer(srv.Handler())
	hs.TLS = tlsCfg
	hs.StartTLS()
	t.Cleanup(func() {
		srv.Stop()
		hs.Close()
	})
	v, err := NewValidator(discoveryv1.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{URL: hs.URL, HTTPServer: hs, CA: ca, Store: st, Memory: mem, Server: srv, Clock: clk, Metrics: reg, Validator: v}
	// The document the tests validate against is the one the server serves.
	resp, err := e.HTTPClient(t, nil).Get(hs.URL + "/v1/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	served, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if e.Validator, err = NewValidator(served); err != nil {
		t.Fatalf("the served OpenAPI document: %v", err)
	}
	return e
}

// HTTPClient returns a client that trusts the fleet CA, presents cert when
// given, and validates every response against the OpenAPI document.
func (e *Env) HTTPClient(t testing.TB, cert *pki.KeyPair) *http.Client {
	t.Helper()
	var certs *tls.Certificate
	if cert != nil {
		c, err := cert.TLSCertificate()
		if err != nil {
			t.Fatal(err)
		}
		certs = &c
	}
	cfg, err := pki.ClientTLS(e.CA.CertPEM, certs)
	if err != nil {
		t.Fatal(err)
	}
	base := &http.Transport{TLSClientConfig: cfg}
	t.Cleanup(base.CloseIdleConnections)
	return &http.Client{Transport: &Transport{T: t, Validator: e.Validator, Base: base}}
}

// Client returns a discovery client with a token (empty: none) and a
// client certificate (nil: none).
func (e *Env) Client(t testing.TB, token string, cert *pki.KeyPair) *client.Client {
	t.Helper()
	c, err := client.New(client.Options{
		BaseURL: e.URL, HTTPClient: e.HTTPClient(t, cert), Token: token,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ClientCert signs a client certificate of organization org with ca, for
// identities pki has no helper for (pki keeps its signing key private to
// the package, so the CA's PEM is parsed here).
func ClientCert(t testing.TB, ca *pki.KeyPair, name, org string) *pki.KeyPair {
	t.Helper()
	caPair, err := tls.X509KeyPair(ca.CertPEM, ca.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caPair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name, Organization: []string{org}},
		NotBefore:    time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), caPair.PrivateKey.(crypto.Signer))
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return &pki.KeyPair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
}

// Registration is a registration of pool namespace/name in cluster with
// one endpoint per instance id, addresses 10.0.0.1 upward.
func Registration(namespace, name, cluster, region string, ids ...string) discoveryv1.Registration {
	r := discoveryv1.Registration{Namespace: namespace, Name: name, Cluster: cluster, Region: region}
	for i, id := range ids {
		r.Endpoints = append(r.Endpoints, discoveryv1.RegistrationEndpoint{
			InstanceID: id, Addresses: []string{"10.0." + itoa(i/250) + "." + itoa(i%250+1)},
			Ports: []discoveryv1.Port{{Name: "http", Port: 8080, Protocol: "TCP"}},
		})
	}
	return r
}

func itoa(i int) string { return big.NewInt(int64(i)).String() }
