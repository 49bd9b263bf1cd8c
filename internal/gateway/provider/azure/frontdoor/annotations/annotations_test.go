package annotations

import (
	"reflect"
	"strings"
	"testing"

	"github.com/fleetnet/fleetnet/api/keys"
)

func TestParse(t *testing.T) {
	const waf = "/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/FrontDoorWebApplicationFirewallPolicies/wafpolicy1"
	tests := []struct {
		name  string
		ann   map[string]string
		class SKU
		want  func(*Settings)
		// errs are substrings every one of which the error must hold;
		// none means no error.
		errs []string
	}{
		{name: "none", want: func(*Settings) {}},
		{name: "others ignored", ann: map[string]string{"example.com/x": "1", keys.AnnotationWeight: "3"}, want: func(*Settings) {}},
		{name: "all valid", class: SKUStandard, ann: map[string]string{
			keys.AnnotationAzureSKU: "Premium", keys.AnnotationAzureWAFPolicy: waf, keys.AnnotationAzureProbePath: "/healthz",
			keys.AnnotationAzureProbeProtocol: "https", keys.AnnotationAzureProbeMethod: "get", keys.AnnotationAzureProbeInterval: "10",
			keys.AnnotationAzureSampleSize: "5", keys.AnnotationAzureSuccessfulSamples: "2", keys.AnnotationAzureOriginHostHeader: "App.Example.com",
			keys.AnnotationAzureConnectivity: "private-link", keys.AnnotationAzurePLSResourceGroup: "MC_fleet_east",
			keys.AnnotationAzureOperations: "{}",
		}, want: func(s *Settings) {
			*s = Settings{SKU: SKUPremium, WAFPolicyID: waf, ProbePath: "/healthz", ProbeProtocol: "Https", ProbeMethod: "GET", ProbeIntervalSecs: 10,
				SampleSize: 5, SuccessfulSamples: 2, OriginHostHeader: "app.example.com", Connectivity: ConnectivityPrivateLink, PLSResourceGroup: "MC_fleet_east"}
		}},
		{name: "class premium", class: SKUPremium, ann: map[string]string{keys.AnnotationAzureConnectivity: "private-link"},
			want: func(s *Settings) { s.SKU, s.Connectivity = SKUPremium, ConnectivityPrivateLink }},
		{name: "unknown key", ann: map[string]string{"fleetnet.dev/azure-probe-timeout": "5"},
			errs: []string{`annotation fleetnet.dev/azure-probe-timeout="5": unknown annotation`}},
		{name: "bad sku", ann: map[string]string{keys.AnnotationAzureSKU: "premium_azurefrontdoor"}, errs: []string{`fleetnet.dev/azure-sku="premium_azurefrontdoor": want Standard or Premium`}},
		{name: "bad waf", ann: map[string]string{keys.AnnotationAzureWAFPolicy: "/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/applicationGatewayWebApplicationFirewallPolicies/x"},
			errs: []string{`fleetnet.dev/azure-waf-policy="/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/applicationGatewayWebApplicationFirewallPolicies/x"`}},
		{name: "bad probe path", ann: map[string]string{keys.AnnotationAzureProbePath: "healthz"}, errs: []string{`fleetnet.dev/azure-probe-path="healthz": want an absolute path`}},
		{name: "bad probe protocol", ann: map[string]string{keys.AnnotationAzureProbeProtocol: "tcp"}, errs: []string{`fleetnet.dev/azure-probe-protocol="tcp": want Http or Https`}},
		{name: "bad probe method", ann: map[string]string{keys.AnnotationAzureProbeMethod: "POST"}, errs: []string{`fleetnet.dev/azure-probe-method="POST"`}},
		{name: "interval zero", ann: map[string]string{keys.AnnotationAzureProbeInterval: "0"}, errs: []string{`fleetnet.dev/azure-probe-interval="0": want whole seconds from 1 to 255`}},
		{name: "interval with unit", ann: map[string]string{keys.AnnotationAzureProbeInterval: "10s"}, errs: []string{`fleetnet.dev/azure-probe-interval="10s"`}},
		{name: "interval leading zero", ann: map[string]string{keys.AnnotationAzureProbeInterval: "010"}, errs: []string{`fleetnet.dev/azure-probe-interval="010"`}},
		{name: "sample size", ann: map[string]string{keys.AnnotationAzureSampleSize: "256"}, errs: []string{`fleetnet.dev/azure-sample-size="256"`}},
		{name: "successful over size", ann: map[string]string{keys.AnnotationAzureSampleSize: "2"},
			errs: []string{`fleetnet.dev/azure-sample-size="2": 3 successful samples of 2`}},
		{name: "successful over size named", ann: map[string]string{keys.AnnotationAzureSampleSize: "4", keys.AnnotationAzureSuccessfulSamples: "5"},
			errs: []string{`fleetnet.dev/azure-successful-samples="5": 5 successful samples of 4`}},
		{name: "bad host header", ann: map[string]string{keys.AnnotationAzureOriginHostHeader: "app.example.com:8080"}, errs: []string{`fleetnet.dev/azure-origin-host-header="app.example.com:8080"`}},
		{name: "bad connectivity", ann: map[string]string{keys.AnnotationAzureConnectivity: "private"}, errs: []string{`fleetnet.dev/azure-connectivity="private": want public or private-link`}},
		{name: "private link on standard", ann: map[string]string{keys.AnnotationAzureConnectivity: "private-link"},
			errs: []string{`fleetnet.dev/azure-connectivity="private-link": Private Link origins need Front Door Premium, and the tier is Standard`}},
		{name: "private link on standard annotated", class: SKUPremium, ann: map[string]string{keys.AnnotationAzureConnectivity: "private-link", keys.AnnotationAzureSKU: "Standard"},
			errs: []string{`fleetnet.dev/azure-connectivity="private-link": Private Link origins need Front Door Premium`}},
		{name: "pls group without private link", class: SKUPremium, ann: map[string]string{keys.AnnotationAzurePLSResourceGroup: "rg"},
			errs: []string{`fleetnet.dev/azure-pls-resource-group="rg": only meaningful with fleetnet.dev/azure-connectivity=private-link`}},
		{name: "listener certificates", ann: map[string]string{keys.AnnotationAzureListenerCertificates: " https = /subscriptions/s/resourceGroups/g/providers/Microsoft.KeyVault/vaults/kv1/secrets/shop ,\n wild=not-checked-here,"},
			want: func(s *Settings) {
				s.ListenerCertificates = map[string]string{"https": "/subscriptions/s/resourceGroups/g/providers/Microsoft.KeyVault/vaults/kv1/secrets/shop", "wild": "not-checked-here"}
			}},
		{name: "listener certificate without listener", ann: map[string]string{keys.AnnotationAzureListenerCertificates: "=/subscriptions/s"},
			errs: []string{`fleetnet.dev/azure-listener-certificates="=/subscriptions/s": entry "=/subscriptions/s": want <listener name>=<Key Vault secret resource id>`}},
		{name: "listener certificate named twice", ann: map[string]string{keys.AnnotationAzureListenerCertificates: "a=x,a=y"},
			errs: []string{`listener a is named twice`}},
		{name: "listener certificates empty", ann: map[string]string{keys.AnnotationAzureListenerCertificates: " , "},
			errs: []string{`fleetnet.dev/azure-listener-certificates=" , ": want <listener name>=`}},
		{name: "bad pls group", class: SKUPremium, ann: map[string]string{keys.AnnotationAzureConnectivity: "private-link", keys.AnnotationAzurePLSResourceGroup: "a/b"},
			errs: []string{`fleetnet.dev/azure-pls-resource-group="a/b"`}},
		{name: "every problem told", ann: map[string]string{keys.AnnotationAzureSKU: "Gold", keys.AnnotationAzureProbeMethod: "PUT"},
			errs: []string{`fleetnet.dev/azure-sku="Gold"`, `fleetnet.dev/azure-probe-method="PUT"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.ann, tt.class)
			if len(tt.errs) > 0 {
				if err == nil {
					t.Fatalf("no error, want %q", tt.errs)
				}
				for _, e := range tt.errs {
					if !strings.Contains(err.Error(), e) {
						t.Errorf("error %q lacks %q", err, e)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			class := tt.class
			if class == "" {
				class = SKUStandard
			}
			want := Defaults(class)
			tt.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestKeyVaultSecret(t *testing.T) {
	for _, tt := range []struct {
		ref, err string
	}{
		{ref: "/subscriptions/s/resourceGroups/g/providers/Microsoft.KeyVault/vaults/kv-1/secrets/shop-tls"},
		{ref: "/SUBSCRIPTIONS/s/resourcegroups/g/providers/microsoft.keyvault/vaults/kv-1/secrets/shop-tls"},
		{ref: "https://kv-1.vault.azure.net/secrets/shop-tls", err: "not its URL"},
		{ref: "/subscriptions/s/resourceGroups/g/providers/Microsoft.KeyVault/vaults/kv-1/certificates/shop-tls", err: "want a Key Vault secret's resource id"},
		{ref: "/subscriptions/s/resourceGroups/g/providers/Microsoft.KeyVault/vaults/kv-1/secrets/shop-tls/versions/abc", err: "want a Key Vault secret's resource id"},
		{ref: "/subscriptions/s/resourceGroups/g/providers/Microsoft.KeyVault/vaults/k/secrets/shop", err: "want a Key Vault secret's resource id"},
	} {
		err := KeyVaultSecret(tt.ref)
		if (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("KeyVaultSecret(%q) = %v, want %q", tt.ref, err, tt.err)
		}
	}
}
