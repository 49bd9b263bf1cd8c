// Package certfiles serves a component's TLS key pair and CA bundle from
// files that are read again when they change on disk, so that a rotation
// (cert-manager renewing a mounted Secret, which the kubelet swaps in
// place) needs no restart, and it exports when each certificate expires.
//
// Servers take ServerConfig and clients ClientConfig, or gRPC clients
// ClientCredentials, which verify the server against the host dialled. All
// consult the Source at every handshake, so established connections keep
// what they negotiated and new ones get the current files. A change that
// does not load (a half-written pair, a bundle without a certificate) is
// logged and the last good files stay in use.
package certfiles

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/credentials"
)

// Expiry is when each certificate in use expires, as a Unix time, by
// component and usage (serving, client, ca: the earliest of the bundle).
var Expiry = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "fleetnet_certificate_expiry_seconds",
	Help: "Unix time at which a certificate in use expires, by component and usage (serving, client, ca: the bundle's earliest).",
}, []string{"component", "usage"})

// Register registers Expiry on reg; registering it twice is no error.
func Register(reg prometheus.Registerer) error {
	if err := reg.Register(Expiry); err != nil {
		var already prometheus.AlreadyRegisteredError
		if !errors.As(err, &already) {
			return err
		}
	}
	return nil
}

// DefaultEvery is how often Run looks at the files.
const DefaultEvery = 10 * time.Second

// Files name a component's TLS files; CertFile and KeyFile may be empty
// (a client without a certificate), and so may CAFile for a server that
// verifies no client certificate.
type Files struct {
	CertFile, KeyFile, CAFile string
	// Component and Usage (serving or client) label Expiry.
	Component, Usage string
	Log              *slog.Logger
}

// Source holds the files' current contents.
type Source struct {
	files Files

	mu   sync.RWMutex
	cert *tls.Certificate
	pool *x509.CertPool
	sum  [32]byte
}

// Load reads the files; its errors name the file at fault.
func Load(f Files) (*Source, error) {
	if f.Log == nil {
		f.Log = slog.Default()
	}
	s := &Source{files: f}
	if _, err := s.reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// reload reads the files and, when they changed and load, uses them; it
// says whether they changed.
func (s *Source) reload() (bool, error) {
	var all []byte
	read := func(path string) ([]byte, error) {
		if path == "" {
			return nil, nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		all = append(append(all, b...), 0)
		return b, nil
	}
	certPEM, err := read(s.files.CertFile)
	if err != nil {
		return false, err
	}
	keyPEM, err := read(s.files.KeyFile)
	if err != nil {
		return false, err
	}
	caPEM, err := read(s.files.CAFile)
	if err != nil {
		return false, err
	}
	sum := sha256.Sum256(all)
	s.mu.RLock()
	same := s.sum == sum && (s.cert != nil || s.files.CertFile == "")
	s.mu.RUnlock()
	if same {
		return false, nil
	}
	var cert *tls.Certificate
	if s.files.CertFile != "" {
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return false, fmt.Errorf("%s and %s: %w", s.files.CertFile, s.files.KeyFile, err)
		}
		cert = &c
	}
	var pool *x509.CertPool
	if s.files.CAFile != "" {
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return false, fmt.Errorf("%s: no certificate in the CA bundle", s.files.CAFile)
		}
	}
	s.mu.Lock()
	s.cert, s.pool, s.sum = cert, pool, sum
	s.mu.Unlock()
	s.export(cert, caPEM)
	return true, nil
}

// export sets Expiry for the pair and the bundle.
func (s *Source) export(cert *tls.Certificate, caPEM []byte) {
	if cert != nil && cert.Leaf != nil {
		Expiry.WithLabelValues(s.files.Component, s.files.Usage).Set(float64(cert.Leaf.NotAfter.Unix()))
	}
	var earliest time.Time
	for rest := caPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil && (earliest.IsZero() || c.NotAfter.Before(earliest)) {
			earliest = c.NotAfter
		}
	}
	if !earliest.IsZero() {
		Expiry.WithLabelValues(s.files.Component, "ca").Set(float64(earliest.Unix()))
	}
}

// Run reads the files every every (DefaultEvery when 0) until ctx ends,
// using them when they changed and load.
func (s *Source) Run(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = DefaultEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		changed, err := s.reload()
		switch {
		case err != nil:
			// A rotation may be half written; the last good files stay.
			s.files.Log.Error("the TLS files changed but do not load; the previous ones stay in use", "component", s.files.Component, "err", err)
		case changed:
			s.files.Log.Info("TLS files reloaded", "component", s.files.Component, "certFile", s.files.CertFile, "caFile", s.files.CAFile)
		}
	}
}

func (s *Source) current() (*tls.Certificate, *x509.CertPool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cert, s.pool
}

