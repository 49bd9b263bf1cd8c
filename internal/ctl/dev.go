package ctl

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/controlplane"
	"github.com/fleetnet/fleetnet/internal/dev"
	"github.com/fleetnet/fleetnet/internal/logging"
	"github.com/fleetnet/fleetnet/internal/node"
	"github.com/fleetnet/fleetnet/internal/registry/client"
	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const defaultDevDir = ".fleetnet/dev"

func newDevCommand() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local fleet on this machine (for demos and tests)",
		Long: `A local fleet: one etcd, per cluster a kube-apiserver, kube-controller-manager,
kube-scheduler and kwok with one fake node, a registry and an agent per cluster,
each a process of its own with its log in the fleet's folder.`,
	}
	cmd.PersistentFlags().StringVar(&dir, "dir", defaultDevDir, "the fleet's folder: state, certificates, kubeconfigs and logs")
	cmd.AddCommand(newDevUpCommand(&dir), newDevDownCommand(&dir), newDevStatusCommand(&dir), newDevLogsCommand(&dir),
		newDevStopCommand(&dir), newDevServeCommand(&dir), newDevAPIServerProxyCommand(),
		newDevNodeCommand(&dir), newDevContainerInitCommand())
	return cmd
}

func newDevUpCommand(dir *string) *cobra.Command {
	o := dev.Options{}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start the local fleet, or whatever of it is not running",
		Example: `  fleetnetctl dev up
  fleetnetctl dev up --clusters hub,east,west --dual-stack east`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tools, err := controlplane.FindBinaries()
			if err != nil {
				return err
			}
			o.Dir, o.Tools, o.Fleetnet, o.Detach, o.Progress = *dir, tools, fleetnetBinDir(tools), true, cmd.ErrOrStderr()
			if !cmd.Flags().Changed("nodes") {
				// As root, a fleet gets its data plane unless asked not
				// to; one that cannot have it here is refused rather than
				// quietly made without (a demo or test would then fail
				// far from the cause). Not root, there is no choice.
				o.Nodes = os.Geteuid() == 0
				if !o.Nodes {
					fmt.Fprintln(cmd.ErrOrStderr(), "a fleet without nodes (no Service data plane, no fleetnet-dns): nodes live in network namespaces, which needs root")
				}
			}
			// A fleet that exists keeps its shape unless asked otherwise.
			if s, err := dev.Load(*dir); err == nil {
				if cmd.Flags().Changed("nodes") && !o.Nodes && s.Nodes {
					return fmt.Errorf("--nodes=false: the fleet in %s has nodes; they are not taken away from a running fleet (`fleetnetctl dev down --dir %s` first)", s.Dir, s.Dir)
				}
				if cmd.Flags().Changed("regions") {
					have := map[string]string{}
					for _, c := range s.Clusters {
						if c.Region != "" {
							have[c.Name] = c.Region
						}
					}
					if !maps.Equal(have, o.Regions) {
						return fmt.Errorf("--regions=%v: the fleet in %s has regions %v; regions are set when a fleet is created (`fleetnetctl dev down --dir %s` first)", o.Regions, s.Dir, have, s.Dir)
					}
				}
				if !cmd.Flags().Changed("clusters") && !cmd.Flags().Changed("dual-stack") {
					o.Clusters, o.DualStack, o.Regions = nil, nil, nil
					for _, c := range s.Clusters {
						o.Clusters = append(o.Clusters, c.Name)
						if c.DualStack {
							o.DualStack = append(o.DualStack, c.Name)
						}
					}
				}
				if !cmd.Flags().Changed("networks") {
					o.Networks = map[string]string{}
					for _, c := range s.Clusters {
						if c.Network != "" {
							o.Networks[c.Name] = c.Network
						}
					}
				}
			}
			// The default regions name the default clusters only.
			if !cmd.Flags().Changed("regions") {
				for c := range o.Regions {
					if !slices.Contains(o.Clusters, c) {
						delete(o.Regions, c)
					}
				}
			}
			started := time.Now()
			s, err := dev.Up(cmd.Context(), o)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "fleet ready in %s\n", time.Since(started).Round(100*time.Millisecond))
			printUsage(cmd.OutOrStdout(), s)
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&o.Clusters, "clusters", []string{"hub", "east", "west"}, "names (and cluster ids) of the clusters; a fleet that exists keeps its own")
	cmd.Flags().StringToStringVar(&o.Regions, "regions", map[string]string{"hub": "eu-central", "east": "us-east", "west": "us-west"}, "CLUSTER=REGION for the agents' --region (imported slices carry it; discovery groups pools by it); clusters not named have none")
	cmd.Flags().StringToStringVar(&o.Networks, "networks", nil, "CLUSTER=NETWORK puts clusters on networks of their own (network namespaces whose pod ranges overlap the default network's, reached only through east-west gateways; needs nodes); clusters not named are on the default network")
	cmd.Flags().StringSliceVar(&o.DualStack, "dual-stack", nil, "clusters that get an IPv6 service CIDR and pod range as well (their Pods get an address of each family)")
	cmd.Flags().IntVar(&o.BasePort, "base-port", 17400, "first loopback port of the fleet; it uses 10 + 10 per cluster from there (and 6 more with --ha)")
	cmd.Flags().BoolVar(&o.HA, "ha", false, "run a 3-member etcd (shared by the API servers and the registry) and two registry replicas that clients fail over between, for fault drills; a fleet keeps what it was made with")
	cmd.Flags().StringVar(&o.GatewayAddressPool, "gateway-address-pool", "", "a loopback prefix (e.g. 127.0.1.0/24) from which every Gateway gets an address of its own, so that Gateways may share port numbers (as the Gateway API conformance suite's do); empty: every Gateway at 127.0.0.1")
	cmd.Flags().DurationVar(&o.LeaseTTL, "lease-ttl", 10*time.Second, "the registry's lease TTL: how soon a cluster whose agent stopped leaves the imports")
	cmd.Flags().BoolVar(&o.Nodes, "nodes", false, "give every cluster a node: kube-proxy (nftables) and fleetnet-dns in a network namespace, so that pods reach Services and ClusterSetIPs by name (needs root, and nft, ip and sysctl: make deps; the default when run as root, which then fails when nodes cannot be made)")
	return cmd
}

