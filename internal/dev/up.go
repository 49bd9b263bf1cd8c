package dev

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/config/crd"
	consoleserver "github.com/fleetnet/fleetnet/internal/console/server"
	"github.com/fleetnet/fleetnet/internal/controlplane"
	"github.com/fleetnet/fleetnet/internal/pki"
	"github.com/fleetnet/fleetnet/internal/registry/client"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
)

// Binary names of fleetnet's own programs (`make build`).
const (
	AgentBinary     = "fleetnet-agent"
	RegistryBinary  = "fleetnet-registry"
	GatewayBinary   = "fleetnet-gateway"
	EdgeBinary      = "fleetnet-edge"
	DiscoveryBinary = "fleetnet-discovery"
	ConsoleBinary   = "fleetnet-console"
)

// reservedNames are the fleet's certificate and folder names besides the
// clusters' (see writeCerts and the components' folders): a cluster of that
// name would take them over.
var reservedNames = []string{"admin", "ca", "certs", "discovery", "edge", "etcd", "gateway", "registry"}

// Options describe a fleet to bring up.
type Options struct {
	// Dir is the fleet's folder: state, certificates, kubeconfigs, logs.
	Dir string
	// Clusters are the clusters' names, which are also their cluster ids.
	Clusters []string
	// DualStack names the clusters that get an IPv6 service CIDR and pod
	// range as well; kwok gives their Pods an address of each family.
	DualStack []string
	// Regions maps clusters to their agents' --region; clusters not named
	// have none.
	Regions map[string]string
	// Networks maps clusters to networks of their own (networks.go);
	// clusters not named are on the default network. Needs Nodes.
	Networks map[string]string
	// BasePort is the first of the fleet's loopback ports (see ports()).
	BasePort int
	// LeaseTTL is the registry's lease TTL; short, so that a stopped agent's
	// cluster leaves the fleet's imports quickly.
	LeaseTTL time.Duration
	// GatewayAddressPool, when set, gives every Gateway an address of its
	// own from this loopback prefix (fleetnet-gateway's
	// --gateway-address-pool), so that Gateways may share port numbers.
	GatewayAddressPool string
	// Tools are the binaries `make tools` builds; Fleetnet is the folder with
	// fleetnet-agent and fleetnet-registry.
	Tools    controlplane.Binaries
	Fleetnet string
	// Detach lets the processes outlive the caller (the command line). Tests
	// leave it unset so that their processes die with them.
	Detach bool
	// Nodes gives every cluster a node: kube-proxy, fleetnet-dns and the
	// pods' route, in a network namespace (root only; see node.go). A fleet
	// without nodes has no Service data plane: pods reach each other by
	// address only.
	Nodes bool
	// HA runs a 3-member etcd, which the API servers and the registry
	// share, and two registry replicas that clients fail over between, as
	// production runs them; for fault drills (`make chaos`).
	HA bool
	// Progress receives one line per step; nil discards.
	Progress io.Writer
}

func (o *Options) validate() error {
	var errs []error
	if len(o.Clusters) == 0 {
		errs = append(errs, fmt.Errorf("--clusters: name at least one cluster"))
	}
	seen := map[string]bool{}
	for _, c := range o.Clusters {
		if msgs := validation.IsDNS1123Label(c); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--clusters: %q: %s", c, strings.Join(msgs, "; ")))
		}
		if slices.Contains(reservedNames, c) {
			errs = append(errs, fmt.Errorf("--clusters: %q is the name of a fleet component's certificate or folder (%s); choose another", c, strings.Join(reservedNames, ", ")))
		}
		if seen[c] {
			errs = append(errs, fmt.Errorf("--clusters: %q is named twice", c))
		}
		seen[c] = true
	}
	for _, c := range o.DualStack {
		if !seen[c] {
			errs = append(errs, fmt.Errorf("--dual-stack: %q is not one of --clusters", c))
		}
	}
	for c, r := range o.Regions {
		if !seen[c] {
			errs = append(errs, fmt.Errorf("--regions: %q is not one of --clusters", c))
		}
		if msgs := validation.IsValidLabelValue(r); r == "" || len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--regions: %s=%q: want a non-empty label value (%s)", c, r, strings.Join(msgs, "; ")))
		}
	}
	for c, n := range o.Networks {
		if !seen[c] {
			errs = append(errs, fmt.Errorf("--networks: %q is not one of --clusters", c))
		}
		if msgs := validation.IsDNS1123Label(n); n == "" || len(msgs) > 0 || len(networkNSPrefix+n) > 63 {
			errs = append(errs, fmt.Errorf("--networks: %s=%q: want a short RFC 1123 label (%s)", c, n, strings.Join(msgs, "; ")))
		}
		if slices.Contains(o.DualStack, c) {
			errs = append(errs, fmt.Errorf("--networks: %s is dual-stack; a network of its own is IPv4 only", c))
		}
	}
	if len(o.Networks) > 0 && !o.Nodes {
		errs = append(errs, errors.New("--networks: networks are network namespaces of the nodes: needs --nodes (root)"))
	}
	if len(o.Clusters) > 50 {
		errs = append(errs, fmt.Errorf("--clusters: %d clusters; at most 50", len(o.Clusters)))
	}
	if last := newState("", *o).lastPort(); o.BasePort < 1024 || last > 65535 {
		errs = append(errs, fmt.Errorf("--base-port=%d: must leave room for the fleet's ports between 1024 and 65535", o.BasePort))
	}
	if o.GatewayAddressPool != "" {
		if p, err := netip.ParsePrefix(o.GatewayAddressPool); err != nil || !p.Addr().IsLoopback() {
			errs = append(errs, fmt.Errorf("--gateway-address-pool=%q: want a loopback prefix such as 127.0.1.0/24", o.GatewayAddressPool))
		}
	}
	if o.LeaseTTL < time.Second {
		errs = append(errs, fmt.Errorf("--lease-ttl=%s: must be at least 1s", o.LeaseTTL))
	}
	if o.Nodes {
		if err := NodeRequirements(); err != nil {
			errs = append(errs, fmt.Errorf("--nodes: %w; or --nodes=false for a fleet without a Service data plane", err))
		}
	}
	return errors.Join(errs...)
}

