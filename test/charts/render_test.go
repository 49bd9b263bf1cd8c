package charts

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fleetnet/fleetnet/internal/testkit"
)

// TestEveryChartIsTested fails when a chart is added without an entry in
// charts, which would leave it unchecked.
func TestEveryChartIsTested(t *testing.T) {
	found, err := filepath.Glob(filepath.Join(repoRoot(t), "charts", "*", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		name := filepath.Base(filepath.Dir(f))
		if !slices.ContainsFunc(charts, func(c chart) bool { return c.name == name }) {
			t.Errorf("charts/%s is not in test/charts' list of charts", name)
		}
	}
	if len(found) != len(charts) {
		t.Errorf("found %d charts, the list has %d", len(found), len(charts))
	}
}

// TestRender lints (strictly) and renders every chart with its default
// values and with each example values file. A chart whose defaults lack a
// required value must fail to render, naming every such value.
func TestRender(t *testing.T) {
	h := testkit.NewHelm(t)
	for _, c := range charts {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := chartDir(t, c.name)
			// helm lint reports a template's `fail` as information, so the
			// defaults lint cleanly either way; rendering is what fails.
			lint := h.Must(t, "lint", "--strict", dir)
			out, err := h.Run(t, "template", c.name, dir)
			switch {
			case len(c.required) == 0 && err != nil:
				t.Errorf("the default values do not render: %v\n%s", err, out)
			case len(c.required) > 0 && err == nil:
				t.Errorf("the default values render; want a failure naming %v", c.required)
			}
			for _, name := range c.required {
				if !strings.Contains(out, name) || !strings.Contains(lint, name) {
					t.Errorf("helm template and lint with the default values must name %s:\n%s\n%s", name, out, lint)
				}
			}
			exs := examples(t, c)
			if len(exs) == 0 {
				t.Errorf("charts/%s has no examples/*.yaml", c.name)
			}
			for _, ex := range exs {
				h.Must(t, "lint", "--strict", dir, "-f", ex)
				h.Must(t, "template", c.name, dir, "-f", ex)
			}
		})
	}
}