// fleetnetBinDir is where fleetnet-agent and fleetnet-registry are: beside
// this fleetnetctl when they are there, in bin/ otherwise.
func fleetnetBinDir(tools controlplane.Binaries) string {
	if exe, err := os.Executable(); err == nil {
		if _, err := os.Stat(filepath.Join(filepath.Dir(exe), dev.AgentBinary)); err == nil {
			return filepath.Dir(exe)
		}
	}
	return tools.Dir
}

func printUsage(w io.Writer, s *dev.State) {
	fmt.Fprintf(w, "\nThe fleet runs. Every cluster is a context of %s:\n", s.MergedKubeconfigPath())
	fmt.Fprintf(w, "  export KUBECONFIG=%s\n", s.MergedKubeconfigPath())
	for _, c := range s.Clusters {
		fmt.Fprintf(w, "  kubectl --context %-8s get serviceexports,serviceimports -A   # or KUBECONFIG=%s\n", c.Name, s.KubeconfigPath(c.Name))
	}
	ao := s.AdminClientOptions()
	fmt.Fprintf(w, "\nThe registry (%s), as the fleet's admin:\n", ao.Address)
	fmt.Fprintf(w, "  fleetnetctl registry imports --registry %s --ca-file %s --cert-file %s --key-file %s\n", ao.Address, ao.CAFile, ao.CertFile, ao.KeyFile)
	dirFlag := ""
	if s.Dir != mustAbs(defaultDevDir) {
		dirFlag = " --dir " + s.Dir
	}
	fmt.Fprintf(w, "\nfleetnet-discovery (the hub's imported pools), as the fleet's admin:\n  curl -s --cacert %s --cert %s --key %s %s/v1/pools\n", ao.CAFile, ao.CertFile, ao.KeyFile, s.DiscoveryURL())
	if u, err := s.ConsoleLoginURL(); err == nil {
		fmt.Fprintf(w, "\nfleetnet-console, the fleet in a browser on this machine (the URL logs in once, then a cookie does):\n  %s\n", u)
	}
	if s.Nodes {
		hub, last := s.Clusters[0], s.Clusters[len(s.Clusters)-1]
		fmt.Fprintf(w, "\nPods run on each cluster's process node; an echo Deployment and its Service, as a shortcut:\n")
		fmt.Fprintf(w, "  fleetnetctl dev serve%s --cluster %s --namespace demo --name echo --replicas 2\n", dirFlag, last.Name)
		fmt.Fprintf(w, "  kubectl --context %s apply -f - <<<'{\"apiVersion\":\"multicluster.x-k8s.io/v1beta1\",\"kind\":\"ServiceExport\",\"metadata\":{\"name\":\"echo\",\"namespace\":\"demo\"}}'\n", last.Name)
		fmt.Fprintf(w, "Connect by name from a pod:\n")
		fmt.Fprintf(w, "  kubectl --context %s create namespace demo\n", hub.Name)
		fmt.Fprintf(w, "  kubectl --context %s -n demo run client --image=nicolaka/netshoot -- sleep infinity\n", hub.Name)
		fmt.Fprintf(w, "  kubectl --context %s -n demo wait --for=condition=Ready pod/client\n", hub.Name)
		fmt.Fprintf(w, "  kubectl --context %s -n demo exec client -- curl -s http://echo.demo.svc.%s/\n", hub.Name, keys.ClustersetZone)
		fmt.Fprintf(w, "Nodes (kube-proxy, fleetnet-dns, the process node's pods):\n")
		for _, c := range s.Clusters {
			fmt.Fprintf(w, "  %-8s node %s, DNS %s (CoreDNS; clusterset.local from fleetnet-dns %s)\n", c.Name, c.NodeAddress(), c.ClusterDNSAddress(), c.DNSAddress())
		}
		if s.HasNetworks() {
			fmt.Fprintf(w, "Networks (pods reach other networks only through east-west gateways):\n")
			for _, c := range s.Clusters {
				network, gw := c.Network, ""
				if network == "" {
					network = "default (the host)"
				}
				if s.EastWestGateway(c) {
					gw = fmt.Sprintf(", east-west gateway %s (metrics %s)", s.EastWestAddress(c), s.EastWestMetricsAddress(c))
				}
				fmt.Fprintf(w, "  %-8s network %s, pods %s%s\n", c.Name, network, strings.Join(c.PodCIDRs, ","), gw)
			}
		}
	}
	fmt.Fprintf(w, "\nStatus, logs, stop:\n  fleetnetctl dev status%s | dev logs %s/agent | dev down\n", dirFlag, s.Clusters[0].Name)
}

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

