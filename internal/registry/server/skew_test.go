package server_test

import (
	"context"
	"strings"
	"testing"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/api/skew"
	"github.com/fleetnet/fleetnet/internal/registry/server"
	"github.com/fleetnet/fleetnet/internal/skewcheck"
	"github.com/fleetnet/fleetnet/internal/version"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// announcing makes a client announce v (nothing when v is "-"), as an
// agent of another release would.
func announcing(v string) grpc.DialOption {
	return grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		md, _ := metadata.FromOutgoingContext(ctx)
		md = md.Copy()
		if v == "-" {
			delete(md, skew.MetadataVersion)
		} else {
			md.Set(skew.MetadataVersion, v)
		}
		return invoker(metadata.NewOutgoingContext(ctx, md), method, req, reply, cc, opts...)
	})
}

// TestAgentsOutsideTheSkewPolicyAreRefused: a registry at this release
// serves agents of this release and those from before versions were
// announced (v0.0.0), and refuses a later release and what is not a
// version, naming both versions, counted; an agent's version is on its
// cluster's record, and every answer carries the registry's version.
func TestAgentsOutsideTheSkewPolicyAreRefused(t *testing.T) {
	e := start(t, server.Config{})
	this := version.Get().Version
	// The policy's cases are api/skew's test; this one is the registry
	// applying it. v0.1 serves v0.0, the builds from before announcements.
	cases := []struct {
		name, announced string
		want            codes.Code
		wantVersion     string
	}{
		{"this release", this, codes.OK, this},
		{"nothing announced", "-", codes.OK, skew.Unannounced},
		{"a later release", "v9.0.0", codes.FailedPrecondition, ""},
		{"not a version", "latest", codes.FailedPrecondition, ""},
	}
	admin := e.client("admin", true)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := "c-" + strings.ReplaceAll(strings.ToLower(tc.name), " ", "-")
			c := e.client(id, false, announcing(tc.announced))
			before := testutil.ToFloat64(skewcheck.Refused.WithLabelValues("registry", skewcheck.Standing(this, tc.announced)))
			var header metadata.MD
			_, err := c.RegisterCluster(context.Background(), &registryv1.RegisterClusterRequest{Cluster: &registryv1.Cluster{Id: id, ClustersetId: "fleet"}}, grpc.Header(&header))
			if got := skewcheck.ServerVersion(header); got != this {
				t.Errorf("the registry answered with version %q, want %q", got, this)
			}
			if status.Code(err) != tc.want {
				t.Fatalf("registering with version %q: %v, want %v", tc.announced, err, tc.want)
			}
			if tc.want != codes.OK {
				msg := status.Convert(err).Message()
				if !strings.Contains(msg, this) || !strings.Contains(msg, "docs/upgrades.md") {
					t.Errorf("refusal %q names neither this registry's version %s nor the policy", msg, this)
				}
				if after := testutil.ToFloat64(skewcheck.Refused.WithLabelValues("registry", skewcheck.Standing(this, tc.announced))); after != before+1 {
					t.Errorf("fleetnet_version_refused_total went from %v to %v, want one more", before, after)
				}
				return
			}
			resp, err := admin.ListClusters(context.Background(), &registryv1.ListClustersRequest{})
			if err != nil {
				t.Fatal(err)
			}
			for _, cl := range resp.GetClusters() {
				if cl.GetId() == id {
					if cl.GetAgentVersion() != tc.wantVersion {
						t.Errorf("cluster %s's agent version %q, want %q", id, cl.GetAgentVersion(), tc.wantVersion)
					}
					return
				}
			}
			t.Errorf("cluster %s is not listed", id)
		})
	}
}
