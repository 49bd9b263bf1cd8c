package agent_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/fleetnet/fleetnet/config/rbac"
	"github.com/fleetnet/fleetnet/internal/agent/app"
	"github.com/fleetnet/fleetnet/internal/registry/registrytest"
	"github.com/fleetnet/fleetnet/internal/registry/server"
	"github.com/fleetnet/fleetnet/internal/testkit"
	"github.com/fleetnet/fleetnet/test/fleet"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// TestAgentRunsWithItsGeneratedRole runs the agent as a ServiceAccount bound
// to nothing but config/rbac/role.yaml, with leader election on, so a
// permission missing from the markers fails here and not in a user's
// cluster.
func TestAgentRunsWithItsGeneratedRole(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "east"}}})
	east := f.Cluster(t, "east")
	c := east.Client(t)
	ctx := context.Background()
	role, err := rbac.AgentClusterRole()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	asAgent := east.AsServiceAccount(t, "fleetnet-system", "fleetnet-agent", role)
	restricted := &fleet.Cluster{Name: east.Name, Config: asAgent}

	reg := registrytest.Start(t, server.Config{})
	startAgent(t, restricted, reg, "east", func(o *app.Options) { o.LeaderElect, o.LeaderElectionNS = true, "fleetnet-system" })
	for _, obj := range []client.Object{
		service(ns, "echo"),
		endpointSlice(ns, "echo", "echo-1", "10.244.0.1"),
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}},
	} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	wantCondition(t, c, "echo", mcsv1beta1.ServiceExportConditionReady, metav1.ConditionTrue, string(mcsv1beta1.ServiceExportReasonReady))
	observer := reg.Client("observer", false)
	testkit.Eventually(t, 20*time.Second, "echo's endpoint in the registry", func(ctx context.Context) error {
		resp, err := registryExports(ctx, observer, "east")
		if err != nil {
			return err
		}
		if endpointCount(resp, ns, "echo") != 1 {
			return errorf("registry holds %d endpoints of echo", endpointCount(resp, ns, "echo"))
		}
		return nil
	})
}

// TestAgentImportsWithoutLocalityRights: an agent whose role predates
// locality policies (no nodes or backendtrafficpolicies) leaves policies
// out and still imports, rather than waiting for caches it may not fill.
func TestAgentImportsWithoutLocalityRights(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "east"}}})
	east := f.Cluster(t, "east")
	c := east.Client(t)
	role, err := rbac.AgentClusterRole()
	if err != nil {
		t.Fatal(err)
	}
	for i := range role.Rules {
		role.Rules[i].Resources = slices.DeleteFunc(role.Rules[i].Resources, func(r string) bool { return r == "nodes" || r == "backendtrafficpolicies" })
	}
	role.Rules = slices.DeleteFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return len(r.Resources) == 0 })
	createNamespace(t, c, ns)
	asAgent := east.AsServiceAccount(t, "fleetnet-system", "fleetnet-agent", role)
	reg := registrytest.Start(t, server.Config{LeaseTTL: 10 * time.Minute})
	startAgent(t, &fleet.Cluster{Name: east.Name, Config: asAgent}, reg, "east")
	exportDirectly(t, reg, "west", time.Now(), httpPort, "10.245.0.1")
	testkit.Eventually(t, 20*time.Second, "east to import west's echo", func(ctx context.Context) error {
		ss, err := importedSlices(ctx, c, "echo")
		if err != nil {
			return err
		}
		if len(ss) == 0 {
			return errorf("no imported slice of echo yet")
		}
		return nil
	})
}
