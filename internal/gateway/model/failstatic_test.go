package model

import (
	"testing"

	"github.com/google/go-cmp/cmp"
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
