// Package export is the export side of the agent: it publishes each valid
// ServiceExport's Service and EndpointSlices to the registry, reports the
// registry's verdict in the ServiceExport's conditions, creates managed
// ServiceExports for labelled Services, and repairs what the registry lost.
package export

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"

	"github.com/fleetnet/fleetnet/api/keys"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/registry/validate"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Invalid says why a ServiceExport cannot be exported.
type Invalid struct {
	Reason  string
	Message string
}

func (i *Invalid) Error() string { return i.Message }

// ParseWeight reads the fleetnet.dev/weight annotation: 0 to 1000, default 1.
func ParseWeight(se *mcsv1beta1.ServiceExport) (uint32, *Invalid) {
	v, ok := se.Annotations[keys.AnnotationWeight]
	if !ok {
		return 1, nil
	}
	w, err := strconv.ParseUint(v, 10, 32)
	if err != nil || w > 1000 {
		return 0, &Invalid{Reason: keys.ReasonInvalidWeight, Message: fmt.Sprintf("annotation %s=%q must be an integer from 0 to 1000", keys.AnnotationWeight, v)}
	}
	return uint32(w), nil
}

// ParseExportTo reads the ServiceExport's scope (keys.AnnotationExportTo):
// nil without the annotation, the sorted cluster ids with it.
func ParseExportTo(se *mcsv1beta1.ServiceExport) ([]string, *Invalid) {
	v, ok := se.Annotations[keys.AnnotationExportTo]
	if !ok {
		return nil, nil
	}
	ids, errs := validate.ParseExportTo(v, field.NewPath("metadata", "annotations").Key(keys.AnnotationExportTo))
	if len(errs) > 0 {
		return nil, &Invalid{Reason: keys.ReasonInvalidExportScope, Message: errs.ToAggregate().Error()}
	}
	return ids, nil
}

// ParseExportToSelector reads the ServiceExport's scope by selector
// (keys.AnnotationExportToSelector): "" without the annotation, the
// selector's canonical form with it.
func ParseExportToSelector(se *mcsv1beta1.ServiceExport) (string, *Invalid) {
	v, ok := se.Annotations[keys.AnnotationExportToSelector]
	if !ok {
		return "", nil
	}
	sel, errs := validate.ParseExportToSelector(v, field.NewPath("metadata", "annotations").Key(keys.AnnotationExportToSelector))
	if len(errs) > 0 {
		return "", &Invalid{Reason: keys.ReasonInvalidExportSelector, Message: errs.ToAggregate().Error()}
	}
	return sel, nil
}