// Up brings the fleet to running: it starts what is not running (all of it
// the first time) and returns when every agent holds a live lease. A second
// Up on a running fleet changes nothing. When the first Up fails, nothing
// it started is left behind.
func Up(ctx context.Context, o Options) (*State, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	// A failed first Up and Down remove the folder: it must be ours.
	if _, err := os.Stat(filepath.Join(dir, stateFile)); errors.Is(err, os.ErrNotExist) {
		if entries, _ := os.ReadDir(dir); len(entries) > 0 && !(len(entries) == 1 && entries[0].Name() == ".lock") {
			return nil, fmt.Errorf("--dir=%s: the folder holds other files; a fleet needs a folder of its own", dir)
		}
	}
	s, unlock, err := lockAndLoad(dir)
	if unlock != nil {
		defer unlock()
	}
	fresh := errors.Is(err, ErrNoFleet)
	switch {
	case fresh:
		s = newState(dir, o)
	case err != nil:
		return nil, err
	default:
		if err := s.sameShape(o); err != nil {
			return nil, err
		}
		// Nodes may be added to a running fleet; they are not taken away.
		s.Nodes = s.Nodes || o.Nodes
	}
	u := &upper{s: s, o: o}
	if err := u.run(ctx, fresh); err != nil {
		u.undo()
		if fresh {
			for _, c := range s.Clusters {
				_ = removeNodeNetwork(s.Dir, c)
			}
			if u.createdBridge {
				_ = removeBridge()
			}
			os.RemoveAll(dir)
		} else {
			_ = s.save()
		}
		return nil, err
	}
	return s, nil
}

func newState(dir string, o Options) *State {
	s := &State{Dir: dir, BasePort: o.BasePort, LeaseTTL: o.LeaseTTL, GatewayAddressPool: o.GatewayAddressPool, Processes: map[string]ProcessState{}, Pods: map[string]PodState{}, Nodes: o.Nodes, HA: o.HA}
	inNetwork := map[string]int{} // clusters so far per network
	for i, name := range o.Clusters {
		dual := slices.Contains(o.DualStack, name)
		cidrs := []string{fmt.Sprintf("10.%d.0.0/16", 96+i)}
		// The default network's clusters take 10.244.<i>.0/24; another
		// network's take 10.244.1.0/24 on, the second cluster's range
		// and those after it: overlapping ranges, as fleets have them.
		k := i
		if n := o.Networks[name]; n != "" {
			k = 1 + inNetwork[n]
			inNetwork[n]++
		}
		pods := []string{fmt.Sprintf("10.244.%d.0/24", k)}
		if dual {
			cidrs = append(cidrs, fmt.Sprintf("fd00:10:%d::/112", 96+i))
			// Canonical (fd00:10:244::/64 for i = 0): the API server warns otherwise.
			pods = append(pods, netip.MustParsePrefix(fmt.Sprintf("fd00:10:244:%d::/64", i)).String())
		}
		s.Clusters = append(s.Clusters, ClusterState{
			Name: name, Index: i, DualStack: dual, ServiceCIDRs: cidrs, PodCIDRs: pods, Region: o.Regions[name], Network: o.Networks[name],
		})
	}
	return s
}

