package wire_test

import (
	"bytes"
	"testing"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/edge/wire"
	"github.com/fleetnet/fleetnet/internal/gateway/model"
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
	cert := model.Certificate{Namespace: "demo", Name: "shop-tls", Digest: "d1", CertPEM: kp.CertPEM, KeyPEM: kp.KeyPEM}
	m := &model.Model{Version: "x", Gateways: []model.Gateway{{Namespace: "demo", Name: "edge", Listeners: []model.Listener{
		{Name: "a", Port: 443, Protocol: model.ProtocolHTTPS, Certificates: []model.Certificate{cert}},
		{Name: "b", Port: 8443, Protocol: model.ProtocolHTTPS, Certificates: []model.Certificate{cert}},
	}}}}
	doc, certs, err := wire.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(doc, []byte("PRIVATE KEY")) || len(certs) != 1 {
		t.Fatalf("document carries a key, or %d certificates for one", len(certs))
	}
	got, pairs, err := wire.Decode(&edgev1.ModelUpdate{ContentType: wire.ContentType, Model: doc, Certificates: certs})
	if err != nil {
		t.Fatal(err)
	}
	if pairs["d1"] == nil || len(got.Gateways[0].Listeners) != 2 || got.Version != "x" {
		t.Errorf("decoded %+v with key pairs %v", got, pairs)
	}
	if _, _, err := wire.Decode(&edgev1.ModelUpdate{ContentType: "text/plain", Model: doc}); err == nil {
		t.Error("another content type was accepted")
	}
	if _, _, err := wire.Decode(&edgev1.ModelUpdate{ContentType: wire.ContentType, Model: doc, Certificates: []*edgev1.Certificate{{Digest: "bad", CertPem: []byte("x")}}}); err == nil {
		t.Error("a broken key pair was accepted")
	}
}
