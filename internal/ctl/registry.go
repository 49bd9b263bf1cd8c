package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/fleetnet/fleetnet/internal/registry/client"
	"github.com/fleetnet/fleetnet/internal/registry/load"
	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"
)

type registryFlags struct {
	client.Options
	output string
}

func newRegistryCommand() *cobra.Command {
	f := &registryFlags{}
	cmd := &cobra.Command{
		Use:   "registry",
		Short: "Inspect and administer the fleet registry",
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.Address, "registry", "127.0.0.1:7443", "registry address")
	pf.StringVar(&f.CAFile, "ca-file", "certs/ca.crt", "CA that signed the registry's certificate")
	pf.StringVar(&f.CertFile, "cert-file", "", "client certificate (admin for evict)")
	pf.StringVar(&f.KeyFile, "key-file", "", "client key")
	pf.StringVar(&f.TokenFile, "token-file", "", "file holding a bearer token, instead of a client certificate")
	pf.StringVar(&f.Token, "token", "", "bearer token instead of a client certificate (visible to anyone who can list processes: prefer --token-file)")
	pf.StringVarP(&f.output, "output", "o", "table", "output format: table, json or yaml")

	cmd.AddCommand(
		&cobra.Command{Use: "clusters", Short: "List clusters and their leases", Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return f.run(cmd, func(ctx context.Context, c registryv1.RegistryClient) (proto.Message, error) {
					return c.ListClusters(ctx, &registryv1.ListClustersRequest{})
				}, clustersTable)
			}},
		&cobra.Command{Use: "exports [CLUSTER]", Short: "List exports with their status", Args: cobra.MaximumNArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				req := &registryv1.ListExportsRequest{}
				if len(args) == 1 {
					req.ClusterId = args[0]
				}
				return f.run(cmd, func(ctx context.Context, c registryv1.RegistryClient) (proto.Message, error) {
					return c.ListExports(ctx, req)
				}, exportsTable)
			}},
		&cobra.Command{Use: "imports [CLUSTER]", Short: "List merged imports (as CLUSTER is sent them: the merge of the exports in whose scope it is)", Args: cobra.MaximumNArgs(1),
			Long: `Lists the merged imports. An administrator sees each merged from every
export; with CLUSTER, the imports the registry sends that cluster, each the
merge of the exports whose scope includes it. A cluster's own identity is
always shown its own.`,
			RunE: func(cmd *cobra.Command, args []string) error {
				req := &registryv1.ListImportsRequest{}
				if len(args) == 1 {
					req.ClusterId = args[0]
				}
				return f.run(cmd, func(ctx context.Context, c registryv1.RegistryClient) (proto.Message, error) {
					return c.ListImports(ctx, req)
				}, importsTable)
			}},
		&cobra.Command{Use: "evict CLUSTER", Short: "Remove a cluster and all its records (admin)", Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return f.run(cmd, func(ctx context.Context, c registryv1.RegistryClient) (proto.Message, error) {
					return c.EvictCluster(ctx, &registryv1.EvictClusterRequest{ClusterId: args[0]})
				}, func(w io.Writer, _ proto.Message) { fmt.Fprintf(w, "cluster %s evicted\n", args[0]) })
			}},
		newRegistryLoadCommand(f),
	)
	return cmd
}

func (f *registryFlags) run(cmd *cobra.Command, call func(context.Context, registryv1.RegistryClient) (proto.Message, error), table func(io.Writer, proto.Message)) error {
	switch f.output {
	case "table", "json", "yaml":
	default:
		return fmt.Errorf("--output=%s: must be table, json or yaml", f.output)
	}
	c, conn, err := client.Dial(f.Options)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
	defer cancel()
	msg, err := call(ctx, c)
	if err != nil {
		return withCredentialsHint(err, f.Options)
	}
	out := cmd.OutOrStdout()
	switch f.output {
	case "table":
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		table(tw, msg)
		return tw.Flush()
	default:
		b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(msg)
		if err != nil {
			return err
		}
		if f.output == "yaml" {
			var v any
			if err := json.Unmarshal(b, &v); err != nil {
				return err
			}
			if b, err = yaml.Marshal(v); err != nil {
				return err
			}
		}
		_, err = fmt.Fprintln(out, strings.TrimSpace(string(b)))
		return err
	}
}

