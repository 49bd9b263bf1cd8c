package model

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/api/keys"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Cluster weights (keys.AnnotationWeight): the ServiceExport's validation
// keeps them in this range; a slice without one has the default.
const (
	DefaultClusterWeight = 1
	MaxClusterWeight     = 1000
)

// backend resolves one backendRef of r: kind, ReferenceGrant, object and
// port, then the endpoints of every cluster.
func (b *builder) backend(r *gwv1.HTTPRoute, ref gwv1.BackendRef) edgev1.Backend {
	group, kind := "", edgev1.KindService
	if ref.Group != nil {
		group = string(*ref.Group)
	}
	if ref.Kind != nil {
		kind = string(*ref.Kind)
	}
	ns := r.Namespace
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	be := edgev1.Backend{Kind: kind, Namespace: ns, Name: string(ref.Name), Weight: 1, Policy: edgev1.DefaultBackendPolicy()}
	if group == "" && kind == edgev1.KindService || group == mcsv1beta1.GroupName && kind == edgev1.KindServiceImport {
		be.Policy = b.backendPolicy(kind, ns, string(ref.Name))
	}
	if ref.Weight != nil {
		be.Weight = *ref.Weight
	}
	if ref.Port != nil {
		be.Port = int32(*ref.Port)
	}
	name := key(ns, string(ref.Name))
	fail := func(reason gwv1.RouteConditionReason, format string, args ...any) edgev1.Backend {
		be.Invalid = &edgev1.Invalid{Reason: string(reason), Message: fmt.Sprintf(format, args...)}
		return be
	}
	switch {
	case group == "" && kind == edgev1.KindService:
	case group == mcsv1beta1.GroupName && kind == edgev1.KindServiceImport:
	default:
		if group == "" {
			group = "core"
		}
		return fail(gwv1.RouteReasonInvalidKind, "backendRef %s: kind %s of group %s is not supported; use a Service or a %s ServiceImport",
			name, kind, group, mcsv1beta1.GroupName)
	}
	if ns != r.Namespace && !b.granted(gatewayGroup, "HTTPRoute", r.Namespace, group, kind, ns, string(ref.Name)) {
		return fail(gwv1.RouteReasonRefNotPermitted, "backendRef %s %s: no ReferenceGrant in %s allows HTTPRoutes of %s to reference it",
			kind, name, ns, r.Namespace)
	}

	// ports are the backend's ports by name, as EndpointSlices name them.
	var ports []string
	var sel []*discoveryv1.EndpointSlice
	if kind == edgev1.KindService {
		svc := b.services[name]
		if svc == nil {
			return fail(gwv1.RouteReasonBackendNotFound, "Service %s not found", name)
		}
		if ref.Port == nil {
			return fail(gwv1.RouteReasonBackendNotFound, "backendRef Service %s: port is required", name)
		}
		i := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == be.Port })
		if i < 0 {
			return fail(gwv1.RouteReasonBackendNotFound, "Service %s has no port %d (ports: %s)", name, be.Port, servicePorts(svc.Spec.Ports))
		}
		ports = []string{svc.Spec.Ports[i].Name}
		if ap := svc.Spec.Ports[i].AppProtocol; ap != nil {
			be.AppProtocol = *ap
		}
		for _, s := range b.slices {
			if s.Namespace == ns && s.Labels[discoveryv1.LabelServiceName] == svc.Name {
				sel = append(sel, s)
			}
		}
	} else {
		si := b.imports[name]
		if si == nil {
			return fail(gwv1.RouteReasonBackendNotFound, "ServiceImport %s not found", name)
		}
		if ref.Port == nil {
			// GEP-1748: without a port, the backend is every port of the
			// ServiceImport.
			for _, p := range si.Spec.Ports {
				ports = append(ports, p.Name)
			}
		} else {
			i := slices.IndexFunc(si.Spec.Ports, func(p mcsv1beta1.ServicePort) bool { return p.Port == be.Port })
			if i < 0 {
				return fail(gwv1.RouteReasonBackendNotFound, "ServiceImport %s has no port %d (ports: %s)", name, be.Port, importPorts(si.Spec.Ports))
			}
			ports = []string{si.Spec.Ports[i].Name}
			if ap := si.Spec.Ports[i].AppProtocol; ap != nil {
				be.AppProtocol = *ap
			}
		}
		for _, s := range b.slices {
			if s.Namespace == ns && s.Labels[mcsv1beta1.LabelServiceName] == si.Name && s.Labels[mcsv1beta1.LabelSourceCluster] != "" {
				sel = append(sel, s)
			}
		}
	}
	be.Clusters = b.clusters(sel, ports, corev1.ProtocolTCP)
	var total int64
	for _, c := range be.Clusters {
		total += c.EffectiveWeight
	}
	be.NoReadyEndpoints = total == 0
	return be
}

func servicePorts(ps []corev1.ServicePort) string {
	var s []string
	for _, p := range ps {
		s = append(s, strconv.Itoa(int(p.Port)))
	}
	return strings.Join(s, ", ")
}

