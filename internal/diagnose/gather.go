package diagnose

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/agent/importer"
	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Sources say where Gather reads.
type Sources struct {
	// Registry is a client of the registry; nil when it is not asked.
	Registry registryv1.RegistryClient
	// RegistryAddress names the registry in messages.
	RegistryAddress string
	// RegistryErr says why no registry client could be made (its TLS
	// files); the registry step then fails with it.
	RegistryErr error
	// Cluster returns a reader of cluster id's API server, or why there is
	// none (no kube context for it).
	Cluster func(id string) (client.Reader, error)
	// Clusters are clusters to look at beyond the target and those the
	// registry knows (which may be unreachable).
	Clusters []string
	// DNS is the target cluster's fleetnet-dns, host:port; ClusterDNS its
	// own resolver (CoreDNS). Each is asked only when set.
	DNS, ClusterDNS string
	// DNSTimeout bounds each DNS question (2 s when zero).
	DNSTimeout time.Duration
	// Hub is the cluster whose Gateways, HTTPRoutes and
	// MultiClusterLoadBalancers publish the service (read through
	// Cluster); EdgeMetrics are the edges' metrics URLs. The edge's part
	// is checked when either is set.
	Hub         string
	EdgeMetrics []string
	// HTTPClient reads the edges' metrics (a client with a 5 s timeout
	// when nil).
	HTTPClient *http.Client
	// Now gives the time the facts are read at (time.Now when nil).
	Now func() time.Time
}

