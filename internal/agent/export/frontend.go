package export

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/registry/validate"
	corev1 "k8s.io/api/core/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// azureInternalAnnotation marks a Service of type LoadBalancer that
// cloud-provider-azure puts on the cluster's internal load balancer, whose
// private frontends a cross-region load balancer cannot use.
const azureInternalAnnotation = "service.beta.kubernetes.io/azure-load-balancer-internal"

// azureLoadBalancerID matches the resource id of an Azure load balancer.
var azureLoadBalancerID = regexp.MustCompile(`(?i)^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Network/loadBalancers/[^/]+$`)

// ValidateAzureLoadBalancerID checks --azure-load-balancer-id.
func ValidateAzureLoadBalancerID(id string) error {
	if id != "" && !azureLoadBalancerID.MatchString(id) {
		return fmt.Errorf("--azure-load-balancer-id=%q: must be /subscriptions/<id>/resourceGroups/<group>/providers/Microsoft.Network/loadBalancers/<name>", id)
	}
	return nil
}

// RegionalFrontend is the cloud resource id of the regional load balancer
// frontend that serves an exported Service, "" when there is none: the
// ServiceExport's keys.AnnotationRegionalFrontend when set; else, when the
// cluster's public Azure load balancer is known (azureLB, from
// --azure-load-balancer-id), the frontend IP configuration that
// cloud-provider-azure gives a public Service of type LoadBalancer once it
// has an address. That frontend is named by the Service's UID as
// k8s.io/cloud-provider's DefaultLoadBalancerName names it: "a" and the
// UID without dashes, at most 32 characters.
func RegionalFrontend(se *mcsv1beta1.ServiceExport, svc *corev1.Service, azureLB string) (string, *Invalid) {
	if v, ok := se.Annotations[keys.AnnotationRegionalFrontend]; ok {
		if msg := validate.RegionalFrontend(v); msg != "" {
			return "", &Invalid{Reason: keys.ReasonInvalidRegionalFrontend, Message: fmt.Sprintf("annotation %s=%q %s", keys.AnnotationRegionalFrontend, v, msg)}
		}
		return v, nil
	}
	if azureLB == "" || svc.Spec.Type != corev1.ServiceTypeLoadBalancer || strings.EqualFold(svc.Annotations[azureInternalAnnotation], "true") ||
		len(svc.Status.LoadBalancer.Ingress) == 0 || svc.UID == "" {
		return "", nil
	}
	name := strings.ReplaceAll("a"+string(svc.UID), "-", "")
	if len(name) > 32 {
		name = name[:32]
	}
	return azureLB + "/frontendIPConfigurations/" + name, nil
}