func importPorts(ps []mcsv1beta1.ServicePort) string {
	var s []string
	for _, p := range ps {
		s = append(s, strconv.Itoa(int(p.Port)))
	}
	return strings.Join(s, ", ")
}

// clusters groups the endpoints of ss, on the named ports of protocol, by
// cluster.
// Imported slices name their cluster, region and weight; a local
// Service's slices are the hub's.
func (b *builder) clusters(ss []*discoveryv1.EndpointSlice, ports []string, protocol corev1.Protocol) []edgev1.ClusterEndpoints {
	byCluster := map[string]*edgev1.ClusterEndpoints{}
	type epKey struct {
		addr string
		port int32
	}
	eps := map[string]map[epKey]*edgev1.Endpoint{}
	for _, s := range ss {
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		cluster, region := s.Labels[mcsv1beta1.LabelSourceCluster], s.Labels[corev1.LabelTopologyRegion]
		if cluster == "" {
			cluster = b.in.LocalCluster
			if region == "" {
				region = b.in.LocalRegion
			}
		}
		weight := sliceWeight(s)
		c := byCluster[cluster]
		if c == nil {
			c = &edgev1.ClusterEndpoints{Cluster: cluster, Region: region, Weight: weight, RegionalFrontend: s.Annotations[keys.AnnotationRegionalFrontend],
				PrivateLinkAutoApproval: true} // until a slice withholds it
			byCluster[cluster] = c
			eps[cluster] = map[epKey]*edgev1.Endpoint{}
		}
		// Slices of one cluster disagree only while the agent rewrites
		// them; the smaller weight and the first region keep the result
		// independent of input order.
		c.Weight = min(c.Weight, weight)
		if c.Region == "" || (region != "" && region < c.Region) {
			c.Region = region
		}
		if f := s.Annotations[keys.AnnotationRegionalFrontend]; c.RegionalFrontend == "" || (f != "" && f < c.RegionalFrontend) {
			c.RegionalFrontend = f
		}
		if pls := s.Annotations[keys.AnnotationPrivateLinkService]; c.PrivateLinkService == "" || (pls != "" && pls < c.PrivateLinkService) {
			c.PrivateLinkService = pls
		}
		// Consent only when every slice of the cluster gives it.
		c.PrivateLinkAutoApproval = c.PrivateLinkAutoApproval && s.Annotations[keys.AnnotationPLSApproval] == keys.PLSApprovalAuto
		var numbers []int32
		for _, p := range s.Ports {
			name := ""
			if p.Name != nil {
				name = *p.Name
			}
			proto := corev1.ProtocolTCP
			if p.Protocol != nil {
				proto = *p.Protocol
			}
			if p.Port == nil || proto != protocol || !slices.Contains(ports, name) {
				continue
			}
			numbers = append(numbers, *p.Port)
		}
		for _, e := range s.Endpoints {
			// A nil ready or serving is true (discovery/v1
			// EndpointConditions: an unknown state is read as ready and
			// serving), each on its own.
			ready := e.Conditions.Ready == nil || *e.Conditions.Ready
			serving := e.Conditions.Serving == nil || *e.Conditions.Serving
			for _, a := range e.Addresses {
				for _, n := range numbers {
					k := epKey{a, n}
					if old := eps[cluster][k]; old != nil {
						old.Ready = old.Ready || ready
						old.Serving = old.Serving || serving
						continue
					}
					eps[cluster][k] = &edgev1.Endpoint{Address: a, Port: n, Ready: ready, Serving: serving}
				}
			}
		}
	}
	out := []edgev1.ClusterEndpoints{}
	for name, c := range byCluster {
		readyAddrs := map[string]bool{}
		c.Endpoints = []edgev1.Endpoint{}
		for _, e := range eps[name] {
			c.Endpoints = append(c.Endpoints, *e)
			if e.Ready {
				readyAddrs[e.Address] = true
			}
		}
		slices.SortFunc(c.Endpoints, func(x, y edgev1.Endpoint) int {
			return cmp.Or(cmp.Compare(x.Address, y.Address), cmp.Compare(x.Port, y.Port))
		})
		c.EffectiveWeight = int64(c.Weight) * int64(len(readyAddrs))
		out = append(out, *c)
	}
	slices.SortFunc(out, func(x, y edgev1.ClusterEndpoints) int { return cmp.Compare(x.Cluster, y.Cluster) })
	return out
}

// sliceWeight is the slice's keys.AnnotationWeight, the default when it
// has none or one out of range.
func sliceWeight(s *discoveryv1.EndpointSlice) int32 {
	v, ok := s.Annotations[keys.AnnotationWeight]
	if !ok {
		return DefaultClusterWeight
	}
	w, err := strconv.Atoi(v)
	if err != nil || w < 0 || w > MaxClusterWeight {
		return DefaultClusterWeight
	}
	return int32(w)
}