// Certificate is the current key pair (the east-west tunnel's
// Credentials).
func (s *Source) Certificate() (*tls.Certificate, error) {
	cert, _ := s.current()
	if cert == nil {
		return nil, errors.New("no key pair loaded from " + s.files.CertFile)
	}
	return cert, nil
}

// CA is the current bundle.
func (s *Source) CA() *x509.CertPool {
	_, pool := s.current()
	return pool
}

// ServerConfig is a server configuration on the current files: their key
// pair, and their bundle for client certificates, required when
// requireClientCert is set and verified when given otherwise (bearer
// tokens then authenticate); without a bundle, none is asked for.
func (s *Source) ServerConfig(requireClientCert bool) *tls.Config {
	auth := tls.VerifyClientCertIfGiven
	switch {
	case s.files.CAFile == "":
		auth = tls.NoClientCert
	case requireClientCert:
		auth = tls.RequireAndVerifyClientCert
	}
	base := &tls.Config{ClientAuth: auth, MinVersion: tls.VersionTLS12}
	return &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		cert, pool := s.current()
		c := base.Clone()
		c.Certificates, c.ClientCAs = []tls.Certificate{*cert}, pool
		return c, nil
	}}
}

// ClientConfig is a client configuration on the current files for a
// connection to serverName, the host the client dials (a DNS name or an IP
// literal, without the port): their key pair (when the Files name one), and
// their bundle for the server's certificate, which must be valid for
// serverName (for an IP, in its IP addresses). crypto/tls cannot take a
// bundle per handshake, so the certificate is verified in VerifyConnection
// instead, against the name kept here: crypto/tls reports no server name
// for an IP literal, and verifying against the one it reports would accept
// any serving certificate of the CA. An empty serverName is an error.
//
// A configuration is for one server: a clone that dials another DNS name
// is refused. gRPC connections take ClientCredentials, which make one per
// connection.
func (s *Source) ClientConfig(serverName string) (*tls.Config, error) {
	if serverName == "" {
		return nil, errors.New("no server name to verify the server's certificate against")
	}
	if _, _, err := net.SplitHostPort(serverName); err == nil {
		return nil, fmt.Errorf("server name %q: give the host without the port", serverName)
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Sent as SNI for a DNS name; crypto/tls sends none for an IP.
		ServerName: serverName,
		// Verified below, against the current bundle.
		InsecureSkipVerify: true, //nolint:gosec
		VerifyConnection: func(cs tls.ConnectionState) error {
			return s.verifyServer(cs, serverName)
		},
	}
	if s.files.CertFile != "" {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, _ := s.current()
			return cert, nil
		}
	}
	return cfg, nil
}

// verifyServer verifies the server's certificate as crypto/tls would, for
// serverName and against the current bundle.
func (s *Source) verifyServer(cs tls.ConnectionState, serverName string) error {
	// A clone whose ServerName was changed to another DNS name (sent as
	// SNI, without its trailing dots) would be verified against a name
	// other than the one dialled.
	if cs.ServerName != "" && !strings.EqualFold(cs.ServerName, strings.TrimRight(serverName, ".")) {
		return fmt.Errorf("a client configuration for %q dialled %q", serverName, cs.ServerName)
	}
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the server sent no certificate")
	}
	_, pool := s.current()
	opts := x509.VerifyOptions{Roots: pool, DNSName: serverName, Intermediates: x509.NewCertPool()}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
		return &tls.CertificateVerificationError{UnverifiedCertificates: cs.PeerCertificates, Err: err}
	}
	return nil
}

// ClientCredentials are gRPC transport credentials on the current files:
// each connection gets a ClientConfig for the host it was dialled as (the
// authority gRPC hands the handshake: the target's host, or the resolver
// address's ServerName), so that a connection to several replicas verifies
// each against its own address.
func (s *Source) ClientCredentials() credentials.TransportCredentials {
	return clientCredentials{s: s}
}

type clientCredentials struct{ s *Source }

var _ credentials.TransportCredentials = clientCredentials{}

func (c clientCredentials) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	host := authority
	if h, _, err := net.SplitHostPort(authority); err == nil {
		host = h
	}
	cfg, err := c.s.ClientConfig(host)
	if err != nil {
		return nil, nil, fmt.Errorf("authority %q: %w", authority, err)
	}
	// credentials.NewTLS sets the configuration's ServerName to the same
	// host, and requires HTTP/2 by ALPN.
	return credentials.NewTLS(cfg).ClientHandshake(ctx, authority, conn)
}

func (clientCredentials) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("certfiles: client credentials cannot serve")
}

func (clientCredentials) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls"}
}

func (c clientCredentials) Clone() credentials.TransportCredentials { return c }

// OverrideServerName is refused: the name verified is the one dialled.
func (clientCredentials) OverrideServerName(string) error {
	return errors.New("certfiles: the server name is the host dialled")
}
