package server

import (
	"context"
	"testing"

	"github.com/fleetnet/fleetnet/internal/registry/auth"
	"github.com/fleetnet/fleetnet/internal/registry/view"
)

// TestScopedViewer: the administrators' view (view.Admins) comes from the
// role alone; a caller of another role is limited by its name, and one
// without a name (which auth refuses) or without an identity by a name no
// scope includes.
func TestScopedViewer(t *testing.T) {
	tests := []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"administrator", auth.WithIdentity(context.Background(), auth.Identity{Name: "ops", Role: auth.RoleAdmin}), view.Admins},
		{"cluster", auth.WithIdentity(context.Background(), auth.Identity{Name: "east", Role: auth.RoleCluster}), "east"},
		{"cluster without a name", auth.WithIdentity(context.Background(), auth.Identity{Role: auth.RoleCluster}), unnamedViewer},
		{"no identity", context.Background(), unnamedViewer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := scopedViewer(tt.ctx); got != tt.want {
				t.Errorf("scopedViewer = %q, want %q", got, tt.want)
			}
			if tt.want != view.Admins && view.Only("a", "b").Includes(scopedViewer(tt.ctx)) {
				t.Error("a scope of other clusters includes the caller")
			}
		})
	}
}