func newDevDownCommand(dir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "down",
		Short: "Stop the local fleet and remove its folder, pods' namespaces and bridge",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return dev.Down(*dir, cmd.ErrOrStderr())
		},
	}
}

func newDevStopCommand(dir *string) *cobra.Command {
	var kill bool
	cmd := &cobra.Command{
		Use:     "stop COMPONENT",
		Short:   "Stop one component (a fault drill); `dev up` starts it again",
		Example: "  fleetnetctl dev stop west/agent\n  fleetnetctl dev stop registry --kill",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := dev.Stop(*dir, args[0], kill); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s stopped\n", args[0])
			return nil
		},
	}
	cmd.Flags().BoolVar(&kill, "kill", false, "SIGKILL instead of SIGTERM")
	return cmd
}

func newDevLogsCommand(dir *string) *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:     "logs COMPONENT",
		Short:   "Show a component's log (etcd, registry, CLUSTER/agent, CLUSTER/kube-apiserver, ...)",
		Example: "  fleetnetctl dev logs east/agent -f",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := dev.Load(*dir)
			if err != nil {
				return err
			}
			p, ok := s.Processes[args[0]]
			if !ok {
				return fmt.Errorf("component %q: the fleet's components are %s", args[0], strings.Join(s.Components(), ", "))
			}
			if !follow {
				f, err := os.Open(p.Log)
				if err != nil {
					return err
				}
				defer f.Close()
				_, err = io.Copy(cmd.OutOrStdout(), f)
				return err
			}
			tail := exec.CommandContext(cmd.Context(), "tail", "-n", "+1", "-F", p.Log)
			tail.Stdout, tail.Stderr = cmd.OutOrStdout(), cmd.ErrOrStderr()
			return tail.Run()
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing what is appended")
	return cmd
}

