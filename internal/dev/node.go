package dev

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/controlplane"
	"github.com/fleetnet/fleetnet/internal/netns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A cluster's node is a network namespace on the bridge with the address
// .254 of the cluster's pod range (the process node's pods take .128 to
// .253, kwok the low ones). It holds what a real node runs for Service traffic and names:
//
//   - kube-proxy (nftables), so that pods reach the cluster's Service
//     addresses, ClusterSetIPs included, through their node: pods' default
//     route points at it. Backends of other clusters are on the same flat
//     bridge and would answer the client directly, past the node's NAT; so
//     the node masquerades all Service traffic (masqueradeAll) and replies
//     come back through it.
//   - fleetnet-dns on port 53 of the node's address: pods' resolv.conf names
//     it.
//   - the API server proxy: the API servers listen on the host's loopback,
//     which a namespace cannot reach. The proxy is a process on the host
//     that listens on the node's own loopback, at the API server's port, and
//     forwards to the host's: the cluster's kubeconfig works unchanged
//     inside the node.
const (
	nodeHost = 254
	// DNSPort is where fleetnet-dns answers on a node's address; the
	// cluster's CoreDNS forwards clusterset.local to it.
	DNSPort = 5353
	// ClusterDNSPort is where the cluster's CoreDNS answers on the node's
	// address: the pods' nameserver.
	ClusterDNSPort  = 53
	kubeProxyHealth = 10256 // kube-proxy's default healthz port
	// kubeProxyMetrics is where kube-proxy serves its metrics: its
	// default, on the node's loopback.
	kubeProxyMetrics = "127.0.0.1:10249"
	dnsHealthPort    = 8080
	dnsReadyPort     = 8181
	dnsMetricsPort   = 9153
	coreDNSReady     = 8182
	coreDNSMetrics   = 9154
)

// CoreDNSBinary is CoreDNS with the kubernetes plugin, which `make tools`
// builds (hack/tools/images/coredns); it is each cluster's own resolver.
const CoreDNSBinary = "coredns"

// Node parts of a cluster (components "<cluster>/<part>"), when the fleet
// has nodes.
const (
	PartAPIServerProxy = "apiserver-proxy"
	PartKubeProxy      = "kube-proxy"
	PartDNS            = "dns"
	// PartCoreDNS is the cluster's resolver: cluster.local from its API
	// server (CoreDNS's kubernetes plugin), clusterset.local from
	// fleetnet-dns, as in a real cluster.
	PartCoreDNS = "coredns"
	// PartProcessNode runs the Pods scheduled to the cluster as processes
	// (internal/node).
	PartProcessNode = "process-node"
)

// KwokTaintKey taints kwok's fake node in a fleet with process nodes: only
// Pods that tolerate it (or select it) run there, without running.
const KwokTaintKey = "kwok.x-k8s.io/node"

// ProcessNodeName is the name of the cluster's process node.
func (c ClusterState) ProcessNodeName() string { return "fleetnet-node-" + c.Name }

// Binaries the nodes need besides the control plane's.
const (
	CtlBinary       = "fleetnetctl"
	DNSBinary       = "fleetnet-dns"
	KubeProxyBinary = "kube-proxy"
)

