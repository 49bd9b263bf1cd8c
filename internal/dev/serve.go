package dev

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/controlplane"
	"github.com/fleetnet/fleetnet/internal/netns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	discoveryv1ac "k8s.io/client-go/applyconfigurations/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// The echo pods' bridge. Its address makes the kernel route the whole pod
// range 10.244.0.0/16 to it, so traffic for pod addresses stays on the
// machine.
const (
	BridgeName    = "fleetnet0"
	bridgeAddress = "10.244.255.1/16"
	podPrefixLen  = 16
	// Echo pods take addresses from .128 up in their cluster's /24; kwok
	// hands out the low ones.
	firstPodHost = 128
	lastPodHost  = 253
)

// ServeOptions describe an echo workload.
type ServeOptions struct {
	Dir       string
	Cluster   string
	Namespace string
	Name      string
	Replicas  int
	// PortName, Port and TargetPort are the Service's single TCP port; the
	// echo servers listen on TargetPort.
	PortName   string
	Port       int32
	TargetPort int32
	// EchoCommand runs the echo server; the pod's flags are appended (see
	// EchoFlags). The command line uses `fleetnetctl dev echo`.
	EchoCommand []string
	// Client pods serve nothing: they are namespaces to run commands in
	// (`dev exec`), and no Service is applied for them.
	Client bool
	// Headless applies the Service with clusterIP None.
	Headless bool
	Detach   bool
	Progress io.Writer
}

// ServeRequirements says why `dev serve` cannot run here, or nil.
func ServeRequirements() error {
	if os.Geteuid() != 0 {
		return errors.New("dev serve creates network namespaces and a bridge, which needs root: run it as root (sudo); `dev up` works without")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("dev serve needs the `ip` command of iproute2 (apt-get install iproute2)")
	}
	return nil
}

// Serve makes the workload have Replicas echo pods, each in a network
// namespace of its own on the bridge with an address from the cluster's pod
// range, and applies the Service and its EndpointSlice in the cluster.
func Serve(ctx context.Context, o ServeOptions) error {
	if err := ServeRequirements(); err != nil {
		return err
	}
	if o.Replicas < 0 || o.Replicas > lastPodHost-firstPodHost+1 {
		return fmt.Errorf("--replicas=%d: must be between 0 and %d", o.Replicas, lastPodHost-firstPodHost+1)
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	s, unlock, err := lockAndLoad(o.Dir)
	if unlock != nil {
		defer unlock()
	}
	if err != nil {
		return err
	}
	cluster, err := s.Cluster(o.Cluster)
	if err != nil {
		return err
	}
	if _, err := ensureBridge(); err != nil {
		return err
	}

	want := map[string]bool{}
	for i := range o.Replicas {
		want[fmt.Sprintf("%s-%d", o.Name, i)] = true
	}
	// Remove surplus and dead pods of this workload.
	for key, pod := range s.Pods {
		if pod.Cluster != o.Cluster || pod.Namespace != o.Namespace || pod.Service != o.Name {
			continue
		}
		if want[pod.Name] && pod.Alive() && pod.Client == o.Client {
			continue
		}
		stopProcess(pod.Process, syscall.SIGTERM, 5*time.Second)
		if err := removePodNetwork(pod); err != nil {
			return fmt.Errorf("pod %s: %w", key, err)
		}
		delete(s.Pods, key)
	}
	for i := range o.Replicas {
		name := fmt.Sprintf("%s-%d", o.Name, i)
		key := o.Cluster + "/" + o.Namespace + "/" + name
		if _, ok := s.Pods[key]; ok {
			continue
		}
		addr, err := s.freePodAddress(cluster)
		if err != nil {
			return err
		}
		pod := PodState{Cluster: o.Cluster, Namespace: o.Namespace, Service: o.Name, Name: name, Address: addr.String(), Client: o.Client}
		pod.NetNS, pod.HostVeth = podNetNames(key)
		fmt.Fprintf(o.Progress, "starting pod %s at %s\n", key, pod.Address)
		if err := startPod(&pod, s, cluster, o); err != nil {
			_ = removePodNetwork(pod)
			return fmt.Errorf("pod %s: %w", key, err)
		}
		s.Pods[key] = pod
		if err := s.save(); err != nil {
			return err
		}
	}
	if err := s.save(); err != nil {
		return err
	}
	if o.Client {
		return nil
	}
	var pods []PodState
	for _, pod := range s.Pods {
		if pod.Cluster == o.Cluster && pod.Namespace == o.Namespace && pod.Service == o.Name {
			url := fmt.Sprintf("http://%s:%d/", pod.Address, o.TargetPort)
			if err := waitHTTP(ctx, url, pod.Process); err != nil {
				return fmt.Errorf("pod %s/%s: %w", o.Namespace, pod.Name, err)
			}
			pods = append(pods, pod)
		}
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Address < pods[j].Address })
	return applyWorkload(ctx, s, cluster, o, pods)
}