func newDevStatusCommand(dir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the fleet's processes, pods, clusters with their leases, and imports",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := dev.Load(*dir)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "COMPONENT\tPID\tSTATE\tLOG")
			for _, c := range s.Components() {
				p := s.Processes[c]
				state, pid := "stopped", "-"
				if p.Alive() {
					state, pid = "running", fmt.Sprint(p.Pid)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c, pid, state, dash(p.Log))
			}
			tw.Flush()
			if u, err := s.ConsoleLoginURL(); err == nil {
				fmt.Fprintf(out, "\nconsole: %s\n", u)
			}
			if s.Nodes {
				fmt.Fprintln(out)
				podsTable(cmd.Context(), tw, s)
				tw.Flush()
			}
			rc, conn, err := client.Dial(s.AdminClientOptions())
			if err != nil {
				return err
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
			defer cancel()
			clusters, err := rc.ListClusters(ctx, &registryv1.ListClustersRequest{})
			if err != nil {
				return fmt.Errorf("registry %s: %w", s.RegistryAddress(), err)
			}
			fmt.Fprintln(out)
			clustersTable(tw, clusters)
			tw.Flush()
			imports, err := rc.ListImports(ctx, &registryv1.ListImportsRequest{})
			if err != nil {
				return fmt.Errorf("registry %s: %w", s.RegistryAddress(), err)
			}
			fmt.Fprintln(out)
			importsTable(tw, imports)
			return tw.Flush()
		},
	}
}

// podsTable lists the Pods on the clusters' process nodes, as their API
// servers tell them, with the network the node made for each (address and
// namespace, from the fleet's state).
func podsTable(ctx context.Context, tw io.Writer, s *dev.State) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	fmt.Fprintln(tw, "POD\tNODE\tPHASE\tREADY\tADDRESS\tNETNS")
	var unreachable []string
	for _, c := range s.Clusters {
		pods, err := nodePods(ctx, s, c)
		if err != nil {
			unreachable = append(unreachable, fmt.Sprintf("%s: %v", c.Name, err))
			continue
		}
		for _, p := range pods {
			key := c.Name + "/" + p.Namespace + "/" + p.Name
			address, netNS := "-", "-"
			if rec, ok := s.Pods[key]; ok && rec.UID == string(p.UID) {
				address, netNS = rec.Address, rec.NetNS
				if !rec.Alive() {
					netNS += " (gone)"
				}
			}
			ready := 0
			for _, cs := range p.Status.ContainerStatuses {
				if cs.Ready {
					ready++
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\n", key, p.Spec.NodeName, podPhase(p), ready, len(p.Spec.Containers), address, netNS)
		}
	}
	for _, u := range unreachable {
		fmt.Fprintf(tw, "(pods of %s)\n", u)
	}
}

// nodePods are the Pods bound to the cluster's process node, by namespace
// and name.
func nodePods(ctx context.Context, s *dev.State, c dev.ClusterState) ([]corev1.Pod, error) {
	cs, err := s.Clientset(c.Name)
	if err != nil {
		return nil, err
	}
	list, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + c.ProcessNodeName()})
	if err != nil {
		return nil, err
	}
	sort.Slice(list.Items, func(i, j int) bool {
		a, b := list.Items[i], list.Items[j]
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	return list.Items, nil
}

// podPhase is the phase as kubectl get pods shows it: a waiting
// container's reason, or Terminating, in its place.
func podPhase(p corev1.Pod) string {
	if p.DeletionTimestamp != nil {
		return "Terminating"
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Waiting != nil && cs.State.Waiting.Reason != "" {
			return cs.State.Waiting.Reason
		}
	}
	return string(p.Status.Phase)
}

func newDevServeCommand(dir *string) *cobra.Command {
	o := dev.ServeOptions{}
	var port, targetPort int32
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run an HTTP echo Deployment (or StatefulSet) and its Service in a cluster of the fleet",
		Long: `A shortcut for what kubectl apply would do: applies the namespace, a Deployment
of Gateway API's echo server (` + dev.EchoImage + `, pods labelled
app=NAME, ready once they answer on --target-port) and a Service selecting its
pods, then waits until the pods are ready and the Service's EndpointSlices list
them. The cluster's process node runs the pods, each in a network namespace on
the bridge ` + dev.BridgeName + ` with an address of the cluster's pod range. The echo
server answers with JSON naming its "pod", "namespace" and "service".
--headless makes a StatefulSet (pods NAME-0, NAME-1, ...) and a Service with
clusterIP None. Running it again with other --replicas scales the workload;
--replicas 0 scales it to nothing. To run commands in a pod, use
kubectl --context CLUSTER exec.`,
		Example: `  fleetnetctl dev serve --cluster east --namespace demo --name echo --replicas 3
  fleetnetctl dev serve --cluster east --namespace demo --name db --replicas 2 --headless
  kubectl --context east -n demo get pods -l app=echo`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Dir, o.Port, o.TargetPort, o.Progress = *dir, port, targetPort, cmd.ErrOrStderr()
			return dev.Serve(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.Cluster, "cluster", "", "cluster to serve in (required)")
	cmd.Flags().StringVar(&o.Namespace, "namespace", "default", "namespace of the workload and its Service")
	cmd.Flags().StringVar(&o.Name, "name", "echo", "name of the workload and its Service")
	cmd.Flags().IntVar(&o.Replicas, "replicas", 1, "number of echo pods")
	cmd.Flags().StringVar(&o.PortName, "port-name", "http", "name of the Service's port")
	cmd.Flags().Int32Var(&port, "port", 80, "the Service's port")
	cmd.Flags().Int32Var(&targetPort, "target-port", 3000, "the port the echo pods listen on")
	cmd.Flags().BoolVar(&o.Headless, "headless", false, "a StatefulSet and a Service with clusterIP None (its import resolves to the pods' addresses, each pod to its own name)")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 2*time.Minute, "how long to wait for the pods to be ready and listed by the Service's EndpointSlices")
	_ = cmd.MarkFlagRequired("cluster")
	return cmd
}

