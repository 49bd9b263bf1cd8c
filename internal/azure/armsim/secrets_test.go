package armsim_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/cdn/armcdn/v2"

	"github.com/fleetnet/fleetnet/internal/azure/armsim"
)

const kvSecret = "/subscriptions/" + sub + "/resourceGroups/certs/providers/Microsoft.KeyVault/vaults/fleet-kv/secrets/shop-tls"

func customerCert(source string) armcdn.Secret {
	return armcdn.Secret{Properties: &armcdn.SecretProperties{Parameters: &armcdn.CustomerCertificateParameters{
		Type: to.Ptr(armcdn.SecretTypeCustomerCertificate), SecretSource: &armcdn.ResourceReference{ID: to.Ptr(source)}, UseLatestVersion: to.Ptr(true)}}}
}

func domain(host string, certType armcdn.AfdCertificateType, secret string) armcdn.AFDDomain {
	tls := &armcdn.AFDDomainHTTPSParameters{CertificateType: to.Ptr(certType), MinimumTLSVersion: to.Ptr(armcdn.AfdMinimumTLSVersionTLS12)}
	if secret != "" {
		tls.Secret = &armcdn.ResourceReference{ID: to.Ptr(secret)}
	}
	return armcdn.AFDDomain{Properties: &armcdn.AFDDomainProperties{HostName: to.Ptr(host), TLSSettings: tls}}
}

// Customer certificates as Front Door documents them: a secret of type
// CustomerCertificate referencing a Key Vault secret by resource id; a
// custom domain with certificateType CustomerCertificate naming a secret
// of its profile; a wildcard domain refused with a managed certificate;
// a secret in use not deletable.
func TestCustomerCertificates(t *testing.T) {
	ctx := context.Background()
	profileID := "/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.Cdn/profiles/afd"
	tests := []struct {
		name string
		// secret, when set, is created first as "cert"; secretStatus is
		// the status its create must get (0: success).
		secret       *armcdn.Secret
		secretStatus int
		domain       armcdn.AFDDomain
		domainStatus int
		// inMessage must be in the refusal's message.
		inMessage string
	}{
		{name: "managed certificate", domain: domain("app.example.com", armcdn.AfdCertificateTypeManagedCertificate, "")},
		{name: "customer certificate", secret: to.Ptr(customerCert(kvSecret)),
			domain: domain("app.example.com", armcdn.AfdCertificateTypeCustomerCertificate, profileID+"/secrets/cert")},
		{name: "wildcard with customer certificate", secret: to.Ptr(customerCert(kvSecret)),
			domain: domain("*.example.com", armcdn.AfdCertificateTypeCustomerCertificate, profileID+"/secrets/cert")},
		{name: "wildcard with managed certificate", domain: domain("*.example.com", armcdn.AfdCertificateTypeManagedCertificate, ""),
			domainStatus: http.StatusBadRequest, inMessage: "needs a customer certificate"},
		{name: "customer certificate without secret", domain: domain("app.example.com", armcdn.AfdCertificateTypeCustomerCertificate, ""),
			domainStatus: http.StatusBadRequest, inMessage: "tlsSettings.secret is required"},
		{name: "customer certificate naming a missing secret", domain: domain("app.example.com", armcdn.AfdCertificateTypeCustomerCertificate, profileID+"/secrets/none"),
			domainStatus: http.StatusBadRequest, inMessage: "secrets/none"},
		{name: "secret referencing a Key Vault URL", secret: to.Ptr(customerCert("https://fleet-kv.vault.azure.net/secrets/shop-tls")), secretStatus: http.StatusBadRequest,
			inMessage: "is not a Key Vault secret"},
		{name: "secret referencing a Key Vault certificate", secret: to.Ptr(customerCert(strings.Replace(kvSecret, "/secrets/", "/certificates/", 1))), secretStatus: http.StatusBadRequest,
			inMessage: "is not a Key Vault secret"},
		{name: "secret without source", secret: &armcdn.Secret{Properties: &armcdn.SecretProperties{Parameters: &armcdn.CustomerCertificateParameters{Type: to.Ptr(armcdn.SecretTypeCustomerCertificate)}}},
			secretStatus: http.StatusBadRequest, inMessage: "secretSource is required"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := armsim.New(armsim.Options{Polls: 1, DeployReads: 1})
			opts := &arm.ClientOptions{ClientOptions: policy.ClientOptions{Transport: s.Transport(), Retry: policy.RetryOptions{MaxRetries: -1}}}
			f, err := armcdn.NewClientFactory(sub, &azfake.TokenCredential{}, opts)
			if err != nil {
				t.Fatal(err)
			}
			if pp, err := f.NewProfilesClient().BeginCreate(ctx, rg, "afd", profile(armcdn.SKUNameStandardAzureFrontDoor), nil); err != nil {
				t.Fatal(err)
			} else if _, err := pp.PollUntilDone(ctx, poll); err != nil {
				t.Fatal(err)
			}
			check := func(what string, err error, status int) bool {
				t.Helper()
				if status == 0 {
					if err != nil {
						t.Fatalf("%s: %v", what, err)
					}
					return true
				}
				re := respErr(t, err)
				if re.StatusCode != status || !strings.Contains(err.Error(), tc.inMessage) {
					t.Fatalf("%s: got %d %v, want %d with %q", what, re.StatusCode, err, status, tc.inMessage)
				}
				return false
			}
			if tc.secret != nil {
				p, err := f.NewSecretsClient().BeginCreate(ctx, rg, "afd", "cert", *tc.secret, nil)
				if err == nil {
					_, err = p.PollUntilDone(ctx, poll)
				}
				if !check("secret", err, tc.secretStatus) {
					return
				}
				got, err := f.NewSecretsClient().Get(ctx, rg, "afd", "cert", nil)
				if err != nil {
					t.Fatalf("get secret: %v", err)
				}
				if cc, ok := got.Properties.Parameters.(*armcdn.CustomerCertificateParameters); !ok || !strings.EqualFold(*cc.SecretSource.ID, kvSecret) {
					t.Fatalf("secret read back: %#v", got.Properties.Parameters)
				}
			}
			p, err := f.NewAFDCustomDomainsClient().BeginCreate(ctx, rg, "afd", "dom", tc.domain, nil)
			if err == nil {
				_, err = p.PollUntilDone(ctx, poll)
			}
			if !check("custom domain", err, tc.domainStatus) || tc.secret == nil {
				return
			}
			// The secret a custom domain uses cannot be deleted; once the
			// domain is gone it can.
			sc := f.NewSecretsClient()
			dp, err := sc.BeginDelete(ctx, rg, "afd", "cert", nil)
			if err == nil {
				_, err = dp.PollUntilDone(ctx, poll)
			}
			if re := respErr(t, err); re.StatusCode != http.StatusConflict {
				t.Fatalf("deleting a secret in use: %v", err)
			}
			if dp, err := f.NewAFDCustomDomainsClient().BeginDelete(ctx, rg, "afd", "dom", nil); err != nil {
				t.Fatal(err)
			} else if _, err := dp.PollUntilDone(ctx, poll); err != nil {
				t.Fatal(err)
			}
			if dp, err := sc.BeginDelete(ctx, rg, "afd", "cert", nil); err != nil {
				t.Fatal(err)
			} else if _, err := dp.PollUntilDone(ctx, poll); err != nil {
				t.Fatal(err)
			}
			if _, err := sc.Get(ctx, rg, "afd", "cert", nil); respErr(t, err).StatusCode != http.StatusNotFound {
				t.Fatalf("secret after delete: %v", err)
			}
		})
	}
}