func clustersTable(w io.Writer, m proto.Message) {
	fmt.Fprintln(w, "CLUSTER\tCLUSTERSET\tREGION\tLIVE\tREGISTERED\tAGENT")
	for _, c := range m.(*registryv1.ListClustersResponse).GetClusters() {
		fmt.Fprintf(w, "%s\t%s\t%s\t%v\t%s\t%s\n", c.GetId(), c.GetClustersetId(), dash(c.GetRegion()), c.GetLive(), c.GetRegisteredAt().AsTime().Format(time.RFC3339), dash(c.GetAgentVersion()))
	}
}

func exportsTable(w io.Writer, m proto.Message) {
	resp := m.(*registryv1.ListExportsResponse)
	type key struct{ ns, name, cluster string }
	statuses := map[key]*registryv1.ExportStatus{}
	for _, s := range resp.GetStatuses() {
		statuses[key{s.GetKey().GetNamespace(), s.GetKey().GetName(), s.GetKey().GetClusterId()}] = s
	}
	fmt.Fprintln(w, "NAMESPACE\tNAME\tCLUSTER\tTYPE\tPORTS\tPARTICIPATING\tCHUNKS\tCONFLICTS\tEXPORT-TO\tIMPORTED-BY")
	for _, e := range resp.GetExports() {
		s := statuses[key{e.GetKey().GetNamespace(), e.GetKey().GetName(), e.GetKey().GetClusterId()}]
		var conflicts []string
		for _, c := range s.GetConflicts() {
			conflicts = append(conflicts, c.GetReason())
		}
		scope, importedBy := "*", "*"
		if to, sel := e.GetExportTo(), e.GetExportToSelector(); len(to) > 0 || sel != "" {
			if sel != "" {
				to = append(slices.Clone(to), "selector("+sel+")")
			}
			scope, importedBy = strings.Join(to, ","), dash(strings.Join(s.GetImportedBy(), ","))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%v\t%d\t%s\t%s\t%s\n", e.GetKey().GetNamespace(), e.GetKey().GetName(), e.GetKey().GetClusterId(),
			e.GetType(), ports(e.GetPorts()), s.GetParticipating(), len(s.GetEndpointChunks()), dash(strings.Join(conflicts, ",")), scope, importedBy)
	}
}

func importsTable(w io.Writer, m proto.Message) {
	fmt.Fprintln(w, "NAMESPACE\tNAME\tTYPE\tPORTS\tIP-FAMILIES\tCLUSTERS")
	for _, i := range m.(*registryv1.ListImportsResponse).GetImports() {
		var clusters []string
		for _, c := range i.GetClusters() {
			clusters = append(clusters, c.GetClusterId())
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", i.GetKey().GetNamespace(), i.GetKey().GetName(), i.GetType(), ports(i.GetPorts()),
			strings.Join(i.GetIpFamilies(), ","), strings.Join(clusters, ","))
	}
}

