// Package podnet is a pod's network on a process node: a network
// namespace with a veth whose other end is on a bridge, an address of its
// cluster's pod range, a default route through the cluster's node and a
// resolv.conf. It makes and removes such networks (Create, Remove); which
// address a pod gets, and where the bridge is, is decided by whoever hands
// out the addresses (the local fleet, internal/dev), behind Networks, which
// the process node (internal/node) asks.
package podnet

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/fleetnet/fleetnet/internal/netns"
)

// Pod is the network of a Pod that a process node runs: its namespace,
// the bridge end of its veth, and its addresses. UID names the Pod object
// it is for.
type Pod struct {
	Cluster   string `json:"cluster"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
	NetNS     string `json:"netns"`
	HostVeth  string `json:"hostVeth"`
	Address   string `json:"address"`
	// AddressV6 is the pod's IPv6 address in a dual-stack cluster.
	AddressV6 string `json:"addressV6,omitempty"`
}

// Addresses are the pod's addresses, IPv4 first as the cluster's primary
// family.
func (p Pod) Addresses() []string {
	if p.AddressV6 == "" {
		return []string{p.Address}
	}
	return []string{p.Address, p.AddressV6}
}

// Alive reports whether the pod's network namespace exists.
func (p Pod) Alive() bool {
	_, err := os.Stat(filepath.Join(netns.Dir, p.NetNS))
	return err == nil
}

// ResolvConfPath is the resolv.conf a pod's processes see.
func (p Pod) ResolvConfPath() string { return filepath.Join(netnsEtc, p.NetNS, "resolv.conf") }

// Networks hands out pods' networks: an address each, unique in its
// network, kept for the same Pod object (uid) across restarts.
type Networks interface {
	// Attach gives the pod its network, or returns the one this
	// incarnation (uid) has.
	Attach(cluster, namespace, name, uid string) (Pod, error)
	// Detach removes the pod's network if it is of incarnation uid.
	Detach(cluster, namespace, name, uid string) error
	// Pods lists the networks of a cluster's pods.
	Pods(cluster string) ([]Pod, error)
}

// Spec is where a pod's network goes.
type Spec struct {
	// Bridge is the bridge the veth's other end joins, in the namespace
	// BridgeNS ("" for the host's).
	Bridge, BridgeNS string
	// PrefixLen and PrefixLenV6 are the on-link prefixes of the pod's
	// addresses (the bridge's).
	PrefixLen, PrefixLenV6 int
	// Gateway and GatewayV6, when valid, are the pod's default routes
	// (its cluster's node).
	Gateway, GatewayV6 netip.Addr
	// ResolvConf, when not empty, is the pod's resolv.conf.
	ResolvConf string
}

// Create makes the pod's namespace and veth on the bridge with its
// addresses, its routes and resolv.conf.
func Create(pod Pod, spec Spec) error {
	if pod.NetNS == "" || pod.HostVeth == "" || pod.Address == "" {
		return errors.New("pod has no network names or address")
	}
	peer := "fnp" + strings.TrimPrefix(pod.HostVeth, "fnh")
	ns := pod.NetNS
	if err := IPAll([]string{"netns", "add", ns}); err != nil {
		return err
	}
	var where []string
	if spec.BridgeNS != "" {
		where = []string{"-n", spec.BridgeNS}
	}
	err := IPBatch(where,
		[]string{"link", "add", pod.HostVeth, "type", "veth", "peer", "name", peer, "address", MACFor(pod.Address)},
		[]string{"link", "set", peer, "netns", ns},
		[]string{"link", "set", pod.HostVeth, "master", spec.Bridge, "up"},
	)
	if err != nil {
		return err
	}
	inside := [][]string{
		{"link", "set", peer, "name", "eth0"},
		{"addr", "add", fmt.Sprintf("%s/%d", pod.Address, spec.PrefixLen), "dev", "eth0"},
		{"link", "set", "eth0", "up"},
		{"link", "set", "lo", "up"},
	}
	if pod.AddressV6 != "" {
		// nodad: usable at once, as the IPv4 address is.
		inside = append(inside, []string{"addr", "add", fmt.Sprintf("%s/%d", pod.AddressV6, spec.PrefixLenV6), "dev", "eth0", "nodad"})
	}
	if spec.Gateway.IsValid() {
		inside = append(inside, []string{"route", "replace", "default", "via", spec.Gateway.String()})
	}
	if pod.AddressV6 != "" && spec.GatewayV6.IsValid() {
		inside = append(inside, []string{"route", "replace", "default", "via", spec.GatewayV6.String()})
	}
	if err := IPBatch([]string{"-n", ns}, inside...); err != nil {
		return err
	}
	if spec.ResolvConf == "" {
		return nil
	}
	dir := filepath.Join(netnsEtc, ns)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte(spec.ResolvConf), 0o644)
}

// Remove deletes the pod's namespace and veth (deleteNS ends what runs
// inside the namespace first); what is already gone is not an error.
func Remove(pod Pod, deleteNS func(string) error) error {
	var errs []error
	if exec.Command("ip", "link", "show", pod.HostVeth).Run() == nil {
		errs = append(errs, IPAll([]string{"link", "del", pod.HostVeth}))
	}
	errs = append(errs, deleteNS(pod.NetNS))
	if err := os.RemoveAll(filepath.Join(netnsEtc, pod.NetNS)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// netnsEtc holds per-namespace files that `ip netns exec` mounts over
// /etc: the pods' resolv.conf.
const netnsEtc = "/etc/netns"

// IPBatch runs the commands with one `ip -batch` (opts are ip's own, such
// as -n NETNS): a pod's network is nine commands, and a process each made
// starting many pods slow.
func IPBatch(opts []string, cmds ...[]string) error {
	var in strings.Builder
	for _, c := range cmds {
		in.WriteString(strings.Join(c, " "))
		in.WriteByte('\n')
	}
	cmd := exec.Command("ip", append(opts, "-batch", "-")...)
	cmd.Stdin = strings.NewReader(in.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ip -batch: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// IPAll runs ip commands one after the other, stopping at the first that
// fails.
func IPAll(cmds ...[]string) error {
	for _, args := range cmds {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// MACFor is the hardware address of the interface holding addr: derived
// from the address, so that a pod started again with an address another
// pod had is reached at once. With a fresh MAC, the host, nodes and pods
// would keep sending to the old one until their neighbour entries expire
// (up to a minute).
func MACFor(addr string) string {
	b := netip.MustParseAddr(addr).As4()
	return fmt.Sprintf("02:00:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3])
}
