package importer

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fleetnet/fleetnet/api/keys"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/agent/eastwest"
	"github.com/fleetnet/fleetnet/internal/eastwest/ports"
	"github.com/fleetnet/fleetnet/test/fleet"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// TestImportsAcrossNetworks runs the import reconciler against a real API
// server for an import exported by east (this cluster's network "a") and
// west (network "b", overlapping pod addresses): through the cluster's
// east-west gateway, the slices name the gateway's pods alone on the
// allocated port, never a pod of west; without a gateway, west is left
// out and the ServiceImport says why; back on one network, everything is
// as in a flat fleet.
func TestImportsAcrossNetworks(t *testing.T) {
	f := fleet.Start(t, fleet.Options{Clusters: []fleet.ClusterOptions{{Name: "hub"}}})
	c := f.Cluster(t, "hub").Client(t)
	ctx := context.Background()
	fx := newReconcileFixture(t, c, "networks")
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleetnet-system"}}); err != nil {
		t.Fatal(err)
	}
	gwSlice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "fleetnet-system", Name: "eastwest-abc", Labels: map[string]string{discoveryv1.LabelServiceName: "eastwest"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.244.0.200"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			{Addresses: []string{"10.244.0.201"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false), Terminating: ptr.To(true)}},
		},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("tunnel"), Port: ptr.To[int32](15008)}},
	}
	if err := c.Create(ctx, gwSlice); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	gateway := func() *eastwest.Gateway {
		return &eastwest.Gateway{Service: types.NamespacedName{Namespace: "fleetnet-system", Name: "eastwest"},
			Ports: &eastwest.Allocator{Range: ports.Range{First: 15100, Last: 15199}}, Publisher: &eastwest.Publisher{Reader: c, Log: log,
				Status: func(string, string) (*registryv1.ExportStatus, bool) { return nil, true }}}
	}
	fx.r.Cluster, fx.r.Network, fx.r.EastWest = "hub", "a", gateway()

	// east is on this network; west on "b", with the same pod addresses
	// as east (10.244.0.1: overlapping ranges).
	d := importOf("networks", "ClusterSetIP", []string{"IPv4"}, httpPorts, "IPv4", "east", "west")
	d.Import.Clusters[0].Network = "a"
	d.Import.Clusters[1].Network, d.Import.Clusters[1].EastwestGateway = "b", "192.0.2.2:15008"
	d.Chunks["west"]["c0"].Endpoints[0].Addresses = []string{"10.244.0.1"}
	fx.set(d, true)
	fx.mustReconcile()

	svc := fx.derived()
	if got := svc.Annotations[keys.AnnotationEastWestPorts]; got != "80=15100" {
		t.Fatalf("derived Service's %s = %q, want 80=15100", keys.AnnotationEastWestPorts, got)
	}
	ss := fx.slices()
	if len(ss) != 1 || ss[0].Labels[mcsv1beta1.LabelSourceCluster] != "hub" || ss[0].Labels[discoveryv1.LabelServiceName] != svc.Name {
		t.Fatalf("slices %v, want one of the gateway (source cluster hub)", sliceSummary(ss))
	}
	if got := sliceSummary(ss); got != "10.244.0.200:http=15100/ready,10.244.0.201:http=15100/terminating" {
		t.Fatalf("slice %s, want the gateway's two pods on port 15100 named http", got)
	}
	cond := fx.condition(keys.ConditionNetworks)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != keys.ReasonThroughEastWestGateway || !strings.Contains(cond.Message, "80→15100") || !strings.Contains(cond.Message, "clusters west through theirs") {
		t.Fatalf("Networks = %+v", cond)
	}
	if ready := fx.ready(); ready.Status != metav1.ConditionTrue {
		t.Fatalf("Ready = %+v", ready)
	}
	m, _, err := fx.r.EastWest.Publisher.Model(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.LoadBalancers) != 1 || len(m.LoadBalancers[0].Ports) != 1 || m.LoadBalancers[0].Ports[0].Port != 15100 || len(m.LoadBalancers[0].Ports[0].Clusters) != 2 ||
		m.LoadBalancers[0].Ports[0].Clusters[1].Via == nil || m.LoadBalancers[0].Ports[0].Clusters[1].Endpoints[0].Address != "192.0.2.2" {
		t.Fatalf("gateway model %+v, want port 15100 to east directly and west through 192.0.2.2", m.LoadBalancers)
	}

	// The gateway's pods change: the import's slice follows.
	gwSlice.Endpoints = gwSlice.Endpoints[:1]
	if err := c.Update(ctx, gwSlice); err != nil {
		t.Fatal(err)
	}
	fx.mustReconcile()
	if got := sliceSummary(fx.slices()); got != "10.244.0.200:http=15100/ready" {
		t.Fatalf("slice %s after a gateway pod left", got)
	}

	// The agent restarts (a new allocator): another import asks first, yet
	// echo keeps its port, read back from its derived Service.
	fx.r.EastWest = gateway()
	other, err := fx.r.gatewayPorts(ctx, types.NamespacedName{Namespace: "networks", Name: "other"}, eastwest.Decision{Carried: []int32{80}})
	if err != nil || other[80] != 15101 {
		t.Fatalf("another import got %v (%v), want 15101: 15100 is echo's", other, err)
	}
	fx.mustReconcile()
	if got := fx.derived().Annotations[keys.AnnotationEastWestPorts]; got != "80=15100" {
		t.Fatalf("after a restart %q, want 80=15100 kept", got)
	}

	// No gateway here: west is left out, east's pods are served directly.
	fx.r.EastWest = nil
	fx.mustReconcile()
	if got := sliceSummary(fx.slices()); got != "10.244.0.1:http=8080/ready" || fx.sliceClusters()[0] != "east" {
		t.Fatalf("slices %s of %v, want east's pod alone", got, fx.sliceClusters())
	}
	if _, ok := fx.derived().Annotations[keys.AnnotationEastWestPorts]; ok {
		t.Errorf("derived Service keeps %s without a gateway", keys.AnnotationEastWestPorts)
	}
	cond = fx.condition(keys.ConditionNetworks)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != keys.ReasonClustersUnreachable || !strings.Contains(cond.Message, `west (network "b"): this cluster runs no east-west gateway`) {
		t.Fatalf("Networks = %+v", cond)
	}
	if evs := fx.events(); len(evs) != 0 {
		t.Logf("events: %q", evs)
	}

	// west joins this network: a flat import again, no Networks condition.
	d.Import.Clusters[1].Network = "a"
	fx.set(d, true)
	fx.mustReconcile()
	if got := fx.sliceClusters(); !slices.Equal(got, []string{"east", "west"}) {
		t.Fatalf("slices of %v, want east and west", got)
	}
	if cond := fx.condition(keys.ConditionNetworks); cond != nil {
		t.Fatalf("Networks = %+v on a one-network import", cond)
	}
}

