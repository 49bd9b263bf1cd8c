package controller

import (
	"testing"

	networkingv1alpha1 "github.com/fleetnet/fleetnet/api/networking/v1alpha1"
	"github.com/fleetnet/fleetnet/internal/gateway/model"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func TestInterest(t *testing.T) {
	meta := func(ns, name string, labels map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}
	}
	in := model.Input{
		HTTPRoutes: []gwv1.HTTPRoute{{ObjectMeta: meta("web", "r", nil), Spec: gwv1.HTTPRouteSpec{Rules: []gwv1.HTTPRouteRule{{
			BackendRefs: []gwv1.HTTPBackendRef{
				{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "api"}}},
				{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "shared", Namespace: ptr.To(gwv1.Namespace("common"))}}},
			},
			Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestMirror, RequestMirror: &gwv1.HTTPRequestMirrorFilter{BackendRef: gwv1.BackendObjectReference{Name: "shadow"}}}},
		}}}}},
		MultiClusterLoadBalancers: []networkingv1alpha1.MultiClusterLoadBalancer{{ObjectMeta: meta("tcp", "lb", nil),
			Spec: networkingv1alpha1.MultiClusterLoadBalancerSpec{ServiceImportName: "db"}}},
		BackendTrafficPolicies: []networkingv1alpha1.BackendTrafficPolicy{{ObjectMeta: meta("web", "p", nil),
			Spec: networkingv1alpha1.BackendTrafficPolicySpec{TargetRefs: []gwv1.LocalPolicyTargetReference{{Kind: "Service", Name: "policed"}}}}},
		Gateways: []gwv1.Gateway{{ObjectMeta: meta("web", "gw", nil), Spec: gwv1.GatewaySpec{Listeners: []gwv1.Listener{
			{Name: "https", TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "cert"}, {Name: "other", Namespace: ptr.To(gwv1.Namespace("certs"))}}}},
			{Name: "http"},
		}}}},
	}
	var i interest
	tests := []struct {
		name string
		obj  client.Object
		want bool
	}{
		{"a routed Service", &corev1.Service{ObjectMeta: meta("web", "api", nil)}, true},
		{"a ServiceImport of the same name", &mcsv1beta1.ServiceImport{ObjectMeta: meta("web", "api", nil)}, true},
		{"a backend in another namespace", &mcsv1beta1.ServiceImport{ObjectMeta: meta("common", "shared", nil)}, true},
		{"a mirror's backend", &corev1.Service{ObjectMeta: meta("web", "shadow", nil)}, true},
		{"a load balancer's import", &mcsv1beta1.ServiceImport{ObjectMeta: meta("tcp", "db", nil)}, true},
		{"a policy's target", &corev1.Service{ObjectMeta: meta("web", "policed", nil)}, true},
		{"an unreferenced Service", &corev1.Service{ObjectMeta: meta("web", "batch", nil)}, false},
		{"a routed name in another namespace", &corev1.Service{ObjectMeta: meta("other", "api", nil)}, false},
		{"a routed Service's slice", &discoveryv1.EndpointSlice{ObjectMeta: meta("web", "api-x1", map[string]string{discoveryv1.LabelServiceName: "api"})}, true},
		{"an imported slice of a routed import", &discoveryv1.EndpointSlice{ObjectMeta: meta("common", "imported-east-1", map[string]string{
			discoveryv1.LabelServiceName: "derived-shared", mcsv1beta1.LabelServiceName: "shared"})}, true},
		{"an unreferenced import's slice", &discoveryv1.EndpointSlice{ObjectMeta: meta("web", "imported-east-2", map[string]string{
			discoveryv1.LabelServiceName: "derived-batch", mcsv1beta1.LabelServiceName: "batch"})}, false},
		{"a listener's Secret", &corev1.Secret{ObjectMeta: meta("web", "cert", nil)}, true},
		{"a Secret in another namespace", &corev1.Secret{ObjectMeta: meta("certs", "other", nil)}, true},
		{"a Secret named like a backend", &corev1.Secret{ObjectMeta: meta("web", "api", nil)}, false},
	}
	for _, tt := range tests {
		if !i.wants(tt.obj) {
			t.Errorf("before the first model: %s filtered out", tt.name)
		}
	}
	if i.set(in) {
		t.Error("the first model gained keys: nothing was filtered before it")
	}
	for _, tt := range tests {
		if got := i.wants(tt.obj); got != tt.want {
			t.Errorf("%s: wanted %v, want %v", tt.name, got, tt.want)
		}
	}
	if i.set(in) {
		t.Error("the same references gained keys")
	}
	in.HTTPRoutes[0].Spec.Rules[0].BackendRefs = in.HTTPRoutes[0].Spec.Rules[0].BackendRefs[:1]
	if i.set(in) {
		t.Error("fewer references gained keys")
	}
	if i.wants(&mcsv1beta1.ServiceImport{ObjectMeta: meta("common", "shared", nil)}) {
		t.Error("a backend no longer routed is still wanted")
	}
	in.HTTPRoutes[0].Spec.Rules[0].BackendRefs = append(in.HTTPRoutes[0].Spec.Rules[0].BackendRefs,
		gwv1.HTTPBackendRef{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "batch"}}})
	if !i.set(in) {
		t.Error("a newly routed backend did not ask for another build")
	}
}
