package ctl

import (
	"cmp"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
	"github.com/fleetnet/fleetnet/internal/discovery/client"
	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// discoveryFlags are the flags every discovery command shares: where the
// server is, who we are, and how to print.
type discoveryFlags struct {
	server            string
	caFile            string
	certFile, keyFile string
	token, tokenFile  string
	output            string
	// filters
	namespace, selector, region string
}

func newDiscoveryCommand() *cobra.Command {
	f := &discoveryFlags{}
	cmd := &cobra.Command{
		Use:   "discovery",
		Short: "Read fleetnet-discovery: pools, router replicas and the watch",
		Long: `Reads a fleetnet-discovery server's HTTP API (/v1/): the pools of endpoints
across the fleet, grouped by cluster and region, the router replicas, and the
watch of changes. A token (--token-file) or a client certificate of the fleet
CA (--cert-file, --key-file) authenticates; either needs the read role.`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.server, "server", "http://127.0.0.1:7480", "fleetnet-discovery's URL")
	pf.StringVar(&f.caFile, "ca-file", "", "CA that signed the server's certificate (https); empty trusts the system's roots")
	pf.StringVar(&f.certFile, "cert-file", "", "client certificate (mutual TLS)")
	pf.StringVar(&f.keyFile, "key-file", "", "client key")
	pf.StringVar(&f.tokenFile, "token-file", "", "file holding a bearer token")
	pf.StringVar(&f.token, "token", "", "bearer token (visible to anyone who can list processes: prefer --token-file)")
	pf.StringVarP(&f.output, "output", "o", "table", "output format: table, wide, json or yaml")

	cmd.AddCommand(f.poolsCommand(), f.routersCommand(), f.watchCommand())
	return cmd
}

// poolsCommand is `discovery pools`: a list or one pool, as a table or the
// API's answer.
func (f *discoveryFlags) poolsCommand() *cobra.Command {
	pools := &cobra.Command{
		Use:   "pools [NAMESPACE/NAME]",
		Short: "List pools, or get one, with their clusters, regions and endpoints",
		Long: `Lists the pools (or gets one). The table has a row per pool and cluster with
its ready endpoints; -o wide adds the zones, ports, instance ids and the
pool's labels; -o json and -o yaml print the API's answer.`,
		Example: `  fleetnetctl discovery pools --server https://discovery:7480 --ca-file certs/ca.crt --token-file token
  fleetnetctl discovery pools -n demo -l tier=web --region eu-west-1 -o wide
  fleetnetctl discovery pools demo/echo -o yaml`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if len(args) == 1 {
				ns, name, ok := strings.Cut(args[0], "/")
				if !ok || ns == "" || name == "" {
					return fmt.Errorf("pool %q: want NAMESPACE/NAME", args[0])
				}
				if f.namespace != "" || f.selector != "" {
					return errors.New("--namespace and --selector filter lists: not with a pool's name")
				}
				p, err := c.GetPool(cmd.Context(), ns, name)
				if err != nil {
					return err
				}
				if f.region != "" {
					p = inRegion(p, f.region)
				}
				return f.print(cmd.OutOrStdout(), p, func(w io.Writer) { poolsTable(w, []discoveryv1.Pool{*p}, f.output == "wide") })
			}
			list, err := c.ListPools(cmd.Context(), client.ListOptions{Namespace: f.namespace, LabelSelector: f.selector, Region: f.region})
			if err != nil {
				return err
			}
			if !list.Synced {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning: the server's pool source is not synced yet; pools may be missing")
			}
			return f.print(cmd.OutOrStdout(), list, func(w io.Writer) { poolsTable(w, list.Pools, f.output == "wide") })
		},
	}
	f.addFilters(pools)
	return pools
}

// routersCommand is `discovery routers`.
func (f *discoveryFlags) routersCommand() *cobra.Command {
	routers := &cobra.Command{
		Use:   "routers",
		Short: "List the router replicas",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			list, err := c.Routers(cmd.Context())
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), list, func(w io.Writer) { routersTable(w, list.Routers, f.output == "wide") })
		},
	}
	return routers
}

