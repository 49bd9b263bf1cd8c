package ctl

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fleetnet/fleetnet/internal/diagnose"
	"github.com/fleetnet/fleetnet/internal/registry/client"
	"github.com/fleetnet/fleetnet/internal/scheme"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
)

type diagnoseFlags struct {
	registry   client.Options
	kubeconfig string
	contexts   map[string]string
	dns        string
	clusterDNS string
	dnsTimeout time.Duration
	timeout    time.Duration
	hub        string
	edges      []string
}

func newDiagnoseCommand() *cobra.Command {
	f := &diagnoseFlags{}
	cmd := &cobra.Command{
		Use:   "diagnose CLUSTER/NAMESPACE/SERVICE",
		Short: "Say where the path of a multi-cluster service to a cluster breaks",
		Long: `Walks the path of NAMESPACE/SERVICE to the importing cluster CLUSTER and
marks each step ✓ (holds), ✗ (breaks), ! (holds, with something off) or -
(not checked), with what was found and what to do:

  the ServiceExport and its Valid, Ready and Conflict conditions in every
  exporting cluster; the registry's export from each, its merge status and
  the cluster's lease; the merged import; in CLUSTER the lease, the namespace,
  the ServiceImport and its conditions, the derived Service and the imported
  EndpointSlices (ready endpoints per source cluster); the answer of
  CLUSTER's fleetnet-dns (--dns) and of its own resolver (--cluster-dns),
  which must forward the clusterset zone; and for a service published
  through the edge, the hub's HTTPRoutes and MultiClusterLoadBalancers that
  have the ServiceImport as a backend (--hub: their Accepted and
  ResolvedRefs conditions, their Gateways' Programmed) and each edge's
  health of its endpoints per cluster (--edge-metrics, read from the
  edge's fleetnet_edge_backend_endpoints and fleetnet_edge_l4_endpoints).

Each cluster is read through the kubeconfig's context of the cluster's id,
or the one --context CLUSTER=CONTEXT names. The registry is asked with an
admin or cluster identity (--cert-file/--key-file or --token-file).

Exits with 1 when a step breaks.`,
		Example: `  fleetnetctl diagnose hub/demo/echo --kubeconfig .fleetnet/dev/kubeconfig \
    --registry 127.0.0.1:7443 --ca-file .fleetnet/dev/certs/ca.crt \
    --cert-file .fleetnet/dev/certs/admin.crt --key-file .fleetnet/dev/certs/admin.key \
    --dns 127.0.0.1:17453 --hub hub --edge-metrics http://127.0.0.1:17407/metrics`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := parseTarget(args[0])
			if err != nil {
				return err
			}
			src, closeRegistry, err := f.sources()
			if err != nil {
				return err
			}
			defer closeRegistry()
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			steps := diagnose.Diagnose(diagnose.Gather(ctx, t, src))
			if err := diagnose.Write(cmd.OutOrStdout(), t, steps); err != nil {
				return err
			}
			if diagnose.Failed(steps) {
				// The report says what broke; no message of our own.
				return ExitError{Code: 1}
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.registry.Address, "registry", "127.0.0.1:7443", `registry address ("" to leave the registry out)`)
	fs.StringVar(&f.registry.CAFile, "ca-file", "certs/ca.crt", "CA that signed the registry's certificate")
	fs.StringVar(&f.registry.CertFile, "cert-file", "", "client certificate")
	fs.StringVar(&f.registry.KeyFile, "key-file", "", "client key")
	fs.StringVar(&f.registry.TokenFile, "token-file", "", "file holding a bearer token, instead of a client certificate")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig with a context per cluster (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringToStringVar(&f.contexts, "context", nil, "CLUSTER=CONTEXT: the kubeconfig context of a cluster whose context is not named like its id (repeatable)")
	fs.StringVar(&f.dns, "dns", "", "HOST:PORT of CLUSTER's fleetnet-dns, to check its answer")
	fs.StringVar(&f.clusterDNS, "cluster-dns", "", "HOST:PORT of CLUSTER's own resolver (its CoreDNS), to check that it forwards the clusterset zone")
	fs.DurationVar(&f.dnsTimeout, "dns-timeout", 2*time.Second, "how long a DNS server has to answer")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "how long the whole diagnosis may take")
	fs.StringVar(&f.hub, "hub", "", "the cluster whose Gateways, HTTPRoutes and MultiClusterLoadBalancers fleetnet-gateway serves, to check the routes that publish the service")
	fs.StringArrayVar(&f.edges, "edge-metrics", nil, "metrics URL of a fleetnet-edge (http://HOST:PORT/metrics), to check its health of the service's endpoints (repeatable)")
	return cmd
}

// parseTarget parses CLUSTER/NAMESPACE/SERVICE.
func parseTarget(s string) (diagnose.Target, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 || parts[0] == "" {
		return diagnose.Target{}, fmt.Errorf("%q: want CLUSTER/NAMESPACE/SERVICE", s)
	}
	for _, p := range parts[1:] {
		if errs := validation.IsDNS1123Label(p); len(errs) > 0 {
			return diagnose.Target{}, fmt.Errorf("%q: %q: %s", s, p, strings.Join(errs, "; "))
		}
	}
	return diagnose.Target{Cluster: parts[0], Namespace: parts[1], Name: parts[2]}, nil
}

// sources connects to the registry (lazily: an unreachable registry is a
// step of the report, not an error here) and reads the kubeconfig.
func (f *diagnoseFlags) sources() (diagnose.Sources, func(), error) {
	src := diagnose.Sources{DNS: f.dns, ClusterDNS: f.clusterDNS, DNSTimeout: f.dnsTimeout, Hub: f.hub, EdgeMetrics: f.edges}
	closeRegistry := func() {}
	if f.registry.Address != "" {
		src.RegistryAddress = f.registry.Address
		// Files that do not load are a broken step of the report, beside
		// what the clusters say, rather than the end of the diagnosis.
		if c, conn, err := client.Dial(f.registry); err != nil {
			src.RegistryErr = err
		} else {
			src.Registry = c
			closeRegistry = func() { conn.Close() }
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	raw, err := rules.Load()
	if err != nil {
		closeRegistry()
		return src, nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	for cluster, name := range f.contexts {
		if _, ok := raw.Contexts[name]; !ok {
			closeRegistry()
			return src, nil, fmt.Errorf("--context %s=%s: the kubeconfig has no context %q", cluster, name, name)
		}
		src.Clusters = append(src.Clusters, cluster)
	}
	src.Cluster = func(id string) (ctrlclient.Reader, error) {
		name, ok := f.contexts[id]
		if !ok {
			name = id
		}
		if _, ok := raw.Contexts[name]; !ok {
			return nil, fmt.Errorf("the kubeconfig has no context %q", name)
		}
		cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, name, &clientcmd.ConfigOverrides{}, rules).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("kubeconfig context %q: %w", name, err)
		}
		// An unreachable API server is a step of the report, reached soon.
		cfg.Timeout = 10 * time.Second
		c, err := ctrlclient.New(cfg, ctrlclient.Options{Scheme: scheme.Scheme})
		if err != nil {
			return nil, fmt.Errorf("kubeconfig context %q: %w", name, err)
		}
		return c, nil
	}
	return src, closeRegistry, nil
}
