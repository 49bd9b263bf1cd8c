package kubesource

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/discovery/store"
	corev1 "k8s.io/api/core/v1"
	k8sdiscoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Selection says which EndpointSlices hold imported endpoints and how a
// slice names its pool and source cluster (--slice-selection).
type Selection string

// Selections.
const (
	// SelectionMCS: the Multi-Cluster Services API's labels
	// (multicluster.kubernetes.io/service-name and /source-cluster), as
	// fleetnet's agent and other MCS implementations write them.
	SelectionMCS Selection = "mcs"
	// SelectionKarmada: Karmada's derived EndpointSlices (see the Karmada
	// keys in api/keys).
	SelectionKarmada Selection = "karmada"
)

// Selections lists the valid values, for flags and errors.
var Selections = []Selection{SelectionMCS, SelectionKarmada}

// LabelSelector returns the label selector of the slices sel reads: the API
// server filters them, so that the cluster's own Services' slices are
// neither sent nor cached.
func (sel Selection) LabelSelector() string {
	if sel == SelectionKarmada {
		return fmt.Sprintf("%s in (%s,%s)", k8sdiscoveryv1.LabelManagedBy, keys.KarmadaEndpointSliceManagedBy, keys.KarmadaDispatchEndpointSliceManagedBy)
	}
	return mcsv1beta1.LabelServiceName + "," + mcsv1beta1.LabelSourceCluster
}

// Origin is where a slice's endpoints belong: its pool and source cluster.
type Origin struct {
	Pool    store.Key
	Cluster string
	Region  string
}

// OriginOf maps a slice to its pool and source cluster, or says why it
// cannot, naming the label, annotation or name at fault.
func (sel Selection) OriginOf(s *k8sdiscoveryv1.EndpointSlice) (Origin, error) {
	o := Origin{Region: s.Labels[corev1.LabelTopologyRegion]}
	if msgs := validation.IsValidLabelValue(o.Region); len(msgs) > 0 {
		o.Region = "" // a region that is no label value is left out, as the agent does
	}
	switch sel {
	case SelectionKarmada:
		svc := s.Labels[k8sdiscoveryv1.LabelServiceName]
		switch s.Labels[k8sdiscoveryv1.LabelManagedBy] {
		case keys.KarmadaDispatchEndpointSliceManagedBy:
			// MultiClusterService: the Service keeps its name, the
			// annotation names the source cluster.
			o.Pool, o.Cluster = store.Key{Namespace: s.Namespace, Name: svc}, s.Annotations[keys.KarmadaAnnotationProvisionCluster]
			if svc == "" {
				return o, fmt.Errorf("label %s is missing", k8sdiscoveryv1.LabelServiceName)
			}
			if o.Cluster == "" {
				return o, fmt.Errorf("annotation %s is missing", keys.KarmadaAnnotationProvisionCluster)
			}
			return o, nil
		default:
			name, ok := strings.CutPrefix(svc, keys.KarmadaDerivedServicePrefix)
			if !ok || name == "" {
				return o, fmt.Errorf("label %s=%q: want %s<service>", k8sdiscoveryv1.LabelServiceName, svc, keys.KarmadaDerivedServicePrefix)
			}
			o.Pool = store.Key{Namespace: s.Namespace, Name: name}
			cluster, err := karmadaCluster(s, name)
			o.Cluster = cluster
			return o, err
		}
	default:
		o.Pool = store.Key{Namespace: s.Namespace, Name: s.Labels[mcsv1beta1.LabelServiceName]}
		o.Cluster = s.Labels[mcsv1beta1.LabelSourceCluster]
		if o.Pool.Name == "" || o.Cluster == "" {
			return o, fmt.Errorf("labels %s=%q and %s=%q: both must be set", mcsv1beta1.LabelServiceName, o.Pool.Name, mcsv1beta1.LabelSourceCluster, o.Cluster)
		}
		return o, nil
	}
}

// karmadaCluster finds the source cluster of a slice Karmada derived for
// service: its name is imported-<cluster>-<source slice>, and the source
// slice, made by the EndpointSlice controller, is <service>-<suffix>. A
// cluster name may hold dashes, so the work namespace annotation
// (karmada-es-<cluster>) decides where it agrees with the name; else the
// cluster ends before the last "-<service>-".
func karmadaCluster(s *k8sdiscoveryv1.EndpointSlice, service string) (string, error) {
	rest, ok := strings.CutPrefix(s.Name, keys.KarmadaImportedSlicePrefix)
	if !ok {
		return "", fmt.Errorf("name %q: want %s<cluster>-<slice>", s.Name, keys.KarmadaImportedSlicePrefix)
	}
	if c, ok := strings.CutPrefix(s.Annotations[keys.KarmadaAnnotationWorkNamespace], keys.KarmadaExecutionSpacePrefix); ok && c != "" && strings.HasPrefix(rest, c+"-") {
		return c, nil
	}
	if i := strings.LastIndex(rest, "-"+service+"-"); i > 0 {
		return rest[:i], nil
	}
	return "", fmt.Errorf("name %q: no source cluster before -%s-, and annotation %s=%q does not name one", s.Name, service, keys.KarmadaAnnotationWorkNamespace, s.Annotations[keys.KarmadaAnnotationWorkNamespace])
}

