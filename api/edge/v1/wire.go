package edgev1

// How a model travels from fleetnet-gateway to fleetnet-edge inside a
// ModelUpdate: the model as JSON (the same document the golden files
// show), and the listeners' key pairs beside it, by digest, since the
// model's JSON never carries a key.

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
)

// ModelContentType names this encoding; an edge refuses others.
const ModelContentType = "application/vnd.fleetnet.model.v1+json"

// EncodeModel returns the model's document and its certificates, sorted by
// digest, each once.
func EncodeModel(m *Model) ([]byte, []*Certificate, error) {
	doc, err := json.Marshal(m)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the model: %w", err)
	}
	byDigest := map[string]*Certificate{}
	for _, gw := range m.Gateways {
		for _, l := range gw.Listeners {
			for _, c := range l.Certificates {
				byDigest[c.Digest] = &Certificate{Digest: c.Digest, CertPem: c.CertPEM, KeyPem: c.KeyPEM}
			}
		}
	}
	certs := make([]*Certificate, 0, len(byDigest))
	for _, c := range byDigest {
		certs = append(certs, c)
	}
	sort.Slice(certs, func(i, j int) bool { return certs[i].GetDigest() < certs[j].GetDigest() })
	return doc, certs, nil
}

// DecodeModel returns the model of an update and its key pairs by digest.
func DecodeModel(u *ModelUpdate) (*Model, map[string]*tls.Certificate, error) {
	if u.GetContentType() != ModelContentType {
		return nil, nil, fmt.Errorf("content type %q is not %q", u.GetContentType(), ModelContentType)
	}
	m := &Model{}
	if err := json.Unmarshal(u.GetModel(), m); err != nil {
		return nil, nil, fmt.Errorf("decoding the model: %w", err)
	}
	certs := map[string]*tls.Certificate{}
	for _, c := range u.GetCertificates() {
		kp, err := tls.X509KeyPair(c.GetCertPem(), c.GetKeyPem())
		if err != nil {
			return nil, nil, fmt.Errorf("certificate %s: %w", c.GetDigest(), err)
		}
		certs[c.GetDigest()] = &kp
	}
	return m, certs, nil
}

// Kinds of a Refusal: the object whose part an edge serves without.
const (
	RefusalKindGateway      = "Gateway"
	RefusalKindLoadBalancer = "MultiClusterLoadBalancer"
)

// VersionOf is a model's Version: a hash of the rest of its JSON, so that
// equal versions serve the same.
func VersionOf(m Model) string {
	m.Version = ""
	data, err := json.Marshal(m)
	if err != nil {
		panic(err) // plain structs of strings and numbers always marshal
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}
