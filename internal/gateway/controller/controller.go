// Package controller is fleetnet-gateway's Gateway API controller. Every
// change of an input (GatewayClass, Gateway, HTTPRoute, ReferenceGrant,
// Namespace, BackendTrafficPolicy, MultiClusterLoadBalancer, and the
// Services, ServiceImports, EndpointSlices and TLS Secrets these
// reference) and every
// change of the provider's progress reconciles one key, the whole model:
// it is built by a pure function from the cache, handed to the provider
// queue (never deployed on the reconcile path), and the status it implies
// is written to each object, with Programmed from the provider's progress.
package controller

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/api/keys"
	networkingv1alpha1 "github.com/fleetnet/fleetnet/api/networking/v1alpha1"
	"github.com/fleetnet/fleetnet/internal/gateway/lastaccepted"
	"github.com/fleetnet/fleetnet/internal/gateway/model"
	"github.com/fleetnet/fleetnet/internal/gateway/provider"
	"github.com/fleetnet/fleetnet/pkg/generated/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// modelKey is the one key every event maps to: the model is built whole.
var modelKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "model"}}

// Deployer takes models off the reconcile path (provider.Split).
type Deployer interface {
	Set(m *edgev1.Model)
	// ClassError is the last deploy error of a load balancer class's
	// provider (provider.ClassEdge for the edge).
	ClassError(class string) error
}

// Reconciler builds the model and writes status.
type Reconciler struct {
	Client client.Client
	// Clientset applies MultiClusterLoadBalancers' finalizer and status
	// (typed, with apply configurations).
	Clientset versioned.Interface
	// LoadBalancerClasses are the MultiClusterLoadBalancer classes the
	// provider serves.
	LoadBalancerClasses []string
	// Queue takes the models; Provider tells their progress (both
	// provider.Split in fleetnet-gateway).
	Queue    Deployer
	Provider interface{ Progress() provider.Progress }
	// ValidateAnnotations checks Gateways' provider annotations
	// (model.Input.ValidateAnnotations).
	ValidateAnnotations func(class string, annotations map[string]string) error
	// LocalCluster and LocalRegion are the hub's cluster id and region.
	LocalCluster, LocalRegion string
	// Features are the Gateway API features of a GatewayClass's provider
	// (model.Input.Features).
	Features func(class string) []gwv1.FeatureName
	// AddressPool, when valid, gives every Gateway an address of its own
	// (model.Input.AddressPool).
	AddressPool netip.Prefix
	// CloudClass and ReservedPorts: see model.Input's.
	CloudClass    func(class string) bool
	ReservedPorts map[int32]string
	// LastAccepted keeps every object's last accepted spec across
	// restarts and changes of leader (lastaccepted.Secrets), so that a
	// refused object keeps serving its last accepted generation then too
	// (model.Input.LastAccepted); nil keeps it in memory only.
	LastAccepted lastaccepted.Store
	Log          *slog.Logger
	// Events triggers a reconcile (provider progress, deploy outcomes).
	Events chan event.GenericEvent
	// CRDBundleVersions are the installed Gateway API CRDs' bundle
	// versions, read at start-up (see BundleVersions).
	CRDBundleVersions []string
	Recorder          events.EventRecorder

	// warned is the model version and edge deploy error last told in
	// events, so that a failure is told once per change, not per
	// reconcile. One worker reconciles the one key, so it needs no lock.
	warned string
	// told is, per object (kind/namespace/name), the generation and
	// message of the last Warning event about it, so that each problem is
	// told once.
	told map[string]string
	// previous is the model handed to the queue last, from which a
	// refused Gateway or load balancer keeps its entry (model.Input's
	// Previous). Memory only: after a restart, a refused object's entry
	// is rebuilt from the spec LastAccepted kept, or, without one, held
	// by its provider (edgev1.Gateway.Hold).
	previous *edgev1.Model
	// interest filters the events of Services, ServiceImports,
	// EndpointSlices and Secrets to those the model references.
	interest interest
	// kept is what LastAccepted holds, loaded at this leader's first
	// reconcile (nil before).
	kept map[string]model.LastAccepted
}

// maxKeepWrites bounds the writes of kept specs in one reconcile (the
// first after an upgrade writes one per object); the rest follow in the
// next ones.
const maxKeepWrites = 20

