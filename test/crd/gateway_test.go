package crd_test

import (
	"strings"
	"testing"

	"github.com/fleetnet/fleetnet/test/fleet"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The Gateway API CRDs installed in the hub are the standard channel's, and
// the API server's own validation of them is what users meet: a
// ServiceImport backend (GEP-1748) needs no port, a Service backend does.
func TestGatewayAPICRDs(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "hub", GatewayAPI: true}}})
	c := f.Cluster(t, "hub").Client(t)
	ctx := t.Context()
	const ns = "gateway"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	route := func(name string, backend map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "gateway.networking.k8s.io/v1",
			"kind":       "HTTPRoute",
			"metadata":   map[string]any{"name": name, "namespace": ns},
			"spec": map[string]any{
				"parentRefs": []any{map[string]any{"name": "edge"}},
				"rules":      []any{map[string]any{"backendRefs": []any{backend}}},
			},
		}}
	}
	tests := []struct {
		name    string
		obj     *unstructured.Unstructured
		wantErr string
	}{
		{"GatewayClass", &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
			"metadata": map[string]any{"name": "fleetnet"},
			"spec":     map[string]any{"controllerName": "fleetnet.dev/gateway-controller"},
		}}, ""},
		{"Gateway", &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
			"metadata": map[string]any{"name": "edge", "namespace": ns},
			"spec": map[string]any{"gatewayClassName": "fleetnet", "listeners": []any{
				map[string]any{"name": "http", "port": int64(8080), "protocol": "HTTP"},
			}},
		}}, ""},
		{"ServiceImport backend without a port", route("import", map[string]any{
			"group": "multicluster.x-k8s.io", "kind": "ServiceImport", "name": "echo",
		}), ""},
		{"Service backend without a port", route("service", map[string]any{"name": "echo"}), "Must have port for Service reference"},
		{"listener port out of range", &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
			"metadata": map[string]any{"name": "bad", "namespace": ns},
			"spec": map[string]any{"gatewayClassName": "fleetnet", "listeners": []any{
				map[string]any{"name": "x", "port": int64(70000), "protocol": "HTTP"},
			}},
		}}, "spec.listeners[0].port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := c.Create(ctx, tt.obj)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