// BuildPool makes a pool from the slices of one pool (each with its
// origin). Endpoints are grouped by source cluster; an endpoint's instance
// id is <cluster>/<first address>, as imported slices carry no Pod
// reference; one that two slices hold (as while the EndpointSlice
// controller moves it) is served once, from the slice that sorts first by
// name. A nil ready or serving is true and a nil terminating is false, as
// the EndpointSlice API documents (discovery/v1 EndpointConditions: an
// unknown state is read as ready and serving). Ports without a
// number ("all ports") are left out.
//
// The pool's labels are labels' (its ServiceImport's) without the reserved
// keys (Kubernetes', the MCS API's and fleetnet's own, such as the agent's
// managed-by label), which are no exporter's.
func BuildPool(k store.Key, labels map[string]string, sl []*k8sdiscoveryv1.EndpointSlice, origins []Origin) discoveryv1.Pool {
	idx := make([]int, len(sl))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(sl[a].Name, sl[b].Name) })
	clusters := map[string]*discoveryv1.PoolCluster{}
	seen := map[string]bool{}
	for _, i := range idx {
		s, o := sl[i], origins[i]
		c := clusters[o.Cluster]
		if c == nil {
			c = &discoveryv1.PoolCluster{Cluster: o.Cluster, Endpoints: []discoveryv1.Endpoint{}}
			clusters[o.Cluster] = c
		}
		if c.Region == "" {
			c.Region = o.Region
		}
		var ports []discoveryv1.Port
		for _, p := range s.Ports {
			if p.Port == nil {
				continue
			}
			ports = append(ports, discoveryv1.Port{Name: ptr.Deref(p.Name, ""), Port: *p.Port, Protocol: string(ptr.Deref(p.Protocol, corev1.ProtocolTCP))})
		}
		for _, e := range s.Endpoints {
			if len(e.Addresses) == 0 {
				continue
			}
			id := o.Cluster + "/" + canonicalAddress(e.Addresses[0])
			if seen[id] {
				continue
			}
			seen[id] = true
			c.Endpoints = append(c.Endpoints, discoveryv1.Endpoint{
				InstanceID:  id,
				Addresses:   slices.Clone(e.Addresses),
				Ports:       slices.Clone(ports),
				Ready:       ptr.Deref(e.Conditions.Ready, true),
				Serving:     ptr.Deref(e.Conditions.Serving, true),
				Terminating: ptr.Deref(e.Conditions.Terminating, false),
				Hostname:    ptr.Deref(e.Hostname, ""),
				Zone:        ptr.Deref(e.Zone, ""),
			})
		}
	}
	p := discoveryv1.Pool{Namespace: k.Namespace, Name: k.Name, Clusters: make([]discoveryv1.PoolCluster, 0, len(clusters))}
	for lk, lv := range labels {
		if keys.ReservedExportKey(lk) == "" {
			if p.Labels == nil {
				p.Labels = map[string]string{}
			}
			p.Labels[lk] = lv
		}
	}
	for _, name := range slices.Sorted(maps.Keys(clusters)) {
		p.Clusters = append(p.Clusters, *clusters[name])
	}
	return p
}

// canonicalAddress writes an IP address one way (an IPv6 address may be
// spelled several), so that its instance id is stable.
func canonicalAddress(a string) string {
	if ip, err := netip.ParseAddr(a); err == nil {
		return ip.String()
	}
	return a
}

// Routers makes the router replicas from the slices of the routers'
// Service in this cluster: the instance id is the Pod's name where the
// endpoint refers to a Pod (the Pods are in this cluster), else the
// address.
func Routers(cluster string, sl []*k8sdiscoveryv1.EndpointSlice) []discoveryv1.Router {
	var out []discoveryv1.Router
	seen := map[string]bool{}
	slices.SortFunc(sl, func(a, b *k8sdiscoveryv1.EndpointSlice) int { return cmp.Compare(a.Name, b.Name) })
	for _, s := range sl {
		var ports []discoveryv1.Port
		for _, p := range s.Ports {
			if p.Port != nil {
				ports = append(ports, discoveryv1.Port{Name: ptr.Deref(p.Name, ""), Port: *p.Port, Protocol: string(ptr.Deref(p.Protocol, corev1.ProtocolTCP))})
			}
		}
		slices.SortFunc(ports, func(a, b discoveryv1.Port) int { return cmp.Compare(a.Name, b.Name) })
		for _, e := range s.Endpoints {
			if len(e.Addresses) == 0 {
				continue
			}
			id := canonicalAddress(e.Addresses[0])
			if e.TargetRef != nil && e.TargetRef.Kind == "Pod" && e.TargetRef.Name != "" {
				id = e.TargetRef.Name
			}
			if seen[id] {
				continue
			}
			seen[id] = true
			out = append(out, discoveryv1.Router{
				InstanceID: id, Addresses: slices.Clone(e.Addresses), Ports: slices.Clone(ports),
				Cluster: cluster, Zone: ptr.Deref(e.Zone, ""), Ready: ptr.Deref(e.Conditions.Ready, true),
			})
		}
	}
	slices.SortFunc(out, func(a, b discoveryv1.Router) int { return cmp.Compare(a.InstanceID, b.InstanceID) })
	return out
}
