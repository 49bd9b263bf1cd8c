package export

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/fleetnet/fleetnet/api/keys"
	corev1 "k8s.io/api/core/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// cloud-provider-azure's annotations of a Service of type LoadBalancer on
// the internal load balancer that ask it to create and manage a Private
// Link Service in front of the Service's frontend
// (https://cloud-provider-azure.sigs.k8s.io/topics/pls-integration/).
const (
	azurePLSCreate        = "service.beta.kubernetes.io/azure-pls-create"
	azurePLSName          = "service.beta.kubernetes.io/azure-pls-name"
	azurePLSResourceGroup = "service.beta.kubernetes.io/azure-pls-resource-group"
	azureInternalSubnet   = "service.beta.kubernetes.io/azure-load-balancer-internal-subnet"
)

// azurePLSID matches the resource id of an Azure Private Link Service.
var azurePLSID = regexp.MustCompile(`(?i)^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Network/privateLinkServices/[^/]+$`)

// azureLBParts splits a load balancer id into its subscription, resource
// group and name.
var azureLBParts = regexp.MustCompile(`(?i)^/subscriptions/([^/]+)/resourceGroups/([^/]+)/providers/Microsoft\.Network/loadBalancers/([^/]+)$`)

// PrivateLink is the Private Link Service that serves an exported Service
// and whether its owner lets the fleet approve connections to it.
type PrivateLink struct {
	// Service is the Private Link Service's resource id, "" when none.
	Service      string
	AutoApproval bool
}

// PrivateLinkService finds the Private Link Service in front of an
// exported Service, "" when there is none: the ServiceExport's
// keys.AnnotationPrivateLinkService when set; else, when the cluster's
// Azure load balancer is known (azureLB, from --azure-load-balancer-id),
// the one cloud-provider-azure creates for an internal Service of type
// LoadBalancer annotated azure-pls-create=true, once the Service has its
// address: named by azure-pls-name or "pls-" and the frontend's name, in
// azure-pls-resource-group or the load balancer's resource group and
// subscription. keys.AnnotationPLSApproval on the ServiceExport says
// whether the owner allows automatic approval; only of the Private Link
// Service cloud-provider-azure makes for the Service, whose tags name the
// Service, which the gateway's provider checks before approving.
func PrivateLinkService(se *mcsv1beta1.ServiceExport, svc *corev1.Service, azureLB string) (PrivateLink, *Invalid) {
	var out PrivateLink
	switch v, ok := se.Annotations[keys.AnnotationPLSApproval]; {
	case !ok || v == keys.PLSApprovalManual:
	case v == keys.PLSApprovalAuto:
		out.AutoApproval = true
	default:
		return PrivateLink{}, &Invalid{Reason: keys.ReasonInvalidPrivateLink, Message: fmt.Sprintf("annotation %s=%q must be %s or %s",
			keys.AnnotationPLSApproval, v, keys.PLSApprovalAuto, keys.PLSApprovalManual)}
	}
	if v, ok := se.Annotations[keys.AnnotationPrivateLinkService]; ok {
		if !azurePLSID.MatchString(v) || len(v) > 1024 {
			return PrivateLink{}, &Invalid{Reason: keys.ReasonInvalidPrivateLink, Message: fmt.Sprintf("annotation %s=%q must be /subscriptions/<id>/resourceGroups/<group>/providers/Microsoft.Network/privateLinkServices/<name>",
				keys.AnnotationPrivateLinkService, v)}
		}
		// Whoever may write a ServiceExport may name any Private Link
		// Service here: consent to approval must come from its owner.
		if out.AutoApproval {
			return PrivateLink{}, &Invalid{Reason: keys.ReasonInvalidPrivateLink, Message: fmt.Sprintf("annotation %s=%s applies only to the Private Link Service cloud-provider-azure makes for the Service (azure-pls-create), not to one named by %s: tag that one %s=%s instead",
				keys.AnnotationPLSApproval, keys.PLSApprovalAuto, keys.AnnotationPrivateLinkService, keys.TagAzurePLSApproval, keys.PLSApprovalAuto)}
		}
		out.Service = v
		return out, nil
	}
	m := azureLBParts.FindStringSubmatch(azureLB)
	if m == nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer || !strings.EqualFold(svc.Annotations[azureInternalAnnotation], "true") ||
		!strings.EqualFold(svc.Annotations[azurePLSCreate], "true") || len(svc.Status.LoadBalancer.Ingress) == 0 || svc.UID == "" {
		out.AutoApproval = false // nothing to approve
		return out, nil
	}
	name := svc.Annotations[azurePLSName]
	if name == "" {
		name = "pls-" + internalFrontendName(svc)
	}
	group := m[2]
	if g := svc.Annotations[azurePLSResourceGroup]; g != "" {
		group = g
	}
	out.Service = fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/privateLinkServices/%s", m[1], group, name)
	if !azurePLSID.MatchString(out.Service) {
		return PrivateLink{}, &Invalid{Reason: keys.ReasonInvalidPrivateLink, Message: fmt.Sprintf("the Private Link Service %q derived from Service %s/%s's annotations is not a resource id; set %s on the ServiceExport",
			out.Service, svc.Namespace, svc.Name, keys.AnnotationPrivateLinkService)}
	}
	return out, nil
}

// internalFrontendName is the name cloud-provider-azure gives an internal
// Service's frontend IP configuration: the default load balancer name ("a"
// and the UID without dashes, at most 32 characters), followed by "-" and
// the subnet when the Service names one, at most 80 characters.
func internalFrontendName(svc *corev1.Service) string {
	name := strings.ReplaceAll("a"+string(svc.UID), "-", "")
	if len(name) > 32 {
		name = name[:32]
	}
	if subnet := svc.Annotations[azureInternalSubnet]; subnet != "" {
		name += "-" + subnet
		if len(name) > 80 {
			name = name[:80]
		}
	}
	return name
}