// CheckExportedMetadata refuses exported labels and annotations that no
// ServiceImport could carry: invalid keys or values, and reserved keys
// (keys.ReservedExportKey), which would overwrite the agent's own.
func CheckExportedMetadata(se *mcsv1beta1.ServiceExport) *Invalid {
	spec := field.NewPath("spec")
	var reserved, errs field.ErrorList
	for _, m := range []struct {
		path   *field.Path
		values map[string]string
	}{{spec.Child("exportedLabels"), se.Spec.ExportedLabels}, {spec.Child("exportedAnnotations"), se.Spec.ExportedAnnotations}} {
		for _, k := range slices.Sorted(maps.Keys(m.values)) {
			if p := keys.ReservedExportKey(k); p != "" {
				reserved = append(reserved, field.Invalid(m.path.Key(k), k, fmt.Sprintf("the prefix %s is reserved for fleetnet and Kubernetes", p)))
			}
		}
	}
	if len(reserved) > 0 {
		return &Invalid{Reason: keys.ReasonReservedExportKey, Message: reserved.ToAggregate().Error()}
	}
	errs = append(errs, metav1validation.ValidateLabels(se.Spec.ExportedLabels, spec.Child("exportedLabels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(se.Spec.ExportedAnnotations, spec.Child("exportedAnnotations"))...)
	if len(errs) > 0 {
		return &Invalid{Reason: keys.ReasonInvalidExportedMetadata, Message: errs.ToAggregate().Error()}
	}
	return nil
}

// BuildExport derives the registry's export record from a ServiceExport and
// its Service (nil when missing). azureLB is the resource id of the
// cluster's public Azure load balancer, "" when unknown (see
// RegionalFrontend and PrivateLinkService).
func BuildExport(cluster string, se *mcsv1beta1.ServiceExport, svc *corev1.Service, azureLB string) (*registryv1.Export, *Invalid) {
	if svc == nil {
		return nil, &Invalid{Reason: string(mcsv1beta1.ServiceExportReasonNoService), Message: fmt.Sprintf("Service %s/%s does not exist", se.Namespace, se.Name)}
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil, &Invalid{Reason: string(mcsv1beta1.ServiceExportReasonInvalidServiceType), Message: fmt.Sprintf("Service %s/%s is of type ExternalName, which cannot be exported", se.Namespace, se.Name)}
	}
	weight, invalid := ParseWeight(se)
	if invalid != nil {
		return nil, invalid
	}
	if invalid := CheckExportedMetadata(se); invalid != nil {
		return nil, invalid
	}
	exportTo, invalid := ParseExportTo(se)
	if invalid != nil {
		return nil, invalid
	}
	selector, invalid := ParseExportToSelector(se)
	if invalid != nil {
		return nil, invalid
	}
	frontend, invalid := RegionalFrontend(se, svc, azureLB)
	if invalid != nil {
		return nil, invalid
	}
	pls, invalid := PrivateLinkService(se, svc, azureLB)
	if invalid != nil {
		return nil, invalid
	}
	e := &registryv1.Export{
		Key:                     &registryv1.ExportKey{Namespace: se.Namespace, Name: se.Name, ClusterId: cluster},
		ExportedSince:           timestamppb.New(se.CreationTimestamp.Time),
		Type:                    string(mcsv1beta1.ClusterSetIP),
		SessionAffinity:         string(svc.Spec.SessionAffinity),
		Labels:                  se.Spec.ExportedLabels,
		Annotations:             se.Spec.ExportedAnnotations,
		Weight:                  weight,
		RegionalFrontend:        frontend,
		PrivateLinkService:      pls.Service,
		PrivateLinkAutoApproval: pls.AutoApproval,
		ExportTo:                exportTo,
		ExportToSelector:        selector,
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		e.Type = string(mcsv1beta1.Headless)
	}
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP && svc.Spec.SessionAffinityConfig != nil && svc.Spec.SessionAffinityConfig.ClientIP != nil {
		e.SessionAffinityTimeoutSeconds = ptr.Deref(svc.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds, 0)
	}
	if svc.Spec.InternalTrafficPolicy != nil {
		e.InternalTrafficPolicy = string(*svc.Spec.InternalTrafficPolicy)
	}
	e.TrafficDistribution = ptr.Deref(svc.Spec.TrafficDistribution, "")
	for _, f := range svc.Spec.IPFamilies {
		e.IpFamilies = append(e.IpFamilies, string(f))
	}
	for _, p := range svc.Spec.Ports {
		e.Ports = append(e.Ports, &registryv1.ServicePort{Name: p.Name, Protocol: string(p.Protocol), Port: p.Port, AppProtocol: ptr.Deref(p.AppProtocol, "")})
	}
	return e, nil
}

// podName is the name of the Pod an endpoint refers to, or "" when it
// refers to something else (or to a Pod of another namespace, which the
// Service's cluster may have but is not what the name identifies).
func podName(namespace string, ref *corev1.ObjectReference) string {
	if ref == nil || ref.Kind != "Pod" || (ref.APIVersion != "" && ref.APIVersion != "v1") || (ref.Namespace != "" && ref.Namespace != namespace) {
		return ""
	}
	return ref.Name
}

// BuildChunks turns the EndpointSlices of an exported Service into one
// chunk per slice, named after it, sorted by name. A nil serving condition
// means serving, as the API documents; a nil ready means ready. An
// endpoint that refers to a Pod carries the Pod's name (registry readers
// take it as the instance id).
func BuildChunks(cluster string, se *mcsv1beta1.ServiceExport, slices []discoveryv1.EndpointSlice) []*registryv1.EndpointChunk {
	var out []*registryv1.EndpointChunk
	for i := range slices {
		if c := BuildChunk(cluster, se, &slices[i]); c != nil {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetKey().GetChunk() < out[j].GetKey().GetChunk() })
	return out
}

// BuildChunk is BuildChunks for one slice; nil for a slice the agent
// imported (not this cluster's own endpoints).
func BuildChunk(cluster string, se *mcsv1beta1.ServiceExport, s *discoveryv1.EndpointSlice) *registryv1.EndpointChunk {
	if s.Labels[discoveryv1.LabelManagedBy] == keys.EndpointSliceManagedBy {
		return nil
	}
	c := &registryv1.EndpointChunk{
		Key:         &registryv1.ChunkKey{Namespace: se.Namespace, Name: se.Name, ClusterId: cluster, Chunk: s.Name},
		AddressType: string(s.AddressType),
	}
	for _, p := range s.Ports {
		if p.Port == nil {
			continue // "all ports" cannot be served across clusters
		}
		c.Ports = append(c.Ports, &registryv1.EndpointPort{
			Name: ptr.Deref(p.Name, ""), Protocol: string(ptr.Deref(p.Protocol, corev1.ProtocolTCP)),
			Port: ptr.Deref(p.Port, 0), AppProtocol: ptr.Deref(p.AppProtocol, ""),
		})
	}
	c.Endpoints = make([]*registryv1.Endpoint, 0, len(s.Endpoints))
	for _, ep := range s.Endpoints {
		c.Endpoints = append(c.Endpoints, &registryv1.Endpoint{
			Addresses: ep.Addresses,
			Hostname:  ptr.Deref(ep.Hostname, ""),
			Zone:      ptr.Deref(ep.Zone, ""),
			NodeName:  ptr.Deref(ep.NodeName, ""),
			PodName:   podName(s.Namespace, ep.TargetRef),
			Conditions: &registryv1.EndpointConditions{
				Ready:       ptr.Deref(ep.Conditions.Ready, true),
				Serving:     ptr.Deref(ep.Conditions.Serving, true),
				Terminating: ptr.Deref(ep.Conditions.Terminating, false),
			},
		})
	}
	return c
}
