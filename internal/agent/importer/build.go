package importer

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"

	"github.com/fleetnet/fleetnet/api/keys"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// DerivedName is the name of the derived Service of an import:
// derived-<first 10 hex digits of sha256(namespace/name)>.
func DerivedName(namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	return keys.DerivedServicePrefix + hex.EncodeToString(sum[:])[:10]
}

// CheckPorts refuses a port set that mixes unnamed and named ports.
func CheckPorts(ports []*registryv1.ServicePort) error {
	if len(ports) < 2 {
		return nil
	}
	for _, p := range ports {
		if p.GetName() == "" {
			return fmt.Errorf("port %d/%s has no name beside %d other ports; a Service needs every port named when it has several", p.GetPort(), p.GetProtocol(), len(ports)-1)
		}
	}
	return nil
}

// Families returns the import's IP families that this cluster's Service
// network has, in the import's order.
func Families(imp *registryv1.Import, cluster []corev1.IPFamily) []corev1.IPFamily {
	var out []corev1.IPFamily
	for _, f := range imp.GetIpFamilies() {
		if slices.Contains(cluster, corev1.IPFamily(f)) {
			out = append(out, corev1.IPFamily(f))
		}
	}
	if len(imp.GetIpFamilies()) == 0 && len(cluster) > 0 {
		out = cluster[:1]
	}
	return out
}

// ServiceImportSpec derives the ServiceImport's spec (without ips).
func ServiceImportSpec(imp *registryv1.Import, families []corev1.IPFamily) mcsv1beta1.ServiceImportSpec {
	spec := mcsv1beta1.ServiceImportSpec{
		Type:            mcsv1beta1.ServiceImportType(imp.GetType()),
		SessionAffinity: corev1.ServiceAffinity(imp.GetSessionAffinity()),
		IPFamilies:      families,
		Ports:           []mcsv1beta1.ServicePort{},
	}
	if imp.GetSessionAffinity() == string(corev1.ServiceAffinityClientIP) && imp.GetSessionAffinityTimeoutSeconds() > 0 {
		spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(imp.GetSessionAffinityTimeoutSeconds())}}
	}
	if p := imp.GetInternalTrafficPolicy(); p != "" {
		spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicy(p))
	}
	if td := imp.GetTrafficDistribution(); td != "" {
		spec.TrafficDistribution = ptr.To(td)
	}
	for _, p := range imp.GetPorts() {
		sp := mcsv1beta1.ServicePort{Name: p.GetName(), Protocol: corev1.Protocol(p.GetProtocol()), Port: p.GetPort()}
		if p.GetAppProtocol() != "" {
			sp.AppProtocol = ptr.To(p.GetAppProtocol())
		}
		spec.Ports = append(spec.Ports, sp)
	}
	return spec
}

// DerivedServiceSpec derives the spec of the derived Service: no selector,
// ClusterIP None for a headless import, the import's ports.
func DerivedServiceSpec(imp *registryv1.Import, families []corev1.IPFamily) corev1.ServiceSpec {
	spec := corev1.ServiceSpec{
		Type:            corev1.ServiceTypeClusterIP,
		SessionAffinity: corev1.ServiceAffinity(imp.GetSessionAffinity()),
		IPFamilies:      families,
		IPFamilyPolicy:  ptr.To(corev1.IPFamilyPolicySingleStack),
	}
	if len(families) > 1 {
		spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyPreferDualStack)
	}
	if imp.GetType() == string(mcsv1beta1.Headless) {
		spec.ClusterIP = corev1.ClusterIPNone
	}
	if imp.GetSessionAffinity() == string(corev1.ServiceAffinityClientIP) && imp.GetSessionAffinityTimeoutSeconds() > 0 {
		spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(imp.GetSessionAffinityTimeoutSeconds())}}
	}
	if td := imp.GetTrafficDistribution(); td != "" {
		spec.TrafficDistribution = ptr.To(td)
	}
	for _, p := range imp.GetPorts() {
		sp := corev1.ServicePort{Name: p.GetName(), Protocol: corev1.Protocol(p.GetProtocol()), Port: p.GetPort(), TargetPort: intstr.FromInt32(p.GetPort())}
		if p.GetAppProtocol() != "" {
			sp.AppProtocol = ptr.To(p.GetAppProtocol())
		}
		spec.Ports = append(spec.Ports, sp)
	}
	return spec
}

// SliceAnnotations are the annotations of an imported EndpointSlice: the
// source cluster's weight (fleetnet.dev/weight, from its ServiceExport),
// regional load balancer frontend (fleetnet.dev/regional-frontend) and
// Private Link Service (fleetnet.dev/private-link-service, with
// fleetnet.dev/pls-approval=auto when its owner allows it), when it has
// them, so that a gateway in this cluster can split traffic by cluster and
// program a cross-region load balancer or Front Door without a registry
// connection of its own.
func SliceAnnotations(c *registryv1.ImportCluster) map[string]string {
	a := map[string]string{keys.AnnotationWeight: strconv.FormatUint(uint64(c.GetWeight()), 10)}
	if f := c.GetRegionalFrontend(); f != "" {
		a[keys.AnnotationRegionalFrontend] = f
	}
	if pls := c.GetPrivateLinkService(); pls != "" {
		a[keys.AnnotationPrivateLinkService] = pls
		if c.GetPrivateLinkAutoApproval() {
			a[keys.AnnotationPLSApproval] = keys.PLSApprovalAuto
		}
	}
	return a
}

// SliceLabels are the labels of an imported EndpointSlice. The region is
// left out when it is not a valid label value; it never fails the apply.
func SliceLabels(importName, derivedName, cluster, region string) map[string]string {
	l := map[string]string{
		discoveryv1.LabelServiceName:  derivedName,
		mcsv1beta1.LabelServiceName:   importName,
		mcsv1beta1.LabelSourceCluster: cluster,
		discoveryv1.LabelManagedBy:    keys.EndpointSliceManagedBy,
	}
	if region != "" && len(validation.IsValidLabelValue(region)) == 0 {
		l[corev1.LabelTopologyRegion] = region
	}
	return l
}

// ImportMetadata returns the ServiceImport's labels and annotations: the
// exported ones the registry merged (the oldest export's), and the agent's
// own label and the name of the derived Service, which no exported key may
// replace (the registry refuses reserved keys; they are dropped here too).
func ImportMetadata(imp *registryv1.Import) (labels, annotations map[string]string) {
	labels = map[string]string{}
	for k, v := range imp.GetLabels() {
		if keys.ReservedExportKey(k) == "" {
			labels[k] = v
		}
	}
	labels[keys.LabelManagedBy] = keys.ManagedByAgent
	annotations = map[string]string{keys.AnnotationDerivedService: DerivedName(imp.GetKey().GetNamespace(), imp.GetKey().GetName())}
	for k, v := range imp.GetAnnotations() {
		if keys.ReservedExportKey(k) == "" {
			annotations[k] = v
		}
	}
	return labels, annotations
}
