// Package dev runs a local fleet on one machine for demos and end-to-end
// tests (`fleetnetctl dev`): one etcd, per cluster a kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok, a registry, and an agent
// per cluster, each its own process. What runs is recorded in a state file
// in the fleet's folder, so that later commands (status, logs, stop, down)
// and a second `up` find it again.
package dev

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/fleetnet/fleetnet/internal/podnet"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	consoleserver "github.com/fleetnet/fleetnet/internal/console/server"
	"github.com/fleetnet/fleetnet/internal/tokenfile"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// stateFile is the name of the state file in a fleet's folder.
const stateFile = "state.json"

// State is what a fleet's folder records about it.
type State struct {
	Dir      string        `json:"dir"`
	BasePort int           `json:"basePort"`
	LeaseTTL time.Duration `json:"leaseTTL"`
	// GatewayAddressPool is fleetnet-gateway's --gateway-address-pool
	// ("" none: every Gateway at 127.0.0.1).
	GatewayAddressPool string         `json:"gatewayAddressPool,omitempty"`
	Clusters           []ClusterState `json:"clusters"`
	// Processes by component name (see Component*).
	Processes map[string]ProcessState `json:"processes"`
	// Pods are the networks the process nodes made for their Pods, by
	// "<cluster>/<namespace>/<pod>".
	Pods map[string]PodState `json:"pods,omitempty"`
	// Nodes is set when every cluster has a node (see node.go).
	Nodes bool `json:"nodes,omitempty"`
	// HA is set for a fleet with a 3-member etcd (the API servers' and the
	// registry's) and two registry replicas; without it, one etcd for the
	// API servers and one registry with etcd embedded.
	HA bool `json:"ha,omitempty"`
	// Version is the state file's format (stateVersion).
	Version int `json:"version,omitempty"`

	// legacyServers are the servers of pods that `dev serve` ran itself
	// (state files before version 2), by pod; only Down uses a state that
	// has them.
	legacyServers map[string]ProcessState
}

// stateVersion is the state file's format. 2: every pod is a process
// node's. Before, `dev serve` also ran echo pods of its own, recorded with
// their server's process ("process") and without "node": true.
const stateVersion = 2

// ClusterState is one cluster of the fleet.
type ClusterState struct {
	Name         string   `json:"name"`
	Index        int      `json:"index"`
	DualStack    bool     `json:"dualStack,omitempty"`
	ServiceCIDRs []string `json:"serviceCIDRs"`
	// PodCIDRs are the kwok node's pod ranges, IPv4 first; dual-stack
	// clusters have an IPv6 one as well.
	PodCIDRs []string `json:"podCIDRs"`
	// Region is the agent's --region: imported slices carry it, and
	// discovery groups pools by it.
	Region string `json:"region,omitempty"`
	// Network is the cluster's network (networks.go); "" is the fleet's
	// default network, the host's bridge.
	Network string `json:"network,omitempty"`
}

// ProcessState identifies a started process. The start time (in clock ticks
// since boot, from /proc) tells a live process from a later one that was
// given the same pid.
type ProcessState struct {
	Pid       int    `json:"pid"`
	StartTime uint64 `json:"startTime"`
	Log       string `json:"log"`
}

// PodState is the network of a Pod that a cluster's process node runs
// (internal/node): podnet's, which the state file records.
type PodState = podnet.Pod

// Component names. Per-cluster components are "<cluster>/<part>".
const (
	ComponentEtcd     = "etcd"
	ComponentRegistry = "registry"
	// ComponentGateway runs against the first cluster, the hub.
	ComponentGateway = "gateway"
	ComponentEdge    = "edge"
	// ComponentDiscovery serves the hub's imported pools (kubernetes
	// source).
	ComponentDiscovery = "discovery"
	// ComponentConsole is the web console, on loopback.
	ComponentConsole = "console"

	PartAPIServer         = "kube-apiserver"
	PartControllerManager = "kube-controller-manager"
	PartScheduler         = "kube-scheduler"
	PartKwok              = "kwok"
	PartAgent             = "agent"
)

// Sizes of an HA fleet's etcd and registry.
const (
	haEtcdMembers      = 3
	haRegistryReplicas = 2
)

// EtcdMembers are the etcd components: "etcd", then "etcd-1", "etcd-2" in
// an HA fleet.
func (s *State) EtcdMembers() []string { return s.numbered(ComponentEtcd, haEtcdMembers) }

