package dev

import (
	"fmt"
	"github.com/fleetnet/fleetnet/internal/podnet"
	"hash/fnv"
	"net/netip"
	"os/exec"
	"path/filepath"

	"github.com/fleetnet/fleetnet/api/keys"
)

// A pod of the local fleet is a network namespace on the bridge with an
// address of its cluster's pod range, routed through the cluster's node.
// The process node (internal/node) makes every pod's network here, and
// `dev serve` makes pods only through it (a Deployment or StatefulSet): the
// state file, under the fleet's lock, records every address handed out.

// The pods' bridge. Its address makes the kernel route the whole pod range
// 10.244.0.0/16 to it, so traffic for pod addresses stays on the machine.
const (
	BridgeName    = "fleetnet0"
	bridgeAddress = "10.244.255.1/16"
	podPrefixLen  = 16
	// The IPv6 side of the same: dual-stack clusters' pod ranges are
	// fd00:10:244:<i>::/64 (up.go), all inside this /48.
	bridgeAddressV6 = "fd00:10:244:ffff::1/48"
	podPrefixLenV6  = 48
	// Pods take addresses from .128 up in their cluster's /24; kwok hands
	// out the low ones, and the node has .254.
	firstPodHost = 128
	lastPodHost  = 253
)

// AttachPod gives the pod cluster/namespace/name (uid identifies this
// incarnation) its network: an address of the cluster's pod range, a
// network namespace on the bridge, the route through the cluster's node and
// a resolv.conf naming its DNS. A pod recorded with the same uid whose
// namespace still exists keeps it and its address, so a restarted node
// never hands an address out twice. A record of another uid (a pod deleted
// and made again under its name) is replaced.
func AttachPod(dir, cluster, namespace, name, uid string) (PodState, error) {
	pod, s, c, made, err := claimPod(dir, cluster, namespace, name, uid)
	if err != nil || !made {
		return pod, err
	}
	// The namespace and links are made outside the fleet's lock, so that
	// pods start in parallel; the address is already recorded as taken.
	if err := createPodNetwork(pod, s, c); err != nil {
		_ = removePodNetwork(pod)
		_ = DetachPod(dir, cluster, namespace, name, uid)
		return PodState{}, fmt.Errorf("pod %s/%s/%s: %w", cluster, namespace, name, err)
	}
	return pod, nil
}

// claimPod records the pod with a free address under the fleet's lock, or
// returns its record when this incarnation already has a network (made is
// false then).
func claimPod(dir, cluster, namespace, name, uid string) (pod PodState, s *State, c ClusterState, made bool, err error) {
	s, unlock, err := lockAndLoad(dir)
	if unlock != nil {
		defer unlock()
	}
	if err != nil {
		return PodState{}, nil, ClusterState{}, false, err
	}
	if c, err = s.Cluster(cluster); err != nil {
		return PodState{}, nil, ClusterState{}, false, err
	}
	key := cluster + "/" + namespace + "/" + name
	if old, ok := s.Pods[key]; ok {
		if old.UID == uid && old.Alive() {
			return old, s, c, false, nil
		}
		if err := removePodNetwork(old); err != nil {
			return PodState{}, nil, ClusterState{}, false, fmt.Errorf("pod %s: removing the network of its earlier incarnation: %w", key, err)
		}
		delete(s.Pods, key)
	}
	if _, err := ensureBridge(c.DualStack); err != nil {
		return PodState{}, nil, ClusterState{}, false, err
	}
	addr, err := s.freePodAddress(c)
	if err != nil {
		return PodState{}, nil, ClusterState{}, false, err
	}
	pod = PodState{Cluster: cluster, Namespace: namespace, Name: name, UID: uid, Address: addr.String()}
	if c.DualStack {
		v6, err := podAddressV6(c, addr)
		if err != nil {
			return PodState{}, nil, ClusterState{}, false, err
		}
		pod.AddressV6 = v6.String()
	}
	pod.NetNS, pod.HostVeth = podNetNames(key + "/" + uid)
	s.Pods[key] = pod
	if err := s.save(); err != nil {
		return PodState{}, nil, ClusterState{}, false, err
	}
	return pod, s, c, true, nil
}

