package annotations

import (
	"errors"
	"strings"
	"testing"

	"github.com/fleetnet/fleetnet/api/keys"
)

// FuzzParse parses any value of any Azure annotation, beside a second one:
// it never panics, every refusal is an *Error naming a key it was given,
// and accepted settings are within what Front Door takes (probe interval
// 1–255 s, samples 1–255 with successful ≤ sample size, a probe path
// starting with "/", Private Link only on Premium).
func FuzzParse(f *testing.F) {
	for _, k := range Known {
		f.Add(k, "", keys.AnnotationAzureSKU, "Premium", "Standard")
	}
	f.Add(keys.AnnotationAzureProbeInterval, "255", keys.AnnotationAzureSampleSize, "3", "")
	f.Add(keys.AnnotationAzureSuccessfulSamples, "9", keys.AnnotationAzureSampleSize, "3", "Premium")
	f.Add(keys.AnnotationAzureConnectivity, "private-link", keys.AnnotationAzureSKU, "Standard", "Premium")
	f.Add(keys.AnnotationAzureProbePath, "/healthz?x=1", keys.AnnotationAzureOriginHostHeader, "a..b", "")
	f.Add(keys.AzureAnnotationPrefix+"probe-pth", "/", "other", "x", "")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, class string) {
		ann := map[string]string{k1: v1, k2: v2}
		// The class's tier comes from the provider's configuration, which
		// Config.Validate keeps to these: not the user's input.
		tier := []SKU{"", SKUStandard, SKUPremium}[len(class)%3]
		s, err := Parse(ann, tier)
		if err != nil {
			for _, e := range unwrap(err) {
				var pe *Error
				if !errors.As(e, &pe) || (pe.Key != k1 && pe.Key != k2) {
					t.Fatalf("refusal %v is not an *Error about a key given (%q, %q)", e, k1, k2)
				}
			}
			return
		}
		switch {
		case s.ProbeIntervalSecs < 1 || s.ProbeIntervalSecs > 255:
			t.Fatalf("probe interval %d accepted", s.ProbeIntervalSecs)
		case s.SampleSize < 1 || s.SampleSize > 255 || s.SuccessfulSamples < 1 || s.SuccessfulSamples > s.SampleSize:
			t.Fatalf("samples %d of %d accepted", s.SuccessfulSamples, s.SampleSize)
		case !strings.HasPrefix(s.ProbePath, "/"):
			t.Fatalf("probe path %q accepted", s.ProbePath)
		case s.Connectivity == ConnectivityPrivateLink && s.SKU != SKUPremium:
			t.Fatalf("Private Link accepted on %s", s.SKU)
		case s.SKU != SKUStandard && s.SKU != SKUPremium:
			t.Fatalf("tier %q accepted", s.SKU)
		}
	})
}

// unwrap is the errors joined in err.
func unwrap(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