// SetupWithManager watches every input and the trigger channel.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	toModel := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{modelKey} })
	// Only what the model references (see interest).
	referenced := handler.EnqueueRequestsFromMapFunc(r.interest.enqueue)
	b := ctrl.NewControllerManagedBy(mgr).Named("gateway").
		Watches(&gwv1.GatewayClass{}, toModel).
		Watches(&gwv1.Gateway{}, toModel).
		Watches(&gwv1.HTTPRoute{}, toModel).
		Watches(&gwv1.ReferenceGrant{}, toModel).
		Watches(&corev1.Namespace{}, toModel).
		Watches(&corev1.Service{}, referenced).
		Watches(&mcsv1beta1.ServiceImport{}, referenced).
		Watches(&corev1.Secret{}, referenced).
		Watches(&discoveryv1.EndpointSlice{}, referenced).
		Watches(&networkingv1alpha1.BackendTrafficPolicy{}, toModel).
		Watches(&networkingv1alpha1.MultiClusterLoadBalancer{}, toModel).
		WatchesRawSource(source.Channel(r.Events, toModel))
	return b.Complete(r)
}

// Trigger asks for a reconcile without blocking.
func (r *Reconciler) Trigger() {
	select {
	case r.Events <- event.GenericEvent{Object: &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "model"}}}:
	default:
	}
}

// Reconcile builds the model from the cache, hands it to the queue and
// writes every object's status.
func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	if r.kept == nil {
		if err := r.loadKept(ctx); err != nil {
			return reconcile.Result{}, err
		}
	}
	in, err := r.inputs(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	res := model.Build(in)
	r.Queue.Set(&res.Model)
	r.previous = &res.Model
	// A newly referenced object's events may have been filtered out while
	// this model was built from an older cache: build once more.
	var again reconcile.Result
	if r.interest.set(in) {
		again.RequeueAfter = time.Millisecond
	}

	// Each object's Programmed comes from its own provider: the edge's
	// progress and error for the edge's Gateways and load balancers, a
	// cloud provider's per object for its own.
	progress := r.Provider.Progress()
	edge := programmedState{ok: progress.Served && progress.Version == res.Model.Version, message: progress.Message, addresses: progress.Addresses}
	edgeErr := ""
	if err := r.Queue.ClassError(provider.ClassEdge); err != nil {
		edgeErr = err.Error()
		edge.reason, edge.message = keys.ReasonDeployFailed, "deploying failed, the previous configuration stays: "+edgeErr
	} else if progress.Version != res.Model.Version {
		edge.message = fmt.Sprintf("model %s is being deployed; %s", res.Model.Version, progress.Message)
	}
	refused := map[string]edgev1.Gateway{}
	for _, g := range res.Model.Gateways {
		if g.Refused != "" {
			refused[g.Namespace+"/"+g.Name] = g
		}
	}
	// The listeners the edges serve the model without, by Gateway.
	unbound := map[string]map[string]string{}
	for _, pr := range progress.PartRefusals {
		if pr.Kind == edgev1.RefusalKindGateway {
			k := pr.Namespace + "/" + pr.Name
			if unbound[k] == nil {
				unbound[k] = map[string]string{}
			}
			unbound[k][pr.Listener] = fmt.Sprintf("port %d cannot be bound: %s", pr.Port, pr.Reason)
		}
	}
	// Told once per model and error, and only once there is an edge
	// Gateway to tell it on.
	told := res.Model.Version + "\x00" + edgeErr
	var errs []error
	for _, st := range res.Status.GatewayClasses {
		errs = append(errs, r.classStatus(ctx, st))
	}
	edgeGateways := 0
	for _, st := range res.Status.Gateways {
		key := st.Namespace + "/" + st.Name
		ps := edge
		if gp, ok := progress.Gateways[key]; ok {
			// served by a cloud provider (e.g. Azure Front Door), which
			// tells its progress and failures per Gateway
			ps = programmedState{ok: gp.Served, reason: gp.Reason, message: gp.Message, addresses: gp.Addresses}
		} else if _, held := refused[key]; !held {
			edgeGateways++
			if edgeErr != "" && told != r.warned {
				r.warnGateway(ctx, st, edgeErr)
			}
		}
		if _, cloud := progress.Gateways[key]; !cloud {
			// With an address pool, an edge Gateway is reached at its own
			// address (the model's), or not at all.
			if st.AddressProblem != "" {
				ps = programmedState{reason: string(gwv1.GatewayReasonAddressNotAssigned), message: st.AddressProblem}
			} else if len(st.Addresses) > 0 {
				ps.addresses = st.Addresses
			}
		}
		if g, ok := refused[key]; ok {
			ps = refusedState(g.Generation, g.Hold, ps)
		} else if _, cloud := progress.Gateways[key]; !cloud {
			ps.unbound = unbound[key]
		}
		errs = append(errs, r.gatewayStatus(ctx, st, ps))
	}
	if edgeErr == "" || edgeGateways > 0 {
		r.warned = told
	}
	for _, st := range res.Status.HTTPRoutes {
		errs = append(errs, r.routeStatus(ctx, withRefusals(st, progress.RouteRefusals)))
	}
	for _, st := range res.Status.BackendTrafficPolicies {
		errs = append(errs, r.policyStatus(ctx, st))
	}
	errs = append(errs, r.loadBalancers(ctx, in.MultiClusterLoadBalancers, res, progress, edge)...)
	more, err := r.keep(ctx, model.Accepted(in, res))
	errs = append(errs, err)
	if more {
		again.RequeueAfter = time.Second
	}
	for _, err := range errs {
		if err != nil {
			return reconcile.Result{}, err
		}
	}
	return again, nil
}

