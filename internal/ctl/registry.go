package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/registry/client"
	"github.com/spf13/cobra"
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
	pf.StringVar(&f.Token, "token", "", "bearer token instead of a client certificate")
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
		&cobra.Command{Use: "imports", Short: "List merged imports", Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return f.run(cmd, func(ctx context.Context, c registryv1.RegistryClient) (proto.Message, error) {
					return c.ListImports(ctx, &registryv1.ListImportsRequest{})
				}, importsTable)
			}},
		&cobra.Command{Use: "evict CLUSTER", Short: "Remove a cluster and all its records (admin)", Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return f.run(cmd, func(ctx context.Context, c registryv1.RegistryClient) (proto.Message, error) {
					return c.EvictCluster(ctx, &registryv1.EvictClusterRequest{ClusterId: args[0]})
				}, func(w io.Writer, _ proto.Message) { fmt.Fprintf(w, "cluster %s evicted\n", args[0]) })
			}},
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
		return err
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
	fmt.Fprintln(w, "CLUSTER\tCLUSTERSET\tREGION\tLIVE\tREGISTERED")
	for _, c := range m.(*registryv1.ListClustersResponse).GetClusters() {
		fmt.Fprintf(w, "%s\t%s\t%s\t%v\t%s\n", c.GetId(), c.GetClustersetId(), dash(c.GetRegion()), c.GetLive(), c.GetRegisteredAt().AsTime().Format(time.RFC3339))
	}
}

func exportsTable(w io.Writer, m proto.Message) {
	resp := m.(*registryv1.ListExportsResponse)
	type key struct{ ns, name, cluster string }
	statuses := map[key]*registryv1.ExportStatus{}
	for _, s := range resp.GetStatuses() {
		statuses[key{s.GetKey().GetNamespace(), s.GetKey().GetName(), s.GetKey().GetClusterId()}] = s
	}
	fmt.Fprintln(w, "NAMESPACE\tNAME\tCLUSTER\tTYPE\tPORTS\tPARTICIPATING\tCHUNKS\tCONFLICTS")
	for _, e := range resp.GetExports() {
		s := statuses[key{e.GetKey().GetNamespace(), e.GetKey().GetName(), e.GetKey().GetClusterId()}]
		var conflicts []string
		for _, c := range s.GetConflicts() {
			conflicts = append(conflicts, c.GetReason())
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%v\t%d\t%s\n", e.GetKey().GetNamespace(), e.GetKey().GetName(), e.GetKey().GetClusterId(),
			e.GetType(), ports(e.GetPorts()), s.GetParticipating(), len(s.GetEndpointChunks()), dash(strings.Join(conflicts, ",")))
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