// RegistryReplicas are the registry components: "registry", then
// "registry-1" in an HA fleet.
func (s *State) RegistryReplicas() []string {
	return s.numbered(ComponentRegistry, haRegistryReplicas)
}

func (s *State) numbered(first string, ha int) []string {
	out := []string{first}
	if s.HA {
		for i := 1; i < ha; i++ {
			out = append(out, fmt.Sprintf("%s-%d", first, i))
		}
	}
	return out
}

// Components lists the fleet's components in start order.
func (s *State) Components() []string {
	out := s.EtcdMembers()
	for _, c := range s.Clusters {
		for _, p := range []string{PartAPIServer, PartControllerManager, PartScheduler, PartKwok} {
			out = append(out, c.Name+"/"+p)
		}
	}
	out = append(out, s.RegistryReplicas()...)
	for _, c := range s.Clusters {
		out = append(out, c.Name+"/"+PartAgent)
	}
	out = append(out, ComponentGateway, ComponentEdge, ComponentDiscovery, ComponentConsole)
	if s.Nodes {
		for _, c := range s.Clusters {
			out = append(out, c.Name+"/"+PartAPIServerProxy, c.Name+"/"+PartKubeProxy, c.Name+"/"+PartDNS, c.Name+"/"+PartCoreDNS, c.Name+"/"+PartProcessNode)
		}
		for _, c := range s.Clusters {
			if s.EastWestGateway(c) {
				out = append(out, c.Name+"/"+PartEastWestGateway)
			}
		}
	}
	return out
}

// Ports of a fleet are fixed offsets from its base port, so that they stay
// the same across restarts and a user can predict them.
const (
	offsetEtcdClient      = 0
	offsetEtcdPeer        = 1
	offsetRegistry        = 2
	offsetRegistryMetrics = 3
	offsetGatewayEdges    = 4
	offsetGatewayMetrics  = 5
	offsetGatewayHealth   = 6
	offsetEdgeMetrics     = 7
	offsetEdgeHealth      = 8
	offsetConsole         = 9
	offsetClusters        = 10
	portsPerCluster       = 10
	offsetAPIServer       = 0
	offsetKwok            = 1
	offsetAgentMetrics    = 2
	offsetAgentHealth     = 3
	// fleetnet-discovery reads the hub, and takes ports of its range.
	offsetDiscovery        = 4
	offsetDiscoveryMetrics = 5
	offsetDiscoveryHealth  = 6
	// The process node's kubelet API.
	offsetProcessNode = 7
	// fleetnet-console's metrics and probes, in the hub's range.
	offsetConsoleMetrics = 8
	offsetConsoleHealth  = 9
	// An HA fleet's further etcd members and registry replicas take two
	// ports each after the clusters' ranges.
	portsPerMember = 2
)

// GatewayEdgesAddress is where fleetnet-gateway serves models to edges.
func (s *State) GatewayEdgesAddress() string {
	return fmt.Sprintf("127.0.0.1:%d", s.BasePort+offsetGatewayEdges)
}

// podRanges are the pod ranges of every cluster of the fleet.
func (s *State) podRanges() []string {
	var r []string
	for _, c := range s.Clusters {
		if c.Network == "" {
			r = append(r, c.PodCIDRs...)
		}
	}
	return r
}

// edgeRanges are the addresses the fleet's edge (on the host) may dial:
// the default network's pod ranges and, with networks, the bridge address
// where the hub's east-west gateway takes its imports' traffic. Another
// network's pods are not reachable from the host; their ranges may name
// the default network's pods.
func (s *State) edgeRanges() []string {
	r := s.podRanges()
	if s.HasNetworks() {
		r = append(r, bridgeHost.String()+"/32")
	}
	return r
}

// EdgeMetricsAddress is where fleetnet-edge serves /metrics.
func (s *State) EdgeMetricsAddress() string {
	return fmt.Sprintf("127.0.0.1:%d", s.BasePort+offsetEdgeMetrics)
}

// DiscoveryURL is fleetnet-discovery's API (HTTPS on loopback; clients
// present a certificate of the fleet CA, see AdminClientOptions).
func (s *State) DiscoveryURL() string {
	return fmt.Sprintf("https://127.0.0.1:%d", s.clusterPort(s.Clusters[0], offsetDiscovery))
}