// loadKept reads what LastAccepted keeps. A store the controller may not
// read (no Role in its namespace) leaves it in memory only, said once in
// the log: the controller still serves, and a refused object is held
// after a restart, as before the store existed.
func (r *Reconciler) loadKept(ctx context.Context) error {
	if r.LastAccepted == nil {
		r.kept = map[string]model.LastAccepted{}
		return nil
	}
	kept, err := r.LastAccepted.Load(ctx)
	switch {
	case err == nil:
	case apierrors.IsForbidden(err):
		r.Log.Error("the last accepted specs cannot be read: they are kept in memory only, and a refused object is held after a restart", "err", err)
		r.LastAccepted, kept = nil, map[string]model.LastAccepted{}
	case kept != nil:
		r.Log.Error("some last accepted specs could not be read", "err", err)
	default:
		return err
	}
	if kept == nil {
		kept = map[string]model.LastAccepted{}
	}
	r.kept = kept
	r.Log.Info("last accepted specs loaded", "objects", len(kept))
	return nil
}

// keep writes what changed of the kept specs: an object's when its
// accepted generation changed, its deletion when the model no longer
// serves it; at most maxKeepWrites, reporting whether more remain.
func (r *Reconciler) keep(ctx context.Context, want map[string]model.LastAccepted) (bool, error) {
	if r.LastAccepted == nil {
		r.kept = want
		return false, nil
	}
	writes := 0
	for _, k := range slices.Sorted(maps.Keys(want)) {
		la := want[k]
		if old, ok := r.kept[k]; ok && old.Same(la) {
			continue
		}
		if writes == maxKeepWrites {
			return true, nil
		}
		writes++
		if err := r.LastAccepted.Put(ctx, k, la); err != nil {
			return false, err
		}
		r.kept[k] = la
	}
	for _, k := range slices.Sorted(maps.Keys(r.kept)) {
		if _, ok := want[k]; ok {
			continue
		}
		if writes == maxKeepWrites {
			return true, nil
		}
		writes++
		if err := r.LastAccepted.Delete(ctx, k); err != nil {
			return false, err
		}
		delete(r.kept, k)
	}
	return false, nil
}

// programmedState is what an object's Programmed condition and addresses
// come from: its provider's progress.
type programmedState struct {
	ok bool
	// reason is the kind of failure when the provider's last deploy of
	// the object failed ("" Pending).
	reason, message string
	addresses       []string
	// refused: the object's current generation is not accepted; message
	// says what still serves.
	refused bool
	// unbound are a Gateway's listeners (by name) that the edges serve
	// the model without, each with why; the rest is served.
	unbound map[string]string
	// partial: the object is served but for some of its ports (reason
	// says why); its addresses still reach the others.
	partial bool
}

