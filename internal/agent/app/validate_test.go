package app_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/internal/agent/app"
	"github.com/fleetnet/fleetnet/internal/agent/identity"
	"github.com/fleetnet/fleetnet/internal/registry/client"
)

func TestOptionsValidate(t *testing.T) {
	valid := func() app.Options {
		return app.Options{
			Identity:           identity.Flags{Source: identity.SourceFlags, ClusterID: "east", ClusterSetID: "fleet", Region: "eu-west-1"},
			Registry:           client.Options{Address: "127.0.0.1:7443", CAFile: "ca.crt"},
			ExportResyncPeriod: 10 * time.Minute,
			ImportResyncPeriod: 10 * time.Minute,
			EndpointsPerSlice:  100,
			ImportWorkers:      4,
		}
	}
	tests := []struct {
		name string
		mod  func(*app.Options)
		// want are the substrings of the error; none means valid.
		want []string
	}{
		{"valid", func(*app.Options) {}, nil},
		{"no region", func(o *app.Options) { o.Identity.Region = "" }, nil},
		{"cluster id not a label", func(o *app.Options) { o.Identity.ClusterID = "Bad_ID" }, []string{`--cluster-id="Bad_ID": a lowercase RFC 1123 label`}},
		{"cluster id too long", func(o *app.Options) { o.Identity.ClusterID = strings.Repeat("a", 64) }, []string{`--cluster-id="` + strings.Repeat("a", 64) + `": must be no more than 63 characters`}},
		{"no cluster id", func(o *app.Options) { o.Identity.ClusterID = "" }, []string{`--cluster-id="": required`}},
		{"clusterset id not a label", func(o *app.Options) { o.Identity.ClusterSetID = "fleet_prod" }, []string{`--clusterset-id="fleet_prod": a lowercase RFC 1123 label`}},
		{"no clusterset id", func(o *app.Options) { o.Identity.ClusterSetID = "" }, []string{`--clusterset-id="": required`}},
		{"region not a label value", func(o *app.Options) { o.Identity.Region = "US West (Oregon)" }, []string{`--region="US West (Oregon)": a valid label must be`}},
		{"every identity flag bad at once", func(o *app.Options) {
			o.Identity = identity.Flags{Source: identity.SourceFlags, ClusterID: "-east", ClusterSetID: "Fleet", Region: "a b"}
		}, []string{`--cluster-id="-east"`, `--clusterset-id="Fleet"`, `--region="a b"`}},
		{"unknown source", func(o *app.Options) { o.Identity.Source = "dns" }, []string{`--cluster-identity-source="dns": must be "flags" or "clusterproperty"`}},
		// The ids come from ClusterProperties then; the id flags are ignored.
		{"clusterproperty ignores id flags", func(o *app.Options) {
			o.Identity = identity.Flags{Source: identity.SourceClusterProperty, ClusterID: "Bad_ID", Region: "eu-west-1"}
		}, nil},
		{"clusterproperty checks region", func(o *app.Options) {
			o.Identity = identity.Flags{Source: identity.SourceClusterProperty, Region: "US West"}
		}, []string{`--region="US West"`}},
		{"no registry", func(o *app.Options) { o.Registry.Address = "" }, []string{"--registry is required"}},
		{"no registry CA", func(o *app.Options) { o.Registry.CAFile = "" }, []string{"--registry-ca-file is required"}},
		{"export resync too short", func(o *app.Options) { o.ExportResyncPeriod = time.Millisecond }, []string{"--export-resync-period=1ms: must be at least 1s"}},
		{"import resync too short", func(o *app.Options) { o.ImportResyncPeriod = 0 }, []string{"--import-resync-period=0s: must be at least 1s"}},
		{"no import workers", func(o *app.Options) { o.ImportWorkers = 0 }, []string{"--import-workers=0: must be between 1 and 64"}},
		{"too many import workers", func(o *app.Options) { o.ImportWorkers = 65 }, []string{"--import-workers=65: must be between 1 and 64"}},
		{"empty slices", func(o *app.Options) { o.EndpointsPerSlice = 0 }, []string{"--endpoints-per-slice=0: must be between 1 and 1000"}},
		{"slices too large", func(o *app.Options) { o.EndpointsPerSlice = 1001 }, []string{"--endpoints-per-slice=1001: must be between 1 and 1000"}},
		{"negative API QPS", func(o *app.Options) { o.KubeAPIQPS = -1 }, []string{"--kube-api-qps=-1: must not be negative"}},
		{"API QPS without a burst", func(o *app.Options) { o.KubeAPIQPS, o.KubeAPIBurst = 50, 0 }, []string{"--kube-api-burst=0: must be at least 1"}},
		{"API QPS and burst", func(o *app.Options) { o.KubeAPIQPS, o.KubeAPIBurst = 50, 100 }, nil},
		{"identity and numbers together", func(o *app.Options) { o.Identity.ClusterID, o.ImportWorkers = "East", 0 }, []string{`--cluster-id="East"`, "--import-workers=0"}},
		{"an east-west gateway", func(o *app.Options) {
			o.EastWest = app.EastWestOptions{Address: "192.0.2.10:15008", Service: "fleetnet-system/fleetnet-eastwest", Ports: "15100-15999", ModelListen: ":15012", CertFile: "m.crt", KeyFile: "m.key"}
		}, nil},
		{"an east-west gateway address alone", func(o *app.Options) { o.EastWest.Address = "ew.example.com:15008" }, nil},
		{"east-west gateway address without port", func(o *app.Options) { o.EastWest.Address = "192.0.2.10" }, []string{`--eastwest-gateway-address="192.0.2.10": want host:port`}},
		{"east-west flags all bad", func(o *app.Options) {
			o.EastWest = app.EastWestOptions{Service: "eastwest", Ports: "16000-15000", ModelListen: "15012"}
		}, []string{`--eastwest-gateway-service="eastwest": want namespace/name`, "--eastwest-gateway-ports: port range \"16000-15000\"",
			`needs --eastwest-model-cert-file and --eastwest-model-key-file`, `--eastwest-model-listen="15012"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := valid()
			tt.mod(&o)
			err := o.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error containing %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
			if got := strings.Count(err.Error(), "\n") + 1; got != len(tt.want) {
				t.Errorf("Validate() gave %d errors, want %d: %q", got, len(tt.want), err)
			}
		})
	}
}