// sameShape refuses to change a running fleet's clusters behind its back.
func (s *State) sameShape(o Options) error {
	var have []string
	for _, c := range s.Clusters {
		have = append(have, c.Name)
	}
	var dual []string
	for _, c := range s.Clusters {
		if c.DualStack {
			dual = append(dual, c.Name)
		}
	}
	want := slices.Clone(o.DualStack)
	slices.Sort(dual)
	slices.Sort(want)
	if s.HA != o.HA {
		return fmt.Errorf("the fleet in %s was made with --ha=%t; run `fleetnetctl dev down --dir %s` before asking for --ha=%t", s.Dir, s.HA, s.Dir, o.HA)
	}
	for _, c := range s.Clusters {
		if c.Network != o.Networks[c.Name] {
			return fmt.Errorf("the fleet in %s has cluster %s on network %q; networks are set when a fleet is created (`fleetnetctl dev down --dir %s` first)", s.Dir, c.Name, c.Network, s.Dir)
		}
	}
	if !slices.Equal(have, o.Clusters) || !slices.Equal(dual, want) {
		return fmt.Errorf("the fleet in %s has clusters %s (dual-stack: %s); run `fleetnetctl dev down --dir %s` before asking for %s (dual-stack: %s)",
			s.Dir, strings.Join(have, ","), listOrNone(dual), s.Dir, strings.Join(o.Clusters, ","), listOrNone(o.DualStack))
	}
	return nil
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ",")
}

// upper starts what is missing and remembers what it started, so that a
// failure can undo exactly that.
type upper struct {
	s       *State
	o       Options
	mu      sync.Mutex
	started []string
	// createdBridge is set when this Up made the bridge.
	createdBridge bool
}