// refusedState is the Programmed state of a refused object whose model
// entry serves generation (or, held, whatever its provider served), with
// ps's addresses.
func refusedState(generation int64, hold bool, ps programmedState) programmedState {
	ps.ok, ps.refused, ps.reason = false, true, ""
	if hold {
		ps.message = "not accepted; its provider keeps serving what it served for an earlier generation, if any"
	} else {
		ps.message = fmt.Sprintf("not accepted; the last accepted configuration (generation %d) still serves", generation)
	}
	return ps
}

// warnGateway tells an edge Gateway that deploying the model failed.
func (r *Reconciler) warnGateway(ctx context.Context, st model.GatewayStatus, deployErr string) {
	if r.Recorder == nil {
		return
	}
	gw := &gwv1.Gateway{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: st.Namespace, Name: st.Name}, gw); err == nil {
		r.Recorder.Eventf(gw, nil, corev1.EventTypeWarning, keys.ReasonDeployFailed, "Deploy", "deploying the model failed, the previous configuration stays: %s", deployErr)
	}
}

// tellOnce records a Warning event about obj once per generation, reason
// and message: an object may have problems of several reasons at once,
// each told once.
func (r *Reconciler) tellOnce(obj client.Object, kind, reason, action, msg string) {
	if r.Recorder == nil {
		return
	}
	k := kind + "/" + obj.GetNamespace() + "/" + obj.GetName() + "/" + reason
	told := fmt.Sprintf("%d\x00%s", obj.GetGeneration(), msg)
	if r.told == nil {
		r.told = map[string]string{}
	}
	if r.told[k] == told {
		return
	}
	r.told[k] = told
	r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, reason, action, "%s", msg)
}

func (r *Reconciler) inputs(ctx context.Context) (model.Input, error) {
	in := model.Input{ControllerName: keys.GatewayControllerName, LocalCluster: r.LocalCluster, LocalRegion: r.LocalRegion}
	var (
		classes        gwv1.GatewayClassList
		gateways       gwv1.GatewayList
		routes         gwv1.HTTPRouteList
		grants         gwv1.ReferenceGrantList
		namespaces     corev1.NamespaceList
		services       corev1.ServiceList
		imports        mcsv1beta1.ServiceImportList
		secrets        corev1.SecretList
		endpointSlices discoveryv1.EndpointSliceList
		policies       networkingv1alpha1.BackendTrafficPolicyList
		loadBalancers  networkingv1alpha1.MultiClusterLoadBalancerList
	)
	for _, l := range []client.ObjectList{&classes, &gateways, &routes, &grants, &namespaces, &services, &imports, &secrets, &endpointSlices, &policies, &loadBalancers} {
		if err := r.Client.List(ctx, l); err != nil {
			return in, fmt.Errorf("listing %T: %w", l, err)
		}
	}
	in.GatewayClasses, in.Gateways, in.HTTPRoutes, in.ReferenceGrants = classes.Items, gateways.Items, routes.Items, grants.Items
	in.Namespaces, in.Services, in.ServiceImports = namespaces.Items, services.Items, imports.Items
	in.Secrets, in.EndpointSlices = secrets.Items, endpointSlices.Items
	in.BackendTrafficPolicies = policies.Items
	in.MultiClusterLoadBalancers, in.LoadBalancerClasses = loadBalancers.Items, r.LoadBalancerClasses
	in.CRDBundleVersions = r.CRDBundleVersions
	in.ValidateAnnotations = r.ValidateAnnotations
	in.Previous = r.previous
	in.LastAccepted = r.kept
	in.AddressPool = r.AddressPool
	in.CloudClass, in.ReservedPorts = r.CloudClass, r.ReservedPorts
	in.Features = r.Features
	return in, nil
}

// BundleVersions reads the gateway.networking.k8s.io/bundle-version of
// every installed Gateway API CRD, for the GatewayClass SupportedVersion
// condition. CRDs change with an upgrade, which restarts the controller.
func BundleVersions(ctx context.Context, c client.Reader) ([]string, error) {
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := c.List(ctx, &crds); err != nil {
		return nil, fmt.Errorf("listing CRDs: %w", err)
	}
	var out []string
	for _, crd := range crds.Items {
		if crd.Spec.Group == gwv1.GroupName {
			out = append(out, crd.Annotations["gateway.networking.k8s.io/bundle-version"])
		}
	}
	return out, nil
}