// EchoFlags are the flags of `fleetnetctl dev echo` for one pod.
func EchoFlags(listen, cluster, pod string) []string {
	return []string{"--listen=" + listen, "--cluster=" + cluster, "--pod=" + pod}
}

// RunEcho serves the echo pod's HTTP answer until ctx ends: one line naming
// the cluster, the pod and its address.
func RunEcho(ctx context.Context, listen, cluster, pod string) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		addr := listen
		if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			addr = a.String()
		}
		fmt.Fprintf(w, "cluster=%s pod=%s address=%s path=%s\n", cluster, pod, addr, r.URL.Path)
	})
	srv := &http.Server{Addr: listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("--listen=%s: %w", listen, err)
	}
	return nil
}

func (s *State) freePodAddress(c ClusterState) (netip.Addr, error) {
	// Echo pods are IPv4 only: the bridge routes the IPv4 pod range.
	if len(c.PodCIDRs) == 0 {
		return netip.Addr{}, fmt.Errorf("cluster %s has no pod range in %s; run `fleetnetctl dev down` and `dev up` again", c.Name, filepath.Join(s.Dir, stateFile))
	}
	prefix, err := netip.ParsePrefix(c.PodCIDRs[0])
	if err != nil {
		return netip.Addr{}, err
	}
	used := map[string]bool{}
	for _, p := range s.Pods {
		used[p.Address] = true
	}
	base := prefix.Addr().As4()
	for host := firstPodHost; host <= lastPodHost; host++ {
		a := netip.AddrFrom4([4]byte{base[0], base[1], base[2], byte(host)})
		if !used[a.String()] {
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("cluster %s has no free echo pod address left in %s", c.Name, prefix)
}

// ensureBridge creates the bridge unless it exists, and says whether it
// did.
func ensureBridge() (bool, error) {
	if err := exec.Command("ip", "link", "show", BridgeName).Run(); err == nil {
		return false, nil
	}
	return true, ipAll(
		[]string{"link", "add", BridgeName, "type", "bridge"},
		[]string{"addr", "add", bridgeAddress, "dev", BridgeName},
		[]string{"link", "set", BridgeName, "up"},
	)
}

func removeBridge() error {
	if err := exec.Command("ip", "link", "show", BridgeName).Run(); err != nil {
		return nil
	}
	return ipAll([]string{"link", "del", BridgeName})
}

func startPod(pod *PodState, s *State, c ClusterState, o ServeOptions) error {
	if err := createPodNetwork(*pod, s, c); err != nil {
		return err
	}
	ns := pod.NetNS
	if o.Client {
		return nil
	}
	if len(o.EchoCommand) == 0 {
		return errors.New("no echo command given")
	}
	args := append([]string{"netns", "exec", ns}, o.EchoCommand...)
	args = append(args, EchoFlags(fmt.Sprintf("%s:%d", pod.Address, o.TargetPort), pod.Cluster, pod.Name)...)
	p, err := controlplane.Start("echo "+pod.Name, "ip", args,
		filepath.Join(s.Dir, pod.Cluster, "pods", pod.Namespace+"-"+pod.Name+".log"), controlplane.StartOptions{Detach: o.Detach})
	if err != nil {
		return err
	}
	start, _, err := procStat(p.Pid())
	if err != nil {
		p.Kill()
		return err
	}
	pod.Process = ProcessState{Pid: p.Pid(), StartTime: start, Log: p.LogPath}
	return nil
}

// removePodNetwork deletes the pod's namespace and veth; what is already gone
// is not an error.
func removePodNetwork(pod PodState) error {
	var errs []error
	if exec.Command("ip", "link", "show", pod.HostVeth).Run() == nil {
		errs = append(errs, ipAll([]string{"link", "del", pod.HostVeth}))
	}
	if _, err := os.Stat(filepath.Join(netns.Dir, pod.NetNS)); err == nil {
		errs = append(errs, ipAll([]string{"netns", "del", pod.NetNS}))
	}
	if err := os.RemoveAll(filepath.Join(netnsEtc, pod.NetNS)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// joinNode routes the pod through its cluster's node and makes it resolve
// names with the node's fleetnet-dns. Service addresses (ClusterSetIPs
// included) are the node's to translate; the fleet's pods are on the bridge
// itself.
func joinNode(pod PodState, c ClusterState) error {
	if err := ipAll([]string{"-n", pod.NetNS, "route", "replace", "default", "via", c.NodeAddress().String()}); err != nil {
		return err
	}
	return writeResolvConf(pod.NetNS, c, pod.Namespace)
}

// netnsEtc holds per-namespace files that `ip netns exec` mounts over
// /etc: the pods' resolv.conf.
const netnsEtc = "/etc/netns"

// writeResolvConf makes the pod resolve names with its cluster's
// fleetnet-dns, searching its namespace first as a Kubernetes pod does.
func writeResolvConf(ns string, c ClusterState, namespace string) error {
	dir := filepath.Join(netnsEtc, ns)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	conf := fmt.Sprintf("# fleetnet dev pod of cluster %s: its node's fleetnet-dns\nnameserver %s\nsearch %s.svc.%s svc.%s\noptions ndots:5\n",
		c.Name, c.NodeAddress(), namespace, keys.ClustersetZone, keys.ClustersetZone)
	return os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte(conf), 0o644)
}

// macFor is the hardware address of the interface holding addr: derived
// from the address, so that a pod started again with an address another
// pod had is reached at once. With a fresh MAC, the host, nodes and pods
// would keep sending to the old one until their neighbour entries expire
// (up to a minute).
func macFor(addr string) string {
	b := netip.MustParseAddr(addr).As4()
	return fmt.Sprintf("02:00:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3])
}

func ipAll(cmds ...[]string) error {
	for _, args := range cmds {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

func waitHTTP(ctx context.Context, url string, p ProcessState) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		err := controlplane.HTTPOK(ctx, url)
		if err == nil {
			return nil
		}
		if !p.Alive() {
			return fmt.Errorf("echo server exited; last lines of %s:\n%s", p.Log, controlplane.Tail(p.Log, 10))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("echo server does not answer: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// applyWorkload applies the namespace, the Service (no selector: its
// endpoints are ours) and one EndpointSlice with the pods' addresses. The
// pods of a headless Service carry their names as hostnames, as a
// StatefulSet's do, so that each has a DNS name of its own.
func applyWorkload(ctx context.Context, s *State, cluster ClusterState, o ServeOptions, pods []PodState) error {
	cs, err := s.Clientset(o.Cluster)
	if err != nil {
		return err
	}
	ns := corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.Namespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", o.Namespace, err)
	}
	apply := metav1.ApplyOptions{FieldManager: keys.FieldManagerDev, Force: true}
	spec := corev1ac.ServiceSpec().WithPorts(
		corev1ac.ServicePort().WithName(o.PortName).WithProtocol(corev1.ProtocolTCP).WithPort(o.Port).WithTargetPort(intstr.FromInt32(o.TargetPort)))
	if o.Headless {
		spec.WithClusterIP(corev1.ClusterIPNone)
	}
	svc := corev1ac.Service(o.Name, o.Namespace).WithSpec(spec)
	if _, err := cs.CoreV1().Services(o.Namespace).Apply(ctx, svc, apply); err != nil {
		return fmt.Errorf("applying Service %s/%s: %w", o.Namespace, o.Name, err)
	}
	slice := discoveryv1ac.EndpointSlice(o.Name+"-dev", o.Namespace).
		WithLabels(map[string]string{discoveryv1.LabelServiceName: o.Name, discoveryv1.LabelManagedBy: keys.EndpointSliceManagedByDev}).
		WithAddressType(discoveryv1.AddressTypeIPv4).
		WithPorts(discoveryv1ac.EndpointPort().WithName(o.PortName).WithProtocol(corev1.ProtocolTCP).WithPort(o.TargetPort))
	var addrs []string
	for _, p := range pods {
		e := discoveryv1ac.Endpoint().WithAddresses(p.Address).
			WithConditions(discoveryv1ac.EndpointConditions().WithReady(true).WithServing(true).WithTerminating(false)).
			WithNodeName(cluster.KwokNodeName())
		if o.Headless {
			e.WithHostname(p.Name)
		}
		slice.WithEndpoints(e)
		addrs = append(addrs, p.Address)
	}
	if _, err := cs.DiscoveryV1().EndpointSlices(o.Namespace).Apply(ctx, slice, apply); err != nil {
		return fmt.Errorf("applying EndpointSlice %s/%s-dev: %w", o.Namespace, o.Name, err)
	}
	fmt.Fprintf(o.Progress, "Service %s/%s in %s has %d endpoints: %s\n", o.Namespace, o.Name, o.Cluster, len(addrs), strings.Join(addrs, ", "))
	return nil
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

// ExecCommand returns the command that runs argv inside a pod's network
// namespace, with the pod's resolv.conf; target is CLUSTER/NAMESPACE/POD.
func ExecCommand(ctx context.Context, dir, target string, argv []string) (*exec.Cmd, error) {
	if err := ServeRequirements(); err != nil {
		return nil, err
	}
	if len(argv) == 0 {
		return nil, errors.New("name a command after --")
	}
	s, err := Load(dir)
	if err != nil {
		return nil, err
	}
	if strings.Count(target, "/") != 2 {
		return nil, fmt.Errorf("pod %q: want CLUSTER/NAMESPACE/POD", target)
	}
	pod, ok := s.Pods[target]
	if !ok {
		var names []string
		for k := range s.Pods {
			names = append(names, k)
		}
		sort.Strings(names)
		if len(names) == 0 {
			return nil, fmt.Errorf("pod %q: the fleet has no pods; start one with `fleetnetctl dev serve --client`", target)
		}
		return nil, fmt.Errorf("pod %q: the fleet's pods are %s", target, strings.Join(names, ", "))
	}
	if !pod.Alive() {
		return nil, fmt.Errorf("pod %s is not running; start it again with `fleetnetctl dev serve`", target)
	}
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", pod.NetNS}, argv...)...), nil
}