func (u *upper) run(ctx context.Context, fresh bool) error {
	s, o := u.s, u.o
	if fresh {
		fmt.Fprintf(o.Progress, "creating a fleet of %d clusters in %s\n", len(s.Clusters), s.Dir)
	}
	// Check every port a missing component needs before starting anything.
	var wanted []portUse
	for _, p := range s.ports() {
		if !s.Processes[p.component].Alive() {
			wanted = append(wanted, p)
		}
	}
	var busy []string
	for _, p := range portsInUse(wanted, portGrace) {
		busy = append(busy, fmt.Sprintf("port %d (%s) is in use", p.port, p))
	}
	var errs []error
	if len(busy) > 0 {
		errs = append(errs, fmt.Errorf("%s; stop what uses them or choose other ports with --base-port (the fleet uses %d to %d)",
			strings.Join(busy, "; "), s.BasePort, s.lastPort()))
	}
	errs = append(errs, u.checkBinaries())
	if s.Nodes {
		errs = append(errs, reclaimNodes(s.Dir, s.Clusters, o.Progress))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if s.Nodes {
		// What no running fleet claims was left by one that ended
		// without `dev down` finishing: a namespace with a process inside,
		// a veth, a bridge with the old fleet's neighbours. This fleet's own
		// are kept when it already runs.
		keep := runningClaims(s.Dir)
		if !fresh {
			keep.claim(s)
		}
		if err := sweepLeftovers(keep, func(l leftover) {
			fmt.Fprintf(o.Progress, "removing %s, left by an earlier fleet\n", l)
		}); err != nil {
			return err
		}
	}
	if err := writeCerts(s); err != nil {
		return err
	}
	if err := s.save(); err != nil {
		return err
	}

	if err := u.etcd(ctx); err != nil {
		return err
	}

	crds, err := crd.All()
	if err != nil {
		return err
	}
	gatewayCRDs, err := crd.GatewayCluster()
	if err != nil {
		return err
	}
	configs := make([]*rest.Config, len(s.Clusters))
	clusterErrs := make([]error, len(s.Clusters))
	var wg sync.WaitGroup
	for i, c := range s.Clusters {
		want := crds
		if i == 0 {
			// The first cluster is the hub, where fleetnet-gateway runs.
			want = append(slices.Clone(crds), gatewayCRDs...)
		}
		wg.Go(func() { configs[i], clusterErrs[i] = u.cluster(ctx, c, want) })
	}
	wg.Wait()
	if err := errors.Join(clusterErrs...); err != nil {
		return err
	}
	merged := map[string]*rest.Config{}
	for i, c := range s.Clusters {
		merged[c.Name] = configs[i]
	}
	if err := controlplane.WriteKubeconfig(s.MergedKubeconfigPath(), merged, s.Clusters[0].Name); err != nil {
		return err
	}

	for i, r := range s.RegistryReplicas() {
		if err := u.ensure(r, func() (*controlplane.Process, error) { return u.startRegistry(ctx, i) }); err != nil {
			return err
		}
	}
	if s.Nodes && s.HasNetworks() {
		// The gateway clusters' agents serve their gateways' models on
		// the networks' transit addresses.
		if err := u.bridgeAndNetworks(); err != nil {
			return err
		}
	}
	for i, c := range s.Clusters {
		// Before its agent: the agent reads its network at start.
		if err := s.applyNetworkObjects(ctx, c, configs[i]); err != nil {
			return fmt.Errorf("cluster %s: %w", c.Name, err)
		}
		if err := u.ensure(c.Name+"/"+PartAgent, func() (*controlplane.Process, error) { return u.startAgent(c) }); err != nil {
			return err
		}
	}
	if err := u.waitRegistered(ctx); err != nil {
		return err
	}
	if err := u.ensure(ComponentGateway, func() (*controlplane.Process, error) { return u.startGateway(ctx) }); err != nil {
		return err
	}
	if err := u.ensure(ComponentEdge, u.startEdge); err != nil {
		return err
	}
	if err := u.ensure(ComponentDiscovery, func() (*controlplane.Process, error) { return u.startDiscovery(ctx) }); err != nil {
		return err
	}
	if err := u.ensure(ComponentConsole, func() (*controlplane.Process, error) { return u.startConsole(ctx) }); err != nil {
		return err
	}
	return u.nodes(ctx)
}

// etcd starts the members that are not running, all at once: a member of
// a new 3-member cluster is healthy only once a majority runs.
func (u *upper) etcd(ctx context.Context) error {
	s := u.s
	members := s.EtcdMembers()
	// A single member keeps the name fleets made before HA gave it.
	var initial string
	if s.HA {
		var peers []string
		for i, m := range members {
			_, peer := s.etcdPorts(i)
			peers = append(peers, fmt.Sprintf("%s=http://127.0.0.1:%d", m, peer))
		}
		initial = strings.Join(peers, ",")
	}
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Go(func() {
			errs[i] = u.ensure(m, func() (*controlplane.Process, error) {
				client, peer := s.etcdPorts(i)
				e, err := controlplane.StartEtcd(ctx, u.o.Tools, controlplane.EtcdConfig{
					Name: memberName(s, m), Dir: filepath.Join(s.Dir, m), ClientPort: client, PeerPort: peer,
					InitialCluster: initial,
				}, u.startOptions())
				if err != nil {
					return nil, err
				}
				return e.Process, nil
			})
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func memberName(s *State, component string) string {
	if s.HA {
		return component
	}
	return ""
}

func (u *upper) startOptions() controlplane.StartOptions {
	return controlplane.StartOptions{Detach: u.o.Detach}
}

func (u *upper) checkBinaries() error {
	var errs []error
	for _, name := range []string{controlplane.EtcdBinary, controlplane.KubeAPIServerBinary, controlplane.KubeControllerManagerBinary,
		controlplane.KubeSchedulerBinary, controlplane.KwokBinary, controlplane.KwokStages} {
		if _, err := u.o.Tools.Path(name); err != nil {
			errs = append(errs, err)
		}
	}
	if u.s.Nodes {
		errs = append(errs, NodeBinaries(u.o.Tools, u.o.Fleetnet))
	}
	for _, name := range []string{AgentBinary, RegistryBinary, GatewayBinary, EdgeBinary, DiscoveryBinary, ConsoleBinary} {
		if _, err := os.Stat(filepath.Join(u.o.Fleetnet, name)); err != nil {
			errs = append(errs, fmt.Errorf("%s is missing: run `make build` in the fleetnet checkout", filepath.Join(u.o.Fleetnet, name)))
		}
	}
	return errors.Join(errs...)
}

// ensure starts a component unless it runs, and records it.
func (u *upper) ensure(component string, start func() (*controlplane.Process, error)) error {
	u.mu.Lock()
	running := u.s.Processes[component].Alive()
	u.mu.Unlock()
	if running {
		return nil
	}
	fmt.Fprintf(u.o.Progress, "starting %s\n", component)
	p, err := start()
	if err != nil {
		return fmt.Errorf("%s: %w", component, err)
	}
	startTime, _, err := procStat(p.Pid())
	if err != nil {
		p.Kill()
		return fmt.Errorf("%s: reading its start time: %w", component, err)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.s.Processes[component] = ProcessState{Pid: p.Pid(), StartTime: startTime, Log: p.LogPath}
	u.started = append(u.started, component)
	return u.s.save()
}

// undo stops what this Up started, newest first.
func (u *upper) undo() {
	for i := len(u.started) - 1; i >= 0; i-- {
		stopProcess(u.s.Processes[u.started[i]], syscall.SIGTERM, 5*time.Second)
		delete(u.s.Processes, u.started[i])
	}
}

// cluster brings one cluster's control plane up and returns its admin config.
func (u *upper) cluster(ctx context.Context, c ClusterState, crds []*apiextensionsv1.CustomResourceDefinition) (*rest.Config, error) {
	s, o := u.s, u.o
	dir := filepath.Join(s.Dir, c.Name)
	cfg := controlplane.APIServerConfig{
		Name: c.Name, Dir: dir, EtcdEndpoint: s.EtcdEndpoints(),
		EtcdPrefix: "/fleet/" + c.Name, Port: s.clusterPort(c, offsetAPIServer), ServiceCIDRs: c.ServiceCIDRs,
		KubeletClientCert: filepath.Join(s.CertDir(), "kubelet-client.crt"),
		KubeletClientKey:  filepath.Join(s.CertDir(), "kubelet-client.key"),
		KubeletCA:         filepath.Join(s.CertDir(), "ca.crt"),
	}
	var taints []corev1.Taint
	if s.Nodes {
		// Pods run on the cluster's process node unless they ask for kwok's.
		taints = []corev1.Taint{{Key: KwokTaintKey, Value: "fake", Effect: corev1.TaintEffectNoSchedule}}
	}
	var api *controlplane.APIServer
	if err := u.ensure(c.Name+"/"+PartAPIServer, func() (*controlplane.Process, error) {
		var err error
		api, err = controlplane.StartAPIServer(ctx, o.Tools, cfg, u.startOptions())
		if err != nil {
			return nil, err
		}
		return api.Process, nil
	}); err != nil {
		return nil, err
	}
	if api == nil {
		// Already running: the credentials in its folder still apply.
		var err error
		if api, err = controlplane.ConnectAPIServer(ctx, cfg); err != nil {
			return nil, fmt.Errorf("%s/%s: %w", c.Name, PartAPIServer, err)
		}
	}
	if err := controlplane.InstallCRDs(ctx, api.Config, crds); err != nil {
		return nil, fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	steps := []struct {
		part  string
		start func() (*controlplane.Process, error)
	}{
		{PartControllerManager, func() (*controlplane.Process, error) {
			return controlplane.StartControllerManager(o.Tools, api, dir, u.startOptions())
		}},
		{PartScheduler, func() (*controlplane.Process, error) {
			return controlplane.StartScheduler(o.Tools, api, dir, u.startOptions())
		}},
		{PartKwok, func() (*controlplane.Process, error) {
			return controlplane.StartKwok(ctx, o.Tools, api, dir, controlplane.KwokConfig{
				NodeName: c.KwokNodeName(), PodCIDRs: c.PodCIDRs, Port: s.clusterPort(c, offsetKwok), Taints: taints, Labels: c.kwokNodeLabels(s.Nodes),
			}, u.startOptions())
		}},
	}
	for _, step := range steps {
		if err := u.ensure(c.Name+"/"+step.part, step.start); err != nil {
			return nil, err
		}
	}
	return api.Config, nil
}

// startRegistry starts replica i: with etcd embedded, or in an HA fleet
// on the fleet's etcd under a prefix of its own.
func (u *upper) startRegistry(ctx context.Context, i int) (*controlplane.Process, error) {
	s := u.s
	certs := s.CertDir()
	name := s.RegistryReplicas()[i]
	metrics := s.registryMetrics(i)
	args := []string{
		"--listen=" + s.registryListen(i),
		"--metrics-listen=" + metrics,
		"--tls-cert-file=" + filepath.Join(certs, "registry.crt"),
		"--tls-key-file=" + filepath.Join(certs, "registry.key"),
		"--client-ca-file=" + filepath.Join(certs, "ca.crt"),
		"--lease-ttl=" + s.LeaseTTL.String(),
	}
	if s.HA {
		args = append(args, "--etcd-endpoints="+s.EtcdEndpoints(), "--etcd-prefix=/fleet/registry/")
	} else {
		args = append(args, "--data-dir="+filepath.Join(s.Dir, "registry", "data"))
	}
	p, err := controlplane.Start(name, filepath.Join(u.o.Fleetnet, RegistryBinary), args,
		filepath.Join(s.Dir, name, "registry.log"), u.startOptions())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = p.WaitFor(ctx, "/readyz", func(ctx context.Context) error { return controlplane.HTTPOK(ctx, "http://"+metrics+"/readyz") })
	if err != nil {
		p.Kill()
		return nil, err
	}
	return p, nil
}

// startGateway runs fleetnet-gateway against the hub (the first cluster).
func (u *upper) startGateway(ctx context.Context) (*controlplane.Process, error) {
	s := u.s
	certs := s.CertDir()
	hub := s.Clusters[0]
	health := fmt.Sprintf("127.0.0.1:%d", s.BasePort+offsetGatewayHealth)
	args := []string{
		"--kubeconfig=" + s.KubeconfigPath(hub.Name),
		"--cluster-id=" + hub.Name,
		"--edge-listen=" + s.GatewayEdgesAddress(),
		"--tls-cert-file=" + filepath.Join(certs, "gateway.crt"),
		"--tls-key-file=" + filepath.Join(certs, "gateway.key"),
		"--client-ca-file=" + filepath.Join(certs, "ca.crt"),
		// The edge's listeners bind 127.0.0.1: that is the Gateways' address.
		"--gateway-addresses=127.0.0.1",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", s.BasePort+offsetGatewayMetrics),
		"--health-probe-bind-address=" + health,
		"--leader-elect=false",
		// The edge's own ports: a Gateway listener there is refused.
		fmt.Sprintf("--edge-reserved-ports=%d,%d", s.BasePort+offsetEdgeMetrics, s.BasePort+offsetEdgeHealth),
	}
	if s.GatewayAddressPool != "" {
		args = append(args, "--gateway-address-pool="+s.GatewayAddressPool)
	}
	p, err := controlplane.Start(ComponentGateway, filepath.Join(u.o.Fleetnet, GatewayBinary), args,
		filepath.Join(s.Dir, "gateway", "gateway.log"), u.startOptions())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := p.WaitFor(ctx, "/readyz", func(ctx context.Context) error { return controlplane.HTTPOK(ctx, "http://"+health+"/readyz") }); err != nil {
		p.Kill()
		return nil, err
	}
	return p, nil
}

// startEdge runs one fleetnet-edge whose listeners bind 127.0.0.1 and
// that dials only the fleet's pod ranges (its nodes' addresses are in
// them), as a production edge should be set up.
func (u *upper) startEdge() (*controlplane.Process, error) {
	s := u.s
	certs := s.CertDir()
	args := []string{
		"--gateway=" + s.GatewayEdgesAddress(),
		"--ca-file=" + filepath.Join(certs, "ca.crt"),
		"--cert-file=" + filepath.Join(certs, "edge.crt"),
		"--key-file=" + filepath.Join(certs, "edge.key"),
		"--region=dev",
		"--state-dir=" + filepath.Join(s.Dir, "edge", "state"),
		"--listen-host=127.0.0.1",
		"--metrics-bind-address=" + s.EdgeMetricsAddress(),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", s.BasePort+offsetEdgeHealth),
		"--endpoint-ranges=" + strings.Join(s.edgeRanges(), ","),
	}
	return controlplane.Start(ComponentEdge, filepath.Join(u.o.Fleetnet, EdgeBinary), args,
		filepath.Join(s.Dir, "edge", "edge.log"), u.startOptions())
}

// startDiscovery runs fleetnet-discovery with the kubernetes source on the
// hub's imported EndpointSlices, HTTPS on loopback.
func (u *upper) startDiscovery(ctx context.Context) (*controlplane.Process, error) {
	s := u.s
	hub := s.Clusters[0]
	health := fmt.Sprintf("127.0.0.1:%d", s.clusterPort(hub, offsetDiscoveryHealth))
	args := []string{
		"--pool-source=kubernetes",
		"--kubeconfig=" + s.KubeconfigPath(hub.Name),
		"--cluster-name=" + hub.Name,
		"--listen=" + strings.TrimPrefix(s.DiscoveryURL(), "https://"),
		// mTLS with the fleet CA: the admin's certificate reads (and may
		// register, for the memory source); a cluster's is refused with
		// 403 by this source, which cannot know export scopes.
		"--tls-cert-file=" + filepath.Join(s.CertDir(), "discovery.crt"),
		"--tls-key-file=" + filepath.Join(s.CertDir(), "discovery.key"),
		"--client-ca-file=" + filepath.Join(s.CertDir(), "ca.crt"),
		fmt.Sprintf("--metrics-addr=127.0.0.1:%d", s.clusterPort(hub, offsetDiscoveryMetrics)),
		"--health-addr=" + health,
	}
	p, err := controlplane.Start(ComponentDiscovery, filepath.Join(u.o.Fleetnet, DiscoveryBinary), args,
		filepath.Join(s.Dir, "discovery", "discovery.log"), u.startOptions())
	if err != nil {
		return nil, err
	}
	if err := waitReady(ctx, p, "http://"+health+"/readyz"); err != nil {
		p.Kill()
		return nil, err
	}
	return p, nil
}

// startConsole runs fleetnet-console on loopback, plain HTTP, logged into
// with the token of ConsoleTokensPath; it reads the registry as the
// fleet's admin, the hub, and the edge's metrics.
func (u *upper) startConsole(ctx context.Context) (*controlplane.Process, error) {
	s := u.s
	hub := s.Clusters[0]
	ao := s.AdminClientOptions()
	health := fmt.Sprintf("127.0.0.1:%d", s.clusterPort(hub, offsetConsoleHealth))
	args := []string{
		"--listen=" + strings.TrimSuffix(strings.TrimPrefix(s.ConsoleURL(), "http://"), "/"),
		"--tokens-file=" + s.ConsoleTokensPath(),
		"--registry=" + ao.Address,
		"--registry-ca-file=" + ao.CAFile,
		"--registry-cert-file=" + ao.CertFile,
		"--registry-key-file=" + ao.KeyFile,
		"--kubeconfig=" + s.KubeconfigPath(hub.Name),
		"--edge-metrics=http://" + s.EdgeMetricsAddress() + "/metrics",
		fmt.Sprintf("--metrics-addr=127.0.0.1:%d", s.clusterPort(hub, offsetConsoleMetrics)),
		"--health-addr=" + health,
	}
	p, err := controlplane.Start(ComponentConsole, filepath.Join(u.o.Fleetnet, ConsoleBinary), args,
		filepath.Join(s.Dir, "console", "console.log"), u.startOptions())
	if err != nil {
		return nil, err
	}
	if err := waitReady(ctx, p, "http://"+health+"/readyz"); err != nil {
		p.Kill()
		return nil, err
	}
	return p, nil
}

func (u *upper) startAgent(c ClusterState) (*controlplane.Process, error) {
	s := u.s
	certs := s.CertDir()
	args := []string{
		"--kubeconfig=" + s.KubeconfigPath(c.Name),
		"--cluster-id=" + c.Name,
		"--clusterset-id=dev",
		"--registry=" + s.RegistryAddress(),
		"--registry-ca-file=" + filepath.Join(certs, "ca.crt"),
		"--registry-cert-file=" + filepath.Join(certs, c.Name+".crt"),
		"--registry-key-file=" + filepath.Join(certs, c.Name+".key"),
		"--metrics-bind-address=" + s.AgentMetricsAddress(c),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", s.clusterPort(c, offsetAgentHealth)),
		// One agent per cluster: nothing to elect, and a restarted agent
		// need not wait for its predecessor's Lease to expire.
		"--leader-elect=false",
	}
	if c.Region != "" {
		args = append(args, "--region="+c.Region)
	}
	args = append(args, s.eastWestAgentArgs(c)...)
	return controlplane.Start(c.Name+"/"+PartAgent, filepath.Join(u.o.Fleetnet, AgentBinary), args,
		filepath.Join(s.Dir, c.Name, "agent.log"), u.startOptions())
}

// waitRegistered returns when every cluster holds a live lease.
func (u *upper) waitRegistered(ctx context.Context) error {
	s := u.s
	fmt.Fprintf(u.o.Progress, "waiting for %d agents to register\n", len(s.Clusters))
	rc, conn, err := client.Dial(s.AdminClientOptions())
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var missing []string
	for {
		missing = missing[:0]
		resp, err := rc.ListClusters(ctx, &registryv1.ListClustersRequest{})
		live := map[string]bool{}
		for _, c := range resp.GetClusters() {
			live[c.GetId()] = c.GetLive()
		}
		for _, c := range s.Clusters {
			if !live[c.Name] {
				missing = append(missing, c.Name)
			}
		}
		if err == nil && len(missing) == 0 {
			return nil
		}
		for _, name := range missing {
			p := s.Processes[name+"/"+PartAgent]
			if !p.Alive() {
				return fmt.Errorf("agent of %s exited; last lines of %s:\n%s", name, p.Log, controlplane.Tail(p.Log, 20))
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("agents of %s did not register (last error: %v); see their logs with `fleetnetctl dev logs CLUSTER/agent`", strings.Join(missing, ", "), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// AdminClientOptions dial the registry as the fleet's administrator.
func (s *State) AdminClientOptions() client.Options {
	return client.Options{
		Address:  s.RegistryAddress(),
		CAFile:   filepath.Join(s.CertDir(), "ca.crt"),
		CertFile: filepath.Join(s.CertDir(), "admin.crt"),
		KeyFile:  filepath.Join(s.CertDir(), "admin.key"),
	}
}

// ClusterClientOptions dial the registry with a cluster's certificate.
func (s *State) ClusterClientOptions(cluster string) client.Options {
	o := s.AdminClientOptions()
	o.CertFile = filepath.Join(s.CertDir(), cluster+".crt")
	o.KeyFile = filepath.Join(s.CertDir(), cluster+".key")
	return o
}

// writeCerts creates the fleet CA and every certificate, keeping those that
// exist.
func writeCerts(s *State) error {
	dir := s.CertDir()
	var ca *pki.KeyPair
	var err error
	if _, statErr := os.Stat(filepath.Join(dir, "ca.crt")); statErr == nil {
		ca, err = pki.LoadCA(filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key"))
	} else {
		if ca, err = pki.NewCA("fleetnet-dev-ca"); err == nil {
			err = ca.Write(dir, "ca")
		}
	}
	if err != nil {
		return fmt.Errorf("fleet CA in %s: %w", dir, err)
	}
	if err := writeConsoleToken(s); err != nil {
		return err
	}
	want := leafCertificates(s, ca)
	// The process nodes' kubelet API pair and the API servers' client
	// certificate toward it (every node listens on 127.0.0.1).
	want["kubelet-client"] = func() (*pki.KeyPair, error) { return ca.AdminCert("kube-apiserver-kubelet-client") }
	want["kubelet"] = func() (*pki.KeyPair, error) {
		return ca.ServingCert("fleetnet-process-node", []string{"127.0.0.1", "localhost"})
	}
	for name, make := range want {
		if _, err := os.Stat(filepath.Join(dir, name+".crt")); err == nil {
			continue
		}
		kp, err := make()
		if err != nil {
			return fmt.Errorf("certificate %s: %w", name, err)
		}
		if err := kp.Write(dir, name); err != nil {
			return err
		}
	}
	return nil
}

// leafCertificates are fleetnet's certificates in a fleet, by file name.
func leafCertificates(s *State, ca *pki.KeyPair) map[string]func() (*pki.KeyPair, error) {
	want := map[string]func() (*pki.KeyPair, error){
		"registry": func() (*pki.KeyPair, error) {
			return ca.ServingCert("fleetnet-registry", []string{"127.0.0.1", "localhost"})
		},
		"admin": func() (*pki.KeyPair, error) { return ca.AdminCert("admin") },
		"gateway": func() (*pki.KeyPair, error) {
			return ca.ServingCert("fleetnet-gateway", []string{"127.0.0.1", "localhost"})
		},
		"edge": func() (*pki.KeyPair, error) { return ca.EdgeCert("edge-dev") },
		"discovery": func() (*pki.KeyPair, error) {
			return ca.ServingCert("fleetnet-discovery", []string{"127.0.0.1", "localhost"})
		},
	}
	for _, c := range s.Clusters {
		want[c.Name] = func() (*pki.KeyPair, error) { return ca.ClusterCert(c.Name) }
		if s.EastWestGateway(c) {
			host, _ := s.transit(c.Network)
			want[c.Name+"-eastwest"] = func() (*pki.KeyPair, error) { return ca.EastWestCert(c.Name) }
			want[c.Name+"-eastwest-edge"] = func() (*pki.KeyPair, error) { return ca.EdgeCert("eastwest-" + c.Name) }
			want[c.Name+"-eastwest-model"] = func() (*pki.KeyPair, error) {
				return ca.ServingCert("fleetnet-agent-"+c.Name, []string{host.String()})
			}
		}
	}
	return want
}

// RenewCertificates issues every fleetnet component's certificate of the
// fleet again from ca (its CA, or the next one of a CA roll) and writes
// them in place, each file replaced whole: the components read them again
// without a restart (internal/certfiles). The process nodes' kubelet pair,
// which Kubernetes' components read once, is left as it is.
func RenewCertificates(s *State, ca *pki.KeyPair) error {
	for name, make := range leafCertificates(s, ca) {
		kp, err := make()
		if err != nil {
			return fmt.Errorf("certificate %s: %w", name, err)
		}
		for _, f := range []struct {
			ext  string
			data []byte
			mode os.FileMode
		}{{".key", kp.KeyPEM, 0o600}, {".crt", kp.CertPEM, 0o644}} {
			path := filepath.Join(s.CertDir(), name+f.ext)
			if err := os.WriteFile(path+".tmp", f.data, f.mode); err != nil {
				return err
			}
			if err := os.Rename(path+".tmp", path); err != nil {
				return err
			}
		}
	}
	return nil
}

// portGrace is how long a port may stay taken by a component that just
// ended: a killed process's leader is reaped before its other threads have
// let go of its sockets.
const portGrace = 5 * time.Second

// portsInUse returns the ports that stay taken for grace.
func portsInUse(ports []portUse, grace time.Duration) []portUse {
	deadline := time.Now().Add(grace)
	for {
		var busy []portUse
		for _, p := range ports {
			if portFree(p.port) != nil {
				busy = append(busy, p)
			}
		}
		if len(busy) == 0 || time.Now().After(deadline) {
			return busy
		}
		ports = busy
		time.Sleep(100 * time.Millisecond)
	}
}

func portFree(port int) error {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return err
	}
	return l.Close()
}

// writeConsoleToken makes the console's login token once; later ups keep
// it, so that a URL printed before still logs in.
func writeConsoleToken(s *State) error {
	path := s.ConsoleTokensPath()
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return fmt.Errorf("console token: %w", err)
	}
	line := hex.EncodeToString(b) + ",dev-admin," + consoleserver.RoleRead + "\n"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(line), 0o600); err != nil {
		return fmt.Errorf("console token: %w", err)
	}
	return nil
}