func (r *Reconciler) classStatus(ctx context.Context, st model.GatewayClassStatus) error {
	gc := &gwv1.GatewayClass{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: st.Name}, gc); err != nil {
		return client.IgnoreNotFound(err)
	}
	conds := merge(gc.Status.Conditions, st.Conditions)
	var features []gwv1.SupportedFeature
	for _, f := range st.SupportedFeatures {
		features = append(features, gwv1.SupportedFeature{Name: f})
	}
	if conditionsEqual(gc.Status.Conditions, conds) && slices.Equal(gc.Status.SupportedFeatures, features) {
		return nil
	}
	patch := client.MergeFromWithOptions(gc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	gc.Status.Conditions, gc.Status.SupportedFeatures = conds, features
	return r.patchStatus(ctx, gc, patch)
}

func (r *Reconciler) gatewayStatus(ctx context.Context, st model.GatewayStatus, ps programmedState) error {
	gw := &gwv1.Gateway{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: st.Namespace, Name: st.Name}, gw); err != nil {
		return client.IgnoreNotFound(err)
	}
	accepted := meta.IsStatusConditionTrue(st.Conditions, string(gwv1.GatewayConditionAccepted))
	prog := metav1.Condition{Type: string(gwv1.GatewayConditionProgrammed), Status: metav1.ConditionTrue, Reason: string(gwv1.GatewayReasonProgrammed), Message: ps.message, ObservedGeneration: gw.Generation}
	switch {
	case !accepted && ps.refused:
		prog.Status, prog.Reason = metav1.ConditionFalse, string(gwv1.GatewayReasonInvalid)
	case !accepted:
		prog.Status, prog.Reason, prog.Message = metav1.ConditionFalse, string(gwv1.GatewayReasonInvalid), "the Gateway is not accepted"
	case !ps.ok && ps.reason != "":
		// The spec lets an implementation name other reasons: the kind of
		// failure tells a permissions problem apart from waiting.
		prog.Status, prog.Reason = metav1.ConditionFalse, ps.reason
	case !ps.ok:
		prog.Status, prog.Reason = metav1.ConditionFalse, string(gwv1.GatewayReasonPending)
	}
	want := gw.Status.DeepCopy()
	want.Conditions = merge(gw.Status.Conditions, append(slices.Clone(st.Conditions), prog))
	want.Listeners = nil
	// Problems of its listeners, told once per reason in one event each.
	problems := map[string][]string{}
	for _, ls := range st.Listeners {
		var old []metav1.Condition
		for _, o := range gw.Status.Listeners {
			if o.Name == ls.Name {
				old = o.Conditions
			}
		}
		lp := prog
		conflicted := meta.FindStatusCondition(ls.Conditions, string(gwv1.ListenerConditionConflicted))
		unbound, isUnbound := ps.unbound[string(ls.Name)]
		la := meta.FindStatusCondition(ls.Conditions, string(gwv1.ListenerConditionAccepted))
		switch {
		case !meta.IsStatusConditionTrue(ls.Conditions, string(gwv1.ListenerConditionAccepted)) || !meta.IsStatusConditionTrue(ls.Conditions, string(gwv1.ListenerConditionResolvedRefs)):
			lp.Status, lp.Reason, lp.Message = metav1.ConditionFalse, string(gwv1.ListenerReasonInvalid), "the listener is not accepted or its references do not resolve"
			if la != nil && la.Reason == string(gwv1.ListenerReasonPortUnavailable) {
				problems[la.Reason] = append(problems[la.Reason], fmt.Sprintf("listener %s: %s", ls.Name, la.Message))
			}
		case conflicted != nil && conflicted.Status == metav1.ConditionTrue:
			lp.Status, lp.Reason, lp.Message = metav1.ConditionFalse, string(gwv1.ListenerReasonInvalid), "not served: "+conflicted.Message
			problems[conflicted.Reason] = append(problems[conflicted.Reason], fmt.Sprintf("listener %s: %s", ls.Name, conflicted.Message))
		case prog.Status == metav1.ConditionFalse && prog.Reason != string(gwv1.GatewayReasonInvalid):
			lp.Reason = string(gwv1.ListenerReasonPending)
		case prog.Status == metav1.ConditionTrue && isUnbound:
			// The edges serve the model, and so the rest of the Gateway,
			// without this listener.
			lp.Status, lp.Reason, lp.Message = metav1.ConditionFalse, string(gwv1.ListenerReasonPortUnavailable), "not served: "+unbound+"; the edges try again with the next model"
			problems[lp.Reason] = append(problems[lp.Reason], fmt.Sprintf("listener %s: %s", ls.Name, lp.Message))
		}
		ls.Conditions = merge(old, append(slices.Clone(ls.Conditions), lp))
		want.Listeners = append(want.Listeners, ls)
	}
	for _, reason := range slices.Sorted(maps.Keys(problems)) {
		r.tellOnce(gw, "Gateway", reason, "Program", strings.Join(problems[reason], "; "))
	}
	want.Addresses = nil
	if accepted || ps.refused {
		// a refused Gateway's last accepted generation is still reached there
		for _, a := range ps.addresses {
			t := gwv1.HostnameAddressType
			if _, err := netip.ParseAddr(a); err == nil {
				t = gwv1.IPAddressType
			}
			want.Addresses = append(want.Addresses, gwv1.GatewayStatusAddress{Type: &t, Value: a})
		}
	}
	if statusEqual(&gw.Status, want) {
		return nil
	}
	patch := client.MergeFromWithOptions(gw.DeepCopy(), client.MergeFromWithOptimisticLock{})
	gw.Status = *want
	return r.patchStatus(ctx, gw, patch)
}

