package importer

import (
	"context"
	"fmt"
	"slices"

	"github.com/fleetnet/fleetnet/api/keys"
	networkingv1alpha1 "github.com/fleetnet/fleetnet/api/networking/v1alpha1"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/agent/locality"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// localityOf decides where this cluster's clients send the import's
// ClusterSetIP traffic (see package locality): nil when no
// BackendTrafficPolicy with locality LocalFirst targets the ServiceImport,
// or when the import is headless (no ClusterSetIP: DNS answers with every
// endpoint).
func (r *Reconciler) localityOf(ctx context.Context, key types.NamespacedName, imp *registryv1.Import, desired *Desired, families []corev1.IPFamily) (*locality.Decision, error) {
	if !r.Policies || imp.GetType() == string(mcsv1beta1.Headless) {
		return nil, nil
	}
	// The cache's objects, not copies (as for slices): only read.
	policies := &networkingv1alpha1.BackendTrafficPolicyList{}
	if err := r.Client.List(ctx, policies, client.InNamespace(key.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, &stepError{"listing BackendTrafficPolicies", err}
	}
	policy, ok := locality.Select(policies.Items, key.Name)
	if !ok {
		return nil, nil
	}
	topo, err := r.topology(ctx)
	if err != nil {
		return nil, err
	}
	// kube-proxy decides per address family; the primary family's
	// endpoints stand for the import's.
	var family discoveryv1.AddressType
	if len(families) > 0 {
		family = discoveryv1.AddressType(families[0])
	}
	sources := make([]locality.Source, 0, len(imp.GetClusters()))
	for _, c := range imp.GetClusters() {
		s := locality.Source{Cluster: c.GetClusterId(), Region: c.GetRegion()}
		for _, chunk := range desired.Chunks[s.Cluster] {
			if family != "" && discoveryv1.AddressType(chunk.GetAddressType()) != family {
				continue
			}
			for _, e := range chunk.GetEndpoints() {
				if e.GetConditions().GetReady() {
					s.Ready++
				}
			}
		}
		sources = append(sources, s)
	}
	d := locality.Decide(policy, topo, sources)
	return &d, nil
}

// withLocality marks the derived Service of an import under a locality
// policy as preferring close endpoints (trafficDistribution PreferClose,
// unless the exported Service chose its own distribution) and returns the
// annotations the agent sets on it: topology-mode Auto under a policy,
// none without. kube-proxy needs only the slices' hints; data planes such
// as Cilium's honour hints only on Services that ask for topology-aware
// routing, some through the field, others through the annotation. The
// EndpointSlice controller ignores both: a derived Service has no
// selector. A headless Service has no ClusterSetIP traffic to steer.
func withLocality(spec corev1.ServiceSpec, d *locality.Decision) (corev1.ServiceSpec, map[string]string) {
	if d == nil || spec.ClusterIP == corev1.ClusterIPNone {
		return spec, nil
	}
	if spec.TrafficDistribution == nil {
		spec.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferClose)
	}
	return spec, map[string]string{keys.AnnotationTopologyMode: keys.TopologyModeAuto}
}

// topology reads this cluster's zones from its Nodes' labels (metadata
// only: the agent never needs a Node's spec or status).
func (r *Reconciler) topology(ctx context.Context) (locality.Topology, error) {
	t := locality.Topology{Cluster: r.Cluster, Region: r.Region}
	nodes := &metav1.PartialObjectMetadataList{}
	nodes.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	if err := r.Client.List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		return t, &stepError{"listing Nodes", err}
	}
	for _, n := range nodes.Items {
		z := n.Labels[corev1.LabelTopologyZone]
		switch {
		case z == "":
			t.Unzoned++
		case !slices.Contains(t.Zones, z):
			t.Zones = append(t.Zones, z)
		}
	}
	slices.Sort(t.Zones)
	return t, nil
}

// setLocality puts the decision into the status' Locality condition
// (removed without a policy), and reports a change of where traffic goes
// in an event and a log line: once per change, not per reconcile (the
// message names clusters, not ready counts, so it changes only with the
// decision).
//
// A decision whose slices were not written (failure) is not in force: the
// condition is Unknown with the cause, never True on hints that no
// EndpointSlice carries.
func (r *Reconciler) setLocality(si *mcsv1beta1.ServiceImport, conditions *[]metav1.Condition, d *locality.Decision, failure error) {
	if d == nil {
		meta.RemoveStatusCondition(conditions, keys.ConditionLocality)
		return
	}
	cond := metav1.Condition{Type: keys.ConditionLocality, Status: metav1.ConditionTrue, Reason: d.Reason, Message: d.Message, ObservedGeneration: si.Generation}
	if !d.Applied {
		cond.Status = metav1.ConditionFalse
	}
	if failure != nil {
		cond.Status, cond.Reason = metav1.ConditionUnknown, keys.ReasonHintsNotWritten
		cond.Message = fmt.Sprintf("%s; not in force: %v", d.Message, failure)
	}
	if old := meta.FindStatusCondition(si.Status.Conditions, keys.ConditionLocality); old == nil || old.Reason != cond.Reason || old.Message != cond.Message {
		typ := corev1.EventTypeNormal
		if cond.Status != metav1.ConditionTrue {
			typ = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(si, nil, typ, cond.Reason, "Locality", "%s", cond.Message)
		r.Log.Info("import locality", "import", si.Namespace+"/"+si.Name, "reason", cond.Reason, "preferred", d.Preferred, "message", cond.Message)
	}
	meta.SetStatusCondition(conditions, cond)
}

// policyTargets maps a BackendTrafficPolicy to the ServiceImports it
// targets (on an update, controller-runtime maps the old object too, so
// an import a policy no longer targets loses its hints).
func policyTargets(_ context.Context, o client.Object) []reconcile.Request {
	p, ok := o.(*networkingv1alpha1.BackendTrafficPolicy)
	if !ok {
		return nil
	}
	var out []reconcile.Request
	for _, name := range locality.Targets(p) {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: name}})
	}
	return out
}

// zoneChanges maps a Node whose zone appeared, changed or left to every
// ServiceImport a policy targets: their hints name the cluster's zones.
func (r *Reconciler) zoneChanges() handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		policies := &networkingv1alpha1.BackendTrafficPolicyList{}
		if err := r.Client.List(ctx, policies, client.UnsafeDisableDeepCopy); err != nil {
			r.Log.Error("listing BackendTrafficPolicies after a zone change", "error", err)
			return nil
		}
		var out []reconcile.Request
		for i := range policies.Items {
			out = append(out, policyTargets(ctx, &policies.Items[i])...)
		}
		return out
	})
}

// zoneLabelChanged passes Node events that can change the cluster's zones.
var zoneLabelChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetLabels()[corev1.LabelTopologyZone] != e.ObjectNew.GetLabels()[corev1.LabelTopologyZone]
	},
	GenericFunc: func(event.GenericEvent) bool { return false },
}
