package kubesource

import (
	"testing"

	"github.com/fleetnet/fleetnet/internal/discovery/store"
	k8sdiscoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// TestBuildPoolEndpointConditions reads an endpoint's conditions as the
// EndpointSlice API documents them (k8s.io/api/discovery/v1
// EndpointConditions): a nil ready or serving is true, whatever the other
// says; a nil terminating is false.
func TestBuildPoolEndpointConditions(t *testing.T) {
	tests := []struct {
		name                                  string
		ready, serving, terminating           *bool
		wantReady, wantServing, wantTerminate bool
	}{
		{"all nil", nil, nil, nil, true, true, false},
		{"not ready, serving nil", ptr.To(false), nil, nil, false, true, false},
		{"ready nil, not serving", nil, ptr.To(false), nil, true, false, false},
		{"not ready, serving nil, terminating", ptr.To(false), nil, ptr.To(true), false, true, true},
		{"not ready, not serving", ptr.To(false), ptr.To(false), nil, false, false, false},
		{"ready, serving", ptr.To(true), ptr.To(true), ptr.To(false), true, true, false},
	}
	k := store.Key{Namespace: "demo", Name: "web"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep := k8sdiscoveryv1.Endpoint{Addresses: []string{"10.0.1.1"},
				Conditions: k8sdiscoveryv1.EndpointConditions{Ready: tt.ready, Serving: tt.serving, Terminating: tt.terminating}}
			p := BuildPool(k, nil, []*k8sdiscoveryv1.EndpointSlice{slice("a", nil, nil, ep)}, []Origin{{Pool: k, Cluster: "east"}})
			if len(p.Clusters) != 1 || len(p.Clusters[0].Endpoints) != 1 {
				t.Fatalf("pool = %+v, want one cluster with one endpoint", p)
			}
			e := p.Clusters[0].Endpoints[0]
			if e.Ready != tt.wantReady || e.Serving != tt.wantServing || e.Terminating != tt.wantTerminate {
				t.Errorf("ready, serving, terminating = %v, %v, %v; want %v, %v, %v", e.Ready, e.Serving, e.Terminating, tt.wantReady, tt.wantServing, tt.wantTerminate)
			}
		})
	}
}