// routeStatus writes our parents' status and keeps other controllers'.
func (r *Reconciler) routeStatus(ctx context.Context, st model.HTTPRouteStatus) error {
	route := &gwv1.HTTPRoute{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: st.Namespace, Name: st.Name}, route); err != nil {
		return client.IgnoreNotFound(err)
	}
	var parents []gwv1.RouteParentStatus
	for _, p := range route.Status.Parents {
		if p.ControllerName != gwv1.GatewayController(keys.GatewayControllerName) {
			parents = append(parents, p)
		}
	}
	for _, p := range st.Parents {
		for _, o := range route.Status.Parents {
			if o.ControllerName == p.ControllerName && equality.Semantic.DeepEqual(o.ParentRef, p.ParentRef) {
				p.Conditions = merge(o.Conditions, p.Conditions)
			}
		}
		p.Conditions = merge(nil, p.Conditions)
		parents = append(parents, p)
	}
	if parentsEqual(route.Status.Parents, parents) {
		return nil
	}
	patch := client.MergeFromWithOptions(route.DeepCopy(), client.MergeFromWithOptimisticLock{})
	route.Status.Parents = parents
	return r.patchStatus(ctx, route, patch)
}

// policyStatus writes a BackendTrafficPolicy's conditions and ancestors,
// and tells an invalid policy's problems in one Warning event per
// generation and message.
func (r *Reconciler) policyStatus(ctx context.Context, st model.BackendTrafficPolicyStatus) error {
	p := &networkingv1alpha1.BackendTrafficPolicy{}
	name := types.NamespacedName{Namespace: st.Namespace, Name: st.Name}
	if err := r.Client.Get(ctx, name, p); err != nil {
		return client.IgnoreNotFound(err)
	}
	if c := meta.FindStatusCondition(st.Conditions, string(gwv1.PolicyConditionAccepted)); c != nil && c.Reason == string(gwv1.PolicyReasonInvalid) {
		r.tellOnce(p, "BackendTrafficPolicy", c.Reason, "Validate", c.Message)
	}
	want := p.Status.DeepCopy()
	want.Conditions = merge(p.Status.Conditions, st.Conditions)
	want.Ancestors = nil
	for _, a := range st.Ancestors {
		for _, o := range p.Status.Ancestors {
			if equality.Semantic.DeepEqual(o.AncestorRef, a.AncestorRef) && o.ControllerName == a.ControllerName {
				a.Conditions = merge(o.Conditions, a.Conditions)
			}
		}
		a.Conditions = merge(nil, a.Conditions)
		want.Ancestors = append(want.Ancestors, a)
	}
	if conditionsEqual(p.Status.Conditions, want.Conditions) && ancestorsEqual(p.Status.Ancestors, want.Ancestors) {
		return nil
	}
	patch := client.MergeFromWithOptions(p.DeepCopy(), client.MergeFromWithOptimisticLock{})
	p.Status = *want
	return r.patchStatus(ctx, p, patch)
}