// slices returns the import's slices, sorted by name.
func (f *reconcileFixture) slices() []discoveryv1.EndpointSlice {
	f.t.Helper()
	list := &discoveryv1.EndpointSliceList{}
	if err := f.c.List(context.Background(), list, client.InNamespace(f.key.Namespace), client.MatchingLabels{
		mcsv1beta1.LabelServiceName: f.key.Name, discoveryv1.LabelManagedBy: keys.EndpointSliceManagedBy,
	}); err != nil {
		f.t.Fatal(err)
	}
	slices.SortFunc(list.Items, func(a, b discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	return list.Items
}

// sliceSummary is address:port-name=port/state of every endpoint.
func sliceSummary(ss []discoveryv1.EndpointSlice) string {
	var out []string
	for _, s := range ss {
		for _, e := range s.Endpoints {
			state := "ready"
			if !ptr.Deref(e.Conditions.Ready, true) {
				state = "not-ready"
			}
			if ptr.Deref(e.Conditions.Terminating, false) {
				state = "terminating"
			}
			for _, a := range e.Addresses {
				for _, p := range s.Ports {
					out = append(out, a+":"+ptr.Deref(p.Name, "")+"="+itoa(ptr.Deref(p.Port, 0))+"/"+state)
				}
			}
		}
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// condition returns the ServiceImport's condition of type t, nil when none.
func (f *reconcileFixture) condition(t string) *metav1.Condition {
	f.t.Helper()
	return meta.FindStatusCondition(f.serviceImport().Status.Conditions, t)
}