// TestWrongValues renders each chart with a wrong value and expects the
// failure to name it: the schema's JSON pointer, or the chart's own message.
func TestWrongValues(t *testing.T) {
	h := testkit.NewHelm(t)
	// Not the subtests' own folders: helm splits -f at commas, which
	// their names hold.
	dir := t.TempDir()
	for i, tc := range []struct {
		chart string
		set   []string // --set arguments
		file  string   // a values file's content
		want  string
	}{
		// The schema: types, names, formats and ranges.
		{chart: "fleetnet-registry", set: []string{"replicas=abc"}, want: "at '/replicas': got string, want integer"},
		{chart: "fleetnet-agent", set: []string{"replicas=abc"}, want: "at '/replicas': got string, want integer"},
		{chart: "fleetnet-gateway", set: []string{"replicas=abc"}, want: "at '/replicas': got string, want integer"},
		{chart: "fleetnet-edge", set: []string{"replicas=abc"}, want: "at '/replicas': got string, want integer"},
		{chart: "fleetnet-registry", set: []string{"replica=2"}, want: "additional properties 'replica' not allowed"},
		{chart: "fleetnet-agent", set: []string{"identity.clusterId=east"}, want: "additional properties 'clusterId' not allowed"},
		{chart: "fleetnet-registry", set: []string{"etcd.mode=sqlite"}, want: "at '/etcd/mode'"},
		{chart: "fleetnet-registry", set: []string{"leaseTTL=30"}, want: "at '/leaseTTL'"},
		{chart: "fleetnet-registry", set: []string{"gracePeriod=ten minutes"}, want: "at '/gracePeriod'"},
		{chart: "fleetnet-registry", set: []string{"tracing.otlpEndpoint=http://collector:4317"}, want: "at '/tracing/otlpEndpoint'"},
		{chart: "fleetnet-agent", set: []string{"tracing.otlpEndpoint=collector"}, want: "at '/tracing/otlpEndpoint'"},
		{chart: "fleetnet-agent", set: []string{"eastWest.gatewayService=eastwest"}, want: "at '/eastWest/gatewayService'"},
		{chart: "fleetnet-agent", set: []string{"eastWest.gatewayAddress=203.0.113.10"}, want: "at '/eastWest/gatewayAddress'"},
		{chart: "fleetnet-agent", set: []string{"eastWest.gatewayService=fleetnet-system/eastwest"}, want: "eastWest.secretName (the Secret of the east-west model stream's serving certificate"},
		{chart: "fleetnet-edge", set: []string{"eastWest.port=0"}, want: "at '/eastWest/port'"},
		{chart: "fleetnet-edge", set: []string{"eastWest.enabled=true"}, want: "eastWest.secretName is required with eastWest.enabled"},
		{chart: "fleetnet-registry", set: []string{"service.type=Ingress"}, want: "at '/service/type'"},
		{chart: "fleetnet-agent", set: []string{"identity.clusterID=East_1"}, want: "at '/identity/clusterID'"},
		{chart: "fleetnet-agent", set: []string{"identity.source=kubeconfig"}, want: "at '/identity/source'"},
		{chart: "fleetnet-agent", set: []string{"registry.auth=password"}, want: "at '/registry/auth'"},
		{chart: "fleetnet-agent", set: []string{"registry.address=registry.example.com"}, want: "at '/registry/address'"},
		{chart: "fleetnet-agent", set: []string{"importWorkers=100"}, want: "at '/importWorkers'"},
		{chart: "fleetnet-agent", set: []string{"extraArgs={v=2}"}, want: "at '/extraArgs/0'"},
		{chart: "fleetnet-agent", set: []string{"kubeAPI.qps=-1"}, want: "at '/kubeAPI/qps'"},
		{chart: "fleetnet-agent", set: []string{"flowControl.lendablePercent=150"}, want: "at '/flowControl/lendablePercent'"},
		{chart: "fleetnet-gateway", set: []string{"region=eu west"}, want: "at '/region'"},
		{chart: "fleetnet-gateway", set: []string{"gatewayAddresses=a.example.com"}, want: "at '/gatewayAddresses'"},
		{chart: "fleetnet-gateway", set: []string{"gatewayAddressPool=192.0.2.1"}, want: "at '/gatewayAddressPool'"},
		{chart: "fleetnet-edge", set: []string{"gateway.address=gateway"}, want: "at '/gateway/address'"},
		{chart: "fleetnet-edge", file: "listeners: [{name: HTTP, port: 80}]", want: "at '/listeners/0/name'"},
		{chart: "fleetnet-edge", file: "listeners: [{name: http, port: 80, protocol: SCTP}]", want: "at '/listeners/0/protocol'"},
		{chart: "fleetnet-edge", file: "listeners: []", want: "at '/listeners'"},
		{chart: "fleetnet-edge", set: []string{"clients.headerTimeout=10"}, want: "at '/clients/headerTimeout'"},
		{chart: "fleetnet-edge", set: []string{"clients.maxConnections=0"}, want: "at '/clients/maxConnections'"},
		{chart: "fleetnet-dns", set: []string{"replicas=two"}, want: "at '/replicas': got string, want integer"},
		{chart: "fleetnet-dns", set: []string{"clusterIp=10.96.0.53"}, want: "additional properties 'clusterIp' not allowed"},
		{chart: "fleetnet-dns", set: []string{"service.clusterIP=10.96.0.300"}, want: "at '/service/clusterIP'"},
		{chart: "fleetnet-dns", set: []string{"service.clusterIP=None"}, want: "at '/service/clusterIP'"},
		{chart: "fleetnet-dns", set: []string{"zone=Clusterset.Local"}, want: "at '/zone'"},
		{chart: "fleetnet-dns", set: []string{"zone=clusterset.local."}, want: "at '/zone'"},
		{chart: "fleetnet-dns", set: []string{"ttlSeconds=5s"}, want: "at '/ttlSeconds': got string, want integer"},
		{chart: "fleetnet-dns", set: []string{"ttlSeconds=7200"}, want: "at '/ttlSeconds'"},
		{chart: "fleetnet-dns", set: []string{"lameduckSeconds=-1"}, want: "at '/lameduckSeconds'"},
		{chart: "fleetnet-dns", set: []string{"ports.dns=53000000"}, want: "at '/ports/dns'"},
		{chart: "fleetnet-discovery", set: []string{"replicas=abc"}, want: "at '/replicas': got string, want integer"},
		{chart: "fleetnet-discovery", set: []string{"poolSource=etcd"}, want: "at '/poolSource'"},
		{chart: "fleetnet-discovery", set: []string{"kubernetes.sliceSelection=istio"}, want: "at '/kubernetes/sliceSelection'"},
		{chart: "fleetnet-discovery", set: []string{"kubernetes.routersService=router"}, want: "at '/kubernetes/routersService'"},
		{chart: "fleetnet-discovery", set: []string{"kubernetes.clusterName=Hub"}, want: "at '/kubernetes/clusterName'"},
		{chart: "fleetnet-discovery", set: []string{"kubernetes.poolLabels=exported"}, want: "at '/kubernetes/poolLabels'"},
		{chart: "fleetnet-discovery", set: []string{"memory.leaseTTL=30"}, want: "at '/memory/leaseTTL'"},
		{chart: "fleetnet-discovery", file: "routers: [router-a]", want: "at '/routers/0'"},
		{chart: "fleetnet-discovery", set: []string{"memory.routers={r=10.0.0.1:80}"}, want: "additional properties 'routers' not allowed"},
		{chart: "fleetnet-discovery", set: []string{"registry.auth=password"}, want: "at '/registry/auth'"},
		{chart: "fleetnet-discovery", set: []string{"registry.address=registry.example.com"}, want: "at '/registry/address'"},
		{chart: "fleetnet-discovery", set: []string{"tls.clientCA=ca"}, want: "additional properties 'clientCA' not allowed"},
		{chart: "fleetnet-discovery", set: []string{"service.type=ExternalName"}, want: "at '/service/type'"},
		// The charts' own checks, across values.
		{chart: "fleetnet-registry", set: []string{"replicas=2"}, want: "replicas=2: the embedded etcd is a single node"},
		{chart: "fleetnet-registry", set: []string{"etcd.mode=external"}, want: "etcd.external.endpoints is required with etcd.mode=external"},
		{chart: "fleetnet-registry", set: []string{"tls.certManager.enabled=true"}, want: "tls.certManager.issuerRef.name is required"},
		{chart: "fleetnet-gateway", set: []string{"tls.certManager.enabled=true"}, want: "tls.certManager.issuerRef.name"},
		{chart: "fleetnet-edge", set: []string{"tls.certManager.enabled=true"}, want: "tls.certManager.issuerRef.name is required"},
		{chart: "fleetnet-edge", file: "listeners: [{name: http, port: 80}, {name: www, port: 80}]", want: "listeners: port 80/TCP is listed twice"},
		{chart: "fleetnet-agent", set: []string{"serviceAccount.create=false"}, want: "serviceAccount.name is required"},
		{chart: "fleetnet-dns", set: []string{"serviceAccount.create=false"}, want: "serviceAccount.name is required"},
		{chart: "fleetnet-discovery", set: []string{"poolSource=memory"}, want: "replicas=2 with poolSource=memory"},
		{chart: "fleetnet-discovery", file: "routers: [\"r=10.0.0.1:80\"]", want: "routers is for poolSource=memory or registry"},
		{chart: "fleetnet-discovery", set: []string{"poolSource=registry"}, want: "registry.address is required with poolSource=registry"},
		{chart: "fleetnet-discovery", set: []string{"tls.clientCertificates=false"}, want: "no authentication: set tokens.secretName"},
		{chart: "fleetnet-discovery", set: []string{"tls.enabled=false", "tokens.secretName=tokens"}, want: "tls.clientCertificates needs tls.enabled"},
		{chart: "fleetnet-discovery", set: []string{"tls.certManager.enabled=true"}, want: "tls.certManager.issuerRef.name is required"},
	} {
		name := tc.chart + "/" + strings.Join(tc.set, ",") + tc.file
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := charts[slices.IndexFunc(charts, func(c chart) bool { return c.name == tc.chart })]
			chartDir := chartDir(t, c.name)
			args := []string{"template", c.name, chartDir}
			if c.base != "" {
				args = append(args, "-f", filepath.Join(chartDir, c.base))
			}
			if tc.file != "" {
				f := filepath.Join(dir, fmt.Sprintf("values-%d.yaml", i))
				if err := os.WriteFile(f, []byte(tc.file), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, "-f", f)
			}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			out, err := h.Run(t, args...)
			if err == nil {
				t.Fatalf("rendered; want a failure naming %q", tc.want)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("the failure does not say %q:\n%s", tc.want, out)
			}
		})
	}
}
