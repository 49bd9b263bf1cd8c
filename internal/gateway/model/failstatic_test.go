package model

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	networkingv1alpha1 "github.com/fleetnet/fleetnet/api/networking/v1alpha1"
)

func findGateway(m edgev1.Model, ns, name string) (edgev1.Gateway, bool) {
	for _, g := range m.Gateways {
		if g.Namespace == ns && g.Name == name {
			return g, true
		}
	}
	return edgev1.Gateway{}, false
}

func findLoadBalancer(m edgev1.Model, ns, name string) (edgev1.LoadBalancer, bool) {
	for _, lb := range m.LoadBalancers {
		if lb.Namespace == ns && lb.Name == name {
			return lb, true
		}
	}
	return edgev1.LoadBalancer{}, false
}

// TestRefusedGatewayKeepsServing: a Gateway whose edit is refused keeps its
// last accepted entry; only leaving our classes withdraws it.
func TestRefusedGatewayKeepsServing(t *testing.T) {
	base := loadInput(t, "testdata/routing.yaml")
	accepted := Build(base).Model
	before, ok := findGateway(accepted, "infra", "web")
	if !ok || len(before.Listeners) == 0 {
		t.Fatalf("infra/web not served before the edit: %+v", before)
	}
	edit := func(f func(gw *gwv1.Gateway)) Input {
		in := base
		in.Gateways = append([]gwv1.Gateway(nil), base.Gateways...)
		for i := range in.Gateways {
			if in.Gateways[i].Name == "web" {
				gw := in.Gateways[i].DeepCopy()
				gw.Generation++
				f(gw)
				in.Gateways[i] = *gw
			}
		}
		return in
	}
	refuse := func(gw *gwv1.Gateway) {
		gw.Spec.Addresses = []gwv1.GatewaySpecAddress{{Value: "192.0.2.1"}}
	}
	tests := []struct {
		name     string
		in       Input
		previous *edgev1.Model
		want     func(t *testing.T, g edgev1.Gateway, ok bool)
	}{
		{"refused with the last model: its entry, frozen", edit(refuse), &accepted, func(t *testing.T, g edgev1.Gateway, ok bool) {
			want := before
			want.Refused = "spec.addresses is not supported: the addresses are those of the edges"
			if d := cmp.Diff(want, g); !ok || d != "" {
				t.Errorf("entry (-want +got):\n%s", d)
			}
		}},
		{"refused after a restart: hold", edit(refuse), nil, func(t *testing.T, g edgev1.Gateway, ok bool) {
			if !ok || !g.Hold || g.Refused == "" || len(g.Listeners) != 0 || g.Generation != before.Generation+1 || g.Class != before.Class {
				t.Errorf("want a hold entry of generation %d, got %+v (present %v)", before.Generation+1, g, ok)
			}
		}},
		{"moved to another controller's class: withdrawn", edit(func(gw *gwv1.Gateway) { gw.Spec.GatewayClassName = "other" }), &accepted,
			func(t *testing.T, g edgev1.Gateway, ok bool) {
				if ok {
					t.Errorf("still in the model: %+v", g)
				}
			}},
		{"accepted again: served as edited, not refused", edit(func(*gwv1.Gateway) {}), &accepted, func(t *testing.T, g edgev1.Gateway, ok bool) {
			if !ok || g.Refused != "" || g.Hold || g.Generation != before.Generation+1 {
				t.Errorf("got %+v", g)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Previous = tt.previous
			g, ok := findGateway(Build(tt.in).Model, "infra", "web")
			tt.want(t, g, ok)
		})
	}
	t.Run("a held entry is held again", func(t *testing.T) {
		in := edit(refuse)
		in.Previous = &accepted
		first := Build(in).Model
		in.Previous = &first
		g, _ := findGateway(Build(in).Model, "infra", "web")
		if g.Generation != before.Generation || len(g.Listeners) != len(before.Listeners) {
			t.Errorf("the second build lost the last accepted entry: %+v", g)
		}
	})
}

// TestRefusedLoadBalancerKeepsServing: the same for load balancers, whose
// kept ports stay taken.
func TestRefusedLoadBalancerKeepsServing(t *testing.T) {
	base := loadInput(t, "testdata/loadbalancers.yaml")
	base.LoadBalancerClasses = []string{"edge", "azure-cross-region"}
	accepted := Build(base).Model
	before, ok := findLoadBalancer(accepted, "demo", "db")
	if !ok {
		t.Fatal("demo/db not served before the edit")
	}
	edit := func(f func(lb *networkingv1alpha1.MultiClusterLoadBalancer)) Input {
		in := base
		in.MultiClusterLoadBalancers = append([]networkingv1alpha1.MultiClusterLoadBalancer(nil), base.MultiClusterLoadBalancers...)
		for i := range in.MultiClusterLoadBalancers {
			if in.MultiClusterLoadBalancers[i].Name == "db" {
				lb := in.MultiClusterLoadBalancers[i].DeepCopy()
				lb.Generation++
				f(lb)
				in.MultiClusterLoadBalancers[i] = *lb
			}
		}
		return in
	}
	invalid := func(lb *networkingv1alpha1.MultiClusterLoadBalancer) {
		lb.Spec.Ports[0].Protocol = "SCTP"
	}
	withFinalizer := func(f func(lb *networkingv1alpha1.MultiClusterLoadBalancer)) func(lb *networkingv1alpha1.MultiClusterLoadBalancer) {
		return func(lb *networkingv1alpha1.MultiClusterLoadBalancer) {
			f(lb)
			lb.Finalizers = append(lb.Finalizers, networkingv1alpha1.LoadBalancerFinalizer)
		}
	}
	tests := []struct {
		name       string
		in         Input
		previous   *edgev1.Model
		wantFrozen bool
		wantHold   bool
	}{
		{"refused with the last model: frozen", edit(invalid), &accepted, true, false},
		{"refused after a restart, held finalizer: hold", edit(withFinalizer(invalid)), nil, false, true},
		{"refused, never served (no finalizer): absent", edit(invalid), nil, false, false},
		{"moved to a class no provider here serves: withdrawn", edit(func(lb *networkingv1alpha1.MultiClusterLoadBalancer) {
			lb.Spec.Class = "elsewhere"
			lb.Finalizers = append(lb.Finalizers, networkingv1alpha1.LoadBalancerFinalizer)
		}), &accepted, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Previous = tt.previous
			res := Build(tt.in)
			lb, ok := findLoadBalancer(res.Model, "demo", "db")
			switch {
			case tt.wantFrozen:
				want := before
				want.Refused = lb.Refused
				if d := cmp.Diff(want, lb); !ok || lb.Refused == "" || d != "" {
					t.Errorf("entry (-want +got):\n%s", d)
				}
			case tt.wantHold:
				if !ok || !lb.Hold || lb.Refused == "" || len(lb.Ports) != 0 {
					t.Errorf("want a hold entry, got %+v (present %v)", lb, ok)
				}
			default:
				if ok {
					t.Errorf("in the model: %+v", lb)
				}
			}
			for _, st := range res.Status.LoadBalancers {
				if st.Name == "db" && st.Served != (tt.wantFrozen || tt.wantHold) {
					t.Errorf("status Served = %v", st.Served)
				}
			}
		})
	}
	t.Run("a kept port stays taken", func(t *testing.T) {
		lateServed := func(previous *edgev1.Model) bool {
			in := edit(invalid)
			in.Previous = previous
			for _, st := range Build(in).Status.LoadBalancers {
				if st.Name == "late" {
					return st.Served
				}
			}
			return false
		}
		if lateServed(&accepted) {
			t.Error("demo/late took port 5432, which the refused demo/db still serves")
		}
		if !lateServed(nil) {
			t.Error("demo/late did not get port 5432 once demo/db was gone")
		}
	})
}

