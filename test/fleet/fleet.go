// Package fleet starts a fleet of real Kubernetes clusters for tests: one
// etcd and one kube-apiserver per cluster, each under its own etcd prefix and
// with its own service CIDR, optionally with kube-controller-manager and a
// kwok node. fleetnet's CRDs are installed in every cluster. Everything is
// torn down through t.Cleanup.
//
// The binaries come from bin/, built by `make tools`; a test whose binaries
// are missing fails and says so.
package fleet

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/config/crd"
	"github.com/fleetnet/fleetnet/internal/controlplane"
	"github.com/fleetnet/fleetnet/internal/scheme"
	"github.com/fleetnet/fleetnet/internal/testkit"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ClusterOptions describes one cluster of a test fleet.
type ClusterOptions struct {
	// Name is the cluster's name, unique in the fleet.
	Name string
	// DualStack gives the cluster an IPv4 and an IPv6 service CIDR and pod
	// range; with Kwok, Pods get an address of each family.
	DualStack bool
	// ControllerManager runs kube-controller-manager, which makes
	// EndpointSlices for Services with selectors and Pods for Deployments.
	ControllerManager bool
	// Kwok runs kube-scheduler and kwok with one fake node, so that Pods are
	// scheduled and reach Running. Pod addresses come from the cluster's pod
	// range and are not reachable.
	Kwok bool
	// GatewayAPI installs the Gateway API's standard-channel CRDs and
	// fleetnet's networking.fleetnet.dev CRDs too (the
	// cluster that runs fleetnet-gateway needs them; the others do not, and
	// they take the API server a moment to serve).
	GatewayAPI bool
	// PriorityAndFairness turns on the API server's API Priority and
	// Fairness (off by default: a local fleet's API servers limit requests
	// in flight only).
	PriorityAndFairness bool
	// MaxRequestsInflight limits the API server's requests in flight (see
	// controlplane.APIServerConfig); 0 keeps kube-apiserver's defaults.
	MaxRequestsInflight int
}

// Options describes a test fleet.
type Options struct {
	Clusters []ClusterOptions
}

// Fleet is a running test fleet.
type Fleet struct {
	// Clusters in the order of Options.Clusters.
	Clusters []*Cluster
	// EtcdEndpoint is the client URL of the etcd that all clusters share.
	EtcdEndpoint string
	dir          string
}

// Cluster is one running cluster of a fleet.
type Cluster struct {
	Name string
	// Config authenticates as a cluster admin.
	Config *rest.Config
	// KubeconfigPath holds the same credentials, for kubectl.
	KubeconfigPath string
	// ServiceCIDRs are the cluster's service CIDRs, the primary family first.
	ServiceCIDRs []string
	// PodCIDRs are where the cluster's kwok node takes Pod addresses from,
	// one range per family, IPv4 first.
	PodCIDRs []string

	apiServer *controlplane.APIServer
}

// Client returns a controller-runtime client for the cluster that knows
// fleetnet's types.
func (c *Cluster) Client(t testing.TB) client.Client {
	t.Helper()
	cl, err := client.New(c.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatalf("client for cluster %s: %v", c.Name, err)
	}
	return cl
}

// Clientset returns a client-go clientset for the cluster.
func (c *Cluster) Clientset(t testing.TB) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatalf("clientset for cluster %s: %v", c.Name, err)
	}
	return cs
}

