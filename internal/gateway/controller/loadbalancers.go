package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/api/keys"
	networkingv1alpha1 "github.com/fleetnet/fleetnet/api/networking/v1alpha1"
	"github.com/fleetnet/fleetnet/internal/gateway/model"
	"github.com/fleetnet/fleetnet/internal/gateway/provider"
	networkingac "github.com/fleetnet/fleetnet/pkg/generated/applyconfiguration/networking/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
)

// loadBalancers writes every MultiClusterLoadBalancer's finalizer and
// status. The finalizer (field manager fleetnet-gateway) is held while the
// load balancer is, or may still be, served: it goes once its provider
// serves a model without it, so that deleting one withdraws it first. The
// status goes with the status field manager, so that neither apply
// removes the other's fields.
func (r *Reconciler) loadBalancers(ctx context.Context, lbs []networkingv1alpha1.MultiClusterLoadBalancer, res model.Result, progress provider.Progress, edge programmedState) []error {
	edgeCurrent := progress.Served && progress.Version == res.Model.Version
	statuses := map[types.NamespacedName]model.LoadBalancerStatus{}
	for _, st := range res.Status.LoadBalancers {
		statuses[types.NamespacedName{Namespace: st.Namespace, Name: st.Name}] = st
	}
	entries := map[types.NamespacedName]edgev1.LoadBalancer{}
	for _, m := range res.Model.LoadBalancers {
		entries[types.NamespacedName{Namespace: m.Namespace, Name: m.Name}] = m
	}
	var errs []error
	for i := range lbs {
		lb := &lbs[i]
		name := types.NamespacedName{Namespace: lb.Namespace, Name: lb.Name}
		st, ok := statuses[name]
		served := ok && st.Served
		key := lb.Namespace + "/" + lb.Name
		// Withdrawn: the load balancer's provider serves a model without
		// it. The edge's progress covers the whole model; a cloud's says
		// per load balancer and class.
		withdrawn := edgeCurrent
		lp, lpOK := progress.LoadBalancers[key]
		class := string(lb.Spec.Class)
		cloud := class != "" && class != provider.ClassEdge
		if cloud {
			withdrawn = progress.ClassVersions[class] == res.Model.Version && !lpOK
		}
		has := slices.Contains(lb.Finalizers, networkingv1alpha1.LoadBalancerFinalizer)
		if want := served || (has && !withdrawn); want != has {
			errs = append(errs, r.applyFinalizer(ctx, lb, want))
		}
		if !ok || lb.DeletionTimestamp != nil {
			continue
		}
		ps := edge
		if cloud {
			ps = programmedState{message: "waiting for the " + class + " provider to deploy it"}
			if err := r.Queue.ClassError(class); err != nil {
				// its provider failed before it told anything of this one
				ps.reason, ps.message = keys.ReasonDeployFailed, "deploying failed, the previous configuration stays: "+err.Error()
			}
			if lpOK {
				ps = programmedState{ok: lp.Served && progress.ClassVersions[class] == res.Model.Version, reason: lp.Reason, message: lp.Message, addresses: lp.Addresses}
			}
		}
		if st.Refused {
			ps = refusedState(entries[name].Generation, entries[name].Hold, ps)
		} else if !cloud && ps.ok {
			ps = unboundPorts(ps, key, progress.PartRefusals)
		}
		errs = append(errs, r.loadBalancerStatus(ctx, lb, st, ps))
	}
	return errs
}

// unboundPorts is ps of a served load balancer (namespace/name key), or,
// when the edges serve the model without some of its ports,
// Programmed=False (PortUnavailable) naming them: the other ports are
// served, at its addresses.
func unboundPorts(ps programmedState, key string, refusals []provider.PartRefusal) programmedState {
	var ports []string
	for _, pr := range refusals {
		if pr.Kind == edgev1.RefusalKindLoadBalancer && pr.Namespace+"/"+pr.Name == key {
			ports = append(ports, fmt.Sprintf("port %d/%s cannot be bound: %s", pr.Port, pr.Protocol, pr.Reason))
		}
	}
	if len(ports) == 0 {
		return ps
	}
	ps.ok, ps.partial, ps.reason = false, true, networkingv1alpha1.LoadBalancerReasonPortUnavailable
	ps.message = "not served: " + strings.Join(ports, "; ") + "; the other ports are served, and the edges try again with the next model"
	return ps
}

