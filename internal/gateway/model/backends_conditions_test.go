package model

import (
	"testing"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestEndpointConditions reads an endpoint's conditions as the
// EndpointSlice API documents them (k8s.io/api/discovery/v1
// EndpointConditions): a nil ready is true, and a nil serving is true too,
// whatever ready says.
func TestEndpointConditions(t *testing.T) {
	tests := []struct {
		name                 string
		ready, serving       *bool
		wantReady, wantServe bool
	}{
		{"both nil", nil, nil, true, true},
		{"not ready, serving nil", ptr.To(false), nil, false, true},
		{"ready nil, not serving", nil, ptr.To(false), true, false},
		{"not ready, serving", ptr.To(false), ptr.To(true), false, true},
		{"not ready, not serving", ptr.To(false), ptr.To(false), false, false},
		{"ready, serving", ptr.To(true), ptr.To(true), true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Namespace: "demo", Name: "echo-abc"},
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
				Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"},
					Conditions: discoveryv1.EndpointConditions{Ready: tt.ready, Serving: tt.serving}}},
			}
			b := &builder{in: Input{LocalCluster: "hub"}}
			got := b.clusters([]*discoveryv1.EndpointSlice{s}, []string{"http"}, corev1.ProtocolTCP)
			if len(got) != 1 || len(got[0].Endpoints) != 1 {
				t.Fatalf("clusters = %+v, want one cluster with one endpoint", got)
			}
			want := edgev1.Endpoint{Address: "10.0.0.1", Port: 8080, Ready: tt.wantReady, Serving: tt.wantServe}
			if e := got[0].Endpoints[0]; e != want {
				t.Errorf("endpoint = %+v, want %+v", e, want)
			}
		})
	}
}

// TestFQDNEndpointsAreNotServed: the edge dials addresses only. A slice of
// names (address type FQDN) is left out of the model, so no name a member
// cluster chose is ever resolved by the edge.
func TestFQDNEndpointsAreNotServed(t *testing.T) {
	slice := func(name string, t discoveryv1.AddressType, addr string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "demo", Name: name},
			AddressType: t,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}}},
		}
	}
	b := &builder{in: Input{LocalCluster: "hub"}}
	got := b.clusters([]*discoveryv1.EndpointSlice{
		slice("echo-names", discoveryv1.AddressTypeFQDN, "metadata.internal.example"),
		slice("echo-v4", discoveryv1.AddressTypeIPv4, "10.0.0.1"),
	}, []string{"http"}, corev1.ProtocolTCP)
	if len(got) != 1 || len(got[0].Endpoints) != 1 || got[0].Endpoints[0].Address != "10.0.0.1" {
		t.Errorf("clusters = %+v, want the IPv4 endpoint alone", got)
	}
}