// Cluster returns the cluster with the given name, or fails the test.
func (f *Fleet) Cluster(t testing.TB, name string) *Cluster {
	t.Helper()
	for _, c := range f.Clusters {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("fleet has no cluster %q", name)
	return nil
}

// Start starts a fleet and registers its teardown with t.Cleanup. It fails
// the test when a binary is missing or a part does not become ready.
func Start(t testing.TB, opts Options) *Fleet {
	t.Helper()
	bins, err := controlplane.FindBinaries()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range requiredBinaries(opts) {
		if _, err := bins.Path(name); err != nil {
			t.Fatal(err)
		}
	}
	crds, err := crd.All()
	if err != nil {
		t.Fatalf("reading CRDs: %v", err)
	}
	gatewayCRDs, err := crd.GatewayCluster()
	if err != nil {
		t.Fatalf("reading the Gateway API CRDs: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	started := time.Now()

	f := &Fleet{dir: t.TempDir()}
	var procs []*controlplane.Process
	var mu sync.Mutex
	track := func(p *controlplane.Process) {
		mu.Lock()
		defer mu.Unlock()
		procs = append(procs, p)
	}
	t.Cleanup(func() {
		// Stop in reverse order: clients before API servers before etcd.
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].Stop(5 * time.Second)
		}
		if t.Failed() {
			for _, p := range procs {
				t.Logf("last lines of %s:\n%s", p.LogPath, controlplane.Tail(p.LogPath, 15))
			}
		}
	})

	etcd, err := controlplane.StartEtcd(ctx, bins, controlplane.EtcdConfig{
		Dir: filepath.Join(f.dir, "etcd"), ClientPort: testkit.FreePort(t), PeerPort: testkit.FreePort(t),
	}, controlplane.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	track(etcd.Process)
	f.EtcdEndpoint = etcd.Endpoint

	f.Clusters = make([]*Cluster, len(opts.Clusters))
	errs := make([]error, len(opts.Clusters))
	var wg sync.WaitGroup
	for i, co := range opts.Clusters {
		wg.Go(func() {
			want := crds
			if co.GatewayAPI {
				want = append(slices.Clone(crds), gatewayCRDs...)
			}
			c, err := startCluster(ctx, bins, f, i, co, want, track, t)
			f.Clusters[i], errs[i] = c, err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("fleet of %d clusters ready in %s", len(f.Clusters), time.Since(started).Round(time.Millisecond))
	return f
}

func requiredBinaries(opts Options) []string {
	names := []string{controlplane.EtcdBinary, controlplane.KubeAPIServerBinary}
	for _, c := range opts.Clusters {
		if c.ControllerManager {
			names = append(names, controlplane.KubeControllerManagerBinary)
		}
		if c.Kwok {
			names = append(names, controlplane.KubeSchedulerBinary, controlplane.KwokBinary, controlplane.KwokStages)
		}
	}
	return names
}

func startCluster(ctx context.Context, bins controlplane.Binaries, f *Fleet, i int, co ClusterOptions, crds []*apiextensionsv1.CustomResourceDefinition, track func(*controlplane.Process), t testing.TB) (*Cluster, error) {
	dir := filepath.Join(f.dir, co.Name)
	c := &Cluster{
		Name:         co.Name,
		ServiceCIDRs: ServiceCIDRs(i, co.DualStack),
		PodCIDRs:     PodCIDRs(i, co.DualStack),
	}
	s, err := controlplane.StartAPIServer(ctx, bins, controlplane.APIServerConfig{
		Name:                co.Name,
		Dir:                 dir,
		EtcdEndpoint:        f.EtcdEndpoint,
		EtcdPrefix:          "/fleet/" + co.Name,
		Port:                testkit.FreePort(t),
		ServiceCIDRs:        c.ServiceCIDRs,
		PriorityAndFairness: co.PriorityAndFairness,
		MaxRequestsInflight: co.MaxRequestsInflight,
	}, controlplane.StartOptions{})
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", co.Name, err)
	}
	track(s.Process)
	c.apiServer, c.Config, c.KubeconfigPath = s, s.Config, s.KubeconfigPath
	if err := controlplane.InstallCRDs(ctx, s.Config, crds); err != nil {
		return nil, fmt.Errorf("cluster %s: %w", co.Name, err)
	}
	if co.ControllerManager {
		p, err := controlplane.StartControllerManager(bins, s, dir, controlplane.StartOptions{})
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", co.Name, err)
		}
		track(p)
	}
	if co.Kwok {
		p, err := controlplane.StartScheduler(bins, s, dir, controlplane.StartOptions{})
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", co.Name, err)
		}
		track(p)
		p, err = controlplane.StartKwok(ctx, bins, s, dir, controlplane.KwokConfig{
			NodeName: "kwok-" + co.Name, PodCIDRs: c.PodCIDRs, Port: testkit.FreePort(t),
		}, controlplane.StartOptions{})
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", co.Name, err)
		}
		track(p)
	}
	return c, nil
}

// ServiceCIDRs returns the service CIDRs of the i-th cluster of a fleet:
// 10.(96+i).0.0/16 and, for dual-stack, fd00:10:(96+i)::/112.
func ServiceCIDRs(i int, dualStack bool) []string {
	cidrs := []string{fmt.Sprintf("10.%d.0.0/16", 96+i)}
	if dualStack {
		cidrs = append(cidrs, fmt.Sprintf("fd00:10:%d::/112", 96+i))
	}
	return cidrs
}

// PodCIDRs returns the pod ranges of the i-th cluster of a fleet:
// 10.244.i.0/24 and, for dual-stack, fd00:10:244:i::/64.
func PodCIDRs(i int, dualStack bool) []string {
	cidrs := []string{fmt.Sprintf("10.244.%d.0/24", i)}
	if dualStack {
		// Canonical (fd00:10:244::/64 for i = 0): the API server warns otherwise.
		cidrs = append(cidrs, netip.MustParsePrefix(fmt.Sprintf("fd00:10:244:%d::/64", i)).String())
	}
	return cidrs
}