// DetachPod removes the network of the pod cluster/namespace/name if the
// record is of incarnation uid, and releases its address. A pod that is
// not recorded is not an error.
func DetachPod(dir, cluster, namespace, name, uid string) error {
	s, err := Load(dir)
	if err != nil {
		return err
	}
	key := cluster + "/" + namespace + "/" + name
	pod, ok := s.Pods[key]
	if !ok || pod.UID != uid {
		return nil
	}
	// The network goes first, outside the lock; the address stays taken
	// until the record goes.
	if err := removePodNetwork(pod); err != nil {
		return fmt.Errorf("pod %s: %w", key, err)
	}
	s, unlock, err := lockAndLoad(dir)
	if unlock != nil {
		defer unlock()
	}
	if err != nil {
		return err
	}
	if cur, ok := s.Pods[key]; !ok || cur.UID != uid {
		return nil
	}
	delete(s.Pods, key)
	return s.save()
}

// NodePods lists the pods of a cluster, which its process node made.
func NodePods(dir, cluster string) ([]PodState, error) {
	s, err := Load(dir)
	if err != nil {
		return nil, err
	}
	var out []PodState
	for _, p := range s.Pods {
		if p.Cluster == cluster {
			out = append(out, p)
		}
	}
	return out, nil
}

// PodNetworks are the fleet in Dir's pods' networks, as the process node
// asks for them (podnet.Networks).
type PodNetworks struct{ Dir string }

// Attach is AttachPod.
func (n PodNetworks) Attach(cluster, namespace, name, uid string) (PodState, error) {
	return AttachPod(n.Dir, cluster, namespace, name, uid)
}

// Detach is DetachPod.
func (n PodNetworks) Detach(cluster, namespace, name, uid string) error {
	return DetachPod(n.Dir, cluster, namespace, name, uid)
}

// Pods is NodePods.
func (n PodNetworks) Pods(cluster string) ([]PodState, error) { return NodePods(n.Dir, cluster) }

// podNetNames are the names of a pod's network namespace and host veth,
// derived from its key; interface names have at most 15 bytes.
func podNetNames(key string) (netNS, hostVeth string) {
	h := fnv.New32a()
	h.Write([]byte(key))
	return fmt.Sprintf("fleetnet-%08x", h.Sum32()), fmt.Sprintf("fnh%08x", h.Sum32())
}

// createPodNetwork makes the pod's namespace and veth on its network's
// bridge with its address, and routes it through its cluster's node.
func createPodNetwork(pod PodState, s *State, c ClusterState) error {
	spec := podnet.Spec{Bridge: BridgeName, BridgeNS: c.NetworkNS(), PrefixLen: podPrefixLen, PrefixLenV6: podPrefixLenV6}
	if s.Nodes {
		// Through the cluster's node: its kube-proxy and fleetnet-dns.
		spec.Gateway, spec.GatewayV6 = c.NodeAddress(), c.NodeAddressV6()
		spec.ResolvConf = resolvConf(c, pod.Namespace)
	}
	return podnet.Create(pod, spec)
}

// ipAll runs ip commands, and macFor is an address's interface's
// hardware address (podnet's, for the nodes' networks).
var (
	ipAll  = podnet.IPAll
	macFor = podnet.MACFor
)

// podAddressV6 is the IPv6 address of the pod that has v4 in a dual-stack
// cluster: the same host number in the cluster's IPv6 pod range, so that
// the IPv4 allocation alone keeps both unique.
func podAddressV6(c ClusterState, v4 netip.Addr) (netip.Addr, error) {
	return c.hostV6(v4.As4()[3])
}