func ports(ps []*registryv1.ServicePort) string {
	var out []string
	for _, p := range ps {
		s := fmt.Sprintf("%d/%s", p.GetPort(), p.GetProtocol())
		if p.GetName() != "" {
			s = p.GetName() + ":" + s
		}
		out = append(out, s)
	}
	return dash(strings.Join(out, ","))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// newRegistryLoadCommand runs the fleet load generator against a registry on
// this machine: simulated clusters get client certificates signed by the
// fleet CA (--ca-file and --ca-key-file), so the registry sees each as a
// cluster of its own.
func newRegistryLoadCommand(f *registryFlags) *cobra.Command {
	cfg := load.Config{}
	var caKeyFile, certDir string
	var keep bool
	cmd := &cobra.Command{
		Use:   "load",
		Short: "Load a registry on this machine with simulated clusters, and report timings",
		Long: `Simulates clusters, each a registry client with a certificate of its own
signed by the fleet CA: they register and renew their leases, export services
with endpoints, then watchers open (as agents do) and endpoints change at
--churn per second for --duration. Prints per-phase timings and latency
percentiles: the time from an endpoint write to each watcher and to all of
them, the bytes a watcher receives per change, lease renewals, and whether an
acknowledged write was lost. The exports are deleted and the clusters
deregistered at the end unless --keep is given.

The run is bounded (at most 1,000 clusters, 1,000,000 endpoints, 1,000
watchers, 10 minutes of churn) and talks only to loopback addresses.`,
		Example: `  fleetnetctl registry load --registry 127.0.0.1:7443 --ca-file certs/ca.crt --ca-key-file certs/ca.key \
    --clusters 20 --services 500 --exporters 3 --endpoints 20 --watchers 20 --churn 50 --duration 30s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if caKeyFile == "" {
				return fmt.Errorf("--ca-key-file is required: the simulated clusters' certificates are signed by the fleet CA")
			}
			ca, err := pki.LoadCA(f.CAFile, caKeyFile)
			if err != nil {
				return fmt.Errorf("--ca-file/--ca-key-file: %w", err)
			}
			if certDir == "" {
				if certDir, err = os.MkdirTemp("", "fleetnet-load-certs"); err != nil {
					return err
				}
				defer os.RemoveAll(certDir)
			}
			cfg.Cleanup = !keep
			rep, err := load.Run(cmd.Context(), cfg, load.Target{Address: f.Address, CAFile: f.CAFile, CA: ca, CertDir: certDir})
			if rep != nil {
				rep.Write(cmd.OutOrStdout())
			}
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&caKeyFile, "ca-key-file", "", "key of the fleet CA (--ca-file), to sign the simulated clusters' certificates")
	fs.StringVar(&certDir, "cert-dir", "", "where the simulated clusters' certificates are written (a temporary directory when empty)")
	fs.IntVar(&cfg.Clusters, "clusters", 10, "simulated clusters")
	fs.IntVar(&cfg.Services, "services", 100, "services exported in all")
	fs.IntVar(&cfg.ExportersPerService, "exporters", 3, "clusters exporting each service")
	fs.IntVar(&cfg.EndpointsPerExport, "endpoints", 20, "endpoints per export")
	fs.IntVar(&cfg.EndpointsPerChunk, "endpoints-per-chunk", 100, "endpoints per chunk (per source EndpointSlice)")
	fs.Float64Var(&cfg.Churn, "churn", 10, "endpoint changes per second during the churn phase")
	fs.IntVar(&cfg.Watchers, "watchers", 10, "import watches, as agents open them")
	fs.DurationVar(&cfg.Duration, "duration", 30*time.Second, "how long endpoints churn")
	fs.DurationVar(&cfg.Idle, "idle", 0, "a phase of lease renewals only after the churn")
	fs.IntVar(&cfg.Writers, "writers", 64, "writes in flight at once")
	fs.StringVar(&cfg.Prefix, "prefix", "load", "prefix of the simulated clusters' ids")
	fs.StringVar(&cfg.Namespace, "namespace", "fleetnet-load", "namespace of the exported services")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of the churn's choices")
	fs.BoolVar(&keep, "keep", false, "keep the exports and clusters at the end")
	return cmd
}

// withCredentialsHint says which flags authenticate when the registry
// refused the call or the TLS handshake (which gRPC reports as Unavailable).
func withCredentialsHint(err error, o client.Options) error {
	switch status.Code(err) {
	case codes.Unauthenticated, codes.PermissionDenied, codes.Unavailable:
	default:
		return err
	}
	given := "none given"
	switch {
	case o.CertFile != "":
		given = "--cert-file " + o.CertFile
	case o.TokenFile != "":
		given = "--token-file " + o.TokenFile
	case o.Token != "":
		given = "--token"
	}
	return fmt.Errorf("%w\n(the registry authenticates with --cert-file and --key-file, a certificate of the fleet CA in --ca-file, or --token-file; %s; evict needs an admin identity)", err, given)
}
