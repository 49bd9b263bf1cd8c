package tunnel

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"

	"github.com/fleetnet/fleetnet/api/keys"
)

// ClusterOf is the fleet cluster a verified certificate names: its common
// name, in organization fleetnet:clusters. Anything else (no verified
// chain, another organization, an empty name) is no cluster: an empty
// name would otherwise match audiences meant for the administrators.
func ClusterOf(state *tls.ConnectionState) (string, error) {
	if state == nil || len(state.VerifiedChains) == 0 || len(state.VerifiedChains[0]) == 0 {
		return "", errors.New("no verified certificate")
	}
	return clusterOf(state.VerifiedChains[0][0])
}

func clusterOf(cert *x509.Certificate) (string, error) {
	if !slices.Contains(cert.Subject.Organization, keys.OrganizationClusters) {
		return "", fmt.Errorf("certificate %q is not of organization %s", cert.Subject.CommonName, keys.OrganizationClusters)
	}
	if slices.Contains(cert.Subject.Organization, keys.OrganizationAdmins) {
		// One identity or the other, never both: the registry would take
		// it for an administrator, discovery for no cluster.
		return "", fmt.Errorf("certificate %q is of organizations %s and %s: a cluster's is of the first alone", cert.Subject.CommonName, keys.OrganizationClusters, keys.OrganizationAdmins)
	}
	if cert.Subject.CommonName == "" {
		return "", errors.New("certificate of organization " + keys.OrganizationClusters + " names no cluster")
	}
	return cert.Subject.CommonName, nil
}

// Credentials are a gateway's key pair and the fleet CA, read on each
// handshake so that rotated files are taken (certfiles.Source).
type Credentials interface {
	// Certificate is the gateway's own (pki.EastWestCert).
	Certificate() (*tls.Certificate, error)
	// CA verifies the peers' certificates.
	CA() *x509.CertPool
}

// StaticCredentials are credentials that do not change (tests, benchmarks).
type StaticCredentials struct {
	Cert *tls.Certificate
	Pool *x509.CertPool
}

func (c StaticCredentials) Certificate() (*tls.Certificate, error) { return c.Cert, nil }
func (c StaticCredentials) CA() *x509.CertPool                     { return c.Pool }

// ServerConfig is the TLS of a gateway's tunnel listener: TLS 1.3, HTTP/2,
// and a client certificate of the fleet CA required.
func ServerConfig(creds Credentials) *tls.Config {
	base := &tls.Config{MinVersion: tls.VersionTLS13, NextProtos: []string{"h2"}, ClientAuth: tls.RequireAndVerifyClientCert}
	return &tls.Config{MinVersion: tls.VersionTLS13, NextProtos: []string{"h2"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, err := creds.Certificate()
			if err != nil {
				return nil, err
			}
			c := base.Clone()
			c.Certificates, c.ClientCAs = []tls.Certificate{*cert}, creds.CA()
			return c, nil
		}}
}

// WrongClusterError is a peer gateway whose certificate names another
// cluster than the one its address was published for.
type WrongClusterError struct{ Want, Got string }

func (e *WrongClusterError) Error() string {
	return fmt.Sprintf("the gateway reached for cluster %q presented cluster %q's certificate", e.Want, e.Got)
}

// ClientConfig is the TLS of a connection to peer's gateway: the peer's
// certificate must chain to the fleet CA and name that cluster exactly,
// whatever address it was reached at (a gateway's address is the one its
// cluster published, not a name in its certificate).
func ClientConfig(creds Credentials, peer string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{"h2"},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return creds.Certificate()
		},
		// The chain and the name are checked in VerifyConnection instead of
		// against a host name.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the peer gateway sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			leaf := cs.PeerCertificates[0]
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: creds.CA(), Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
				return fmt.Errorf("the peer gateway's certificate: %w", err)
			}
			got, err := clusterOf(leaf)
			if err != nil {
				return fmt.Errorf("the peer gateway's certificate: %w", err)
			}
			if got != peer {
				return &WrongClusterError{Want: peer, Got: got}
			}
			return nil
		},
	}
}