// After a restart of the controller (no Previous), a refused object is
// served as the spec of its last accepted generation describes (kept by
// the controller: LastAccepted), not held: the same entry the running
// controller kept. Without a kept spec it is held, as before.
func TestRefusedAfterRestartServesLastAccepted(t *testing.T) {
	gateways := loadInput(t, "testdata/routing.yaml")
	lbs := loadInput(t, "testdata/loadbalancers.yaml")
	lbs.LoadBalancerClasses = []string{"edge", "azure-cross-region"}
	base := gateways
	base.MultiClusterLoadBalancers = lbs.MultiClusterLoadBalancers
	base.ServiceImports = append(slices.Clone(gateways.ServiceImports), lbs.ServiceImports...)
	base.EndpointSlices = append(slices.Clone(gateways.EndpointSlices), lbs.EndpointSlices...)
	base.LoadBalancerClasses = lbs.LoadBalancerClasses
	res := Build(base)
	kept := Accepted(base, res)
	beforeGW, ok := findGateway(res.Model, "infra", "web")
	if !ok || len(beforeGW.Listeners) == 0 {
		t.Fatal("infra/web not served before the edit")
	}
	beforeLB, ok := findLoadBalancer(res.Model, "demo", "db")
	if !ok {
		t.Fatal("demo/db not served before the edit")
	}
	if la := kept[LastAcceptedKey(KindGateway, "infra", "web")]; la.Gateway == nil || la.Generation != beforeGW.Generation {
		t.Fatalf("Accepted keeps %+v for infra/web", la)
	}

	// Both edited into a refusal; the load balancer holds its finalizer,
	// as one that was served does.
	refused := base
	refused.Gateways = slices.Clone(base.Gateways)
	for i := range refused.Gateways {
		if refused.Gateways[i].Name == "web" {
			gw := refused.Gateways[i].DeepCopy()
			gw.Generation++
			gw.Spec.Addresses = []gwv1.GatewaySpecAddress{{Value: "192.0.2.1"}}
			refused.Gateways[i] = *gw
		}
	}
	refused.MultiClusterLoadBalancers = slices.Clone(base.MultiClusterLoadBalancers)
	for i := range refused.MultiClusterLoadBalancers {
		if refused.MultiClusterLoadBalancers[i].Name == "db" {
			lb := refused.MultiClusterLoadBalancers[i].DeepCopy()
			lb.Generation++
			lb.Spec.Ports[0].Protocol = "SCTP"
			lb.Finalizers = append(lb.Finalizers, networkingv1alpha1.LoadBalancerFinalizer)
			refused.MultiClusterLoadBalancers[i] = *lb
		}
	}

	t.Run("without a kept spec: held", func(t *testing.T) {
		m := Build(refused).Model
		if g, _ := findGateway(m, "infra", "web"); !g.Hold {
			t.Errorf("Gateway entry %+v, want a hold", g)
		}
		if lb, _ := findLoadBalancer(m, "demo", "db"); !lb.Hold {
			t.Errorf("load balancer entry %+v, want a hold", lb)
		}
	})
	t.Run("with the kept spec: its last accepted entry", func(t *testing.T) {
		in := refused
		in.LastAccepted = kept
		first := Build(in)
		g, _ := findGateway(first.Model, "infra", "web")
		wantGW := beforeGW
		wantGW.Refused = "spec.addresses is not supported: the addresses are those of the edges"
		if d := cmp.Diff(wantGW, g); d != "" {
			t.Errorf("Gateway entry (-want +got):\n%s", d)
		}
		lb, _ := findLoadBalancer(first.Model, "demo", "db")
		wantLB := beforeLB
		wantLB.Refused = lb.Refused
		if d := cmp.Diff(wantLB, lb); lb.Refused == "" || d != "" {
			t.Errorf("load balancer entry (-want +got):\n%s", d)
		}
		// The refused objects' own status is their current generation's.
		st := gatewayStatusOf(t, first, "infra", "web")
		if c := meta.FindStatusCondition(st.Conditions, string(gwv1.GatewayConditionAccepted)); c == nil || c.Status != metav1.ConditionFalse || c.ObservedGeneration != beforeGW.Generation+1 {
			t.Errorf("Accepted %+v, want False for generation %d", c, beforeGW.Generation+1)
		}
		// What is kept stays the last accepted spec, not the refused one.
		if la := Accepted(in, first)[LastAcceptedKey(KindGateway, "infra", "web")]; !la.Same(kept[LastAcceptedKey(KindGateway, "infra", "web")]) {
			t.Errorf("Accepted after the refusal keeps generation %d", la.Generation)
		}
		// The next build holds the same entry through Previous.
		in.Previous = &first.Model
		if g2, _ := findGateway(Build(in).Model, "infra", "web"); !cmp.Equal(g, g2) {
			t.Errorf("the next build changed the entry: %s", cmp.Diff(g, g2))
		}
	})
	t.Run("a spec kept for another object of the same name: held", func(t *testing.T) {
		in := refused
		in.LastAccepted = map[string]LastAccepted{}
		for k, la := range kept {
			la.UID = "deleted-since"
			in.LastAccepted[k] = la
		}
		m := Build(in).Model
		if g, _ := findGateway(m, "infra", "web"); !g.Hold {
			t.Errorf("Gateway entry %+v, want a hold", g)
		}
		if lb, _ := findLoadBalancer(m, "demo", "db"); !lb.Hold {
			t.Errorf("load balancer entry %+v, want a hold", lb)
		}
	})
	t.Run("a deleted object's spec is forgotten", func(t *testing.T) {
		in := base
		in.Gateways = slices.DeleteFunc(slices.Clone(base.Gateways), func(gw gwv1.Gateway) bool { return gw.Name == "web" })
		in.LastAccepted = kept
		if _, ok := Accepted(in, Build(in))[LastAcceptedKey(KindGateway, "infra", "web")]; ok {
			t.Error("the deleted Gateway's spec is still kept")
		}
	})
}
