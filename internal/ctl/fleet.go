package ctl

import (
	"context"
	"fmt"
	"time"

	"github.com/fleetnet/fleetnet/internal/fleetsetup"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
)

// fleetFlags are the flags every fleet command shares.
type fleetFlags struct {
	kubeconfig, context string
	namespace, certsDir string
	set                 []string
	wait                bool
	timeout             time.Duration
	wireDNS             bool
}

func (f *fleetFlags) bind(cmd *cobra.Command, withValues bool) {
	fs := cmd.Flags()
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&f.context, "context", "", "the kubeconfig's context of the cluster (default: its current one)")
	fs.StringVar(&f.namespace, "namespace", "fleetnet-system", "namespace of fleetnet's releases")
	fs.StringVar(&f.certsDir, "certs-dir", "certs", "folder of the fleet CA (ca.crt, ca.key) and fleetnetctl's administrator certificate; keep it off the clusters")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Minute, "how long the command may take, waiting included")
	if withValues {
		fs.StringArrayVar(&f.set, "set", nil, "a chart value, <chart>.<key>=<value> in helm's --set syntax, <chart> one of registry, agent, gateway, edge, dns, discovery, console (repeatable)")
		fs.BoolVar(&f.wait, "wait", true, "wait until the workloads are ready and the cluster is registered (join: and its imports are in place), printing progress")
		fs.BoolVar(&f.wireDNS, "wire-dns", true, "forward the clusterset zone from the cluster's CoreDNS to fleetnet-dns, as \"fleetnetctl dns wire\" does (skipped with a note when the cluster has no kube-system/coredns ConfigMap)")
	}
}

// install runs a cluster's set-up, wires its CoreDNS (--wire-dns) and
// waits (--wait).
func (f *fleetFlags) install(ctx context.Context, cmd *cobra.Command, setUp, wait func() error) error {
	if err := setUp(); err != nil {
		return err
	}
	if f.wireDNS {
		if err := f.dnsWire(ctx, cmd, true); err != nil {
			return err
		}
	}
	if !f.wait {
		return nil
	}
	return wait()
}

// dnsWire runs "dns wire" (or unwire) with its defaults against the
// cluster; a cluster without kubeadm's CoreDNS ConfigMap gets a note.
func (f *fleetFlags) dnsWire(ctx context.Context, cmd *cobra.Command, wire bool) error {
	d := &dnsWireFlags{
		kubeconfig: f.kubeconfig, context: f.context,
		service:   f.namespace + "/fleetnet-dns",
		configMap: "kube-system/coredns", key: "Corefile", deployment: "kube-system/coredns",
		zone: "clusterset.local", cacheSeconds: 5,
	}
	err := d.run(ctx, cmd, wire)
	if apierrors.IsNotFound(err) {
		fmt.Fprintf(cmd.OutOrStdout(), "note: %v; forward clusterset.local to fleetnet-dns in the cluster's DNS by hand (docs/guide/tasks/install.md, \"Clusterset DNS\")\n", err)
		return nil
	}
	return err
}

func newFleetCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "Set up a fleet: init the hub, join and leave members",
		Long: `One command per step of a fleet's life, each idempotent:

  fleet init   the hub: the fleet CA (or cert-manager), the CRDs, the registry,
               an agent, fleetnet-gateway, the edges, fleetnet-discovery,
               fleetnet-dns and fleetnet-console, through Helm (releases
               named after the charts)
  fleet join   a member: its certificate from the fleet CA, the agent and
               fleetnet-dns; waits until it is registered and its imports
               are in place
  fleet leave  a member out: its exports withdrawn first, then everything
               join installed taken out

The charts are the ones built into this binary. docs/guide/tasks/install.md
lists what each step does by hand.`,
	}
	cmd.AddCommand(newFleetInitCommand(), newFleetJoinCommand(), newFleetLeaveCommand())
	return cmd
}

