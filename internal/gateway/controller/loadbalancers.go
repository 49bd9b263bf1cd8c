package controller

import (
	"context"
	"fmt"
	"slices"

	"github.com/fleetnet/fleetnet/api/keys"
	networkingv1alpha1 "github.com/fleetnet/fleetnet/api/networking/v1alpha1"
	"github.com/fleetnet/fleetnet/internal/gateway/model"
	"github.com/fleetnet/fleetnet/internal/gateway/provider"
	networkingac "github.com/fleetnet/fleetnet/pkg/generated/applyconfiguration/networking/v1alpha1"
	corev1 "k8s.io/api/core/v1"
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
func (r *Reconciler) loadBalancers(ctx context.Context, lbs []networkingv1alpha1.MultiClusterLoadBalancer, res model.Result, progress provider.Progress, deployErr string) []error {
	edgeCurrent := progress.Served && progress.Version == res.Model.Version
	statuses := map[types.NamespacedName]model.LoadBalancerStatus{}
	for _, st := range res.Status.LoadBalancers {
		statuses[types.NamespacedName{Namespace: st.Namespace, Name: st.Name}] = st
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
		if class != "" && class != provider.ClassEdge {
			withdrawn = progress.ClassVersions[class] == res.Model.Version && !lpOK
		}
		has := slices.Contains(lb.Finalizers, networkingv1alpha1.LoadBalancerFinalizer)
		if want := served || (has && !withdrawn); want != has {
			errs = append(errs, r.applyFinalizer(ctx, lb, want))
		}
		if !ok || lb.DeletionTimestamp != nil {
			continue
		}
		lbProgress := provider.LoadBalancerProgress{Served: edgeCurrent, Message: progress.Message, Addresses: progress.Addresses}
		if class != "" && class != provider.ClassEdge {
			lbProgress = provider.LoadBalancerProgress{Message: "waiting for the " + class + " provider to deploy it"}
			if lpOK {
				lbProgress = lp
				lbProgress.Served = lp.Served && progress.ClassVersions[class] == res.Model.Version
			}
		}
		errs = append(errs, r.loadBalancerStatus(ctx, lb, st, lbProgress, deployErr))
	}
	return errs
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
// what is stored.
func (r *Reconciler) loadBalancerStatus(ctx context.Context, lb *networkingv1alpha1.MultiClusterLoadBalancer, st model.LoadBalancerStatus, progress provider.LoadBalancerProgress, deployErr string) error {
	prog := metav1.Condition{Type: networkingv1alpha1.LoadBalancerConditionProgrammed, Status: metav1.ConditionTrue,
		Reason: networkingv1alpha1.LoadBalancerReasonProgrammed, Message: progress.Message, ObservedGeneration: lb.Generation}
	var addresses []string
	switch {
	case !st.Served:
		prog.Status, prog.Reason, prog.Message = metav1.ConditionFalse, networkingv1alpha1.LoadBalancerReasonInvalid, "the load balancer is not accepted"
	case deployErr != "":
		prog.Status, prog.Reason = metav1.ConditionFalse, networkingv1alpha1.LoadBalancerReasonPending
		prog.Message = "deploying failed, the previous configuration stays: " + deployErr
	case !progress.Served:
		prog.Status, prog.Reason = metav1.ConditionFalse, networkingv1alpha1.LoadBalancerReasonPending
	default:
		addresses = progress.Addresses
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
	if c := meta.FindStatusCondition(st.Conditions, networkingv1alpha1.LoadBalancerConditionAccepted); c != nil && c.Status == metav1.ConditionFalse && r.Recorder != nil {
		r.Recorder.Eventf(lb, nil, corev1.EventTypeWarning, c.Reason, "Accept", "%s", c.Message)
	}
	return nil
}