// watchCommand is `discovery watch`: the pools, then a line per change.
func (f *discoveryFlags) watchCommand() *cobra.Command {
	var revision int64
	watch := &cobra.Command{
		Use:   "watch",
		Short: "Print the pools, then every change, until interrupted",
		Long: `Watches the pools: a snapshot (one line per pool, then SYNCED), then a line
per change. The watch resumes by itself from the last revision after a
disconnect; a server that no longer holds that revision sends RESET and a
fresh snapshot. -o json prints one event per line (newline-delimited JSON),
-o yaml one document per event. --region keeps only that region's clusters
in what is printed.`,
		Example: `  fleetnetctl discovery watch -n demo
  fleetnetctl discovery watch --revision 1764547200000123 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			// A stream cannot be aligned by a tabwriter (it would wait for
			// the end): fixed widths, wide enough for a revision and the
			// events.
			const line = "%-17v  %-8s  %-16s  %-16s  %s\n"
			if f.isTable() {
				fmt.Fprintf(out, line, "REVISION", "EVENT", "NAMESPACE", "NAME", "CLUSTERS")
			}
			err = c.Watch(cmd.Context(), client.WatchOptions{Namespace: f.namespace, LabelSelector: f.selector, Revision: revision}, func(e discoveryv1.Event) error {
				if e.Pool != nil && f.region != "" {
					e.Pool = inRegion(e.Pool, f.region)
				}
				if !f.isTable() {
					return f.print(out, e, nil)
				}
				ns, name, clusters := "-", "-", "-"
				if e.Pool != nil {
					ns, name = e.Pool.Namespace, e.Pool.Name
					if e.Type != discoveryv1.EventDelete {
						clusters = clusterSummary(e.Pool.Clusters)
					}
				}
				_, err := fmt.Fprintf(out, line, e.Revision, strings.ToUpper(string(e.Type)), ns, name, clusters)
				return err
			})
			if cmd.Context().Err() != nil {
				return nil // interrupted: the normal end
			}
			return err
		},
	}
	f.addFilters(watch)
	watch.Flags().Int64Var(&revision, "revision", 0, "resume after this revision (0: start with a snapshot)")
	return watch
}

// addFilters adds the flags that narrow pools: namespace, label selector
// and region.
func (f *discoveryFlags) addFilters(c *cobra.Command) {
	c.Flags().StringVarP(&f.namespace, "namespace", "n", "", "only pools of this namespace")
	c.Flags().StringVarP(&f.selector, "selector", "l", "", "only pools whose labels match this selector (Kubernetes syntax, e.g. tier=web,env!=dev)")
	c.Flags().StringVar(&f.region, "region", "", "only the clusters of this region")
}

func (f *discoveryFlags) isTable() bool { return f.output == "table" || f.output == "wide" }

// client builds a discovery client from the flags, checking them first.
// The watch's reconnections are logged to stderr.
func (f *discoveryFlags) client(stderr io.Writer) (*client.Client, error) {
	switch f.output {
	case "table", "wide", "json", "yaml":
	default:
		return nil, fmt.Errorf("--output=%q: must be table, wide, json or yaml", f.output)
	}
	if (f.certFile == "") != (f.keyFile == "") {
		return nil, fmt.Errorf("--cert-file=%q and --key-file=%q: give both or neither", f.certFile, f.keyFile)
	}
	if f.token != "" && f.tokenFile != "" {
		return nil, fmt.Errorf("--token and --token-file=%q: give one", f.tokenFile)
	}
	token := f.token
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		if token = strings.TrimSpace(string(b)); token == "" {
			return nil, fmt.Errorf("--token-file=%q: the file is empty", f.tokenFile)
		}
	}
	if !strings.HasPrefix(f.server, "https://") && (f.caFile != "" || f.certFile != "") {
		return nil, fmt.Errorf("--server=%q: --ca-file and --cert-file need an https:// URL", f.server)
	}
	httpClient := &http.Client{}
	if strings.HasPrefix(f.server, "https://") {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		var cert *tls.Certificate
		if f.certFile != "" {
			c, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
			if err != nil {
				return nil, fmt.Errorf("--cert-file=%q --key-file=%q: %w", f.certFile, f.keyFile, err)
			}
			cert = &c
			cfg.Certificates = []tls.Certificate{c}
		}
		if f.caFile != "" {
			caPEM, err := os.ReadFile(f.caFile)
			if err != nil {
				return nil, fmt.Errorf("--ca-file: %w", err)
			}
			if cfg, err = pki.ClientTLS(caPEM, cert); err != nil {
				return nil, fmt.Errorf("--ca-file=%q: %w", f.caFile, err)
			}
		}
		httpClient.Transport = &http.Transport{TLSClientConfig: cfg, Proxy: http.ProxyFromEnvironment}
	}
	c, err := client.New(client.Options{BaseURL: f.server, HTTPClient: httpClient, Token: token, Log: slog.New(slog.NewTextHandler(stderr, nil))})
	if err != nil {
		return nil, fmt.Errorf("--server: %w", err)
	}
	return c, nil
}

// print writes v as JSON or YAML, or calls table.
func (f *discoveryFlags) print(out io.Writer, v any, table func(io.Writer)) error {
	switch f.output {
	case "json":
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if table != nil {
			// A single answer is indented; watch events stay one per line.
			var buf strings.Builder
			enc := json.NewEncoder(&buf)
			enc.SetIndent("", "  ")
			if err := enc.Encode(v); err != nil {
				return err
			}
			_, err = io.WriteString(out, buf.String())
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		if table == nil {
			_, err = fmt.Fprintf(out, "---\n%s", b)
			return err
		}
		_, err = out.Write(b)
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	table(tw)
	return tw.Flush()
}

// inRegion keeps only the clusters of region.
func inRegion(p *discoveryv1.Pool, region string) *discoveryv1.Pool {
	cp := *p
	cp.Clusters = nil
	for _, c := range p.Clusters {
		if c.Region == region {
			cp.Clusters = append(cp.Clusters, c)
		}
	}
	if cp.Clusters == nil {
		cp.Clusters = []discoveryv1.PoolCluster{}
	}
	return &cp
}

func readyCount(eps []discoveryv1.Endpoint) (ready, total int) {
	for _, e := range eps {
		if e.Ready {
			ready++
		}
	}
	return ready, len(eps)
}

// clusterSummary is "east(eu-west-1) 2/2, west 1/1": each cluster, its
// region, and its ready endpoints out of all.
func clusterSummary(cs []discoveryv1.PoolCluster) string {
	var out []string
	for _, c := range cs {
		r, n := readyCount(c.Endpoints)
		s := c.Cluster
		if c.Region != "" {
			s += "(" + c.Region + ")"
		}
		out = append(out, fmt.Sprintf("%s %d/%d", s, r, n))
	}
	return dash(strings.Join(out, ", "))
}

func poolsTable(w io.Writer, pools []discoveryv1.Pool, wide bool) {
	header := "NAMESPACE\tNAME\tCLUSTER\tREGION\tREADY\tREVISION"
	if wide {
		header += "\tZONES\tPORTS\tINSTANCES\tLABELS"
	}
	fmt.Fprintln(w, header)
	for _, p := range pools {
		clusters := p.Clusters
		if len(clusters) == 0 {
			clusters = []discoveryv1.PoolCluster{{}}
		}
		for _, c := range clusters {
			r, n := readyCount(c.Endpoints)
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d/%d\t%d", p.Namespace, p.Name, dash(c.Cluster), dash(c.Region), r, n, p.Revision)
			if wide {
				var zones, ports, ids []string
				for _, e := range c.Endpoints {
					if e.Zone != "" && !slices.Contains(zones, e.Zone) {
						zones = append(zones, e.Zone)
					}
					for _, pt := range e.Ports {
						if s := portString(pt); !slices.Contains(ports, s) {
							ports = append(ports, s)
						}
					}
					id := e.InstanceID
					switch {
					case e.Terminating:
						id += "(terminating)"
					case !e.Ready:
						id += "(not-ready)"
					}
					ids = append(ids, id)
				}
				fmt.Fprintf(w, "\t%s\t%s\t%s\t%s", dash(strings.Join(zones, ",")), dash(strings.Join(ports, ",")), dash(strings.Join(ids, ",")), labelString(p.Labels))
			}
			fmt.Fprintln(w)
		}
	}
}

func routersTable(w io.Writer, routers []discoveryv1.Router, wide bool) {
	header := "INSTANCE\tCLUSTER\tREGION\tADDRESS\tPORTS\tREADY"
	if wide {
		header += "\tZONE\tADDRESSES"
	}
	fmt.Fprintln(w, header)
	for _, r := range routers {
		var ports []string
		for _, p := range r.Ports {
			ports = append(ports, portString(p))
		}
		addr := "-"
		if len(r.Addresses) > 0 {
			addr = r.Addresses[0]
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%v", r.InstanceID, dash(r.Cluster), dash(r.Region), addr, dash(strings.Join(ports, ",")), r.Ready)
		if wide {
			fmt.Fprintf(w, "\t%s\t%s", dash(r.Zone), dash(strings.Join(r.Addresses, ",")))
		}
		fmt.Fprintln(w)
	}
}

func portString(p discoveryv1.Port) string {
	s := strconv.Itoa(int(p.Port)) + "/" + p.Protocol
	if p.Name != "" {
		s = p.Name + ":" + s
	}
	return s
}

func labelString(l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, cmp.Compare[string])
	var out []string
	for _, k := range keys {
		out = append(out, k+"="+l[k])
	}
	return dash(strings.Join(out, ","))
}