// ConsoleURL is fleetnet-console's web UI (plain HTTP on loopback).
func (s *State) ConsoleURL() string {
	return fmt.Sprintf("http://127.0.0.1:%d/", s.BasePort+offsetConsole)
}

// ConsoleTokensPath is the console's tokens file: one login token, made
// with the fleet's certificates.
func (s *State) ConsoleTokensPath() string { return filepath.Join(s.CertDir(), "console-tokens.csv") }

// ConsoleLoginURL is the URL a browser on this machine opens to log in to
// the console: ConsoleURL with the login token.
func (s *State) ConsoleLoginURL() (string, error) {
	entries, err := tokenfile.Load(s.ConsoleTokensPath(), consoleserver.RoleRead)
	if err != nil {
		return "", err
	}
	if len(entries) == 0 {
		return "", fmt.Errorf("%s holds no token", s.ConsoleTokensPath())
	}
	return s.ConsoleURL() + "?token=" + url.QueryEscape(entries[0].Token), nil
}

// RegistryAddress is the registry's gRPC address: every replica's,
// comma-separated, as clients take it.
func (s *State) RegistryAddress() string {
	var out []string
	for i := range s.RegistryReplicas() {
		out = append(out, s.registryListen(i))
	}
	return strings.Join(out, ",")
}

// registryListen is replica i's gRPC address; registryMetrics its /metrics.
func (s *State) registryListen(i int) string {
	if i == 0 {
		return fmt.Sprintf("127.0.0.1:%d", s.BasePort+offsetRegistry)
	}
	return fmt.Sprintf("127.0.0.1:%d", s.extraPort(len(s.EtcdMembers())-1+i-1, 0))
}

func (s *State) registryMetrics(i int) string {
	if i == 0 {
		return fmt.Sprintf("127.0.0.1:%d", s.BasePort+offsetRegistryMetrics)
	}
	return fmt.Sprintf("127.0.0.1:%d", s.extraPort(len(s.EtcdMembers())-1+i-1, 1))
}

// etcdPorts are member i's client and peer ports.
func (s *State) etcdPorts(i int) (client, peer int) {
	if i == 0 {
		return s.BasePort + offsetEtcdClient, s.BasePort + offsetEtcdPeer
	}
	return s.extraPort(i-1, 0), s.extraPort(i-1, 1)
}

// EtcdEndpoints are the etcd members' client URLs, comma-separated.
func (s *State) EtcdEndpoints() string {
	var out []string
	for i := range s.EtcdMembers() {
		c, _ := s.etcdPorts(i)
		out = append(out, fmt.Sprintf("http://127.0.0.1:%d", c))
	}
	return strings.Join(out, ",")
}

// extraPort is port k of the n-th further member or replica of an HA fleet.
func (s *State) extraPort(n, k int) int {
	return s.BasePort + offsetClusters + len(s.Clusters)*portsPerCluster + n*portsPerMember + k
}

// lastPort is the highest port the fleet uses.
func (s *State) lastPort() int {
	extra := len(s.EtcdMembers()) - 1 + len(s.RegistryReplicas()) - 1
	return s.BasePort + offsetClusters + len(s.Clusters)*portsPerCluster + extra*portsPerMember - 1
}

// MetricsAddresses are where each component of the fleet serves /metrics,
// by component (a cluster's agent as "<cluster>/agent").
func (s *State) MetricsAddresses() map[string]string {
	out := map[string]string{
		ComponentGateway:   fmt.Sprintf("127.0.0.1:%d", s.BasePort+offsetGatewayMetrics),
		ComponentEdge:      s.EdgeMetricsAddress(),
		ComponentDiscovery: fmt.Sprintf("127.0.0.1:%d", s.clusterPort(s.Clusters[0], offsetDiscoveryMetrics)),
		ComponentConsole:   fmt.Sprintf("127.0.0.1:%d", s.clusterPort(s.Clusters[0], offsetConsoleMetrics)),
	}
	for i, r := range s.RegistryReplicas() {
		out[r] = s.registryMetrics(i)
	}
	for _, c := range s.Clusters {
		out[c.Name+"/"+PartAgent] = s.AgentMetricsAddress(c)
	}
	return out
}

// AgentMetricsAddress is where a cluster's agent serves /metrics.
func (s *State) AgentMetricsAddress(c ClusterState) string {
	return fmt.Sprintf("127.0.0.1:%d", s.clusterPort(c, offsetAgentMetrics))
}

