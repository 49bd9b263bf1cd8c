package frontdoor

import (
	"context"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/cdn/armcdn/v2"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/azure/armsim"
	"github.com/fleetnet/fleetnet/internal/azure/armutil"
)

const (
	kvShop = "/subscriptions/" + sub + "/resourceGroups/certs/providers/Microsoft.KeyVault/vaults/fleet-kv/secrets/shop-tls"
	kvWild = "/subscriptions/" + sub + "/resourceGroups/certs/providers/Microsoft.KeyVault/vaults/fleet-kv/secrets/wild-tls"
)

// certGateway is h.gateway with a second HTTPS listener, "wild", for
// *.example.com (its TLS Secret web/wild-tls) serving site.
func (h *harness) certGateway(name string, ann map[string]string) edgev1.Gateway {
	gw := h.gateway("afd-standard", ann)
	gw.Name = name
	gw.Listeners = append(gw.Listeners, edgev1.Listener{Name: "wild", Port: 443, Protocol: edgev1.ProtocolHTTPS, Hostname: "*.example.com",
		Certificates: []edgev1.ListenerCertificate{{Namespace: "web", Name: "wild-tls"}},
		VirtualHosts: []edgev1.VirtualHost{{Hostname: "*.example.com", Routes: []edgev1.Route{route("tenants", 0, "/", backend("site", 1, h.cluster("east", 1)))}}}})
	return gw
}

// An HTTPS listener named in fleetnet.dev/azure-listener-certificates
// gets a customer certificate (a secret referencing the Key Vault
// secret, the custom domain using it); others keep AFD-managed ones; a
// wildcard hostname is served only with a customer certificate; a bad
// reference leaves only its listener unserved, named in the message
// with the annotation and the value, while the other listeners and
// another Gateway deploy.
func TestCustomerCertificates(t *testing.T) {
	tests := []struct {
		name string
		ann  string // keys.AnnotationAzureListenerCertificates, "" for none
		// domains are the custom domains wanted: certificate type and
		// Key Vault secret ("" for managed) by hostname.
		domains map[string]string
		// inMessage must each be in the Gateway's Programmed message.
		inMessage []string
	}{
		{name: "managed by default", domains: map[string]string{"app.example.com": ""},
			inMessage: []string{"hostname *.example.com of listener wild is not served: a wildcard custom domain needs a customer certificate",
				"TLS Secret web/wild-tls cannot be used", keys.AnnotationAzureListenerCertificates + ": wild=/subscriptions/"}},
		{name: "customer certificate", ann: "https=" + kvShop, domains: map[string]string{"app.example.com": kvShop}},
		{name: "wildcard with customer certificate", ann: "wild=" + kvWild + ", https=" + kvShop,
			domains: map[string]string{"app.example.com": kvShop, "*.example.com": kvWild}},
		{name: "one secret for two listeners", ann: "wild=" + kvShop + ",https=" + kvShop,
			domains: map[string]string{"app.example.com": kvShop, "*.example.com": kvShop}},
		{name: "bad reference refuses its listener only", ann: "wild=https://fleet-kv.vault.azure.net/secrets/wild-tls,https=" + kvShop,
			domains: map[string]string{"app.example.com": kvShop},
			inMessage: []string{`listener wild is not served: annotation ` + keys.AnnotationAzureListenerCertificates +
				`, listener wild: value "https://fleet-kv.vault.azure.net/secrets/wild-tls": want the Key Vault secret's resource id, not its URL`}},
		{name: "unknown listener", ann: "shop=" + kvShop, domains: map[string]string{"app.example.com": ""},
			inMessage: []string{"listener shop: value \"" + kvShop + "\" is not used: the Gateway has no HTTPS listener shop on port 443"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, armsim.Options{Polls: 1, DeployReads: 1})
			p := h.provider()
			var ann map[string]string
			if tc.ann != "" {
				ann = map[string]string{keys.AnnotationAzureListenerCertificates: tc.ann}
			}
			other := h.gateway("afd-standard", nil)
			other.Name = "other"
			if err := p.Deploy(context.Background(), modelOf("v1", h.certGateway("public", ann), other)); err != nil {
				t.Fatal(err)
			}
			validateDomains(h)
			for _, key := range []string{"web/public", "web/other"} {
				h.until(p, key, 0, func(g GatewayProgress) bool { return g.Served })
			}
			msg := p.Gateways()["web/public"].Message
			for _, m := range tc.inMessage {
				if !strings.Contains(msg, m) {
					t.Errorf("message lacks %q:\n%s", m, msg)
				}
			}
			profile := profileName(owner, "web", "public")
			got := map[string]string{}
			for _, r := range h.sim.Resources(armsim.TypeCustomDomain) {
				if r.ID.Names[0] != profile {
					continue
				}
				d, _ := armsim.Lookup[armcdn.AFDDomain](h.sim, r.ID)
				tls := d.Properties.TLSSettings
				got[armutil.Deref(d.Properties.HostName)] = ""
				if armutil.Deref(tls.CertificateType) != armcdn.AfdCertificateTypeCustomerCertificate {
					continue
				}
				sid, err := armsim.ParseID(armutil.Deref(tls.Secret.ID))
				if err != nil {
					t.Fatal(err)
				}
				sc, ok := armsim.Lookup[armcdn.Secret](h.sim, sid)
				if !ok {
					t.Fatalf("domain %s: no secret %s", r.ID.Name(), sid)
				}
				cc := sc.Properties.Parameters.(*armcdn.CustomerCertificateParameters)
				if !armutil.Deref(cc.UseLatestVersion) {
					t.Errorf("secret %s does not follow the latest version", sid.Name())
				}
				got[armutil.Deref(d.Properties.HostName)] = armutil.Deref(cc.SecretSource.ID)
			}
			if len(got) != len(tc.domains) {
				t.Errorf("custom domains %v, want %v", got, tc.domains)
			}
			for host, ref := range tc.domains {
				if g, ok := got[host]; !ok || !strings.EqualFold(g, ref) {
					t.Errorf("custom domain %s: Key Vault secret %q, want %q (all: %v)", host, g, ref, got)
				}
			}
			if tc.ann == "" {
				return
			}
			// Back to managed certificates: the secrets are withdrawn
			// after the domains stop using them.
			if err := p.Deploy(context.Background(), modelOf("v2", h.gateway("afd-standard", nil), other)); err != nil {
				t.Fatal(err)
			}
			for _, r := range h.sim.Resources(armsim.TypeSecret) {
				t.Errorf("secret %s left after the annotation went", r.ID)
			}
		})
	}
}
