package identity_test

import (
	"context"
	"strings"
	"testing"

	aboutv1alpha1 "github.com/fleetnet/fleetnet/api/about/v1alpha1"
	"github.com/fleetnet/fleetnet/internal/agent/identity"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// properties serves ClusterProperty values by name. Resolve only reads
// them; test/agent runs it against a real API server.
type properties map[string]string

func (p properties) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	obj.(*aboutv1alpha1.ClusterProperty).Spec.Value = p[key.Name]
	return nil
}

func (properties) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

func TestResolveNamesTheSourceOfABadValue(t *testing.T) {
	props := properties{aboutv1alpha1.ClusterIDPropertyName: "East_1", aboutv1alpha1.ClusterSetPropertyName: "prod"}
	// The id flags are ignored with this source, even when invalid.
	f := identity.Flags{Source: identity.SourceClusterProperty, ClusterID: "Flag_ID", Region: "eu-west-1"}
	if err := f.Validate(); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
	_, err := identity.Resolve(context.Background(), props, f)
	want := `--cluster-identity-source=clusterproperty: ClusterProperty ` + aboutv1alpha1.ClusterIDPropertyName + `="East_1": a lowercase RFC 1123 label`
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "Flag_ID") {
		t.Fatalf("Resolve() = %v, want an error containing %s", err, want)
	}

	props[aboutv1alpha1.ClusterIDPropertyName] = "east-1"
	c, err := identity.Resolve(context.Background(), props, f)
	if err != nil || c.GetId() != "east-1" || c.GetClustersetId() != "prod" || c.GetRegion() != "eu-west-1" {
		t.Fatalf("Resolve() = %v, %v; want east-1 in prod, eu-west-1", c, err)
	}
}
