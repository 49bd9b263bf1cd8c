// Package identity resolves who this cluster is in the fleet: its cluster
// id, clusterset id and region, from flags or from ClusterProperty objects
// (KEP-2149), and refuses values the registry would refuse.
package identity

import (
	"context"
	"fmt"

	aboutv1alpha1 "github.com/fleetnet/fleetnet/api/about/v1alpha1"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/registry/validate"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Sources of the cluster identity (--cluster-identity-source).
const (
	SourceFlags           = "flags"
	SourceClusterProperty = "clusterproperty"
)

// Flags are the identity flags as given.
type Flags struct {
	Source       string
	ClusterID    string
	ClusterSetID string
	Region       string
}

// Resolve returns the cluster's identity, or an error naming the flag (or
// ClusterProperty) and the value at fault.
func Resolve(ctx context.Context, reader client.Reader, f Flags) (*registryv1.Cluster, error) {
	c := &registryv1.Cluster{Id: f.ClusterID, ClustersetId: f.ClusterSetID, Region: f.Region}
	switch f.Source {
	case SourceFlags:
	case SourceClusterProperty:
		for _, prop := range []struct {
			name string
			dst  *string
		}{{aboutv1alpha1.ClusterIDPropertyName, &c.Id}, {aboutv1alpha1.ClusterSetPropertyName, &c.ClustersetId}} {
			p := &aboutv1alpha1.ClusterProperty{}
			if err := reader.Get(ctx, types.NamespacedName{Name: prop.name}, p); err != nil {
				return nil, fmt.Errorf("--cluster-identity-source=clusterproperty: reading ClusterProperty %s: %w", prop.name, err)
			}
			*prop.dst = p.Spec.Value
		}
	default:
		return nil, fmt.Errorf("--cluster-identity-source=%q: must be %q or %q", f.Source, SourceFlags, SourceClusterProperty)
	}
	if errs := validate.Cluster(c, nil); len(errs) > 0 {
		return nil, fmt.Errorf("invalid cluster identity (from %s): %s", f.Source, flagNames(errs))
	}
	return c, nil
}

// flagNames renders field errors in terms of the flags that set them.
func flagNames(errs field.ErrorList) string {
	names := map[string]string{"id": "--cluster-id", "clustersetId": "--clusterset-id", "region": "--region"}
	out := ""
	for i, e := range errs {
		if i > 0 {
			out += "; "
		}
		name := names[e.Field]
		if name == "" {
			name = e.Field
		}
		out += fmt.Sprintf("%s=%q: %s", name, fmt.Sprint(e.BadValue), e.Detail)
		if e.Type == field.ErrorTypeRequired {
			out += "required"
		}
	}
	return out
}