// NodeRequirements says why the fleet cannot have nodes here, or nil.
func NodeRequirements() error {
	if os.Geteuid() != 0 {
		return errors.New("nodes (kube-proxy, fleetnet-dns and the pods' routes) live in network namespaces, which needs root: run as root (sudo), or without nodes")
	}
	var missing []string
	for _, cmd := range []struct{ name, pkg string }{{"ip", "iproute2"}, {"nft", "nftables"}, {"sysctl", "procps"}} {
		if _, err := exec.LookPath(cmd.name); err != nil {
			missing = append(missing, fmt.Sprintf("`%s` (%s)", cmd.name, cmd.pkg))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("nodes need %s: run hack/install-deps.sh, or apt-get install them", strings.Join(missing, " and "))
	}
	return nil
}

// NodeBinaries says which binary the nodes need is missing, or nil: tools
// holds kube-proxy (`make tools`), fleetnet the folder with fleetnetctl and
// fleetnet-dns (`make build`).
func NodeBinaries(tools controlplane.Binaries, fleetnet string) error {
	var errs []error
	for _, name := range []string{KubeProxyBinary, CoreDNSBinary} {
		if _, err := tools.Path(name); err != nil {
			errs = append(errs, err)
		}
	}
	for _, name := range []string{CtlBinary, DNSBinary} {
		if _, err := os.Stat(filepath.Join(fleetnet, name)); err != nil {
			errs = append(errs, fmt.Errorf("%s is missing: run `make build` in the fleetnet checkout", filepath.Join(fleetnet, name)))
		}
	}
	return errors.Join(errs...)
}

// NodeAddress is the address of a cluster's node on the bridge; pods route
// through it and resolve names with it.
func (c ClusterState) NodeAddress() netip.Addr {
	prefix, err := netip.ParsePrefix(c.PodCIDRs[0])
	if err != nil {
		panic(fmt.Sprintf("cluster %s: pod range %q: %v", c.Name, c.PodCIDRs[0], err))
	}
	b := prefix.Addr().As4()
	return netip.AddrFrom4([4]byte{b[0], b[1], b[2], nodeHost})
}

// NodeAddressV6 is the IPv6 address of a dual-stack cluster's node on the
// bridge (the invalid Addr for a single-stack cluster): pods' IPv6 default
// route.
func (c ClusterState) NodeAddressV6() netip.Addr {
	if !c.DualStack {
		return netip.Addr{}
	}
	a, err := c.hostV6(nodeHost)
	if err != nil {
		panic(err.Error())
	}
	return a
}

// KwokNodeName is the name of the cluster's Node object, kwok's.
func (c ClusterState) KwokNodeName() string { return "kwok-" + c.Name }

// Zone is the topology.kubernetes.io/zone of the cluster's nodes: one zone
// per cluster, named after its region (or the cluster, without one), so
// that zone hints and locality policies work as on a cloud's nodes.
func (c ClusterState) Zone() string {
	if c.Region != "" {
		return c.Region + "-a"
	}
	return c.Name + "-a"
}

// TopologyLabels are the region and zone labels of the cluster's nodes.
func (c ClusterState) TopologyLabels() map[string]string {
	l := map[string]string{corev1.LabelTopologyZone: c.Zone()}
	if c.Region != "" {
		l[corev1.LabelTopologyRegion] = c.Region
	}
	return l
}

// kwokNodeLabels are the labels the kwok node is made with. In a fleet
// with nodes its kube-proxy runs as the kwok node, and the zone label is
// set only once that kube-proxy is up (zoneAfterKubeProxy).
func (c ClusterState) kwokNodeLabels(nodes bool) map[string]string {
	l := c.TopologyLabels()
	if nodes {
		delete(l, corev1.LabelTopologyZone)
	}
	return l
}

// zoneAfterKubeProxy works around a race in kube-proxy (v1.37,
// cmd/kube-proxy/app/server.go): its node informer is started and synced
// in NewNodeManager, and NewNodeTopologyConfig adds its event handler to
// that running informer before the proxier is registered as the handler's
// listener. When the informer replays the node (an add) before the
// registration, NodeTopologyConfig records the zone and tells no one; every
// later event carries the same zone and is dropped as no change. That
// kube-proxy never learns its node's zone and ignores every Service's zone
// hints for its whole life ("Ignoring same-zone topology hints ... node is
// missing label" at -v=2): a LocalFirst import's traffic goes to every
// cluster (issue 52). A zone label that appears after kube-proxy is up is
// a change, delivered to the registered proxier. So the zone is taken off
// before kube-proxy starts and put back once it answers /healthz (its first
// sync, which comes after the registration).
// docs/decisions/0160-kube-proxy-zone-race.md has the upstream issue.
func (c ClusterState) zoneAfterKubeProxy(ctx context.Context, s *State, present bool) error {
	cs, err := s.Clientset(c.Name)
	if err != nil {
		return err
	}
	var patch string
	if present {
		patch = fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, corev1.LabelTopologyZone, c.Zone())
	} else {
		patch = fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, corev1.LabelTopologyZone)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := cs.CoreV1().Nodes().Patch(ctx, c.KwokNodeName(), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("node %s's zone label: %w", c.KwokNodeName(), err)
	}
	return nil
}

