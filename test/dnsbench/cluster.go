package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/config/crd"
	"github.com/fleetnet/fleetnet/internal/controlplane"
	"github.com/fleetnet/fleetnet/internal/testkit"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"
)

// namespaces the Services and imports are spread over.
const namespaces = 10

// cluster is one etcd and one kube-apiserver with fleetnet's CRDs.
type cluster struct {
	config     *rest.Config
	kubeconfig string
	procs      []*controlplane.Process
}

func startCluster(ctx context.Context, dir string) (*cluster, error) {
	bins, err := controlplane.FindBinaries()
	if err != nil {
		return nil, err
	}
	ports, err := testkit.PickFreePorts(3)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	c := &cluster{}
	etcd, err := controlplane.StartEtcd(ctx, bins, controlplane.EtcdConfig{
		Dir: filepath.Join(dir, "etcd"), ClientPort: ports[0], PeerPort: ports[1],
	}, controlplane.StartOptions{})
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, etcd.Process)
	s, err := controlplane.StartAPIServer(ctx, bins, controlplane.APIServerConfig{
		Name: "bench", Dir: filepath.Join(dir, "bench"), EtcdEndpoint: etcd.Endpoint, EtcdPrefix: "/dnsbench",
		Port: ports[2], ServiceCIDRs: []string{"10.96.0.0/16"},
	}, controlplane.StartOptions{})
	if err != nil {
		c.stop()
		return nil, err
	}
	c.procs = append(c.procs, s.Process)
	c.config, c.kubeconfig = s.Config, s.KubeconfigPath
	crds, err := crd.All()
	if err != nil {
		c.stop()
		return nil, fmt.Errorf("reading CRDs: %w", err)
	}
	if err := controlplane.InstallCRDs(ctx, s.Config, crds); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

func (c *cluster) stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].Stop(5 * time.Second)
	}
}

// service is one Service and its import: the names both servers answer
// and the address they must answer with.
type service struct {
	namespace, name string
	clusterIP       string
}

// populate creates n Services with an EndpointSlice each, and n
// ServiceImports (ClusterSetIP: the Service's ClusterIP) with an imported
// EndpointSlice each, as the agent makes them, over namespaces bench-0…9.
func populate(ctx context.Context, cfg *rest.Config, n int) ([]service, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 2000, 2000
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mc, err := mcsclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	for i := range namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%d", i)}}
		if _, err := kc.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("creating namespace %s: %w", ns.Name, err)
		}
	}
	svcs := make([]service, n)
	work := make(chan int)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range work {
				s, err := createPair(ctx, kc, mc, i)
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					continue
				}
				svcs[i] = s
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return nil, err
	default:
	}
	return svcs, nil
}

// createPair creates Service i, its EndpointSlice, ServiceImport i and its
// imported EndpointSlice.
func createPair(ctx context.Context, kc kubernetes.Interface, mc mcsclient.Interface, i int) (service, error) {
	ns, name := fmt.Sprintf("bench-%d", i%namespaces), fmt.Sprintf("svc-%d", i)
	svc, err := kc.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return service{}, fmt.Errorf("creating Service %s/%s: %w", ns, name, err)
	}
	local := slice(ns, name+"-local", i, 0, map[string]string{discoveryv1.LabelServiceName: name})
	if _, err := kc.DiscoveryV1().EndpointSlices(ns).Create(ctx, local, metav1.CreateOptions{}); err != nil {
		return service{}, fmt.Errorf("creating EndpointSlice %s/%s: %w", ns, local.Name, err)
	}
	if _, err := mc.MulticlusterV1beta1().ServiceImports(ns).Create(ctx, &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{svc.Spec.ClusterIP},
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		return service{}, fmt.Errorf("creating ServiceImport %s/%s: %w", ns, name, err)
	}
	imported := slice(ns, name+"-east", i, 1, map[string]string{
		discoveryv1.LabelServiceName:  keys.DerivedServicePrefix + name,
		mcsv1beta1.LabelServiceName:   name,
		mcsv1beta1.LabelSourceCluster: "east",
		discoveryv1.LabelManagedBy:    keys.EndpointSliceManagedBy,
	})
	if _, err := kc.DiscoveryV1().EndpointSlices(ns).Create(ctx, imported, metav1.CreateOptions{}); err != nil {
		return service{}, fmt.Errorf("creating EndpointSlice %s/%s: %w", ns, imported.Name, err)
	}
	return service{namespace: ns, name: name, clusterIP: svc.Spec.ClusterIP}, nil
}

// slice is an EndpointSlice of three ready endpoints; the addresses of
// Service i in cluster c (0 local, 1 imported) are distinct.
func slice(ns, name string, i, c int, labels map[string]string) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
	}
	for j := range 3 {
		k := i*3 + j
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 244+c, k/256, k%256)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		})
	}
	return es
}