func (r *Reconciler) patchStatus(ctx context.Context, obj client.Object, patch client.Patch) error {
	if err := r.Client.Status().Patch(ctx, obj, patch, client.FieldOwner(keys.FieldManagerGatewayStatus)); err != nil {
		if ctx.Err() != nil {
			return nil // stopping
		}
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return err // the next reconcile reads it again
		}
		return fmt.Errorf("writing status of %T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
	}
	r.Log.Info("status written", "kind", fmt.Sprintf("%T", obj), "object", client.ObjectKeyFromObject(obj).String())
	return nil
}

// merge sets each wanted condition on the existing ones, keeping a
// condition's lastTransitionTime while its status stays, and drops
// conditions no longer wanted.
func merge(existing, want []metav1.Condition) []metav1.Condition {
	out := []metav1.Condition{}
	for _, c := range want {
		if old := meta.FindStatusCondition(existing, c.Type); old != nil && old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		} else {
			c.LastTransitionTime = metav1.Now()
		}
		out = append(out, c)
	}
	return out
}

func conditionsEqual(a, b []metav1.Condition) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message || x.ObservedGeneration != y.ObservedGeneration {
			return false
		}
	}
	return true
}

func statusEqual(a, b *gwv1.GatewayStatus) bool {
	if !conditionsEqual(a.Conditions, b.Conditions) || len(a.Listeners) != len(b.Listeners) || !equality.Semantic.DeepEqual(a.Addresses, b.Addresses) {
		return false
	}
	for i := range a.Listeners {
		x, y := a.Listeners[i], b.Listeners[i]
		if x.Name != y.Name || x.AttachedRoutes != y.AttachedRoutes || !equality.Semantic.DeepEqual(x.SupportedKinds, y.SupportedKinds) || !conditionsEqual(x.Conditions, y.Conditions) {
			return false
		}
	}
	return true
}

func ancestorsEqual(a, b []gwv1.PolicyAncestorStatus) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ControllerName != b[i].ControllerName || !equality.Semantic.DeepEqual(a[i].AncestorRef, b[i].AncestorRef) || !conditionsEqual(a[i].Conditions, b[i].Conditions) {
			return false
		}
	}
	return true
}

func parentsEqual(a, b []gwv1.RouteParentStatus) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ControllerName != b[i].ControllerName || !equality.Semantic.DeepEqual(a[i].ParentRef, b[i].ParentRef) || !conditionsEqual(a[i].Conditions, b[i].Conditions) {
			return false
		}
	}
	return true
}

// withRefusals adds, to each parent of st served by a cloud provider that
// refuses some of the route's matches, PartiallyInvalid=True
// (UnsupportedValue) naming them: the rest of the route is served there.
func withRefusals(st model.HTTPRouteStatus, refusals []provider.RouteRefusal) model.HTTPRouteStatus {
	if len(refusals) == 0 {
		return st
	}
	parents := slices.Clone(st.Parents)
	for i, p := range parents {
		ns := st.Namespace
		if p.ParentRef.Namespace != nil {
			ns = string(*p.ParentRef.Namespace)
		}
		var msgs []string
		for _, rf := range refusals {
			if rf.RouteNamespace == st.Namespace && rf.RouteName == st.Name && rf.GatewayNamespace == ns && rf.GatewayName == string(p.ParentRef.Name) {
				msgs = append(msgs, fmt.Sprintf("rule %d match %d: %s", rf.Rule, rf.Match, rf.Reason))
			}
		}
		if len(msgs) == 0 {
			continue
		}
		var gen int64
		if len(p.Conditions) > 0 {
			gen = p.Conditions[0].ObservedGeneration
		}
		p.Conditions = append(slices.Clone(p.Conditions), metav1.Condition{Type: string(gwv1.RouteConditionPartiallyInvalid), Status: metav1.ConditionTrue,
			Reason: string(gwv1.RouteReasonUnsupportedValue), Message: "not served by the Gateway's provider: " + strings.Join(msgs, "; "), ObservedGeneration: gen})
		parents[i] = p
	}
	st.Parents = parents
	return st
}