func (s *State) clusterPort(c ClusterState, offset int) int {
	return s.BasePort + offsetClusters + c.Index*portsPerCluster + offset
}

// ports lists every port the fleet listens on, with what it is for.
func (s *State) ports() []portUse {
	var out []portUse
	for i, m := range s.EtcdMembers() {
		client, peer := s.etcdPorts(i)
		out = append(out, portUse{client, m, "client"}, portUse{peer, m, "peer"})
	}
	for i, r := range s.RegistryReplicas() {
		out = append(out, portUse{port(s.registryListen(i)), r, ""}, portUse{port(s.registryMetrics(i)), r, "metrics"})
	}
	out = append(out, []portUse{
		{s.BasePort + offsetGatewayEdges, ComponentGateway, "edges"},
		{s.BasePort + offsetGatewayMetrics, ComponentGateway, "metrics"},
		{s.BasePort + offsetGatewayHealth, ComponentGateway, "health"},
		{s.BasePort + offsetEdgeMetrics, ComponentEdge, "metrics"},
		{s.BasePort + offsetEdgeHealth, ComponentEdge, "health"},
	}...)
	for _, c := range s.Clusters {
		out = append(out,
			portUse{s.clusterPort(c, offsetAPIServer), c.Name + "/" + PartAPIServer, ""},
			portUse{s.clusterPort(c, offsetKwok), c.Name + "/" + PartKwok, ""},
			portUse{s.clusterPort(c, offsetAgentMetrics), c.Name + "/" + PartAgent, "metrics"},
			portUse{s.clusterPort(c, offsetAgentHealth), c.Name + "/" + PartAgent, "health"},
		)
		if s.Nodes {
			out = append(out, portUse{s.clusterPort(c, offsetProcessNode), c.Name + "/" + PartProcessNode, "kubelet API"})
		}
	}
	hub := s.Clusters[0]
	out = append(out,
		portUse{s.clusterPort(hub, offsetDiscovery), ComponentDiscovery, ""},
		portUse{s.clusterPort(hub, offsetDiscoveryMetrics), ComponentDiscovery, "metrics"},
		portUse{s.clusterPort(hub, offsetDiscoveryHealth), ComponentDiscovery, "health"},
		portUse{s.BasePort + offsetConsole, ComponentConsole, ""},
		portUse{s.clusterPort(hub, offsetConsoleMetrics), ComponentConsole, "metrics"},
		portUse{s.clusterPort(hub, offsetConsoleHealth), ComponentConsole, "health"},
	)
	return out
}

// port is the port of a loopback address the fleet made.
func port(addr string) int {
	p, _ := strconv.Atoi(addr[strings.LastIndexByte(addr, ':')+1:])
	return p
}

// portUse is one port of the fleet: the component listening and, when it
// has several, which of its ports it is.
type portUse struct {
	port      int
	component string
	role      string
}

func (p portUse) String() string {
	if p.role == "" {
		return p.component
	}
	return p.component + " (" + p.role + ")"
}

// Cluster returns the cluster with the given name.
func (s *State) Cluster(name string) (ClusterState, error) {
	for _, c := range s.Clusters {
		if c.Name == name {
			return c, nil
		}
	}
	var names []string
	for _, c := range s.Clusters {
		names = append(names, c.Name)
	}
	return ClusterState{}, fmt.Errorf("the fleet in %s has no cluster %q (it has %s)", s.Dir, name, strings.Join(names, ", "))
}

// KubeconfigPath is the kubeconfig of one cluster.
func (s *State) KubeconfigPath(cluster string) string {
	return filepath.Join(s.Dir, cluster, "kubeconfig")
}

// MergedKubeconfigPath is the kubeconfig with one context per cluster.
func (s *State) MergedKubeconfigPath() string { return filepath.Join(s.Dir, "kubeconfig") }

// CertDir holds the fleet CA and the registry's, clusters' and admin's
// certificates.
func (s *State) CertDir() string { return filepath.Join(s.Dir, "certs") }

// ErrNoFleet is returned when a folder holds no fleet.
var ErrNoFleet = errors.New("no fleet")

