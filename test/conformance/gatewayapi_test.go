package conformance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/conformance"
	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
	"sigs.k8s.io/yaml"
)

// GatewayClass is the class the suite's Gateways get: fleetnet-gateway's,
// served by the fleet's fleetnet-edge.
const gatewayClass = "fleetnet"

// TestGatewayAPI runs the Gateway API conformance suite, profile
// GATEWAY-HTTP, against the hub of a local fleet whose fleetnet-gateway
// gives every Gateway an address of its own (`make conformance` brings it
// up). It writes the suite's ConformanceReport to $CONFORMANCE_REPORT and
// the count of passed and failed tests to $CONFORMANCE_SUMMARY.
func TestGatewayAPI(t *testing.T) {
	report, summary := os.Getenv("CONFORMANCE_REPORT"), os.Getenv("CONFORMANCE_SUMMARY")
	if os.Getenv("KUBECONFIG") == "" || report == "" || summary == "" {
		t.Fatal("KUBECONFIG (the hub's), CONFORMANCE_REPORT and CONFORMANCE_SUMMARY must be set: run `make conformance` (as root), which brings up a local fleet with `fleetnetctl dev up --gateway-address-pool=127.0.1.0/24` and sets them")
	}
	opts := conformance.DefaultOptions(t)
	opts.GatewayClassName = gatewayClass
	opts.ConformanceProfiles = []suite.ConformanceProfileName{suite.GatewayHTTPConformanceProfileName}
	// No features are named here: the suite reads them from the
	// GatewayClass's status.supportedFeatures, where fleetnet-gateway lists
	// what the edge implements (internal/gateway/provider/edge.Features),
	// so the claim tested is the claim users see.
	opts.SupportedFeatures = nil
	opts.CleanupBaseResources = true
	opts.CleanupTestResources = true
	opts.ReportOutputPath = report
	opts.Implementation = confv1.Implementation{
		Organization: "fleetnet",
		Project:      "fleetnet",
		URL:          "https://github.com/fleetnet/fleetnet",
		Version:      envOr("FLEETNET_VERSION", "dev"),
		Contact:      []string{"@fleetnet/maintainers"},
	}
	opts.Mode = "default"
	ensureGatewayClass(t, opts)
	// Cleanups run last first: this one reads the report the suite's own
	// cleanup writes.
	t.Cleanup(func() { writeSummary(t, report, summary) })
	conformance.RunConformanceWithOptions(t, opts)
}

// ensureGatewayClass makes the class the suite tests and waits until
// fleetnet-gateway has listed its features: the suite reads them once, as
// it starts.
func ensureGatewayClass(t *testing.T, opts suite.ConformanceOptions) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	gc := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: gatewayClass}, Spec: gwv1.GatewayClassSpec{ControllerName: keys.GatewayControllerName}}
	if err := opts.Client.Create(ctx, gc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating GatewayClass %s: %v", gatewayClass, err)
	}
	for {
		err := opts.Client.Get(ctx, client.ObjectKey{Name: gatewayClass}, gc)
		if err == nil && len(gc.Status.SupportedFeatures) > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("GatewayClass %s has no status.supportedFeatures after a minute (is fleetnet-gateway running? last error: %v)", gatewayClass, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// writeSummary writes "N passed, M failed" (and the skipped) of the
// GATEWAY-HTTP profile's core and extended tests, from the report.
func writeSummary(t *testing.T, report, summary string) {
	doc, err := os.ReadFile(report)
	if err != nil {
		t.Errorf("reading the conformance report: %v", err)
		return
	}
	var r confv1.ConformanceReport
	if err := yaml.Unmarshal(doc, &r); err != nil {
		t.Errorf("parsing the conformance report %s: %v", report, err)
		return
	}
	var lines []string
	for _, p := range r.ProfileReports {
		passed, failed, skipped := p.Core.Statistics.Passed, p.Core.Statistics.Failed, p.Core.Statistics.Skipped
		var failedTests []string
		failedTests = append(failedTests, p.Core.FailedTests...)
		if p.Extended != nil {
			passed += p.Extended.Statistics.Passed
			failed += p.Extended.Statistics.Failed
			skipped += p.Extended.Statistics.Skipped
			failedTests = append(failedTests, p.Extended.FailedTests...)
		}
		line := fmt.Sprintf("%s: %d passed, %d failed (%d skipped); core %s", p.Name, passed, failed, skipped, p.Core.Result)
		if len(failedTests) > 0 {
			line += "; failed: " + strings.Join(failedTests, ", ")
		}
		lines = append(lines, line)
	}
	if err := os.MkdirAll(filepath.Dir(summary), 0o755); err != nil {
		t.Error(err)
	}
	if err := os.WriteFile(summary, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Errorf("writing %s: %v", summary, err)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
