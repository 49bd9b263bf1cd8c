package export

import (
	"strings"
	"testing"

	"github.com/fleetnet/fleetnet/api/keys"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func TestRegionalFrontend(t *testing.T) {
	const lb = "/subscriptions/0000/resourceGroups/MC_rg_aks_westeurope/providers/Microsoft.Network/loadBalancers/kubernetes"
	const given = "/subscriptions/0000/resourceGroups/net/providers/Microsoft.Network/loadBalancers/edge/frontendIPConfigurations/web"
	lbService := func(mods ...func(*corev1.Service)) *corev1.Service {
		s := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", UID: "7f3c2b1a-9d8e-4c7b-a6f5-e4d3c2b1a098"},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
			Status:     corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "20.1.2.3"}}}},
		}
		for _, m := range mods {
			m(s)
		}
		return s
	}
	export := func(annotations map[string]string) *mcsv1beta1.ServiceExport {
		return &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", Annotations: annotations}}
	}
	tests := []struct {
		name    string
		se      *mcsv1beta1.ServiceExport
		svc     *corev1.Service
		azureLB string
		want    string
		invalid string
	}{
		// "a" and the UID without dashes, cut at 32 characters.
		{"derived from the Service's UID", export(nil), lbService(), lb, lb + "/frontendIPConfigurations/a7f3c2b1a9d8e4c7ba6f5e4d3c2b1a09", ""},
		{"the annotation wins", export(map[string]string{keys.AnnotationRegionalFrontend: given}), lbService(), lb, given, ""},
		{"the annotation without a load balancer id", export(map[string]string{keys.AnnotationRegionalFrontend: given}), lbService(), "", given, ""},
		{"an invalid annotation", export(map[string]string{keys.AnnotationRegionalFrontend: "edge frontend"}), lbService(), lb, "", `annotation fleetnet.dev/regional-frontend="edge frontend" must be a resource id starting with /`},
		{"no load balancer id", export(nil), lbService(), "", "", ""},
		{"an internal load balancer", export(nil), lbService(func(s *corev1.Service) {
			s.Annotations = map[string]string{azureInternalAnnotation: "true"}
		}), lb, "", ""},
		{"no address yet", export(nil), lbService(func(s *corev1.Service) { s.Status = corev1.ServiceStatus{} }), lb, "", ""},
		{"not a load balancer", export(nil), lbService(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP }), lb, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, invalid := RegionalFrontend(tt.se, tt.svc, tt.azureLB)
			if tt.invalid != "" {
				if invalid == nil || invalid.Reason != keys.ReasonInvalidRegionalFrontend || !strings.Contains(invalid.Message, tt.invalid) {
					t.Fatalf("invalid = %+v, want %q", invalid, tt.invalid)
				}
				return
			}
			if invalid != nil || got != tt.want {
				t.Errorf("RegionalFrontend = %q, %+v; want %q", got, invalid, tt.want)
			}
		})
	}
}

func TestValidateAzureLoadBalancerID(t *testing.T) {
	for id, ok := range map[string]bool{
		"": true,
		"/subscriptions/0000/resourceGroups/MC_rg/providers/Microsoft.Network/loadBalancers/kubernetes":                            true,
		"/subscriptions/0000/resourceGroups/MC_rg/providers/Microsoft.Network/loadBalancers/kubernetes/frontendIPConfigurations/x": false,
		"kubernetes": false,
	} {
		if err := ValidateAzureLoadBalancerID(id); (err == nil) != ok {
			t.Errorf("ValidateAzureLoadBalancerID(%q) = %v", id, err)
		}
	}
}
