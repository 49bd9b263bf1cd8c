package export

import (
	"strings"
	"testing"

	"github.com/fleetnet/fleetnet/api/keys"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func TestPrivateLinkService(t *testing.T) {
	const lb = "/subscriptions/0000/resourceGroups/MC_rg_aks_westeurope/providers/Microsoft.Network/loadBalancers/kubernetes"
	const plsPrefix = "/subscriptions/0000/resourceGroups/MC_rg_aks_westeurope/providers/Microsoft.Network/privateLinkServices/"
	const given = "/subscriptions/1111/resourceGroups/net/providers/Microsoft.Network/privateLinkServices/web-pls"
	internal := func(mods ...func(*corev1.Service)) *corev1.Service {
		s := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", UID: "7f3c2b1a-9d8e-4c7b-a6f5-e4d3c2b1a098",
				Annotations: map[string]string{azureInternalAnnotation: "true", azurePLSCreate: "true"}},
			Spec:   corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "10.224.0.9"}}}},
		}
		for _, m := range mods {
			m(s)
		}
		return s
	}
	annotate := func(k, v string) func(*corev1.Service) { return func(s *corev1.Service) { s.Annotations[k] = v } }
	export := func(annotations map[string]string) *mcsv1beta1.ServiceExport {
		return &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", Annotations: annotations}}
	}
	tests := []struct {
		name    string
		se      *mcsv1beta1.ServiceExport
		svc     *corev1.Service
		azureLB string
		want    PrivateLink
		invalid string
	}{
		// "pls-" and the frontend's name: "a" and the UID without dashes, cut at 32 characters.
		{"derived from cloud-provider-azure's defaults", export(nil), internal(), lb, PrivateLink{Service: plsPrefix + "pls-a7f3c2b1a9d8e4c7ba6f5e4d3c2b1a09"}, ""},
		{"the frontend of a named subnet", export(nil), internal(annotate(azureInternalSubnet, "ingress")), lb, PrivateLink{Service: plsPrefix + "pls-a7f3c2b1a9d8e4c7ba6f5e4d3c2b1a09-ingress"}, ""},
		{"azure-pls-name", export(nil), internal(annotate(azurePLSName, "web-pls")), lb, PrivateLink{Service: plsPrefix + "web-pls"}, ""},
		{"azure-pls-resource-group", export(nil), internal(annotate(azurePLSName, "web-pls"), annotate(azurePLSResourceGroup, "net")), lb,
			PrivateLink{Service: "/subscriptions/0000/resourceGroups/net/providers/Microsoft.Network/privateLinkServices/web-pls"}, ""},
		{"auto approval", export(map[string]string{keys.AnnotationPLSApproval: "auto"}), internal(), lb, PrivateLink{Service: plsPrefix + "pls-a7f3c2b1a9d8e4c7ba6f5e4d3c2b1a09", AutoApproval: true}, ""},
		{"manual approval", export(map[string]string{keys.AnnotationPLSApproval: "manual"}), internal(), lb, PrivateLink{Service: plsPrefix + "pls-a7f3c2b1a9d8e4c7ba6f5e4d3c2b1a09"}, ""},
		{"the annotation wins", export(map[string]string{keys.AnnotationPrivateLinkService: given}), internal(), lb, PrivateLink{Service: given}, ""},
		{"the annotation without a load balancer id", export(map[string]string{keys.AnnotationPrivateLinkService: given, keys.AnnotationPLSApproval: "manual"}), internal(), "", PrivateLink{Service: given}, ""},
		// the export's writer cannot consent for a PLS it merely names
		{"auto approval of a named PLS", export(map[string]string{keys.AnnotationPrivateLinkService: given, keys.AnnotationPLSApproval: "auto"}), internal(), lb, PrivateLink{},
			"annotation fleetnet.dev/pls-approval=auto applies only to the Private Link Service cloud-provider-azure makes for the Service"},
		{"no azure-pls-create", export(nil), internal(annotate(azurePLSCreate, "false")), lb, PrivateLink{}, ""},
		{"a public Service", export(nil), internal(annotate(azureInternalAnnotation, "false")), lb, PrivateLink{}, ""},
		{"no address yet", export(nil), internal(func(s *corev1.Service) { s.Status = corev1.ServiceStatus{} }), lb, PrivateLink{}, ""},
		{"load balancer unknown", export(nil), internal(), "", PrivateLink{}, ""},
		{"approval without a Private Link Service", export(map[string]string{keys.AnnotationPLSApproval: "auto"}), internal(), "", PrivateLink{}, ""},
		{"a bad annotation", export(map[string]string{keys.AnnotationPrivateLinkService: "/subscriptions/0000/resourceGroups/net/providers/Microsoft.Network/loadBalancers/edge"}), internal(), lb, PrivateLink{},
			`annotation fleetnet.dev/private-link-service="/subscriptions/0000/resourceGroups/net/providers/Microsoft.Network/loadBalancers/edge" must be /subscriptions/`},
		{"a bad approval", export(map[string]string{keys.AnnotationPLSApproval: "yes"}), internal(), lb, PrivateLink{}, `annotation fleetnet.dev/pls-approval="yes" must be auto or manual`},
		{"a bad azure-pls-name", export(nil), internal(annotate(azurePLSName, "web/pls")), lb, PrivateLink{}, `derived from Service demo/web's annotations is not a resource id; set fleetnet.dev/private-link-service`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, invalid := PrivateLinkService(tt.se, tt.svc, tt.azureLB)
			if tt.invalid != "" {
				if invalid == nil || invalid.Reason != keys.ReasonInvalidPrivateLink || !strings.Contains(invalid.Message, tt.invalid) {
					t.Fatalf("invalid = %+v; want reason %s and a message containing %q", invalid, keys.ReasonInvalidPrivateLink, tt.invalid)
				}
				return
			}
			if invalid != nil || got != tt.want {
				t.Errorf("PrivateLinkService = %+v, %+v; want %+v", got, invalid, tt.want)
			}
		})
	}
}