// zoneFollowedByKubeProxy puts the zone label on the kwok node and waits
// until the node's kube-proxy has made a full sync of every IP family
// after it, which a topology change always asks for (nftables proxier's
// OnTopologyChange) and nothing else does but a failed sync or the hourly
// full sync. A change that it did not take is made again, twice at most.
func (c ClusterState) zoneFollowedByKubeProxy(ctx context.Context, s *State) error {
	// /healthz answers before the first sync; the full-sync series appear
	// with it, which comes after the proxier's registration.
	var before map[string]float64
	var err error
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if before, err = c.kubeProxyFullSyncs(ctx); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for the first sync: %w", err)
		}
	}
	for range 3 {
		if err := c.zoneAfterKubeProxy(ctx, s, true); err != nil {
			return err
		}
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			after, err := c.kubeProxyFullSyncs(ctx)
			if err != nil {
				return err
			}
			if tookIt(before, after) {
				return nil
			}
		}
		// Taken off and put on again: the full sync that taking it off
		// may cause (kube-proxy at least 1 s apart) comes before the count.
		if err := c.zoneAfterKubeProxy(ctx, s, false); err != nil {
			return err
		}
		time.Sleep(2 * time.Second)
		if before, err = c.kubeProxyFullSyncs(ctx); err != nil {
			return err
		}
	}
	return fmt.Errorf("kube-proxy of %s did not take its node %s's zone label %s (no full sync after it, three times): its Service's zone hints would be ignored", c.Name, c.KwokNodeName(), c.Zone())
}

// tookIt: every family's full syncs went up.
func tookIt(before, after map[string]float64) bool {
	for series, n := range before {
		if after[series] <= n {
			return false
		}
	}
	return true
}

// kubeProxyFullSyncs reads how many full syncs the node's kube-proxy made,
// by IP family, from its metrics (on the node's loopback).
func (c ClusterState) kubeProxyFullSyncs(ctx context.Context) (map[string]float64, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: netns.Dialer(c.NodeNetNS())}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+kubeProxyMetrics+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("kube-proxy of %s: %w", c.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("kube-proxy of %s: %w", c.Name, err)
	}
	const name = "kubeproxy_sync_full_proxy_rules_duration_seconds_count"
	out := map[string]float64{}
	for line := range strings.Lines(string(body)) {
		if !strings.HasPrefix(line, name) {
			continue
		}
		series, value, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, fmt.Errorf("kube-proxy of %s: %q: %w", c.Name, line, err)
		}
		out[series] = n
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("kube-proxy of %s: no %s in its metrics", c.Name, name)
	}
	return out, nil
}

// NodeNetNS is the name of the node's network namespace.
func (c ClusterState) NodeNetNS() string { return "fleetnet-node-" + c.Name }

// nodeVeth is the host end of the node's veth; interface names have at most
// 15 bytes, cluster names up to 63.
func (c ClusterState) nodeVeth() string {
	h := fnv.New32a()
	h.Write([]byte(c.Name))
	return fmt.Sprintf("fnn%08x", h.Sum32())
}

// DNSAddress is where the cluster's fleetnet-dns answers.
func (c ClusterState) DNSAddress() string {
	return net.JoinHostPort(c.NodeAddress().String(), fmt.Sprint(DNSPort))
}

// ClusterDNSAddress is where the cluster's CoreDNS answers: the pods'
// nameserver.
func (c ClusterState) ClusterDNSAddress() string {
	return net.JoinHostPort(c.NodeAddress().String(), fmt.Sprint(ClusterDNSPort))
}

