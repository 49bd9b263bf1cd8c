package annotations_test

import (
	"maps"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/gateway/model"
	"github.com/fleetnet/fleetnet/internal/gateway/provider/azure/frontdoor/annotations"
)

// The model builder refuses a Gateway whose Azure annotations do not
// parse: Accepted=False, InvalidParameters, naming the key and value; a
// valid one is accepted and its annotations reach the model.
func TestBuildRefusesInvalidAnnotations(t *testing.T) {
	tests := []struct {
		name    string
		ann     map[string]string
		message string // "" for accepted
	}{
		{"valid", map[string]string{keys.AnnotationAzureProbePath: "/healthz"}, ""},
		{"private link on a Premium annotation", map[string]string{keys.AnnotationAzureSKU: "Premium", keys.AnnotationAzureConnectivity: "private-link"}, ""},
		{"unknown key", map[string]string{"fleetnet.dev/azure-probe-timeout": "5"}, `annotation fleetnet.dev/azure-probe-timeout="5": unknown annotation`},
		{"malformed", map[string]string{keys.AnnotationAzureProbeInterval: "fast"}, `annotation fleetnet.dev/azure-probe-interval="fast"`},
		{"private link on Standard", map[string]string{keys.AnnotationAzureSKU: "Standard", keys.AnnotationAzureConnectivity: "private-link"},
			`annotation fleetnet.dev/azure-connectivity="private-link": Private Link origins need Front Door Premium`},
		{"private link on a Standard class", map[string]string{keys.AnnotationAzureConnectivity: "private-link"},
			`annotation fleetnet.dev/azure-connectivity="private-link": Private Link origins need Front Door Premium, and the tier is Standard`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := model.Input{ControllerName: keys.GatewayControllerName, ValidateAnnotations: annotations.Validator(map[string]string{"afd": "Standard"}),
				GatewayClasses: []gwv1.GatewayClass{{ObjectMeta: metav1.ObjectMeta{Name: "afd"}, Spec: gwv1.GatewayClassSpec{ControllerName: keys.GatewayControllerName}}},
				Gateways: []gwv1.Gateway{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Annotations: tt.ann, UID: "uid-1"},
					Spec: gwv1.GatewaySpec{GatewayClassName: "afd", Listeners: []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}}}}},
			}
			res := model.Build(in)
			if len(res.Status.Gateways) != 1 {
				t.Fatalf("gateway statuses: %+v", res.Status.Gateways)
			}
			c := meta.FindStatusCondition(res.Status.Gateways[0].Conditions, string(gwv1.GatewayConditionAccepted))
			if tt.message == "" {
				if c.Status != metav1.ConditionTrue {
					t.Fatalf("not accepted: %+v", c)
				}
				if len(res.Model.Gateways) != 1 || !maps.Equal(res.Model.Gateways[0].Annotations, tt.ann) ||
					res.Model.Gateways[0].Class != "afd" || res.Model.Gateways[0].UID != "uid-1" {
					t.Errorf("model gateway: %+v", res.Model.Gateways)
				}
				return
			}
			if c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.GatewayReasonInvalidParameters) || !strings.Contains(c.Message, tt.message) {
				t.Errorf("Accepted = %s %s %q, want False InvalidParameters containing %q", c.Status, c.Reason, c.Message, tt.message)
			}
			// Refused: held (fail static), not served as written.
			if len(res.Model.Gateways) != 1 || !res.Model.Gateways[0].Hold || len(res.Model.Gateways[0].Listeners) != 0 {
				t.Errorf("a refused Gateway's model entry: %+v, want only a hold", res.Model.Gateways)
			}
		})
	}
}
