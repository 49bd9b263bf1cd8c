package ctl

import (
	"context"
	"fmt"
	"net/http"
	"text/tabwriter"
	"time"

	"github.com/fleetnet/fleetnet/api/skew"
	"github.com/fleetnet/fleetnet/internal/registry/client"
	"github.com/fleetnet/fleetnet/internal/skewcheck"
	"github.com/fleetnet/fleetnet/internal/version"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

func newVersionCommand() *cobra.Command {
	var reg client.Options
	var metricsURLs []string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print fleetnetctl's version and, given their addresses, the registry's and other components'",
		Long: `Prints fleetnetctl's version. With --registry, also the version the
registry answers with (any identity it accepts may ask); with --metrics, the
fleetnet_build_info of each component's /metrics (fleetnet-gateway,
fleetnet-edge, agents, ...). docs/upgrades.md says which mixes are supported.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintf(w, "COMPONENT\tVERSION\tREVISION\tFROM\n")
			i := version.Get()
			fmt.Fprintf(w, "fleetnetctl\t%s\t%s\t%s\n", i.Version, dash(i.Revision), i.Platform)
			var errs []error
			if reg.Address != "" {
				v, err := registryVersion(cmd.Context(), reg)
				if err != nil {
					errs = append(errs, err)
					v = "unknown"
				}
				fmt.Fprintf(w, "registry\t%s\t-\t%s\n", v, reg.Address)
			}
			for _, u := range metricsURLs {
				info, err := buildInfo(cmd.Context(), u)
				if err != nil {
					errs = append(errs, err)
					fmt.Fprintf(w, "?\tunknown\t-\t%s\n", u)
					continue
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", info.job, info.version, dash(info.revision), u)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			if len(errs) > 0 {
				return fmt.Errorf("some versions are unknown: %v", errs)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&reg.Address, "registry", "", "registry address(es) to ask for its version; none: not asked")
	f.StringVar(&reg.CAFile, "ca-file", "certs/ca.crt", "CA that signed the registry's certificate")
	f.StringVar(&reg.CertFile, "cert-file", "", "client certificate")
	f.StringVar(&reg.KeyFile, "key-file", "", "client key")
	f.StringVar(&reg.TokenFile, "token-file", "", "file holding a bearer token, instead of a client certificate")
	f.StringArrayVar(&metricsURLs, "metrics", nil, "a component's /metrics URL to read fleetnet_build_info from (repeatable)")
	return cmd
}

// registryVersion asks the registry's health service: every answer
// carries the registry's version (internal/skewcheck), also a refusal.
func registryVersion(ctx context.Context, o client.Options) (string, error) {
	_, conn, err := client.Dial(o)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var header metadata.MD
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header))
	if len(header.Get(skew.MetadataVersion)) > 0 {
		return skewcheck.ServerVersion(header), nil // a refusal still names it
	}
	if err != nil {
		return "", withCredentialsHint(fmt.Errorf("asking the registry at %s: %w", o.Address, err), o)
	}
	return skew.Unannounced + " (announces none: before v0.1.0)", nil
}

type componentInfo struct{ job, version, revision string }

// buildInfo reads fleetnet_build_info from a /metrics URL.
func buildInfo(ctx context.Context, url string) (componentInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return componentInfo{}, fmt.Errorf("--metrics=%s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return componentInfo{}, fmt.Errorf("reading %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return componentInfo{}, fmt.Errorf("reading %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return componentInfo{}, fmt.Errorf("parsing %s: %w", url, err)
	}
	mf := families["fleetnet_build_info"]
	if mf == nil || len(mf.GetMetric()) == 0 {
		return componentInfo{}, fmt.Errorf("%s has no fleetnet_build_info: a component before v0.1.0, or not fleetnet's", url)
	}
	info := componentInfo{job: "component"}
	for _, l := range mf.GetMetric()[0].GetLabel() {
		switch l.GetName() {
		case "version":
			info.version = l.GetValue()
		case "revision":
			info.revision = l.GetValue()
		case "program":
			info.job = l.GetValue()
		}
	}
	return info, nil
}