// Load reads the state of the fleet in dir. A fleet whose state an older
// or newer fleetnetctl wrote, in a format this one does not run, is
// refused with what to do; Down takes it down all the same.
func Load(dir string) (*State, error) {
	s, err := load(dir)
	if err != nil {
		return nil, err
	}
	if len(s.legacyServers) > 0 {
		return nil, fmt.Errorf("the fleet in %s has echo pods that an older `fleetnetctl dev serve` ran itself (%s); pods now run on the process nodes: take the fleet down with `fleetnetctl dev down --dir %s` and bring it up again",
			s.Dir, strings.Join(slices.Sorted(maps.Keys(s.legacyServers)), ", "), s.Dir)
	}
	return s, nil
}

// load reads the state of the fleet in dir, whatever pods it has.
func load(dir string) (*State, error) {
	path := filepath.Join(dir, stateFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s: start one with `fleetnetctl dev up --dir %s`", ErrNoFleet, dir, dir)
	}
	if err != nil {
		return nil, err
	}
	s := &State{}
	if err := json.Unmarshal(data, s); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if s.Version > stateVersion {
		return nil, fmt.Errorf("%s is of format %d, which a newer fleetnetctl wrote (this one reads up to %d): use that one", path, s.Version, stateVersion)
	}
	if s.Version < 2 {
		var old struct {
			Pods map[string]struct {
				Node    bool         `json:"node"`
				Process ProcessState `json:"process"`
			} `json:"pods"`
		}
		if err := json.Unmarshal(data, &old); err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		for key, p := range old.Pods {
			if !p.Node {
				if s.legacyServers == nil {
					s.legacyServers = map[string]ProcessState{}
				}
				s.legacyServers[key] = p.Process
			}
		}
	}
	if s.Processes == nil {
		s.Processes = map[string]ProcessState{}
	}
	if s.Pods == nil {
		s.Pods = map[string]PodState{}
	}
	return s, nil
}

// save writes the state atomically, in the current format.
func (s *State) save() error {
	s.Version = stateVersion
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(s.Dir, stateFile)
	if err := os.WriteFile(path+".tmp", data, 0o644); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

// lock takes an exclusive lock on the fleet's folder, so that two commands
// do not change the state at once. The returned function releases it.
func lock(dir string) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	return func() { f.Close() }, nil
}

// Clientset returns a clientset for one of the fleet's clusters.
func (s *State) Clientset(cluster string) (kubernetes.Interface, error) {
	if _, err := s.Cluster(cluster); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", s.KubeconfigPath(cluster))
	if err != nil {
		return nil, fmt.Errorf("kubeconfig of %s: %w", cluster, err)
	}
	return kubernetes.NewForConfig(cfg)
}

// lockAndLoad takes the lock of the fleet in dir and reads its state. The
// caller releases the lock with unlock, which is set whenever the lock was
// taken, also when reading failed (ErrNoFleet for a folder without a fleet).
func lockAndLoad(dir string) (s *State, unlock func(), err error) {
	if unlock, err = lock(dir); err != nil {
		return nil, nil, err
	}
	s, err = Load(dir)
	return s, unlock, err
}

// Alive reports whether the recorded process still runs.
func (p ProcessState) Alive() bool {
	if p.Pid <= 0 {
		return false
	}
	start, state, err := procStat(p.Pid)
	return err == nil && start == p.StartTime && state != "Z" && state != "X"
}

// procStat reads a process's start time and state from /proc/<pid>/stat.
func procStat(pid int) (uint64, string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", err
	}
	// The command name (field 2) may hold spaces; fields after it are
	// separated by single spaces.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, "", fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	fields := strings.Fields(s[i+1:])
	// fields[0] is field 3 (state); field 22 (starttime) is fields[19].
	if len(fields) < 20 {
		return 0, "", fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	return start, fields[0], err
}

// stopProcess ends a recorded process: SIGTERM (or sig), then SIGKILL after
// grace. It returns once the process is gone. The fleet starts each
// process in a group of its own (controlplane.Start), so what it started
// and left behind (a child that ignored its parent's death) ends with it.
func stopProcess(p ProcessState, sig syscall.Signal, grace time.Duration) {
	if !p.Alive() {
		return
	}
	_ = syscall.Kill(p.Pid, sig)
	deadline := time.Now().Add(grace)
	for p.Alive() {
		if time.Now().After(deadline) {
			_ = syscall.Kill(p.Pid, syscall.SIGKILL)
			deadline = time.Now().Add(time.Hour)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
}
