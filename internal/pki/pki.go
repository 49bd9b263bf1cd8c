// Package pki creates the fleet's certificates: a CA, the registry's serving
// certificate, and client certificates for clusters and administrators.
// `fleetnetctl certs` and the tests use it.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
)

// Validity of the certificates this package makes.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	CertValidity = 365 * 24 * time.Hour
)

// KeyPair is a certificate and its private key, PEM-encoded.
type KeyPair struct {
	CertPEM, KeyPEM []byte
	cert            *x509.Certificate
	key             crypto.Signer
}

// NewCA creates a self-signed CA.
func NewCA(name string) (*KeyPair, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: name},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	return create(tmpl, nil, CAValidity)
}

// LoadCA reads a CA written by Write.
func LoadCA(certPath, keyPath string) (*KeyPair, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("loading CA %s: %w", certPath, err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, err
	}
	return &KeyPair{CertPEM: certPEM, KeyPEM: keyPEM, cert: cert, key: pair.PrivateKey.(crypto.Signer)}, nil
}

// ServingCert signs a server certificate for hosts (DNS names or IPs).
func (ca *KeyPair) ServingCert(name string, hosts []string) (*KeyPair, error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return create(tmpl, ca, CertValidity)
}

// ClusterCert signs the client certificate of a member cluster.
func (ca *KeyPair) ClusterCert(clusterID string) (*KeyPair, error) {
	return ca.clientCert(clusterID, keys.OrganizationClusters)
}

// EastWestCert signs the certificate of a cluster's east-west gateway: the
// cluster's identity (as ClusterCert), usable as a server and as a client,
// since each gateway is both to the others (internal/eastwest/tunnel).
func (ca *KeyPair) EastWestCert(clusterID string) (*KeyPair, error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: clusterID, Organization: []string{keys.OrganizationClusters}},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	return create(tmpl, ca, CertValidity)
}

// AdminCert signs an administrator's client certificate.
func (ca *KeyPair) AdminCert(name string) (*KeyPair, error) {
	return ca.clientCert(name, keys.OrganizationAdmins)
}

// EdgeCert signs the client certificate of a fleetnet-edge.
func (ca *KeyPair) EdgeCert(name string) (*KeyPair, error) {
	return ca.clientCert(name, keys.OrganizationEdges)
}

// ConsoleCert issues a certificate that may look at fleetnet-console.
func (ca *KeyPair) ConsoleCert(name string) (*KeyPair, error) {
	return ca.clientCert(name, keys.OrganizationConsole)
}

func (ca *KeyPair) clientCert(name, org string) (*KeyPair, error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: name, Organization: []string{org}},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return create(tmpl, ca, CertValidity)
}

func create(tmpl *x509.Certificate, parent *KeyPair, validity time.Duration) (*KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(validity)
	signerCert, signerKey := tmpl, crypto.Signer(key)
	if parent != nil {
		signerCert, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, key.Public(), signerKey)
	if err != nil {
		return nil, fmt.Errorf("signing certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &KeyPair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		cert:    cert,
		key:     key,
	}, nil
}

// Write stores the pair as <dir>/<name>.crt (mode 0644) and
// <dir>/<name>.key (mode 0600), replacing files that were there, whatever
// their mode.
func (kp *KeyPair) Write(dir, name string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, name+".crt"), kp.CertPEM, 0o644); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, name+".key"), kp.KeyPEM, 0o600)
}

// writeFile replaces path with data in mode perm. os.WriteFile would keep
// an existing file's mode (a key file once 0644 would stay readable by
// all); a temporary file (created 0600) renamed over path also leaves no
// reader a half-written file.
func writeFile(path string, data []byte, perm os.FileMode) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// TLSCertificate returns the pair for crypto/tls.
func (kp *KeyPair) TLSCertificate() (tls.Certificate, error) {
	return tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
}

// ServerTLS returns a server configuration that requires client
// certificates signed by ca when requireClientCert is set, and verifies
// them if presented otherwise (bearer tokens then authenticate).
func ServerTLS(serving tls.Certificate, caPEM []byte, requireClientCert bool) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("no certificate in the client CA bundle")
	}
	auth := tls.VerifyClientCertIfGiven
	if requireClientCert {
		auth = tls.RequireAndVerifyClientCert
	}
	return &tls.Config{Certificates: []tls.Certificate{serving}, ClientCAs: pool, ClientAuth: auth, MinVersion: tls.VersionTLS12}, nil
}

// ClientTLS returns a client configuration that trusts caPEM and presents
// client, when given.
func ClientTLS(caPEM []byte, client *tls.Certificate) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("no certificate in the CA bundle")
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if client != nil {
		cfg.Certificates = []tls.Certificate{*client}
	}
	return cfg, nil
}

// LoadOrCreateCA reads the CA <dir>/ca.crt and ca.key, or creates and
// writes one named name when there is none.
func LoadOrCreateCA(dir, name string) (*KeyPair, error) {
	certPath, keyPath := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if _, err := os.Stat(certPath); err == nil {
		return LoadCA(certPath, keyPath)
	}
	ca, err := NewCA(name)
	if err != nil {
		return nil, err
	}
	return ca, ca.Write(dir, "ca")
}

// Identity is what a certificate must say to be kept instead of issued
// again: its common name, its organization (empty for a serving
// certificate) and the hosts it must be valid for.
type Identity struct {
	CommonName, Organization string
	Hosts                    []string
}

// Check says why certPEM is not a certificate of this CA for id that stays
// valid for at least renewBefore; nil when it is.
func (ca *KeyPair) Check(certPEM []byte, id Identity, renewBefore time.Duration) error {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return fmt.Errorf("no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return err
	}
	if err := cert.CheckSignatureFrom(ca.cert); err != nil {
		return fmt.Errorf("not signed by the fleet CA %q: %w", ca.cert.Subject.CommonName, err)
	}
	if cert.Subject.CommonName != id.CommonName {
		return fmt.Errorf("common name %q, want %q", cert.Subject.CommonName, id.CommonName)
	}
	if id.Organization != "" && !slices.Equal(cert.Subject.Organization, []string{id.Organization}) {
		return fmt.Errorf("organization %v, want %q", cert.Subject.Organization, id.Organization)
	}
	for _, h := range id.Hosts {
		if err := cert.VerifyHostname(h); err != nil {
			return err
		}
	}
	if left := time.Until(cert.NotAfter); left < renewBefore {
		return fmt.Errorf("expires at %s", cert.NotAfter.Format(time.RFC3339))
	}
	return nil
}
