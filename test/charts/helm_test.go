// Package charts tests the Helm charts under charts/: they lint, render
// with their default values and every documented example, refuse wrong
// values naming them (render_test.go), install into a real API server and
// give the agent, fleetnet-dns and fleetnet-discovery the permissions they
// need (install_test.go, agent_test.go, dns_test.go, discovery_test.go).
//
// helm comes from bin/, built by `make tools`.
package charts

import (
	"os"
	"path/filepath"
	"testing"
)

// chart describes one chart under charts/.
type chart struct {
	name string
	// required are the values without a usable default: with the default
	// values the chart fails to render, naming each. The other charts
	// render with their defaults.
	required []string
	// base is an example that gives the required values, under which the
	// wrong-value cases of charts with required values are rendered.
	base string
}

var charts = []chart{
	{name: "fleetnet-registry"},
	{name: "fleetnet-agent", required: []string{"identity.clusterID", "identity.clustersetID", "registry.address"}, base: "examples/member.yaml"},
	{name: "fleetnet-gateway", required: []string{"clusterID"}, base: "examples/hub.yaml"},
	{name: "fleetnet-edge"},
	{name: "fleetnet-dns"},
	{name: "fleetnet-discovery"},
	{name: "fleetnet-console", required: []string{"registry.address"}, base: "examples/tls.yaml"},
}

// repoRoot is the checkout's root: tests run in test/charts.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("test/charts must run from its own folder: %v", err)
	}
	return root
}

func chartDir(t testing.TB, name string) string {
	return filepath.Join(repoRoot(t), "charts", name)
}

// examples lists a chart's example values files.
func examples(t testing.TB, c chart) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir(t, c.name), "examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}
