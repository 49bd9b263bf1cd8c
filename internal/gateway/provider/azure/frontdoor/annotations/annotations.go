// Package annotations parses a Gateway's fleetnet.dev/azure-* annotations
// into typed Front Door settings, strictly: an unknown key with the
// prefix, a malformed value or an incompatible combination is an error
// naming the key and value, and there is no fallback to a default. It is
// pure, so that the model builder can refuse such a Gateway
// (Accepted=False) and the provider parses the same annotations the same
// way.
package annotations

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/fleetnet/fleetnet/api/keys"
)

// SKU is a Front Door tier.
type SKU string

// Front Door tiers.
const (
	SKUStandard SKU = "Standard"
	SKUPremium  SKU = "Premium"
)

// Connectivity is how Front Door reaches the origins.
type Connectivity string

// Connectivity values.
const (
	ConnectivityPublic      Connectivity = "public"
	ConnectivityPrivateLink Connectivity = "private-link"
)

// Settings are a Gateway's Front Door settings. Zero fields were not
// annotated; Defaults fills them.
type Settings struct {
	SKU               SKU
	WAFPolicyID       string
	ProbePath         string
	ProbeProtocol     string // Http or Https
	ProbeMethod       string // HEAD or GET
	ProbeIntervalSecs int32
	SampleSize        int32
	SuccessfulSamples int32
	OriginHostHeader  string
	Connectivity      Connectivity
	PLSResourceGroup  string
	// ListenerCertificates are the Key Vault secret references of
	// keys.AnnotationAzureListenerCertificates by listener name, as
	// written: KeyVaultSecret checks each, so that a bad one leaves only
	// its listener unserved.
	ListenerCertificates map[string]string `json:",omitempty"`
}

// Defaults are the settings of a Gateway without annotations, on tier sku.
func Defaults(sku SKU) Settings {
	return Settings{SKU: sku, ProbePath: "/", ProbeProtocol: "Http", ProbeMethod: "HEAD", ProbeIntervalSecs: 30,
		SampleSize: 4, SuccessfulSamples: 3, Connectivity: ConnectivityPublic}
}

// Error is one refused annotation.
type Error struct {
	Key, Value string
	// Reason says what is wrong and what is accepted.
	Reason string
}

func (e *Error) Error() string { return fmt.Sprintf("annotation %s=%q: %s", e.Key, e.Value, e.Reason) }

var (
	wafID = regexp.MustCompile(`(?i)^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Network/FrontDoorWebApplicationFirewallPolicies/[A-Za-z][A-Za-z0-9]{0,127}$`)
	// hostname is an RFC 1123 host name.
	hostname = regexp.MustCompile(`^(?i)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$`)
	// resourceGroup is ARM's rule for resource group names.
	resourceGroup = regexp.MustCompile(`^[-\w._()]{1,90}$`)
	probePath     = regexp.MustCompile(`^/[A-Za-z0-9\-._~!$&'()*+,;=:@/%]*$`)
)

// Known are the annotations Parse accepts.
var Known = []string{
	keys.AnnotationAzureSKU, keys.AnnotationAzureWAFPolicy, keys.AnnotationAzureProbePath, keys.AnnotationAzureProbeProtocol,
	keys.AnnotationAzureProbeMethod, keys.AnnotationAzureProbeInterval, keys.AnnotationAzureSampleSize,
	keys.AnnotationAzureSuccessfulSamples, keys.AnnotationAzureOriginHostHeader, keys.AnnotationAzureConnectivity,
	keys.AnnotationAzurePLSResourceGroup, keys.AnnotationAzureListenerCertificates, keys.AnnotationAzureOperations,
}

// Validator checks a Gateway's Azure annotations for the model builder
// (model.Input.ValidateAnnotations) as Parse reads them. tiers are the
// GatewayClasses Azure Front Door serves with the tier each selects, so
// that Private Link on a Standard class is refused; a class Front Door
// does not serve is checked as Premium, which refuses no combination.
func Validator(tiers map[string]string) func(class string, ann map[string]string) error {
	return func(class string, ann map[string]string) error {
		tier := SKU(tiers[class])
		if tier == "" {
			tier = SKUPremium
		}
		_, err := Parse(ann, tier)
		return err
	}
}

