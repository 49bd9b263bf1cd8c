// Package identity resolves who this cluster is in the fleet: its cluster
// id, clusterset id and region, from flags or from ClusterProperty objects
// (KEP-2149), and refuses values the registry would refuse; and what it
// says of itself: the properties it publishes with its registration, kept
// up to date as its ClusterProperties change (PropertyWatcher).
package identity

import (
	"context"
	"errors"
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

// flagNames are the flags that set each field of registryv1.Cluster.
var flagNames = map[string]string{"id": "--cluster-id", "clustersetId": "--clusterset-id", "region": "--region"}

// Validate checks what the flags alone decide, so that a bad flag is
// reported before anything connects: the source, and every identity value
// the flags supply. With the clusterproperty source the ids come from
// ClusterProperty objects and --cluster-id and --clusterset-id are ignored,
// so only --region is checked.
func (f Flags) Validate() error {
	c := &registryv1.Cluster{Id: f.ClusterID, ClustersetId: f.ClusterSetID, Region: f.Region}
	errs := validate.Cluster(c, nil)
	switch f.Source {
	case SourceFlags:
	case SourceClusterProperty:
		var fromFlags field.ErrorList
		for _, e := range errs {
			if e.Field == "region" {
				fromFlags = append(fromFlags, e)
			}
		}
		errs = fromFlags
	default:
		return fmt.Errorf("--cluster-identity-source=%q: must be %q or %q", f.Source, SourceFlags, SourceClusterProperty)
	}
	return describe(errs, func(fieldName string) string { return flagNames[fieldName] })
}

// Resolve returns the cluster's identity, or an error naming the flag (or
// ClusterProperty) and the value at fault.
func Resolve(ctx context.Context, reader client.Reader, f Flags) (*registryv1.Cluster, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	c := &registryv1.Cluster{Id: f.ClusterID, ClustersetId: f.ClusterSetID, Region: f.Region}
	if f.Source != SourceClusterProperty {
		return c, nil
	}
	sources := map[string]string{"region": flagNames["region"]}
	for _, prop := range []struct {
		field string
		name  string
		dst   *string
	}{{"id", aboutv1alpha1.ClusterIDPropertyName, &c.Id}, {"clustersetId", aboutv1alpha1.ClusterSetPropertyName, &c.ClustersetId}} {
		p := &aboutv1alpha1.ClusterProperty{}
		if err := reader.Get(ctx, types.NamespacedName{Name: prop.name}, p); err != nil {
			return nil, fmt.Errorf("--cluster-identity-source=clusterproperty: reading ClusterProperty %s: %w", prop.name, err)
		}
		*prop.dst = p.Spec.Value
		sources[prop.field] = "ClusterProperty " + prop.name
	}
	if err := describe(validate.Cluster(c, nil), func(fieldName string) string { return sources[fieldName] }); err != nil {
		return nil, fmt.Errorf("--cluster-identity-source=clusterproperty: %w", err)
	}
	return c, nil
}

// describe renders field errors in terms of where their values came from,
// one error per value: `--cluster-id="Bad_ID": a lowercase RFC 1123 label…`.
func describe(errs field.ErrorList, source func(fieldName string) string) error {
	var out []error
	for _, e := range errs {
		name := source(e.Field)
		if name == "" {
			name = e.Field
		}
		detail := e.Detail
		if e.Type == field.ErrorTypeRequired {
			detail = "required"
		}
		out = append(out, fmt.Errorf("%s=%q: %s", name, fmt.Sprint(e.BadValue), detail))
	}
	return errors.Join(out...)
}
