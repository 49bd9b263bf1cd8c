package controlplane

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"

	certutil "k8s.io/client-go/util/cert"
)

// credentials are the files an API server and its clients need.
type credentials struct {
	ServingCert, ServingKey string // kube-apiserver's serving certificate
	CABundle                string // what clients trust: the serving certificate's chain
	ServiceAccountKey       string // signs and verifies service account tokens
	TokenFile               string // static token file with the admin token
	AdminToken              string
}

// writeCredentials creates the serving certificate, the service account key
// and an admin token in dir, or reuses them when they are already there.
func writeCredentials(dir string) (credentials, error) {
	c := credentials{
		ServingCert:       filepath.Join(dir, "serving.crt"),
		ServingKey:        filepath.Join(dir, "serving.key"),
		CABundle:          filepath.Join(dir, "serving.crt"),
		ServiceAccountKey: filepath.Join(dir, "sa.key"),
		TokenFile:         filepath.Join(dir, "tokens.csv"),
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return c, err
	}
	if !exists(c.ServingCert) {
		// The certificate comes with the CA that signed it, so it is also the
		// bundle clients trust.
		cert, key, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, nil)
		if err != nil {
			return c, fmt.Errorf("generating serving certificate: %w", err)
		}
		if err := os.WriteFile(c.ServingKey, key, 0o600); err != nil {
			return c, err
		}
		if err := os.WriteFile(c.ServingCert, cert, 0o644); err != nil {
			return c, err
		}
	}
	if !exists(c.ServiceAccountKey) {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return c, err
		}
		block := &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}
		if err := os.WriteFile(c.ServiceAccountKey, pem.EncodeToMemory(block), 0o600); err != nil {
			return c, err
		}
	}
	if !exists(c.TokenFile) {
		buf := make([]byte, 24)
		if _, err := rand.Read(buf); err != nil {
			return c, err
		}
		line := fmt.Sprintf("%s,admin,admin,\"system:masters\"\n", hex.EncodeToString(buf))
		if err := os.WriteFile(c.TokenFile, []byte(line), 0o600); err != nil {
			return c, err
		}
	}
	data, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return c, err
	}
	_, err = fmt.Sscanf(string(data), "%48s", &c.AdminToken)
	if err != nil || len(c.AdminToken) != 48 {
		return c, fmt.Errorf("reading admin token from %s: malformed file", c.TokenFile)
	}
	return c, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
