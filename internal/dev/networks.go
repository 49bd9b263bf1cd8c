package dev

import (
	"context"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	aboutv1alpha1 "github.com/fleetnet/fleetnet/api/about/v1alpha1"
	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/controlplane"
	"github.com/fleetnet/fleetnet/internal/netns"
	"github.com/fleetnet/fleetnet/internal/scheme"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A fleet's networks (`dev up --networks west=b`). Clusters not named are
// on the fleet's default network, the host's bridge, as before. Each other
// network is a network namespace of its own holding its bridge, with the
// same bridge address and pod ranges that may repeat the default
// network's: its pods and nodes cannot reach another network's pods, and
// are not reached from them or from the host. Only the east-west gateways
// cross, over a transit link per network to the host:
//
//	default network: the host; its gateway's address 172.31.0.1 (on the bridge)
//	network j (1, 2, ...): namespace fleetnet-net-<name>, transit 172.31.j.0/30,
//	                       the host at .1, the network's namespace at .2
//
// The first cluster of each network runs its east-west gateway (a
// fleetnet-edge in the east-west role, in the network's namespace, fed by
// the cluster's agent); its pods reach it at the bridge address, as pods
// of a real cluster reach their gateway's pods. Other clusters of the
// same network have none (their imports from other networks say so).
const (
	networkNSPrefix = "fleetnet-net-"
	// EastWestTunnelPort is where the gateways take tunnel streams.
	EastWestTunnelPort = 15008
	// eastWestModelPort is the agent's model stream for its gateway, on
	// the network's host address.
	eastWestModelPort  = 15012
	eastWestMetrics    = 15090
	eastWestHealth     = 15091
	eastWestPortsRange = "15100-15999"
	// EastWestService is the gateway's Service in its cluster: a
	// selectorless Service whose slice names the bridge address.
	EastWestServiceNamespace = "fleetnet-system"
	EastWestServiceName      = "fleetnet-eastwest"
	// PartEastWestGateway is a gateway cluster's east-west gateway.
	PartEastWestGateway = "eastwest-gateway"
)

// bridgeHost is the bridge's address in every network: the east-west
// gateway's address for the network's pods.
var bridgeHost = netip.MustParseAddr("10.244.255.1")

// networks are the fleet's networks other than the default, in the
// order their first cluster comes.
func (s *State) networks() []string {
	var out []string
	for _, c := range s.Clusters {
		if c.Network != "" && !slices.Contains(out, c.Network) {
			out = append(out, c.Network)
		}
	}
	return out
}

// HasNetworks says some cluster is on a network of its own.
func (s *State) HasNetworks() bool { return len(s.networks()) > 0 }

// NetworkNS is the namespace of the cluster's network, "" for the
// default network (the host).
func (c ClusterState) NetworkNS() string {
	if c.Network == "" {
		return ""
	}
	return networkNSPrefix + c.Network
}

// transit is a network's host address and its namespace's address on the
// transit link; for the default network both are the host's 172.31.0.1.
func (s *State) transit(network string) (host, inside netip.Addr) {
	j := slices.Index(s.networks(), network) + 1
	if network == "" {
		a := netip.AddrFrom4([4]byte{172, 31, 0, 1})
		return a, a
	}
	return netip.AddrFrom4([4]byte{172, 31, byte(j), 1}), netip.AddrFrom4([4]byte{172, 31, byte(j), 2})
}

// EastWestGateway says whether the cluster runs an east-west gateway:
// in a fleet with networks, the first cluster of each network.
func (s *State) EastWestGateway(c ClusterState) bool {
	if !s.HasNetworks() || !s.Nodes {
		return false
	}
	i := slices.IndexFunc(s.Clusters, func(o ClusterState) bool { return o.Network == c.Network })
	return i >= 0 && s.Clusters[i].Name == c.Name
}

// EastWestAddress is where the cluster's gateway takes tunnel streams, as
// its agent publishes it.
func (s *State) EastWestAddress(c ClusterState) string {
	_, inside := s.transit(c.Network)
	return netip.AddrPortFrom(inside, EastWestTunnelPort).String()
}

// EastWestMetricsAddress is where the cluster's gateway serves /metrics
// (inside its network's namespace for another network).
func (s *State) EastWestMetricsAddress(c ClusterState) string {
	_, inside := s.transit(c.Network)
	return netip.AddrPortFrom(inside, eastWestMetrics).String()
}

// eastWestModelAddress is where the cluster's agent serves its gateway's
// model: the network's host address.
func (s *State) eastWestModelAddress(c ClusterState) string {
	host, _ := s.transit(c.Network)
	return netip.AddrPortFrom(host, eastWestModelPort).String()
}

// transitVeth is the host end of a network's transit link.
func transitVeth(network string) string { return "fnw" + fmt.Sprintf("%08x", hash32("net/"+network)) }

// ensureNetworks makes every network's namespace, bridge and transit
// link, and lets the host forward between the transit links. A fleet
// without networks changes nothing.
func ensureNetworks(s *State) error {
	if !s.HasNetworks() {
		return nil
	}
	host, _ := s.transit("")
	cmds := [][]string{{"addr", "replace", host.String() + "/32", "dev", BridgeName}}
	if err := ipAll(cmds...); err != nil {
		return err
	}
	if out, err := exec.Command("sysctl", "-q", "-w", "net.ipv4.ip_forward=1").CombinedOutput(); err != nil {
		return fmt.Errorf("sysctl net.ipv4.ip_forward=1: %w: %s", err, strings.TrimSpace(string(out)))
	}
	for _, n := range s.networks() {
		if err := ensureNetwork(s, n); err != nil {
			return fmt.Errorf("network %s: %w", n, err)
		}
	}
	return nil
}

func ensureNetwork(s *State, network string) error {
	ns := networkNSPrefix + network
	host, inside := s.transit(network)
	if _, err := os.Stat(filepath.Join(netns.Dir, ns)); err == nil {
		out, err := exec.Command("ip", "-n", ns, "addr", "show").CombinedOutput()
		if err == nil && strings.Contains(string(out), " "+inside.String()+"/30") && strings.Contains(string(out), " "+bridgeAddress+" ") {
			return nil
		}
		if err := deleteNetNS(ns); err != nil {
			return err
		}
	}
	veth := transitVeth(network)
	peer := "fnx" + strings.TrimPrefix(veth, "fnw")
	err := ipAll(
		[]string{"netns", "add", ns},
		[]string{"-n", ns, "link", "set", "lo", "up"},
		[]string{"-n", ns, "link", "add", BridgeName, "type", "bridge"},
		[]string{"-n", ns, "addr", "add", bridgeAddress, "dev", BridgeName},
		[]string{"-n", ns, "link", "set", BridgeName, "up"},
		[]string{"link", "add", veth, "type", "veth", "peer", "name", peer},
		[]string{"link", "set", peer, "netns", ns},
		[]string{"addr", "add", host.String() + "/30", "dev", veth},
		[]string{"link", "set", veth, "up"},
		[]string{"-n", ns, "link", "set", peer, "name", "transit"},
		[]string{"-n", ns, "addr", "add", inside.String() + "/30", "dev", "transit"},
		[]string{"-n", ns, "link", "set", "transit", "up"},
		// Other networks' gateways, through the host; never their pods.
		[]string{"-n", ns, "route", "add", "172.31.0.0/16", "via", host.String()},
	)
	if err != nil {
		_ = deleteNetNS(ns)
		return err
	}
	return nil
}

// ipIn runs ip commands in the namespace ns, or in the host's for "".
func ipIn(ns string, cmds ...[]string) error {
	if ns == "" {
		return ipAll(cmds...)
	}
	var in [][]string
	for _, c := range cmds {
		in = append(in, append([]string{"-n", ns}, c...))
	}
	return ipAll(in...)
}

// applyNetworkObjects writes what a cluster's network needs in its API
// before its agent starts: its network.fleetnet.dev ClusterProperty (on a
// network of its own), and for a gateway cluster the gateway's Service
// and its EndpointSlice naming the bridge address.
func (s *State) applyNetworkObjects(ctx context.Context, c ClusterState, cfg *rest.Config) error {
	if !s.HasNetworks() {
		return nil
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return err
	}
	if c.Network != "" {
		cp := &aboutv1alpha1.ClusterProperty{ObjectMeta: metav1.ObjectMeta{Name: keys.PropertyNetwork}, Spec: aboutv1alpha1.ClusterPropertySpec{Value: c.Network}}
		if err := cl.Create(ctx, cp); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("ClusterProperty %s: %w", keys.PropertyNetwork, err)
		}
	}
	if !s.EastWestGateway(c) {
		return nil
	}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: EastWestServiceNamespace}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: EastWestServiceNamespace, Name: EastWestServiceName},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "tunnel", Port: EastWestTunnelPort, TargetPort: intstr.FromInt32(EastWestTunnelPort)}}}},
		&discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: EastWestServiceNamespace, Name: EastWestServiceName + "-dev",
				Labels: map[string]string{discoveryv1.LabelServiceName: EastWestServiceName, discoveryv1.LabelManagedBy: "fleetnetctl-dev"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{bridgeHost.String()}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("tunnel"), Port: ptr.To[int32](EastWestTunnelPort)}},
		},
	}
	for _, o := range objs {
		if err := cl.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

// startEastWestGateway runs the cluster's east-west gateway in its
// network's namespace (the host's for the default network).
func (u *upper) startEastWestGateway(ctx context.Context, c ClusterState) (*controlplane.Process, error) {
	s := u.s
	certs := s.CertDir()
	_, inside := s.transit(c.Network)
	listenHost := ""
	if c.Network == "" {
		// On the host: the pods' side of the bridge only.
		listenHost = bridgeHost.String()
	}
	var ranges []string
	for _, o := range s.Clusters {
		if o.Network == c.Network {
			ranges = append(ranges, o.PodCIDRs...)
		}
	}
	args := []string{
		"--gateway=" + s.eastWestModelAddress(c),
		"--ca-file=" + filepath.Join(certs, "ca.crt"),
		"--cert-file=" + filepath.Join(certs, c.Name+"-eastwest-edge.crt"),
		"--key-file=" + filepath.Join(certs, c.Name+"-eastwest-edge.key"),
		"--state-dir=" + filepath.Join(s.Dir, c.Name, "eastwest", "state"),
		"--listen-host=" + listenHost,
		"--metrics-bind-address=" + s.EastWestMetricsAddress(c),
		"--health-probe-bind-address=" + netip.AddrPortFrom(inside, eastWestHealth).String(),
		"--endpoint-ranges=" + strings.Join(ranges, ","),
		"--eastwest-listen=" + s.EastWestAddress(c),
		"--eastwest-cert-file=" + filepath.Join(certs, c.Name+"-eastwest.crt"),
		"--eastwest-key-file=" + filepath.Join(certs, c.Name+"-eastwest.key"),
	}
	if c.Region != "" {
		args = append(args, "--region="+c.Region)
	}
	bin := filepath.Join(u.o.Fleetnet, EdgeBinary)
	name, cmdArgs := bin, args
	if ns := c.NetworkNS(); ns != "" {
		name, cmdArgs = "ip", append([]string{"netns", "exec", ns, bin}, args...)
	}
	p, err := controlplane.Start(c.Name+"/"+PartEastWestGateway, name, cmdArgs, filepath.Join(s.Dir, c.Name, "eastwest-gateway.log"), u.startOptions())
	if err != nil {
		return nil, err
	}
	ready := "http://" + netip.AddrPortFrom(inside, eastWestHealth).String() + "/readyz"
	if err := waitReadyIn(ctx, p, c.NetworkNS(), ready); err != nil {
		p.Kill()
		return nil, err
	}
	return p, nil
}

// eastWestAgentArgs are a gateway cluster's agent's east-west flags.
func (s *State) eastWestAgentArgs(c ClusterState) []string {
	if !s.EastWestGateway(c) {
		return nil
	}
	certs := s.CertDir()
	return []string{
		"--eastwest-gateway-address=" + s.EastWestAddress(c),
		"--eastwest-gateway-service=" + EastWestServiceNamespace + "/" + EastWestServiceName,
		"--eastwest-gateway-ports=" + eastWestPortsRange,
		"--eastwest-model-listen=" + s.eastWestModelAddress(c),
		"--eastwest-model-cert-file=" + filepath.Join(certs, c.Name+"-eastwest-model.crt"),
		"--eastwest-model-key-file=" + filepath.Join(certs, c.Name+"-eastwest-model.key"),
	}
}

// waitReadyIn waits until url answers 200, dialled from the namespace ns
// (the host's for "").
func waitReadyIn(ctx context.Context, p *controlplane.Process, ns, url string) error {
	if ns == "" {
		return waitReady(ctx, p, url)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: netns.Dialer(ns)}}
	return p.WaitFor(ctx, url, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	})
}

// DialInNetwork dials addr from the cluster's network (its namespace, or
// the host for the default network): what a node of the cluster reaches.
func (c ClusterState) DialInNetwork(ctx context.Context, network, addr string) (net.Conn, error) {
	if ns := c.NetworkNS(); ns != "" {
		return netns.Dialer(ns)(ctx, network, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

func hash32(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}