func newDevAPIServerProxyCommand() *cobra.Command {
	var ns, listen, to string
	cmd := &cobra.Command{
		Use:    "apiserver-proxy",
		Short:  "Forward a port of a node's loopback to the host's API server (run by `dev up` for each node)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return dev.RunAPIServerProxy(cmd.Context(), ns, listen, to)
		},
	}
	cmd.Flags().StringVar(&ns, "netns", "", "the node's network namespace")
	cmd.Flags().StringVar(&listen, "listen", "", "address to listen on inside the namespace")
	cmd.Flags().StringVar(&to, "to", "", "address to forward to, from the host")
	return cmd
}

// ExitError ends fleetnetctl with Code and no message of its own: the
// program that failed (a container's init step) has said what went wrong.
type ExitError struct{ Code int }

func (e ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

func newDevNodeCommand(dir *string) *cobra.Command {
	var cfg node.Config
	lo := logging.Options{Format: logging.FormatText}
	cmd := &cobra.Command{
		Use:    "node",
		Short:  "Run a cluster's process node: the pods scheduled to it as processes (run by `dev up` for each cluster)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lg, err := lo.New(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			self, err := os.Executable()
			if err != nil {
				return err
			}
			cfg.Dir, cfg.Networks = *dir, dev.PodNetworks{Dir: *dir}
			cfg.InitCommand = []string{self, "dev", "container-init"}
			return node.Run(cmd.Context(), cfg, logr.FromSlogHandler(lg.Handler()))
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Cluster, "cluster", "", "the cluster whose node this is")
	f.StringVar(&cfg.NodeName, "node-name", "", "the Node's name")
	f.StringVar(&cfg.StateDir, "state-dir", "", "folder for the pods' volumes and logs")
	f.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "the cluster's kubeconfig")
	f.StringVar(&cfg.Listen, "listen", "", "address of the kubelet API")
	f.StringVar(&cfg.InternalIP, "internal-ip", "127.0.0.1", "the node's InternalIP, where the API server reaches the kubelet API")
	f.StringVar(&cfg.Region, "region", "", "the node's topology.kubernetes.io/region label")
	f.StringVar(&cfg.Zone, "zone", "", "the node's topology.kubernetes.io/zone label")
	f.StringVar(&cfg.ServingCert, "tls-cert-file", "", "the kubelet API's serving certificate")
	f.StringVar(&cfg.ServingKey, "tls-key-file", "", "the kubelet API's serving key")
	f.StringVar(&cfg.ClientCA, "client-ca-file", "", "CA of the kubelet API's clients")
	f.StringVar(&cfg.Tools, "tools-dir", "", "folder of the image programs (agnhost, echo-basic)")
	lo.BindFlags(f)
	return cmd
}

func newDevContainerInitCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "container-init SPEC",
		Short:  "Become a container of the process node (run by `dev node`)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := node.RunInit(args[0])
			fmt.Fprintf(os.Stderr, "fleetnet process node: %v\n", err)
			return ExitError{Code: 128}
		},
	}
}
