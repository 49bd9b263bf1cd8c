package edgev1_test

import (
	"bytes"
	"testing"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"

	"github.com/fleetnet/fleetnet/internal/pki"
)

// Keys travel beside the model document, never inside it, and come back
// as usable key pairs.
func TestRoundTripKeepsKeysOutOfTheDocument(t *testing.T) {
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.ServingCert("shop", []string{"shop.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	cert := edgev1.ListenerCertificate{Namespace: "demo", Name: "shop-tls", Digest: "d1", CertPEM: kp.CertPEM, KeyPEM: kp.KeyPEM}
	m := &edgev1.Model{Version: "x", Gateways: []edgev1.Gateway{{Namespace: "demo", Name: "edge", Listeners: []edgev1.Listener{
		{Name: "a", Port: 443, Protocol: edgev1.ProtocolHTTPS, Certificates: []edgev1.ListenerCertificate{cert}},
		{Name: "b", Port: 8443, Protocol: edgev1.ProtocolHTTPS, Certificates: []edgev1.ListenerCertificate{cert}},
	}}}}
	doc, certs, err := edgev1.EncodeModel(m)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(doc, []byte("PRIVATE KEY")) || len(certs) != 1 {
		t.Fatalf("document carries a key, or %d certificates for one", len(certs))
	}
	got, pairs, err := edgev1.DecodeModel(&edgev1.ModelUpdate{ContentType: edgev1.ModelContentType, Model: doc, Certificates: certs})
	if err != nil {
		t.Fatal(err)
	}
	if pairs["d1"] == nil || len(got.Gateways[0].Listeners) != 2 || got.Version != "x" {
		t.Errorf("decoded %+v with key pairs %v", got, pairs)
	}
	if _, _, err := edgev1.DecodeModel(&edgev1.ModelUpdate{ContentType: "text/plain", Model: doc}); err == nil {
		t.Error("another content type was accepted")
	}
	if _, _, err := edgev1.DecodeModel(&edgev1.ModelUpdate{ContentType: edgev1.ModelContentType, Model: doc, Certificates: []*edgev1.Certificate{{Digest: "bad", CertPem: []byte("x")}}}); err == nil {
		t.Error("a broken key pair was accepted")
	}
}
