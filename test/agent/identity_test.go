package agent_test

import (
	"context"
	"strings"
	"testing"
	"time"

	aboutv1alpha1 "github.com/fleetnet/fleetnet/api/about/v1alpha1"
	"github.com/fleetnet/fleetnet/internal/agent/app"
	"github.com/fleetnet/fleetnet/internal/agent/identity"
	"github.com/fleetnet/fleetnet/internal/registry/registrytest"
	"github.com/fleetnet/fleetnet/internal/registry/server"
	"github.com/fleetnet/fleetnet/test/fleet"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestIdentity(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "east"}}})
	east := f.Cluster(t, "east")
	c := east.Client(t)
	ctx := context.Background()

	// Before the ClusterProperties exist, the source fails with their name.
	_, err := identity.Resolve(ctx, c, identity.Flags{Source: identity.SourceClusterProperty, Region: "eu-west-1"})
	if err == nil || !strings.Contains(err.Error(), "ClusterProperty cluster.clusterset.k8s.io") {
		t.Fatalf("missing ClusterProperty: err = %v", err)
	}
	for name, value := range map[string]string{aboutv1alpha1.ClusterIDPropertyName: "east-1", aboutv1alpha1.ClusterSetPropertyName: "prod"} {
		if err := c.Create(ctx, &aboutv1alpha1.ClusterProperty{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: aboutv1alpha1.ClusterPropertySpec{Value: value}}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		flags   identity.Flags
		wantID  string
		wantErr string
	}{
		{"from ClusterProperties", identity.Flags{Source: identity.SourceClusterProperty, Region: "eu-west-1"}, "east-1", ""},
		{"from flags", identity.Flags{Source: identity.SourceFlags, ClusterID: "west", ClusterSetID: "prod"}, "west", ""},
		{"invalid region", identity.Flags{Source: identity.SourceFlags, ClusterID: "west", ClusterSetID: "prod", Region: "US West (Oregon)"}, "", `--region="US West (Oregon)"`},
		{"invalid cluster id", identity.Flags{Source: identity.SourceFlags, ClusterID: "West_1", ClusterSetID: "prod"}, "", `--cluster-id="West_1"`},
		{"missing cluster id", identity.Flags{Source: identity.SourceFlags, ClusterSetID: "prod"}, "", `--cluster-id="": required`},
		{"unknown source", identity.Flags{Source: "dns"}, "", `--cluster-identity-source="dns"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := identity.Resolve(ctx, c, tt.flags)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %s", err, tt.wantErr)
				}
				return
			}
			if err != nil || got.GetId() != tt.wantID {
				t.Fatalf("Resolve = %v, %v; want id %s", got, err, tt.wantID)
			}
		})
	}

	// A bad value read from a ClusterProperty is reported under the
	// property's name; the id flags, ignored with this source, are not.
	prop := &aboutv1alpha1.ClusterProperty{}
	if err := c.Get(ctx, client.ObjectKey{Name: aboutv1alpha1.ClusterIDPropertyName}, prop); err != nil {
		t.Fatal(err)
	}
	prop.Spec.Value = "East_1"
	if err := c.Update(ctx, prop); err != nil {
		t.Fatal(err)
	}
	_, err = identity.Resolve(ctx, c, identity.Flags{Source: identity.SourceClusterProperty, ClusterID: "Flag_ID", Region: "eu-west-1"})
	want := `--cluster-identity-source=clusterproperty: ClusterProperty ` + aboutv1alpha1.ClusterIDPropertyName + `="East_1": a lowercase RFC 1123 label`
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "Flag_ID") {
		t.Fatalf("bad ClusterProperty: err = %v, want one containing %s", err, want)
	}

	// The agent refuses to start with an invalid identity.
	reg := registrytest.Start(t, server.Config{})
	o := app.Options{
		Identity:           identity.Flags{Source: identity.SourceFlags, ClusterID: "east", ClusterSetID: "fleet", Region: "US West (Oregon)"},
		Registry:           reg.ClientOptions("east", false),
		MetricsAddr:        "0",
		HealthAddr:         "0",
		ExportResyncPeriod: time.Minute,
		ImportResyncPeriod: time.Minute,
		EndpointsPerSlice:  100,
		ImportWorkers:      4,
	}
	err = app.Run(ctx, east.Config, o, nil)
	if err == nil || !strings.Contains(err.Error(), `--region="US West (Oregon)"`) {
		t.Fatalf("agent start with an invalid region: %v", err)
	}
}