// hostV6 is host number host of a dual-stack cluster's IPv6 pod range.
func (c ClusterState) hostV6(host byte) (netip.Addr, error) {
	prefix, err := c.podRangeV6()
	if err != nil {
		return netip.Addr{}, err
	}
	b := prefix.Addr().As16()
	b[15] = host
	return netip.AddrFrom16(b), nil
}

// podRangeV6 is a dual-stack cluster's IPv6 pod range.
func (c ClusterState) podRangeV6() (netip.Prefix, error) {
	for _, cidr := range c.PodCIDRs {
		prefix, err := netip.ParsePrefix(cidr)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("cluster %s: pod range %q: %w", c.Name, cidr, err)
		}
		if prefix.Addr().Is6() {
			return prefix, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("dual-stack cluster %s has no IPv6 pod range in %v; run `fleetnetctl dev down` and `dev up` again", c.Name, c.PodCIDRs)
}

func (s *State) freePodAddress(c ClusterState) (netip.Addr, error) {
	if len(c.PodCIDRs) == 0 {
		return netip.Addr{}, fmt.Errorf("cluster %s has no pod range in %s; run `fleetnetctl dev down` and `dev up` again", c.Name, filepath.Join(s.Dir, stateFile))
	}
	prefix, err := netip.ParsePrefix(c.PodCIDRs[0])
	if err != nil {
		return netip.Addr{}, err
	}
	// Addresses repeat across networks (their ranges may overlap), not
	// within one.
	used := map[string]bool{}
	for _, p := range s.Pods {
		if pc, err := s.Cluster(p.Cluster); err != nil || pc.Network == c.Network {
			used[p.Address] = true
		}
	}
	base := prefix.Addr().As4()
	for host := firstPodHost; host <= lastPodHost; host++ {
		a := netip.AddrFrom4([4]byte{base[0], base[1], base[2], byte(host)})
		if !used[a.String()] {
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("cluster %s has no free pod address left in %s", c.Name, prefix)
}

// ensureBridge creates the bridge unless it exists, and says whether it
// did. With dualStack the bridge gets its IPv6 address too (a bridge made
// for single-stack clusters, or by an earlier version, gets it then); a
// single-stack fleet asks nothing of the host's IPv6, which may be off.
func ensureBridge(dualStack bool) (bool, error) {
	var v6 [][]string
	if dualStack {
		v6 = append(v6, []string{"addr", "replace", bridgeAddressV6, "dev", BridgeName, "nodad"})
	}
	if err := exec.Command("ip", "link", "show", BridgeName).Run(); err == nil {
		return false, ipAll(v6...)
	}
	return true, ipAll(append(append([][]string{
		{"link", "add", BridgeName, "type", "bridge"},
		{"addr", "add", bridgeAddress, "dev", BridgeName},
	}, v6...), []string{"link", "set", BridgeName, "up"})...)
}
func removeBridge() error {
	if err := exec.Command("ip", "link", "show", BridgeName).Run(); err != nil {
		return nil
	}
	return ipAll([]string{"link", "del", BridgeName})
}

// removePodNetwork deletes the pod's namespace and veth; what is already
// gone is not an error.
func removePodNetwork(pod PodState) error { return podnet.Remove(pod, deleteNetNS) }

// resolvConf makes the pod resolve names with its cluster's CoreDNS,
// searching its namespace first as a Kubernetes pod does.
func resolvConf(c ClusterState, namespace string) string {
	// As a kubelet's (cluster.local first), then the clusterset zone.
	return fmt.Sprintf("# fleetnet dev pod of cluster %s: the cluster's CoreDNS on its node\nnameserver %s\nsearch %s.svc.cluster.local svc.cluster.local cluster.local %s.svc.%s svc.%s\noptions ndots:5\n",
		c.Name, c.NodeAddress(), namespace, namespace, keys.ClustersetZone, keys.ClustersetZone)
}