// Gather reads the facts Diagnose needs. Failures to read become part of
// the facts (a cluster's or the registry's Err, a DNS answer's Err): the
// diagnosis says where they are, so Gather itself does not fail.
func Gather(ctx context.Context, t Target, src Sources) *Facts {
	now := time.Now
	if src.Now != nil {
		now = src.Now
	}
	f := &Facts{Target: t, Now: now(), Clusters: map[string]*ClusterFacts{}}
	switch {
	case src.RegistryErr != nil:
		f.Registry = &RegistryFacts{Address: src.RegistryAddress, Err: src.RegistryErr}
	case src.Registry != nil:
		f.Registry = gatherRegistry(ctx, t, src.Registry, src.RegistryAddress)
	}

	ids := sets.New(src.Clusters...).Insert(t.Cluster)
	if r := f.Registry; r != nil {
		for _, c := range r.Clusters {
			ids.Insert(c.GetId())
		}
		for _, e := range r.Exports {
			ids.Insert(e.GetKey().GetClusterId())
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	// Clusters are read side by side: an unreachable one costs its
	// timeout once, not once per cluster after it.
	for _, id := range sets.List(ids) {
		wg.Go(func() {
			cf := gatherCluster(ctx, t, id, src.Cluster)
			mu.Lock()
			f.Clusters[id] = cf
			mu.Unlock()
		})
	}
	wg.Wait()

	if src.Hub != "" || len(src.EdgeMetrics) > 0 {
		f.Edge = gatherEdge(ctx, t, src.Hub, src.Cluster, src.EdgeMetrics, src.HTTPClient)
	}
	if src.DNS != "" || src.ClusterDNS != "" {
		f.DNS = &DNSFacts{Name: serviceName(t)}
		if src.DNS != "" {
			a := Query(ctx, src.DNS, f.DNS.Name, src.DNSTimeout)
			f.DNS.Fleetnet = &a
		}
		if src.ClusterDNS != "" {
			a := Query(ctx, src.ClusterDNS, f.DNS.Name, src.DNSTimeout)
			f.DNS.Cluster = &a
		}
	}
	return f
}

func gatherRegistry(ctx context.Context, t Target, c registryv1.RegistryClient, addr string) *RegistryFacts {
	r := &RegistryFacts{Address: addr}
	clusters, err := c.ListClusters(ctx, &registryv1.ListClustersRequest{})
	if err != nil {
		r.Err = fmt.Errorf("listing clusters: %w", err)
		return r
	}
	r.Clusters = clusters.GetClusters()
	exports, err := c.ListExports(ctx, &registryv1.ListExportsRequest{})
	if err != nil {
		r.Err = fmt.Errorf("listing exports: %w", err)
		return r
	}
	for _, e := range exports.GetExports() {
		if e.GetKey().GetNamespace() == t.Namespace && e.GetKey().GetName() == t.Name {
			r.Exports = append(r.Exports, e)
		}
	}
	for _, s := range exports.GetStatuses() {
		if s.GetKey().GetNamespace() == t.Namespace && s.GetKey().GetName() == t.Name {
			r.Statuses = append(r.Statuses, s)
		}
	}
	// The target's import: each cluster is sent the merge of the exports it
	// may see (an administrator asks for the target's; a cluster is given
	// its own whatever it asks).
	imports, err := c.ListImports(ctx, &registryv1.ListImportsRequest{ClusterId: t.Cluster})
	if err != nil {
		r.Err = fmt.Errorf("listing imports: %w", err)
		return r
	}
	for _, i := range imports.GetImports() {
		if i.GetKey().GetNamespace() == t.Namespace && i.GetKey().GetName() == t.Name {
			r.Import = i
		}
	}
	return r
}

// gatherCluster reads cluster id's ServiceExport and, in the target
// cluster, the import's objects.
func gatherCluster(ctx context.Context, t Target, id string, reader func(string) (client.Reader, error)) *ClusterFacts {
	cf := &ClusterFacts{}
	if reader == nil {
		cf.Err = errors.New("no kube context given")
		return cf
	}
	c, err := reader(id)
	if err != nil {
		cf.Err = err
		return cf
	}
	key := types.NamespacedName{Namespace: t.Namespace, Name: t.Name}
	se := &mcsv1beta1.ServiceExport{}
	if found, err := get(ctx, c, key, se); err != nil {
		cf.Err = fmt.Errorf("reading ServiceExport %s: %w", key, err)
		return cf
	} else if found {
		cf.Export = se
	}
	if id != t.Cluster {
		return cf
	}
	if cf.NamespaceExists, err = get(ctx, c, types.NamespacedName{Name: t.Namespace}, &corev1.Namespace{}); err != nil {
		cf.Err = fmt.Errorf("reading namespace %s: %w", t.Namespace, err)
		return cf
	}
	si := &mcsv1beta1.ServiceImport{}
	if found, err := get(ctx, c, key, si); err != nil {
		cf.Err = fmt.Errorf("reading ServiceImport %s: %w", key, err)
		return cf
	} else if !found {
		return cf
	}
	cf.Import = si
	// The annotation names the derived Service; an agent older than the
	// annotation used the same derivation.
	cf.DerivedServiceName = si.Annotations[keys.AnnotationDerivedService]
	if cf.DerivedServiceName == "" {
		cf.DerivedServiceName = importer.DerivedName(t.Namespace, t.Name)
	}
	svc := &corev1.Service{}
	if found, err := get(ctx, c, types.NamespacedName{Namespace: t.Namespace, Name: cf.DerivedServiceName}, svc); err != nil {
		cf.Err = fmt.Errorf("reading derived Service %s: %w", cf.DerivedServiceName, err)
		return cf
	} else if found {
		cf.DerivedService = svc
	}
	list := &discoveryv1.EndpointSliceList{}
	if err := c.List(ctx, list, client.InNamespace(t.Namespace), client.MatchingLabels{
		mcsv1beta1.LabelServiceName: t.Name, discoveryv1.LabelManagedBy: keys.EndpointSliceManagedBy,
	}); err != nil {
		cf.Err = fmt.Errorf("listing EndpointSlices: %w", err)
		return cf
	}
	cf.Slices = list.Items
	return cf
}

// get reads key into obj; a missing object is no error.
func get(ctx context.Context, c client.Reader, key types.NamespacedName, obj client.Object) (bool, error) {
	err := c.Get(ctx, key, obj)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// Query asks server (host:port) for the A and AAAA records of name over
// UDP, falling back to TCP for a truncated answer. The A question's
// response code is the answer's: the clusterset zone answers both alike.
func Query(ctx context.Context, server, name string, timeout time.Duration) DNSAnswer {
	if timeout == 0 {
		timeout = 2 * time.Second
	}
	a := DNSAnswer{Server: server}
	if _, _, err := net.SplitHostPort(server); err != nil {
		a.Err = fmt.Errorf("DNS server address %q: %w", server, err)
		return a
	}
	c := &dns.Client{Timeout: timeout}
	for i, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(name), qtype)
		r, _, err := c.ExchangeContext(ctx, m, server)
		if err == nil && r.Truncated {
			r, _, err = (&dns.Client{Net: "tcp", Timeout: timeout}).ExchangeContext(ctx, m, server)
		}
		if err != nil {
			a.Err = fmt.Errorf("%s %s: %w", dns.TypeToString[qtype], strings.TrimSuffix(name, "."), err)
			return a
		}
		if i == 0 {
			a.Rcode = r.Rcode
		}
		for _, rr := range r.Answer {
			switch rr := rr.(type) {
			case *dns.A:
				a.Addrs = append(a.Addrs, rr.A.String())
			case *dns.AAAA:
				a.Addrs = append(a.Addrs, rr.AAAA.String())
			}
		}
	}
	return a
}