func (r *Reconciler) applyFinalizer(ctx context.Context, lb *networkingv1alpha1.MultiClusterLoadBalancer, want bool) error {
	ac := networkingac.MultiClusterLoadBalancer(lb.Name, lb.Namespace)
	if want {
		ac.WithFinalizers(networkingv1alpha1.LoadBalancerFinalizer)
	}
	// Applying no finalizer as this manager removes the one it applied.
	_, err := r.Clientset.NetworkingV1alpha1().MultiClusterLoadBalancers(lb.Namespace).Apply(ctx, ac,
		metav1.ApplyOptions{FieldManager: keys.FieldManagerGateway, Force: true})
	if err != nil {
		if ctx.Err() != nil || apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("applying the finalizer of MultiClusterLoadBalancer %s/%s: %w", lb.Namespace, lb.Name, err)
	}
	verb := "removed"
	if want {
		verb = "added"
	}
	r.Log.Info("finalizer "+verb, "kind", "MultiClusterLoadBalancer", "object", lb.Namespace+"/"+lb.Name)
	return nil
}

// loadBalancerStatus applies the conditions (Programmed from the
// provider's progress), addresses and clusters, when they differ from
// what is stored, and tells a refusal or a failed deploy in a Warning
// event, once per generation and message.
func (r *Reconciler) loadBalancerStatus(ctx context.Context, lb *networkingv1alpha1.MultiClusterLoadBalancer, st model.LoadBalancerStatus, ps programmedState) error {
	prog := metav1.Condition{Type: networkingv1alpha1.LoadBalancerConditionProgrammed, Status: metav1.ConditionTrue,
		Reason: networkingv1alpha1.LoadBalancerReasonProgrammed, Message: ps.message, ObservedGeneration: lb.Generation}
	var addresses []string
	switch {
	case ps.refused:
		prog.Status, prog.Reason = metav1.ConditionFalse, networkingv1alpha1.LoadBalancerReasonInvalid
		addresses = ps.addresses // the last accepted generation is still reached there
	case !st.Served:
		prog.Status, prog.Reason, prog.Message = metav1.ConditionFalse, networkingv1alpha1.LoadBalancerReasonInvalid, "the load balancer is not accepted"
	case !ps.ok && ps.reason != "":
		prog.Status, prog.Reason = metav1.ConditionFalse, ps.reason
		r.tellOnce(lb, "MultiClusterLoadBalancer", ps.reason, "Deploy", ps.message)
		if ps.partial {
			addresses = ps.addresses // its other ports are reached there
		}
	case !ps.ok:
		prog.Status, prog.Reason = metav1.ConditionFalse, networkingv1alpha1.LoadBalancerReasonPending
	default:
		addresses = ps.addresses
	}
	if c := meta.FindStatusCondition(st.Conditions, networkingv1alpha1.LoadBalancerConditionAccepted); c != nil && c.Status == metav1.ConditionFalse {
		r.tellOnce(lb, "MultiClusterLoadBalancer", c.Reason, "Accept", c.Message)
	}
	conds := merge(lb.Status.Conditions, append(slices.Clone(st.Conditions), prog))
	if conditionsEqual(lb.Status.Conditions, conds) && slices.Equal(lb.Status.Addresses, addresses) && slices.Equal(lb.Status.Clusters, st.Clusters) &&
		lb.Status.Ports == st.Ports && lb.Status.HealthyClusters == st.HealthyClusters {
		return nil
	}
	status := networkingac.MultiClusterLoadBalancerStatus().WithAddresses(addresses...).WithHealthyClusters(st.HealthyClusters)
	if st.Ports != "" {
		status.WithPorts(st.Ports)
	}
	for _, c := range conds {
		status.WithConditions(metav1ac.Condition().WithType(c.Type).WithStatus(c.Status).WithReason(c.Reason).
			WithMessage(c.Message).WithObservedGeneration(c.ObservedGeneration).WithLastTransitionTime(c.LastTransitionTime))
	}
	for _, c := range st.Clusters {
		status.WithClusters(networkingac.ClusterBackendStatus().WithName(c.Name).WithState(c.State).WithWeight(c.Weight).WithReadyEndpoints(c.ReadyEndpoints))
	}
	ac := networkingac.MultiClusterLoadBalancer(lb.Name, lb.Namespace).WithStatus(status)
	_, err := r.Clientset.NetworkingV1alpha1().MultiClusterLoadBalancers(lb.Namespace).ApplyStatus(ctx, ac,
		metav1.ApplyOptions{FieldManager: keys.FieldManagerGatewayStatus, Force: true})
	if err != nil {
		if ctx.Err() != nil || apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("applying the status of MultiClusterLoadBalancer %s/%s: %w", lb.Namespace, lb.Name, err)
	}
	r.Log.Info("status written", "kind", "MultiClusterLoadBalancer", "object", lb.Namespace+"/"+lb.Name)
	return nil
}