// nodes starts every cluster's node, in parallel.
func (u *upper) nodes(ctx context.Context) error {
	if !u.s.Nodes {
		return nil
	}
	if err := u.bridgeAndNetworks(); err != nil {
		return err
	}
	errs := make([]error, len(u.s.Clusters))
	var wg sync.WaitGroup
	for i, c := range u.s.Clusters {
		wg.Go(func() { errs[i] = u.node(ctx, c) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, c := range u.s.Clusters {
		if !u.s.EastWestGateway(c) {
			continue
		}
		if err := u.ensure(c.Name+"/"+PartEastWestGateway, func() (*controlplane.Process, error) { return u.startEastWestGateway(ctx, c) }); err != nil {
			return err
		}
	}
	return nil
}

// bridgeAndNetworks makes the bridge and the fleet's networks, unless they
// exist.
func (u *upper) bridgeAndNetworks() error {
	created, err := ensureBridge(slices.ContainsFunc(u.s.Clusters, func(c ClusterState) bool { return c.DualStack }))
	if err != nil {
		return err
	}
	u.createdBridge = u.createdBridge || created
	return ensureNetworks(u.s)
}

func (u *upper) node(ctx context.Context, c ClusterState) error {
	if err := ensureNodeNetwork(u.s.Dir, c); err != nil {
		return fmt.Errorf("node of %s: %w", c.Name, err)
	}
	s := u.s
	apiPort := s.clusterPort(c, offsetAPIServer)
	if err := u.ensure(c.Name+"/"+PartAPIServerProxy, func() (*controlplane.Process, error) {
		addr := fmt.Sprintf("127.0.0.1:%d", apiPort)
		args := []string{"dev", "apiserver-proxy", "--netns=" + c.NodeNetNS(), "--listen=" + addr, "--to=" + addr}
		return controlplane.Start(c.Name+"/"+PartAPIServerProxy, filepath.Join(u.o.Fleetnet, CtlBinary), args,
			filepath.Join(s.Dir, c.Name, "apiserver-proxy.log"), u.startOptions())
	}); err != nil {
		return err
	}
	node := c.NodeAddress().String()
	if err := u.ensure(c.Name+"/"+PartKubeProxy, func() (*controlplane.Process, error) {
		bin, err := u.o.Tools.Path(KubeProxyBinary)
		if err != nil {
			return nil, err
		}
		config := filepath.Join(s.Dir, c.Name, "kube-proxy.yaml")
		if err := os.WriteFile(config, []byte(kubeProxyConfig(s, c)), 0o644); err != nil {
			return nil, err
		}
		if err := c.zoneAfterKubeProxy(ctx, s, false); err != nil {
			return nil, err
		}
		// /healthz answers 200 once kube-proxy serves. At
		// verbosity 2 kube-proxy says when and why it ignores a Service's
		// topology hints (no zone label on its node, no hint for its
		// zone), which is what a locality policy depends on.
		p, err := u.startInNode(ctx, c, PartKubeProxy, fmt.Sprintf("http://%s:%d/healthz", node, kubeProxyHealth), bin, "--config="+config, "--v=2")
		if err != nil {
			return nil, err
		}
		if err := c.zoneFollowedByKubeProxy(ctx, s); err != nil {
			p.Kill()
			return nil, err
		}
		return p, nil
	}); err != nil {
		return err
	}
	if err := u.ensure(c.Name+"/"+PartDNS, func() (*controlplane.Process, error) {
		return u.startInNode(ctx, c, PartDNS, fmt.Sprintf("http://%s:%d/ready", node, dnsReadyPort), filepath.Join(u.o.Fleetnet, DNSBinary),
			"--kubeconfig="+s.KubeconfigPath(c.Name),
			"--listen="+c.DNSAddress(),
			fmt.Sprintf("--health-addr=%s:%d", node, dnsHealthPort),
			fmt.Sprintf("--ready-addr=%s:%d", node, dnsReadyPort),
			fmt.Sprintf("--metrics-addr=%s:%d", node, dnsMetricsPort))
	}); err != nil {
		return err
	}
	if err := u.ensure(c.Name+"/"+PartCoreDNS, func() (*controlplane.Process, error) { return u.startCoreDNS(ctx, c) }); err != nil {
		return err
	}
	return u.ensure(c.Name+"/"+PartProcessNode, func() (*controlplane.Process, error) { return u.startProcessNode(ctx, c) })
}

// startCoreDNS runs the cluster's resolver in its node's namespace, on the
// node's address: cluster.local (and reverse lookups) from the cluster's
// API server with CoreDNS's kubernetes plugin, clusterset.local forwarded
// to fleetnet-dns uncached (its answers carry their own TTLs), anything
// else to the host's resolvers. This is the stanza a real cluster's CoreDNS
// gets (internal/dns/app's documentation).
func (u *upper) startCoreDNS(ctx context.Context, c ClusterState) (*controlplane.Process, error) {
	s := u.s
	bin, err := u.o.Tools.Path(CoreDNSBinary)
	if err != nil {
		return nil, err
	}
	node := c.NodeAddress().String()
	corefile := filepath.Join(s.Dir, c.Name, "Corefile")
	conf := fmt.Sprintf(`# The cluster's resolver (fleetnetctl dev up).
cluster.local:%[1]d in-addr.arpa:%[1]d ip6.arpa:%[1]d {
    bind %[2]s
    errors
    ready %[2]s:%[3]d
    prometheus %[2]s:%[4]d
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %[5]s
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }
    cache 5
}
%[6]s:%[1]d {
    bind %[2]s
    errors
    forward . %[7]s
}
.:%[1]d {
    bind %[2]s
    errors
    forward . /etc/resolv.conf
    cache 30
}
`, ClusterDNSPort, node, coreDNSReady, coreDNSMetrics, s.KubeconfigPath(c.Name), keys.ClustersetZone, c.DNSAddress())
	if err := os.WriteFile(corefile, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	return u.startInNode(ctx, c, PartCoreDNS, fmt.Sprintf("http://%s:%d/ready", node, coreDNSReady), bin, "-conf", corefile)
}

// startInNode runs a node part (its log <cluster>/<part>.log) in the
// node's namespace and waits until ready answers 200.
func (u *upper) startInNode(ctx context.Context, c ClusterState, part, ready string, bin string, args ...string) (*controlplane.Process, error) {
	p, err := controlplane.Start(c.Name+"/"+part, "ip", append([]string{"netns", "exec", c.NodeNetNS(), bin}, args...),
		filepath.Join(u.s.Dir, c.Name, part+".log"), u.startOptions())
	if err != nil {
		return nil, err
	}
	// From inside the node: on a network of its own, the host cannot
	// reach it.
	if err := waitReadyIn(ctx, p, c.NodeNetNS(), ready); err != nil {
		p.Kill()
		return nil, err
	}
	return p, nil
}

// kubeProxyConfig is the node's KubeProxyConfiguration. The conntrack
// settings are zero because a network namespace may not change the host's
// conntrack table size and timeouts.
func kubeProxyConfig(s *State, c ClusterState) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection:
  kubeconfig: %q
hostnameOverride: %q
bindAddress: %q
clusterCIDR: %q
nftables:
  masqueradeAll: true
healthzBindAddress: "%s:%d"
metricsBindAddress: "%s"
nodePortAddresses: [%s]
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, s.KubeconfigPath(c.Name), c.KwokNodeName(), c.NodeAddress(), strings.Join(c.PodCIDRs, ","),
		c.NodeAddress(), kubeProxyHealth, kubeProxyMetrics, nodePortAddresses(c))
}

// nodePortAddresses is kube-proxy's nodePortAddresses: the node's
// addresses, one of each family in a dual-stack cluster.
func nodePortAddresses(c ClusterState) string {
	out := fmt.Sprintf("%q", c.NodeAddress().String()+"/32")
	if c.DualStack {
		out += fmt.Sprintf(", %q", c.NodeAddressV6().String()+"/128")
	}
	return out
}

// nodeOwners records which fleet (its folder) created each node
// namespace: node namespaces are named after clusters, and every fleet has
// a hub.
const nodeOwners = "/run/fleetnet/nodes"

// nodeOwner returns the folder of the fleet that created the namespace, or
// "" when none is recorded.
func nodeOwner(ns string) string {
	data, err := os.ReadFile(filepath.Join(nodeOwners, ns))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// reclaimNodes checks, before anything starts, that no other fleet holds
// the node namespaces this one needs. A fleet that holds them but no longer
// runs (its command was killed, or its folder removed, before `dev down`)
// is taken down, so that one killed run does not block every later one; a
// running fleet is an error naming it.
func reclaimNodes(dir string, clusters []ClusterState, progress io.Writer) error {
	stale := map[string]bool{}
	var errs []error
	for _, c := range clusters {
		ns := c.NodeNetNS()
		owner := nodeOwner(ns)
		if owner == "" || owner == dir {
			continue
		}
		if _, err := os.Stat(filepath.Join(netns.Dir, ns)); err != nil {
			continue // a record without a namespace: ensureNodeNetwork rewrites it
		}
		if fleetRuns(owner) {
			errs = append(errs, ownedElsewhere(ns, owner))
			continue
		}
		stale[owner] = true
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, owner := range slices.Sorted(maps.Keys(stale)) {
		fmt.Fprintf(progress, "the fleet in %s left its nodes behind and no longer runs: taking it down\n", owner)
		if _, err := os.Stat(filepath.Join(owner, stateFile)); err == nil {
			if err := Down(owner, progress); err != nil {
				return fmt.Errorf("taking down the stopped fleet in %s: %w", owner, err)
			}
		}
	}
	// What a removed folder no longer names: the namespaces themselves.
	for _, c := range clusters {
		if owner := nodeOwner(c.NodeNetNS()); stale[owner] {
			if err := removeNodeNetwork(owner, c); err != nil {
				return fmt.Errorf("node of %s left by the fleet in %s: %w", c.Name, owner, err)
			}
		}
	}
	return nil
}

// ownedElsewhere is the error for a node namespace of another fleet.
func ownedElsewhere(ns, owner string) error {
	return fmt.Errorf("network namespace %s belongs to the fleet in %s; one root fleet with nodes runs on a machine at a time: run `fleetnetctl dev down --dir %s` first, or give this one --nodes=false", ns, owner, owner)
}

// fleetRuns reports whether the fleet in dir is running or being changed:
// a command holds its lock, or one of its recorded processes is alive.
func fleetRuns(dir string) bool {
	f, err := os.Open(filepath.Join(dir, ".lock"))
	if err != nil {
		return false // no folder, no fleet
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return true
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	s, err := load(dir)
	if err != nil {
		return !errors.Is(err, ErrNoFleet)
	}
	for _, p := range s.Processes {
		if p.Alive() {
			return true
		}
	}
	return false
}

// ensureNodeNetwork creates the node's namespace and its veth on the bridge,
// unless this fleet's exist and are whole. A namespace of another fleet is
// an error: the fleets would share the bridge, pod ranges and node
// addresses.
func ensureNodeNetwork(dir string, c ClusterState) error {
	ns := c.NodeNetNS()
	if _, err := os.Stat(filepath.Join(netns.Dir, ns)); err == nil {
		if owner := nodeOwner(ns); owner != "" && owner != dir {
			return ownedElsewhere(ns, owner)
		}
		out, err := exec.Command("ip", "-n", ns, "addr", "show", "dev", "eth0").CombinedOutput()
		if err == nil && strings.Contains(string(out), " "+c.NodeAddress().String()+"/") &&
			(!c.DualStack || strings.Contains(string(out), " "+c.NodeAddressV6().String()+"/")) {
			return nil
		}
		// Left half made by an interrupted run: made again.
		if err := removeNodeNetwork(dir, c); err != nil {
			return err
		}
	}
	host := c.nodeVeth()
	peer := "fnm" + strings.TrimPrefix(host, "fnn")
	// The host end goes on the network's bridge: the host's, or the one in
	// the network's namespace.
	network := c.NetworkNS()
	err := ipAll([]string{"netns", "add", ns})
	if err == nil {
		err = ipIn(network,
			[]string{"link", "add", host, "type", "veth", "peer", "name", peer, "address", macFor(c.NodeAddress().String())},
			[]string{"link", "set", peer, "netns", ns})
	}
	if err == nil {
		err = ipAll(
			[]string{"-n", ns, "link", "set", peer, "name", "eth0"},
			[]string{"-n", ns, "addr", "add", fmt.Sprintf("%s/%d", c.NodeAddress(), podPrefixLen), "dev", "eth0"},
			[]string{"-n", ns, "link", "set", "eth0", "up"},
			[]string{"-n", ns, "link", "set", "lo", "up"},
		)
	}
	if err == nil {
		err = ipIn(network, []string{"link", "set", host, "master", BridgeName, "up"})
	}
	if err == nil {
		// The node forwards pods' Service traffic back out of the interface
		// it came in on; redirects would tell pods to skip it.
		err = sysctlIn(ns, "net.ipv4.ip_forward=1", "net.ipv4.conf.all.send_redirects=0", "net.ipv4.conf.eth0.send_redirects=0")
	}
	if err == nil && c.DualStack {
		err = ipAll([]string{"-n", ns, "addr", "add", fmt.Sprintf("%s/%d", c.NodeAddressV6(), podPrefixLenV6), "dev", "eth0", "nodad"})
		if err == nil {
			// Linux has no IPv6 send_redirects: a redirect the node sends
			// names the endpoint's address (after kube-proxy's DNAT), which
			// pods reach on-link anyway; Service addresses stay routed.
			err = sysctlIn(ns, "net.ipv6.conf.all.forwarding=1")
		}
	}
	if err == nil {
		if err = os.MkdirAll(nodeOwners, 0o755); err == nil {
			err = os.WriteFile(filepath.Join(nodeOwners, ns), []byte(dir+"\n"), 0o644)
		}
	}
	if err != nil {
		_ = removeNodeNetwork(dir, c)
		return err
	}
	return nil
}

func sysctlIn(ns string, settings ...string) error {
	args := append([]string{"netns", "exec", ns, "sysctl", "-q", "-w"}, settings...)
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("sysctl %s in %s: %w: %s", strings.Join(settings, " "), ns, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// removeNodeNetwork deletes the node's namespace and veth when this fleet
// (dir) made them; what is already gone is not an error. Deleting the
// namespace (after whatever still runs inside it) deletes kube-proxy's
// rules with it.
func removeNodeNetwork(dir string, c ClusterState) error {
	if owner := nodeOwner(c.NodeNetNS()); owner != "" && owner != dir {
		return nil // another fleet's
	}
	var errs []error
	if exec.Command("ip", "link", "show", c.nodeVeth()).Run() == nil {
		errs = append(errs, ipAll([]string{"link", "del", c.nodeVeth()}))
	}
	errs = append(errs, deleteNetNS(c.NodeNetNS()))
	if err := os.Remove(filepath.Join(nodeOwners, c.NodeNetNS())); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func waitReady(ctx context.Context, p *controlplane.Process, url string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return p.WaitFor(ctx, url, func(ctx context.Context) error { return controlplane.HTTPOK(ctx, url) })
}

// RunAPIServerProxy listens on listen inside the named network namespace
// and forwards every connection to the address to, dialled from the
// namespace this process runs in, until ctx ends.
func RunAPIServerProxy(ctx context.Context, ns, listen, to string) error {
	l, err := netns.Listen(ns, "tcp", listen)
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	var d net.Dialer
	for {
		conn, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("accepting on %s in %s: %w", listen, ns, err)
			}
			// Out of file descriptors and the like: passes.
			fmt.Fprintf(os.Stderr, "accepting on %s in %s: %v\n", listen, ns, err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		go func() {
			defer conn.Close()
			up, err := d.DialContext(ctx, "tcp", to)
			if err != nil {
				fmt.Fprintf(os.Stderr, "forwarding %s in %s to %s: %v\n", listen, ns, to, err)
				return
			}
			defer up.Close()
			done := make(chan struct{}, 2)
			pipe := func(dst, src net.Conn) {
				_, _ = io.Copy(dst, src)
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
				done <- struct{}{}
			}
			go pipe(up, conn)
			go pipe(conn, up)
			<-done
			<-done
		}()
	}
}

// startProcessNode starts the cluster's process node and waits until its
// Node is Ready.
func (u *upper) startProcessNode(ctx context.Context, c ClusterState) (*controlplane.Process, error) {
	s := u.s
	certs := s.CertDir()
	args := []string{"dev", "node", "--dir=" + s.Dir,
		"--cluster=" + c.Name,
		"--node-name=" + c.ProcessNodeName(),
		"--zone=" + c.Zone(),
		"--region=" + c.Region,
		"--state-dir=" + filepath.Join(s.Dir, c.Name, "process-node"),
		"--kubeconfig=" + s.KubeconfigPath(c.Name),
		fmt.Sprintf("--listen=127.0.0.1:%d", s.clusterPort(c, offsetProcessNode)),
		"--tls-cert-file=" + filepath.Join(certs, "kubelet.crt"),
		"--tls-key-file=" + filepath.Join(certs, "kubelet.key"),
		"--client-ca-file=" + filepath.Join(certs, "ca.crt"),
		"--tools-dir=" + u.o.Tools.Dir,
	}
	p, err := controlplane.Start(c.Name+"/"+PartProcessNode, filepath.Join(u.o.Fleetnet, CtlBinary), args,
		filepath.Join(s.Dir, c.Name, "process-node.log"), u.startOptions())
	if err != nil {
		return nil, err
	}
	cs, err := s.Clientset(c.Name)
	if err != nil {
		p.Kill()
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	kubeletAPI := fmt.Sprintf("127.0.0.1:%d", s.clusterPort(c, offsetProcessNode))
	err = p.WaitFor(wctx, "Node "+c.ProcessNodeName()+" Ready", func(ctx context.Context) error {
		// The port was free before the start: an answer is this process's,
		// while the Node may still show Ready from an earlier one.
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", kubeletAPI)
		if err != nil {
			return fmt.Errorf("kubelet API %s: %w", kubeletAPI, err)
		}
		conn.Close()
		n, err := cs.CoreV1().Nodes().Get(ctx, c.ProcessNodeName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("node %s is not Ready", c.ProcessNodeName())
	})
	if err != nil {
		p.Kill()
		return nil, err
	}
	return p, nil
}
