package model

import (
	"slices"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	networkingv1alpha1 "github.com/fleetnet/fleetnet/api/networking/v1alpha1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// A refused object keeps serving its last accepted generation (fail
// static). While the controller runs, Input.Previous holds that entry.
// Across restarts and leader changes the controller keeps, per object,
// the spec of its last accepted generation (LastAccepted, written by the
// controller where only it writes); Build then rebuilds the entry of a
// refused object that Previous lacks from that spec, with today's routes,
// endpoints and certificates, and holds it as Previous would have. Only a
// spec the controller once accepted is ever served this way: the stored
// spec is never taken from the object itself, which its owner could
// write.

// Kinds of a LastAccepted key.
const (
	KindGateway      = "Gateway"
	KindLoadBalancer = "MultiClusterLoadBalancer"
)

// LastAccepted is the spec of an object's last accepted generation:
// exactly one of Gateway and LoadBalancer is set. UID is the object's: a
// spec kept for an object deleted since is not another object's of the
// same name.
type LastAccepted struct {
	UID          types.UID                                        `json:"uid"`
	Generation   int64                                            `json:"generation"`
	Gateway      *gwv1.GatewaySpec                                `json:"gateway,omitempty"`
	LoadBalancer *networkingv1alpha1.MultiClusterLoadBalancerSpec `json:"loadBalancer,omitempty"`
}

// Same says whether a and b are the same generation of the same object,
// and so the same spec: a generation's spec never changes.
func (a LastAccepted) Same(b LastAccepted) bool {
	return a.UID == b.UID && a.Generation == b.Generation
}

// LastAcceptedKey names an object in Input.LastAccepted: kind (KindGateway
// or KindLoadBalancer), namespace and name.
func LastAcceptedKey(kind, namespace, name string) string {
	return kind + "/" + namespace + "/" + name
}

// Accepted is, per object of in that res serves (accepted, or refused and
// kept), the spec to keep: its current one when its current generation is
// accepted, what in.LastAccepted holds when it is refused. Objects that
// res does not serve (deleted, of another controller's class, never
// accepted) have none: their kept spec is to be forgotten.
func Accepted(in Input, res Result) map[string]LastAccepted {
	out := map[string]LastAccepted{}
	gateways := map[string]*gwv1.Gateway{}
	for i := range in.Gateways {
		gw := &in.Gateways[i]
		gateways[key(gw.Namespace, gw.Name)] = gw
	}
	for _, st := range res.Status.Gateways {
		gw := gateways[key(st.Namespace, st.Name)]
		k := LastAcceptedKey(KindGateway, st.Namespace, st.Name)
		switch {
		case gw == nil:
		case meta.IsStatusConditionTrue(st.Conditions, string(gwv1.GatewayConditionAccepted)):
			out[k] = LastAccepted{UID: gw.UID, Generation: gw.Generation, Gateway: gw.Spec.DeepCopy()}
		default:
			if la, ok := in.LastAccepted[k]; ok {
				out[k] = la
			}
		}
	}
	lbs := map[string]*networkingv1alpha1.MultiClusterLoadBalancer{}
	for i := range in.MultiClusterLoadBalancers {
		lb := &in.MultiClusterLoadBalancers[i]
		lbs[key(lb.Namespace, lb.Name)] = lb
	}
	for _, st := range res.Status.LoadBalancers {
		lb := lbs[key(st.Namespace, st.Name)]
		k := LastAcceptedKey(KindLoadBalancer, st.Namespace, st.Name)
		switch {
		case lb == nil || !st.Served:
		case !st.Refused:
			out[k] = LastAccepted{UID: lb.UID, Generation: lb.Generation, LoadBalancer: lb.Spec.DeepCopy()}
		default:
			if la, ok := in.LastAccepted[k]; ok {
				out[k] = la
			}
		}
	}
	return out
}

// restoreLastAccepted returns in.Previous with the entries of res's held
// objects (refused, and unknown to in.Previous) rebuilt from their specs
// in in.LastAccepted, and whether there was any. The rebuild is one more
// Build of in with those objects at their last accepted generation: their
// entries then meet the same rules as any (ports, hostnames, references).
func restoreLastAccepted(in Input, res Result) (*edgev1.Model, bool) {
	if len(in.LastAccepted) == 0 {
		return nil, false
	}
	alt := in
	alt.LastAccepted = nil
	alt.Gateways, alt.MultiClusterLoadBalancers = nil, nil
	restored := map[string]bool{}
	for _, g := range res.Model.Gateways {
		k := LastAcceptedKey(KindGateway, g.Namespace, g.Name)
		la, ok := in.LastAccepted[k]
		if !g.Hold || !ok || la.Gateway == nil {
			continue
		}
		if alt.Gateways == nil {
			alt.Gateways = slices.Clone(in.Gateways)
		}
		for i := range alt.Gateways {
			if gw := &alt.Gateways[i]; gw.Namespace == g.Namespace && gw.Name == g.Name && gw.UID == la.UID {
				old := gw.DeepCopy()
				old.Generation, old.Spec = la.Generation, *la.Gateway.DeepCopy()
				alt.Gateways[i] = *old
				restored[k] = true
			}
		}
	}
	for _, lb := range res.Model.LoadBalancers {
		k := LastAcceptedKey(KindLoadBalancer, lb.Namespace, lb.Name)
		la, ok := in.LastAccepted[k]
		if !lb.Hold || !ok || la.LoadBalancer == nil {
			continue
		}
		if alt.MultiClusterLoadBalancers == nil {
			alt.MultiClusterLoadBalancers = slices.Clone(in.MultiClusterLoadBalancers)
		}
		for i := range alt.MultiClusterLoadBalancers {
			if o := &alt.MultiClusterLoadBalancers[i]; o.Namespace == lb.Namespace && o.Name == lb.Name && o.UID == la.UID {
				old := o.DeepCopy()
				old.Generation, old.Spec = la.Generation, *la.LoadBalancer.DeepCopy()
				alt.MultiClusterLoadBalancers[i] = *old
				restored[k] = true
			}
		}
	}
	if len(restored) == 0 {
		return nil, false
	}
	if alt.Gateways == nil {
		alt.Gateways = in.Gateways
	}
	if alt.MultiClusterLoadBalancers == nil {
		alt.MultiClusterLoadBalancers = in.MultiClusterLoadBalancers
	}
	rebuilt := build(alt).Model
	previous := &edgev1.Model{}
	if in.Previous != nil {
		p := *in.Previous
		previous = &p
	}
	previous.Gateways = slices.Clone(previous.Gateways)
	previous.LoadBalancers = slices.Clone(previous.LoadBalancers)
	for _, g := range rebuilt.Gateways {
		if restored[LastAcceptedKey(KindGateway, g.Namespace, g.Name)] && g.Refused == "" {
			previous.Gateways = append(previous.Gateways, g)
		}
	}
	for _, lb := range rebuilt.LoadBalancers {
		if restored[LastAcceptedKey(KindLoadBalancer, lb.Namespace, lb.Name)] && lb.Refused == "" {
			previous.LoadBalancers = append(previous.LoadBalancers, lb)
		}
	}
	return previous, true
}