func newFleetInitCommand() *cobra.Command {
	f := &fleetFlags{}
	o := fleetsetup.HubOptions{}
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Install the hub: registry, agent, gateway, edges, discovery, clusterset DNS and the console",
		Example: `  fleetnetctl fleet init --context hub --clusterset-id fleet --region eu-west-1 \
    --registry-hosts registry.fleet.example.com --gateway-address edge.fleet.example.com \
    --image-repository registry.example.com/fleetnet --version v0.1.0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			hub, sets, err := f.connect()
			if err != nil {
				return err
			}
			if o.ClusterID == "" {
				o.ClusterID = hub.Name
			}
			if err := checkLabel("--cluster-id", o.ClusterID); err != nil {
				return err
			}
			if err := checkLabel("--clusterset-id", o.ClustersetID); err != nil {
				return err
			}
			o.Namespace, o.CertsDir, o.Set = f.namespace, f.certsDir, sets
			out := cmd.OutOrStdout()
			return f.install(ctx, cmd,
				func() error { return fleetsetup.Init(ctx, hub, o, out) },
				func() error { return fleetsetup.WaitHub(ctx, hub, o, out) })
		},
	}
	f.bind(cmd, true)
	fs := cmd.Flags()
	fs.StringVar(&o.ClusterID, "cluster-id", "", "the hub's cluster id, an RFC 1123 label (default: the context's name)")
	fs.StringVar(&o.ClustersetID, "clusterset-id", "", "the clusterset's id, an RFC 1123 label (required)")
	fs.StringVar(&o.Region, "region", "", "the hub's region")
	fs.StringSliceVar(&o.RegistryHosts, "registry-hosts", nil, "names or IPs members dial the registry at (its serving certificate has them and the in-cluster names)")
	fs.StringVar(&o.RegistryAddress, "registry-address", "", "host:port members dial the registry at (default: the first --registry-hosts entry, port 7443)")
	fs.StringVar(&o.RegistryServiceType, "registry-service-type", "LoadBalancer", "type of the registry's Service; members must reach it")
	fs.StringSliceVar(&o.GatewayHosts, "gateway-hosts", nil, "extra names of fleetnet-gateway's serving certificate (edges in other clusters dial it there)")
	fs.StringSliceVar(&o.DiscoveryHosts, "discovery-hosts", nil, "extra names of fleetnet-discovery's serving certificate")
	fs.StringSliceVar(&o.GatewayAddresses, "gateway-address", nil, "the edges' addresses (host names or IPs) that Gateways report")
	fs.StringVar(&o.DNSClusterIP, "dns-cluster-ip", "", "fleetnet-dns's ClusterIP, a free address of the service range (default: Kubernetes picks one)")
	fs.StringVar(&o.ImageRepository, "image-repository", "", "prefix of the images: <prefix>/fleetnet-registry, ... (default: the charts', ghcr.io/fleetnet)")
	fs.StringVar(&o.Version, "version", "", "the images' tag (default: the charts' appVersion)")
	fs.StringVar(&o.CertManagerIssuer, "cert-manager-issuer", "", "let cert-manager issue the registry's, gateway's, edges' and discovery's certificates from this issuer (holding the fleet CA) instead of --certs-dir")
	fs.StringVar(&o.CertManagerIssuerKind, "cert-manager-issuer-kind", "Issuer", "Issuer (in --namespace) or ClusterIssuer")
	fs.BoolVar(&o.Console, "console", true, "install fleetnet-console, the fleet's read-only web UI, with an administrator's certificate for the registry (false: a console installed before stays)")
	return cmd
}

func newFleetJoinCommand() *cobra.Command {
	f := &fleetFlags{}
	o := fleetsetup.MemberOptions{}
	var hubKubeconfig, hubContext string
	cmd := &cobra.Command{
		Use:   "join",
		Short: "Join a member: its certificate, the agent and fleetnet-dns; wait until its imports are in place",
		Example: `  fleetnetctl fleet join --hub-context hub --context east --region eu-central-1
  fleetnetctl fleet join --context east --clusterset-id fleet --registry-address registry.fleet.example.com:7443`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			member, sets, err := f.connect()
			if err != nil {
				return err
			}
			if o.ClusterID == "" {
				// The id it joined with before, else the context's name.
				if o.ClusterID, err = fleetsetup.JoinedAs(member, f.namespace); err != nil {
					return err
				}
			}
			if o.ClusterID == "" {
				o.ClusterID = member.Name
			}
			if err := checkLabel("--cluster-id", o.ClusterID); err != nil {
				return err
			}
			if hubContext != "" || hubKubeconfig != "" {
				if hubKubeconfig == "" {
					hubKubeconfig = f.kubeconfig
				}
				hub, err := fleetsetup.Connect(hubKubeconfig, hubContext)
				if err != nil {
					return fmt.Errorf("the hub: %w", err)
				}
				fromHub, err := fleetsetup.ReadFleetInfo(ctx, hub, f.namespace)
				if err != nil {
					return err
				}
				o.Fleet = mergeFleetInfo(o.Fleet, fromHub)
			}
			if o.Fleet.ClustersetID == "" || o.Fleet.RegistryAddress == "" {
				return fmt.Errorf("--hub-context, or --clusterset-id and --registry-address, are needed: what fleet to join")
			}
			o.Namespace, o.CertsDir, o.Set = f.namespace, f.certsDir, sets
			out := cmd.OutOrStdout()
			return f.install(ctx, cmd,
				func() error { return fleetsetup.Join(ctx, member, o, out) },
				func() error { return fleetsetup.WaitJoined(ctx, member, o, out) })
		},
	}
	f.bind(cmd, true)
	fs := cmd.Flags()
	fs.StringVar(&hubKubeconfig, "hub-kubeconfig", "", "kubeconfig of the hub, whose fleet ConfigMap (written by fleet init) says what to join (default: --kubeconfig's)")
	fs.StringVar(&hubContext, "hub-context", "", "the hub's context")
	fs.StringVar(&o.ClusterID, "cluster-id", "", "the member's cluster id, an RFC 1123 label unique in the fleet (default: the id it joined with before, else the context's name)")
	fs.StringVar(&o.Region, "region", "", "the member's region")
	fs.StringVar(&o.DNSClusterIP, "dns-cluster-ip", "", "fleetnet-dns's ClusterIP, a free address of the service range (default: Kubernetes picks one)")
	fs.StringVar(&o.Fleet.ClustersetID, "clusterset-id", "", "the clusterset's id (default: the hub's)")
	fs.StringVar(&o.Fleet.RegistryAddress, "registry-address", "", "host:port of the registry as the member reaches it (default: the hub's)")
	fs.StringVar(&o.Fleet.ImageRepository, "image-repository", "", "prefix of the images (default: the hub's)")
	fs.StringVar(&o.Fleet.Version, "version", "", "the images' tag (default: the hub's)")
	return cmd
}

func newFleetLeaveCommand() *cobra.Command {
	f := &fleetFlags{}
	o := fleetsetup.LeaveOptions{}
	cmd := &cobra.Command{
		Use:   "leave",
		Short: "Take a member out: withdraw its exports, then remove what join installed",
		Long: `Stops the member's agent, has the registry withdraw the cluster's exports and
registration (every other cluster stops sending to it while its Pods still
serve), deletes what the agent made (ServiceImports, derived Services,
EndpointSlices, its finalizers on ServiceExports, ServiceExports it made for
labelled Services), takes the clusterset forward out of CoreDNS, uninstalls
the agent and fleetnet-dns, and deletes the Secret and namespace join made.
The users' ServiceExports stay, and so do the CRDs unless --delete-crds.`,
		Example: `  fleetnetctl fleet leave --context east`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			member, _, err := f.connect()
			if err != nil {
				return err
			}
			o.Namespace, o.CertsDir = f.namespace, f.certsDir
			o.Unwire = func(ctx context.Context) error { return f.dnsWire(ctx, cmd, false) }
			return fleetsetup.Leave(ctx, member, o, cmd.OutOrStdout())
		},
	}
	f.bind(cmd, false)
	fs := cmd.Flags()
	fs.StringVar(&o.ClusterID, "cluster-id", "", "the member's cluster id (default: its agent release's)")
	fs.StringVar(&o.RegistryAddress, "registry-address", "", "host:port of the registry (default: the agent release's)")
	fs.BoolVar(&o.DeleteCRDs, "delete-crds", false, "also delete the MCS, ClusterProperty and BackendTrafficPolicy CRDs, and with them every ServiceExport and policy")
	return cmd
}

func (f *fleetFlags) connect() (*fleetsetup.Cluster, fleetsetup.Sets, error) {
	sets, err := fleetsetup.ParseSets(f.set)
	if err != nil {
		return nil, nil, err
	}
	c, err := fleetsetup.Connect(f.kubeconfig, f.context)
	return c, sets, err
}

// mergeFleetInfo fills what the flags left empty from the hub's.
func mergeFleetInfo(flags, hub fleetsetup.FleetInfo) fleetsetup.FleetInfo {
	for _, p := range []struct {
		dst *string
		src string
	}{
		{&flags.ClustersetID, hub.ClustersetID}, {&flags.RegistryAddress, hub.RegistryAddress},
		{&flags.ImageRepository, hub.ImageRepository}, {&flags.Version, hub.Version},
	} {
		if *p.dst == "" {
			*p.dst = p.src
		}
	}
	return flags
}

func checkLabel(flag, v string) error {
	if errs := validation.IsDNS1123Label(v); len(errs) > 0 {
		return fmt.Errorf("%s=%q: %s", flag, v, errs[0])
	}
	return nil
}
