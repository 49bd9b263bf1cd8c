// Package diagnose walks the path of one multi-cluster service, from the
// ServiceExports of the exporting clusters through the registry's exports,
// merge and leases to the ServiceImport, derived Service, EndpointSlices and
// clusterset DNS answer of one importing cluster, and says at which step it
// breaks, why and what to do (fleetnetctl diagnose).
//
// The work is split in two: Gather reads everything once from the API
// servers, the registry and the DNS servers into Facts, plain data; Diagnose
// decides from Facts alone. The decisions are therefore tested by tables of
// broken set-ups without any server, and the fetch layer by a real fleet.
package diagnose

import (
	"time"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Target names the service diagnosed and the cluster that should reach it.
type Target struct {
	// Cluster is the importing cluster's id in the registry.
	Cluster string
	// Namespace and Name are the exported Service's.
	Namespace, Name string
}

// String returns CLUSTER/NAMESPACE/SERVICE, the command's argument.
func (t Target) String() string { return t.Cluster + "/" + t.Namespace + "/" + t.Name }

// Facts is everything Diagnose looks at, as read at one moment.
type Facts struct {
	Target Target
	// Now is when the facts were read; lease times are told relative to it.
	Now time.Time
	// Registry is what the registry says; nil when no registry was asked.
	Registry *RegistryFacts
	// Clusters are what each cluster's API server holds, by cluster id: the
	// target, every cluster the registry knows and every cluster the user
	// named. A cluster without an entry was not looked at.
	Clusters map[string]*ClusterFacts
	// DNS is the clusterset DNS answer for the target; nil when no server
	// was given.
	DNS *DNSFacts
	// Edge is what the hub and the edges say of the routes that publish
	// the service; nil when neither the hub nor an edge was given.
	Edge *EdgeFacts
}

// RegistryFacts is the registry's view of the target service.
type RegistryFacts struct {
	// Address is the registry's address, for messages.
	Address string
	// Err is set when the registry could not be read; the rest is then
	// empty.
	Err error
	// Clusters are every registered cluster, with their leases.
	Clusters []*registryv1.Cluster
	// Exports are the exports of the target's namespace and name, one per
	// exporting cluster, and Statuses their merge statuses.
	Exports  []*registryv1.Export
	Statuses []*registryv1.ExportStatus
	// Import is the import the registry sends the target cluster: the
	// merge of the exports in whose scope it is; nil when none takes part.
	Import *registryv1.Import
}

// ClusterFacts is what one cluster's API server holds for the service.
type ClusterFacts struct {
	// Err is set when the cluster could not be read at all (no kube
	// context for it, API server unreachable); the rest is then empty.
	Err error
	// Export is the cluster's ServiceExport; nil when there is none.
	Export *mcsv1beta1.ServiceExport
	// NamespaceExists says whether the namespace exists (read in the target
	// cluster only).
	NamespaceExists bool
	// Import is the ServiceImport (target cluster only); nil when none.
	Import *mcsv1beta1.ServiceImport
	// DerivedServiceName is the name the ServiceImport gives its derived
	// Service (its keys.AnnotationDerivedService annotation), or the name
	// the agent derives when the annotation is missing.
	DerivedServiceName string
	// DerivedService is the derived Service; nil when there is none.
	DerivedService *corev1.Service
	// Slices are the EndpointSlices the agent imported for the service.
	Slices []discoveryv1.EndpointSlice
}

// DNSFacts are the answers of the target cluster's DNS servers for the
// service's clusterset name.
type DNSFacts struct {
	// Name is the name asked, <svc>.<ns>.svc.clusterset.local.
	Name string
	// Fleetnet is fleetnet-dns' answer; nil when no address was given.
	Fleetnet *DNSAnswer
	// Cluster is the answer of the cluster's own resolver (its CoreDNS),
	// which must forward the clusterset zone to fleetnet-dns; nil when no
	// address was given.
	Cluster *DNSAnswer
}

// DNSAnswer is one server's answer to the A and AAAA questions.
type DNSAnswer struct {
	// Server is the host:port asked.
	Server string
	// Err is set when the server did not answer (timeout, refused).
	Err error
	// Rcode is the answer's DNS response code (dns.RcodeSuccess, ...).
	Rcode int
	// Addrs are the A and AAAA records' addresses.
	Addrs []string
}