// Parse reads ann's Azure annotations over Defaults(classSKU) (classSKU
// "" when the class does not say: Standard unless annotated). Every
// problem is returned, joined, each an *Error, in key order.
func Parse(ann map[string]string, classSKU SKU) (Settings, error) {
	if classSKU == "" {
		classSKU = SKUStandard
	}
	s := Defaults(classSKU)
	var errs []error
	bad := func(k, reason string) { errs = append(errs, &Error{Key: k, Value: ann[k], Reason: reason}) }
	ks := make([]string, 0, len(ann))
	for k := range ann {
		if strings.HasPrefix(k, keys.AzureAnnotationPrefix) {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	seen := map[string]bool{}
	for _, k := range ks {
		v := ann[k]
		seen[k] = true
		switch k {
		case keys.AnnotationAzureSKU:
			switch SKU(v) {
			case SKUStandard, SKUPremium:
				s.SKU = SKU(v)
			default:
				bad(k, "want Standard or Premium")
			}
		case keys.AnnotationAzureWAFPolicy:
			if !wafID.MatchString(v) {
				bad(k, "want the resource id of a Front Door WAF policy: /subscriptions/{id}/resourceGroups/{group}/providers/Microsoft.Network/FrontDoorWebApplicationFirewallPolicies/{name} (a letter, then letters and digits)")
			}
			s.WAFPolicyID = v
		case keys.AnnotationAzureProbePath:
			if !probePath.MatchString(v) || len(v) > 260 {
				bad(k, "want an absolute path of at most 260 characters, such as /healthz")
			}
			s.ProbePath = v
		case keys.AnnotationAzureProbeProtocol:
			switch strings.ToLower(v) {
			case "http":
				s.ProbeProtocol = "Http"
			case "https":
				s.ProbeProtocol = "Https"
			default:
				bad(k, "want Http or Https")
			}
		case keys.AnnotationAzureProbeMethod:
			switch strings.ToUpper(v) {
			case "HEAD", "GET":
				s.ProbeMethod = strings.ToUpper(v)
			default:
				bad(k, "want HEAD or GET")
			}
		case keys.AnnotationAzureProbeInterval:
			if n, ok := intIn(v, 1, 255); ok {
				s.ProbeIntervalSecs = n
			} else {
				bad(k, "want whole seconds from 1 to 255")
			}
		case keys.AnnotationAzureSampleSize:
			if n, ok := intIn(v, 1, 255); ok {
				s.SampleSize = n
			} else {
				bad(k, "want a number of samples from 1 to 255")
			}
		case keys.AnnotationAzureSuccessfulSamples:
			if n, ok := intIn(v, 1, 255); ok {
				s.SuccessfulSamples = n
			} else {
				bad(k, "want a number of samples from 1 to 255")
			}
		case keys.AnnotationAzureOriginHostHeader:
			if len(v) > 253 || !hostname.MatchString(v) {
				bad(k, "want a host name such as app.example.com")
			}
			s.OriginHostHeader = strings.ToLower(v)
		case keys.AnnotationAzureConnectivity:
			switch Connectivity(v) {
			case ConnectivityPublic, ConnectivityPrivateLink:
				s.Connectivity = Connectivity(v)
			default:
				bad(k, "want public or private-link")
			}
		case keys.AnnotationAzurePLSResourceGroup:
			if !resourceGroup.MatchString(v) || strings.HasSuffix(v, ".") {
				bad(k, "want a resource group name (1 to 90 letters, digits, '-', '_', '.', '(' or ')', not ending with '.')")
			}
			s.PLSResourceGroup = v
		case keys.AnnotationAzureListenerCertificates:
			certs, reason := listenerCertificates(v)
			if reason != "" {
				bad(k, reason)
			}
			s.ListenerCertificates = certs
		case keys.AnnotationAzureOperations:
			// the controller's own; not a setting
		default:
			bad(k, fmt.Sprintf("unknown annotation with prefix %s; known: %s", keys.AzureAnnotationPrefix, strings.Join(Known, ", ")))
		}
	}
	if len(errs) > 0 {
		return s, errors.Join(errs...)
	}
	// Combinations, named by the annotation that makes them wrong.
	if s.SuccessfulSamples > s.SampleSize {
		k := keys.AnnotationAzureSuccessfulSamples
		if !seen[k] {
			k = keys.AnnotationAzureSampleSize
		}
		bad(k, fmt.Sprintf("%d successful samples of %d: the successful samples cannot exceed the sample size", s.SuccessfulSamples, s.SampleSize))
	}
	if s.Connectivity == ConnectivityPrivateLink && s.SKU != SKUPremium {
		k := keys.AnnotationAzureConnectivity
		errs = append(errs, &Error{Key: k, Value: ann[k], Reason: fmt.Sprintf("Private Link origins need Front Door Premium, and the tier is %s (%s or the GatewayClass)", s.SKU, keys.AnnotationAzureSKU)})
	}
	if seen[keys.AnnotationAzurePLSResourceGroup] && s.Connectivity != ConnectivityPrivateLink {
		bad(keys.AnnotationAzurePLSResourceGroup, fmt.Sprintf("only meaningful with %s=private-link", keys.AnnotationAzureConnectivity))
	}
	return s, errors.Join(errs...)
}

// listenerCertificates splits the entries <listener>=<reference>
// (comma-separated, blanks around them ignored), or says what is wrong
// with their syntax.
func listenerCertificates(v string) (map[string]string, string) {
	out := map[string]string{}
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		l, ref, ok := strings.Cut(e, "=")
		l, ref = strings.TrimSpace(l), strings.TrimSpace(ref)
		if !ok || l == "" || ref == "" {
			return nil, fmt.Sprintf("entry %q: want <listener name>=<Key Vault secret resource id>, entries separated by commas", e)
		}
		if _, dup := out[l]; dup {
			return nil, fmt.Sprintf("listener %s is named twice", l)
		}
		out[l] = ref
	}
	if len(out) == 0 {
		return nil, "want <listener name>=<Key Vault secret resource id>, entries separated by commas"
	}
	return out, ""
}

// keyVaultSecret is the shape Front Door documents for a customer
// certificate's secretSource ("Secrets - Create" and "AFD Profiles -
// Validate Secret", secretSource: "Expected to be in format of
// /subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/Microsoft.KeyVault/vaults/{vaultName}/secrets/{secretName}",
// https://learn.microsoft.com/rest/api/frontdoor/azurefrontdoorstandardpremium/afd-profiles/validate-secret).
// Vault names are 3 to 24 letters, digits and hyphens; secret names 1 to
// 127 letters, digits and hyphens (Microsoft.KeyVault/vaults/secrets).
var keyVaultSecret = regexp.MustCompile(`(?i)^/subscriptions/[^/]+/resourceGroups/[-\w._()]{1,90}/providers/Microsoft\.KeyVault/vaults/[a-z0-9-]{3,24}/secrets/[a-z0-9-]{1,127}$`)

// KeyVaultSecret checks that ref is a Key Vault secret's resource id (a
// Key Vault certificate is read through the secret of the same name),
// and says what is wrong otherwise.
func KeyVaultSecret(ref string) error {
	if keyVaultSecret.MatchString(ref) {
		return nil
	}
	if strings.HasPrefix(strings.ToLower(ref), "https://") {
		return errors.New("want the Key Vault secret's resource id, not its URL: /subscriptions/{id}/resourceGroups/{group}/providers/Microsoft.KeyVault/vaults/{vault}/secrets/{name}")
	}
	return errors.New("want a Key Vault secret's resource id: /subscriptions/{id}/resourceGroups/{group}/providers/Microsoft.KeyVault/vaults/{vault}/secrets/{name}")
}

func intIn(v string, lo, hi int) (int32, bool) {
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi || strconv.Itoa(n) != v {
		return 0, false
	}
	return int32(n), true
}
