package importer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	networkingv1alpha1 "github.com/fleetnet/fleetnet/api/networking/v1alpha1"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/agent/eastwest"
	"github.com/fleetnet/fleetnet/internal/agent/locality"
	"github.com/fleetnet/fleetnet/internal/tracing"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// Reconciler materialises imports: for each import of the registry whose
// namespace exists, a ServiceImport, a derived Service and EndpointSlices.
// It compares the registry's desired state with the objects in the cluster
// on every call, so an edited or deleted object is repaired whatever the
// registry does; it deletes only on a synced registry stream.
type Reconciler struct {
	Client client.Client
	Stream *Stream
	// Families are the IP families of this cluster's Service network,
	// primary first.
	Families          []corev1.IPFamily
	EndpointsPerSlice int
	Recorder          events.EventRecorder
	Log               *slog.Logger
	// Events triggers reconciles (fed by the stream).
	Events chan event.GenericEvent
	// Pending counts imports waiting for their namespace.
	Pending *PendingTracker
	// Progress counts the imports in place (nil: not counted).
	Progress *Progress
	// CreateNamespaces: an import whose namespace does not exist creates
	// it, rather than waiting for it (namespace sameness kept by hand).
	CreateNamespaces bool
	// Workers is how many imports are reconciled at once (at least 1).
	// Imports are independent; one worker made a fleet's first sync of
	// 1,000 imports wait on one API round trip after another.
	Workers int
	// Cluster and Region are this cluster's id and region, which locality
	// policies prefer.
	Cluster, Region string
	// Policies: BackendTrafficPolicies with locality LocalFirst are
	// applied to the ServiceImports they target (their CRD is installed).
	Policies bool
	// Tracer, when set, traces the apply of each change the registry sent
	// with a trace_parent (keys.SpanApplyImport), as that change's child.
	Tracer trace.Tracer
	// Network is this cluster's network (keys.PropertyNetwork; "" for the
	// fleet's one network): exporting clusters of other networks are
	// reached through EastWest, or not at all.
	Network string
	// EastWest is this cluster's east-west gateway; nil when it has none.
	EastWest *eastwest.Gateway

	memo verifiedSlices
	// written holds the expectations of the reconciler's own ServiceImport
	// writes.
	written writtenImports
}

// verified returns the import's record of verified slices.
func (r *Reconciler) verified(key types.NamespacedName) *importMemo { return r.memo.of(key) }

// SetupWithManager watches ServiceImports, derived Services, imported
// EndpointSlices, Namespaces and the registry stream.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	byImportLabel := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		name := o.GetLabels()[mcsv1beta1.LabelServiceName]
		if name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	})
	byNamespace := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		var out []reconcile.Request
		keys, _ := r.Stream.Keys()
		for _, k := range keys {
			if k.Namespace == o.GetName() {
				out = append(out, reconcile.Request{NamespacedName: k})
			}
		}
		return out
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named("serviceimport").
		For(&mcsv1beta1.ServiceImport{}, builder.WithPredicates(notOwnWrite)).
		Watches(&corev1.Service{}, byImportLabel, builder.WithPredicates(notOwnWrite)).
		Watches(&discoveryv1.EndpointSlice{}, byImportLabel, builder.WithPredicates(notOwnWrite)).
		Watches(&corev1.Namespace{}, byNamespace).
		WatchesRawSource(source.Channel(r.Events, &handler.EnqueueRequestForObject{}))
	if r.Policies {
		b = b.Watches(&networkingv1alpha1.BackendTrafficPolicy{}, handler.EnqueueRequestsFromMapFunc(policyTargets)).
			WatchesMetadata(&corev1.Node{}, r.zoneChanges(), builder.WithPredicates(zoneLabelChanged))
	}
	if r.EastWest != nil {
		// The gateway's pods are what the imports that go through it
		// serve: when they change, so do those imports' slices.
		gw := r.EastWest.Service
		b = b.Watches(&discoveryv1.EndpointSlice{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if o.GetNamespace() != gw.Namespace || o.GetLabels()[discoveryv1.LabelServiceName] != gw.Name {
				return nil
			}
			var out []reconcile.Request
			for _, k := range r.EastWest.Publisher.Routed() {
				out = append(out, reconcile.Request{NamespacedName: k})
			}
			return out
		}))
	}
	return b.WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Complete(r)
}

// stepError names the step that failed.
type stepError struct {
	step string
	err  error
}

func (e *stepError) Error() string { return e.step + ": " + e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }

// Reconcile brings one import's objects to what the registry says. When
// the registry sent a traced change of the import, the reconcile is that
// change's span (keys.SpanApplyImport).
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if r.Tracer == nil {
		return r.reconcile(ctx, req)
	}
	tp := r.Stream.TakeTraceParent(req.NamespacedName)
	if tp == "" {
		return r.reconcile(ctx, req)
	}
	ctx, span := tracing.Start(ctx, r.Tracer, keys.SpanApplyImport, tp, attribute.String(keys.AttributeCluster, r.Cluster),
		attribute.String(keys.AttributeNamespace, req.Namespace), attribute.String(keys.AttributeService, req.Name))
	res, err := r.reconcile(ctx, req)
	if err != nil || res.RequeueAfter > 0 {
		r.Stream.ReturnTraceParent(req.NamespacedName, tp) // the retry finishes the apply
	}
	tracing.End(span, err)
	return res, err
}

func (r *Reconciler) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	desired, synced := r.Stream.Get(req.NamespacedName)
	if desired == nil || desired.Import == nil {
		r.Pending.Done(req.NamespacedName)
		r.Progress.Set(req.NamespacedName, false)
		if !synced {
			// Never delete on partial knowledge; but come back while
			// something fleetnet made is here, which the stream's sync
			// may not name (it names the imports it holds).
			return r.whileDataPlane(ctx, req.NamespacedName)
		}
		return reconcile.Result{}, r.remove(ctx, req.NamespacedName)
	}
	ns := &corev1.Namespace{}
	err := r.Client.Get(ctx, types.NamespacedName{Name: req.Namespace}, ns)
	if apierrors.IsNotFound(err) && r.CreateNamespaces {
		created, cerr := r.createNamespace(ctx, req.Namespace)
		if cerr != nil {
			return reconcile.Result{}, cerr
		}
		if created != nil {
			ns, err = created, nil
		}
	}
	if apierrors.IsNotFound(err) || (err == nil && !ns.DeletionTimestamp.IsZero()) {
		r.Pending.Wait(req.NamespacedName)
		r.Progress.Set(req.NamespacedName, false)
		r.memo.drop(req.NamespacedName)
		return reconcile.Result{}, nil // the Namespace watch brings it back
	} else if err != nil {
		return reconcile.Result{}, err
	}
	r.Pending.Done(req.NamespacedName)

	si := &mcsv1beta1.ServiceImport{}
	err = r.Client.Get(ctx, req.NamespacedName, si)
	if cached := si; err == nil || apierrors.IsNotFound(err) {
		if err != nil {
			cached = nil
		}
		if r.written.behind(req.NamespacedName, cached, time.Now()) {
			return reconcile.Result{RequeueAfter: cacheBehindRetry}, nil // our last write is on its way to the cache
		}
	}
	if err == nil && si.Labels[keys.LabelManagedBy] != keys.ManagedByAgent {
		r.Recorder.Eventf(si, nil, corev1.EventTypeWarning, keys.ReasonBlocked, "Import", "ServiceImport %s exists and is not managed by fleetnet; the import waits until it is removed", req)
		r.Log.Info("import blocked by a ServiceImport fleetnet does not manage", "import", req.String())
		r.Progress.Set(req.NamespacedName, false)
		return reconcile.Result{}, nil
	} else if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}

	imp := desired.Import
	cross := eastwest.Decide(imp, eastwest.Local{Network: r.Network, Gateway: r.EastWest != nil})
	families := Families(imp, r.Families)
	spec := ServiceImportSpec(imp, families)
	reason, failure := unservable(imp, r.Families)
	// An import this cluster cannot serve keeps its ServiceImport, which
	// says why (Ready=False), and loses what fleetnet made for it here: the
	// derived Service and slices describe ports or families the import no
	// longer has, and would keep sending traffic to endpoints the registry
	// no longer vouches for (some of clusters that have left). Users find
	// no address (spec.ips is cleared) and gateways no endpoint, rather
	// than a stale backend; servable again, the import gets a new derived
	// Service and ClusterSetIP. Only a synced stream is acted on: an
	// unsynced one may hold a state the registry has since left, and
	// nothing is deleted on partial knowledge.
	withdraw := failure != nil && synced
	// The derived Service comes first, so that the ServiceImport is written
	// once, with the ClusterSetIP its Service was given, and is never
	// without it; the slices it selects are owned by it (see
	// docs/decisions/0118-derived-service-first.md and
	// docs/decisions/0119-slices-owned-by-derived-service.md).
	var svc *corev1.Service
	var loc *locality.Decision
	var gatewayPorts map[int32]int32
	if failure == nil && cross.Through {
		// The gateway dials each cluster itself: zone hints on its own
		// endpoints would say nothing of where the traffic goes.
		if gatewayPorts, failure = r.gatewayPorts(ctx, req.NamespacedName, cross); failure != nil {
			reason = keys.ReasonApplyFailed
		}
	} else if failure == nil {
		if loc, failure = r.localityOf(ctx, req.NamespacedName, imp, desired, families); failure != nil {
			reason = keys.ReasonApplyFailed
		}
	}
	if !cross.Through && r.EastWest != nil {
		r.EastWest.Publisher.DeleteRoute(req.NamespacedName)
		r.EastWest.Ports.Release(req.NamespacedName)
	}
	if failure == nil {
		svcSpec, svcAnnotations := withLocality(DerivedServiceSpec(imp, families), loc)
		if cross.Through {
			svcAnnotations = maps.Clone(svcAnnotations)
			if svcAnnotations == nil {
				svcAnnotations = map[string]string{}
			}
			svcAnnotations[keys.AnnotationEastWestPorts] = eastwest.FormatPorts(gatewayPorts)
		}
		svc, failure = r.applyDerivedService(ctx, si, req.NamespacedName, svcSpec, svcAnnotations)
		if errors.Is(failure, errServiceReplaced) {
			return reconcile.Result{RequeueAfter: cacheBehindRetry}, nil // the cache has yet to show it
		}
		if failure != nil {
			reason = keys.ReasonApplyFailed
		}
	}
	applied := si
	labels, annotations := ImportMetadata(imp)
	ips := importIPs(imp.GetType(), si.Spec.IPs, svc, withdraw)
	// With a derived Service, the ServiceImport and the slices are
	// independent writes and go at once: a new import is complete after
	// two API round trips (the Service, then both), not three.
	var siApply sync.WaitGroup
	var siErr error
	if want := withIPs(spec, ips); si.UID == "" || !equality.Semantic.DeepEqual(si.Spec, want) || !metadataApplied(si, labels, annotations) {
		apply := func() {
			applied, siErr = r.applyServiceImport(ctx, si, req.NamespacedName, spec, ips, labels, annotations)
		}
		if svc != nil {
			siApply.Go(apply)
		} else if apply(); siErr != nil {
			r.Progress.Set(req.NamespacedName, false)
			return reconcile.Result{}, r.specRefused(ctx, si, req.NamespacedName, imp, &stepError{"applying the ServiceImport spec", siErr})
		}
	}
	var withdrawErr error
	switch {
	case svc != nil:
		var hints map[string][]discoveryv1.ForZone
		if loc != nil {
			hints = loc.Hints
		}
		served := desired
		if served, failure = r.crossNetworks(ctx, req.NamespacedName, desired, cross, gatewayPorts); failure == nil {
			failure = r.applySlices(ctx, req.NamespacedName, svc, served, families, hints)
		}
		if failure != nil {
			reason = keys.ReasonApplyFailed
		}
	case withdraw:
		withdrawErr = r.withdraw(ctx, req.NamespacedName, reason)
	}
	if siApply.Wait(); siErr != nil {
		r.Progress.Set(req.NamespacedName, false)
		return reconcile.Result{}, r.specRefused(ctx, si, req.NamespacedName, imp, &stepError{"applying the ServiceImport spec", siErr})
	}
	serr := r.applyStatus(ctx, applied, imp, reason, failure, loc, cross.Condition(gatewayPorts, applied.Generation))
	r.Progress.Set(req.NamespacedName, failure == nil && serr == nil)
	if serr != nil {
		return reconcile.Result{}, errors.Join(withdrawErr, serr)
	}
	switch {
	case withdrawErr != nil:
		return reconcile.Result{}, withdrawErr
	case failure != nil && reason == keys.ReasonApplyFailed:
		return reconcile.Result{}, failure
	case failure != nil && !synced:
		// A stream that syncs to the same import reports no change: come
		// back while there is a data plane left to withdraw.
		return r.whileDataPlane(ctx, req.NamespacedName)
	}
	return reconcile.Result{}, nil
}

// whileDataPlane asks for the import key to be reconciled again after
// withdrawRetry while fleetnet's derived Service or slices of it remain,
// for a decision that waits for a synced stream.
func (r *Reconciler) whileDataPlane(ctx context.Context, key types.NamespacedName) (reconcile.Result, error) {
	svc, ss, err := r.dataPlane(ctx, key)
	if err != nil {
		return reconcile.Result{}, err
	}
	if svc != nil || len(ss) > 0 {
		return reconcile.Result{RequeueAfter: withdrawRetry}, nil
	}
	return reconcile.Result{}, nil
}

// createNamespace creates an import's missing namespace, labelled as the
// agent's, and returns it; nil when it exists already (made since the
// cache was read: the Namespace watch brings the import back). The agent
// never deletes it: others may have put anything in it since, which the
// agent could not see without reading every resource type of the cluster.
func (r *Reconciler) createNamespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{keys.LabelManagedBy: keys.ManagedByAgent}}}
	err := r.Client.Create(ctx, ns, client.FieldOwner(keys.FieldManagerAgent))
	switch {
	case apierrors.IsAlreadyExists(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("creating namespace %s for its imports: %w", name, err)
	}
	r.Log.Info("created the namespace of an import", "namespace", name)
	return ns, nil
}

// withdrawRetry is how soon an import this cluster cannot serve is
// reconciled again while its data plane waits for a synced stream to be
// withdrawn.
const withdrawRetry = 10 * time.Second

// unservable says why imp cannot be served in a cluster whose Service
// network has the IP families cluster: the Ready condition's reason, and
// the cause naming the import's field and value. It returns "" and nil
// when imp can be served.
func unservable(imp *registryv1.Import, cluster []corev1.IPFamily) (string, error) {
	if err := CheckPorts(imp.GetPorts()); err != nil {
		return keys.ReasonInvalidPorts, fmt.Errorf("ports: %w", err)
	}
	if len(Families(imp, cluster)) == 0 {
		return string(mcsv1beta1.ServiceImportReasonIPFamilyNotSupported), fmt.Errorf("ipFamilies %v: none is in this cluster's Service network %v", imp.GetIpFamilies(), cluster)
	}
	return "", nil
}

// importIPs returns the ServiceImport's spec.ips: none for a headless
// import (it has no ClusterSetIP) or one whose data plane is withdrawn (no
// derived Service, no address); else the ClusterIPs of its derived Service
// svc, or, when that could not be applied (nil), the ips it holds.
func importIPs(typ string, held []string, svc *corev1.Service, withdrawn bool) []string {
	switch {
	case typ == string(mcsv1beta1.Headless) || withdrawn:
		return nil
	case svc != nil:
		return svc.Spec.ClusterIPs
	}
	return held
}

// specRefused makes a ServiceImport spec the API server refused visible,
// and returns err so that the import is retried: a Warning event, and
// Ready=False when the ServiceImport exists and its status can be written.
func (r *Reconciler) specRefused(ctx context.Context, si *mcsv1beta1.ServiceImport, key types.NamespacedName, imp *registryv1.Import, err error) error {
	r.Log.Info("ServiceImport spec refused", "import", key.String(), "err", err)
	wrapped := fmt.Errorf("ServiceImport %s: %w", key, err)
	if si.UID == "" {
		r.Recorder.Eventf(eventTarget(si, key), nil, corev1.EventTypeWarning, keys.ReasonApplyFailed, "Import", "%s", err.Error())
		return wrapped
	}
	if serr := r.applyStatus(ctx, si, imp, keys.ReasonApplyFailed, err, nil, nil); serr != nil {
		return errors.Join(wrapped, serr)
	}
	return wrapped
}

// dataPlane returns what fleetnet made for an import in this cluster: its
// derived Service (nil when there is none, or it is not fleetnet's) and
// its imported slices (the cache's own objects, only to be read).
func (r *Reconciler) dataPlane(ctx context.Context, key types.NamespacedName) (*corev1.Service, []discoveryv1.EndpointSlice, error) {
	svc := &corev1.Service{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: DerivedName(key.Namespace, key.Name)}, svc)
	switch {
	case apierrors.IsNotFound(err) || (err == nil && svc.Labels[keys.LabelManagedBy] != keys.ManagedByAgent):
		svc = nil
	case err != nil:
		return nil, nil, &stepError{"reading the derived Service", err}
	}
	list := &discoveryv1.EndpointSliceList{}
	if err := r.Client.List(ctx, list, client.InNamespace(key.Namespace), client.MatchingLabels{
		mcsv1beta1.LabelServiceName: key.Name, discoveryv1.LabelManagedBy: keys.EndpointSliceManagedBy,
	}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, &stepError{"listing EndpointSlices", err}
	}
	return svc, list.Items, nil
}

// withdraw deletes an import's derived Service and slices (see
// Reconcile for when). A withdrawn import costs no write.
func (r *Reconciler) withdraw(ctx context.Context, key types.NamespacedName, reason string) error {
	svc, ss, err := r.dataPlane(ctx, key)
	if err != nil {
		return err
	}
	r.memo.drop(key)
	if r.EastWest != nil {
		r.EastWest.Publisher.DeleteRoute(key)
		r.EastWest.Ports.Release(key)
	}
	if svc == nil && len(ss) == 0 {
		return nil
	}
	var errs []error
	if svc != nil {
		if err := r.Client.Delete(ctx, svc, client.Preconditions{UID: &svc.UID}); client.IgnoreNotFound(err) != nil {
			errs = append(errs, &stepError{"deleting the derived Service", err})
		}
	}
	for i := range ss {
		if err := r.deleteSlice(ctx, key.Namespace, ss[i].Name); err != nil {
			errs = append(errs, &stepError{"deleting EndpointSlice " + ss[i].Name, err})
		}
	}
	r.Log.Info("withdrew the derived Service and EndpointSlices of an import this cluster cannot serve", "import", key.String(), "reason", reason,
		"service", svc != nil, "slices", len(ss))
	return errors.Join(errs...)
}

// withIPs returns spec with ips, as the ServiceImport should hold it.
func withIPs(spec mcsv1beta1.ServiceImportSpec, ips []string) mcsv1beta1.ServiceImportSpec {
	spec.IPs = ips
	return spec
}

// applyServiceImport applies the ServiceImport's spec and metadata. Every
// apply carries the whole desired labels and annotations: server-side apply
// removes the keys the agent applied before and leaves out now.
func (r *Reconciler) applyServiceImport(ctx context.Context, base *mcsv1beta1.ServiceImport, key types.NamespacedName, spec mcsv1beta1.ServiceImportSpec, ips []string, labels, annotations map[string]string) (*mcsv1beta1.ServiceImport, error) {
	spec.IPs = ips
	si := &mcsv1beta1.ServiceImport{
		TypeMeta:   metav1.TypeMeta{APIVersion: mcsv1beta1.GroupVersion.String(), Kind: "ServiceImport"},
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: labels, Annotations: annotations},
		Spec:       spec,
	}
	out := &mcsv1beta1.ServiceImport{}
	if err := r.apply(ctx, si, out, ""); err != nil {
		return nil, err
	}
	r.written.record(base, out, time.Now())
	return out, nil
}

// applyDerivedService applies the derived Service of the import key, whose
// ServiceImport si may not exist yet. A change between headless and
// ClusterSetIP, or of the primary family, cannot be made in place: the
// Service is deleted and created again. Ports edited by anyone else are
// replaced, not merged. annotations are the ones the agent sets (an
// annotation it set before and leaves out goes with the apply).
func (r *Reconciler) applyDerivedService(ctx context.Context, si *mcsv1beta1.ServiceImport, key types.NamespacedName, spec corev1.ServiceSpec, annotations map[string]string) (*corev1.Service, error) {
	name := DerivedName(key.Namespace, key.Name)
	labels := map[string]string{keys.LabelManagedBy: keys.ManagedByAgent, mcsv1beta1.LabelServiceName: key.Name}
	existing := &corev1.Service{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: name}, existing)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, &stepError{"reading the derived Service", err}
	case existing.Labels[keys.LabelManagedBy] != keys.ManagedByAgent:
		r.Recorder.Eventf(eventTarget(si, key), nil, corev1.EventTypeWarning, keys.ReasonBlocked, "Import", "Service %s/%s exists and is not managed by fleetnet", key.Namespace, name)
		return nil, &stepError{"applying the derived Service", fmt.Errorf("a Service %s/%s exists that fleetnet does not manage", key.Namespace, name)}
	case (existing.Spec.ClusterIP == corev1.ClusterIPNone) != (spec.ClusterIP == corev1.ClusterIPNone) ||
		(len(existing.Spec.IPFamilies) > 0 && len(spec.IPFamilies) > 0 && existing.Spec.IPFamilies[0] != spec.IPFamilies[0]):
		if err := r.Client.Delete(ctx, existing, client.Preconditions{UID: &existing.UID}); apierrors.IsConflict(err) {
			return nil, errServiceReplaced
		} else if client.IgnoreNotFound(err) != nil {
			return nil, &stepError{"re-creating the derived Service", err}
		}
		r.Log.Info("re-creating derived Service: headless or primary IP family changed", "import", key.String(), "service", name)
		existing = &corev1.Service{}
	case existing.DeletionTimestamp.IsZero() && !samePorts(existing.Spec.Ports, spec.Ports):
		// Ports someone else changed are replaced before the apply: server-side
		// apply merges port lists by (port, protocol), so applying ours beside
		// a foreign port of the same name would be refused as a duplicate name
		// (and a foreign port would stay). The update is conditional on the
		// resourceVersion read; a newer change fails it and the reconcile
		// retries.
		fixed := existing.DeepCopy()
		fixed.Spec.Ports = spec.Ports
		if err := r.Client.Update(ctx, fixed, client.FieldOwner(keys.FieldManagerAgent)); err != nil {
			return nil, &stepError{"replacing the derived Service's ports", err}
		}
		r.Log.Info("replaced the derived Service's ports", "import", key.String(), "service", name)
		existing = fixed
	}
	if existing.UID != "" {
		// Against the Service that stays: a re-created one has no
		// operator's annotations yet.
		annotations = withoutForeign(existing, annotations)
	}
	if existing.UID != "" && existing.DeletionTimestamp.IsZero() && serviceMatches(existing, key.Name, spec) && metadataApplied(existing, labels, annotations) {
		return existing, nil
	}
	// No owner reference: the ServiceImport is written after it. An
	// applied Service lists none, which also drops the reference to the
	// ServiceImport that derived Services had before.
	svc := &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: key.Namespace, Name: name,
			Labels: labels, Annotations: annotations,
		},
		Spec: spec,
	}
	out := &corev1.Service{}
	if err := r.apply(ctx, svc, out, ""); err != nil {
		return nil, &stepError{"applying the derived Service", err}
	}
	if !samePorts(out.Spec.Ports, spec.Ports) {
		// A port another field manager added since our read: replace the list.
		out.Spec.Ports = spec.Ports
		if err := r.Client.Update(ctx, out, client.FieldOwner(keys.FieldManagerAgent)); err != nil {
			return nil, &stepError{"replacing the derived Service's ports", err}
		}
	}
	return out, nil
}

// errServiceReplaced: the derived Service the cache showed was already
// replaced (its UID precondition failed); the cache is behind.
var errServiceReplaced = errors.New("the derived Service was already re-created")

// serviceMatches reports whether the derived Service of the import named
// name already is what the agent would apply, so that a converged import
// costs no API write.
func serviceMatches(svc *corev1.Service, name string, spec corev1.ServiceSpec) bool {
	ownedByImport := false
	for _, o := range svc.OwnerReferences {
		ownedByImport = ownedByImport || o.Kind == "ServiceImport"
	}
	return !ownedByImport && svc.Labels[mcsv1beta1.LabelServiceName] == name &&
		samePorts(svc.Spec.Ports, spec.Ports) &&
		(svc.Spec.ClusterIP == corev1.ClusterIPNone) == (spec.ClusterIP == corev1.ClusterIPNone) &&
		equality.Semantic.DeepEqual(svc.Spec.IPFamilies, spec.IPFamilies) &&
		ptr.Deref(svc.Spec.IPFamilyPolicy, "") == ptr.Deref(spec.IPFamilyPolicy, "") &&
		svc.Spec.SessionAffinity == spec.SessionAffinity &&
		equality.Semantic.DeepEqual(svc.Spec.SessionAffinityConfig, spec.SessionAffinityConfig) &&
		ptr.Deref(svc.Spec.TrafficDistribution, "") == ptr.Deref(spec.TrafficDistribution, "") &&
		len(svc.Spec.Selector) == 0
}

func samePorts(a, b []corev1.ServicePort) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Port != b[i].Port || a[i].Protocol != b[i].Protocol || a[i].TargetPort != b[i].TargetPort || ptr.Deref(a[i].AppProtocol, "") != ptr.Deref(b[i].AppProtocol, "") {
			return false
		}
	}
	return true
}

// applySlices makes each source cluster's imported slices match its
// chunks (see PlanSlices), and deletes the slices of clusters or address
// families that left the import. A failing cluster does not stop the others
// or the deletion of stale slices; the errors are joined.
func (r *Reconciler) applySlices(ctx context.Context, key types.NamespacedName, svc *corev1.Service, desired *Desired, families []corev1.IPFamily, hints map[string][]discoveryv1.ForZone) error {
	derived := svc.Name
	list := &discoveryv1.EndpointSliceList{}
	// The cache's own objects, not copies: a Service of 50,000 endpoints
	// would otherwise be copied on every change. They are only read.
	if err := r.Client.List(ctx, list, client.InNamespace(key.Namespace), client.MatchingLabels{
		mcsv1beta1.LabelServiceName: key.Name, discoveryv1.LabelManagedBy: keys.EndpointSliceManagedBy,
	}, client.UnsafeDisableDeepCopy); err != nil {
		return &stepError{"listing EndpointSlices", err}
	}
	existing := map[string]map[string]*discoveryv1.EndpointSlice{}
	for i := range list.Items {
		s := &list.Items[i]
		c := s.Labels[mcsv1beta1.LabelSourceCluster]
		if existing[c] == nil {
			existing[c] = map[string]*discoveryv1.EndpointSlice{}
		}
		existing[c][s.Name] = s
	}
	memo := r.verified(key)
	regions := map[string]string{}
	byCluster := map[string]*registryv1.ImportCluster{}
	for _, c := range desired.Import.GetClusters() {
		regions[c.GetClusterId()] = c.GetRegion()
		byCluster[c.GetClusterId()] = c
	}
	var errs []error
	handled := map[string]bool{}
	planned := map[string]bool{} // slices that should exist
	clusters := make([]string, 0, len(desired.Chunks))
	for c := range desired.Chunks {
		clusters = append(clusters, c)
	}
	sort.Strings(clusters)
	for _, cluster := range clusters {
		if byCluster[cluster] == nil {
			continue
		}
		handled[cluster] = true
		plan := PlanSlices(derived+"-"+cluster, desired.Chunks[cluster], families, existing[cluster], r.EndpointsPerSlice, hints[cluster], memo.check)
		for _, p := range [][]Slice{plan.Apply, plan.Keep} {
			for _, sl := range p {
				planned[sl.Name] = true
			}
		}
		labels := SliceLabels(key.Name, derived, cluster, regions[cluster])
		annotations := SliceAnnotations(byCluster[cluster])
		for _, s := range plan.Apply {
			applied, err := r.applySlice(ctx, svc, s, labels, annotations)
			if err != nil {
				errs = append(errs, &stepError{fmt.Sprintf("applying EndpointSlice %s of cluster %s", s.Name, cluster), err})
				continue
			}
			memo.set(applied, s.Chunk, s.Part, s.Hints)
		}
		for _, name := range plan.Delete {
			if err := r.deleteSlice(ctx, key.Namespace, name); err != nil {
				errs = append(errs, &stepError{"deleting EndpointSlice " + name, err})
			}
			memo.forget(name)
		}
		// Slices whose endpoints are right may still need new labels or
		// annotations (a region or weight change), or a new owner (a
		// re-created derived Service).
		for _, k := range plan.Keep {
			s := existing[cluster][k.Name]
			if ownedMatch(s.Labels, labels, sliceLabelKeys) && ownedMatch(s.Annotations, annotations, sliceAnnotationKeys) && ownedBy(s, svc.UID) {
				memo.set(s, k.Chunk, k.Part, k.Hints)
				continue
			}
			relabelled := Slice{Name: s.Name, AddressType: s.AddressType, Endpoints: s.Endpoints, Ports: s.Ports}
			applied, err := r.applySlice(ctx, svc, relabelled, labels, annotations)
			if err != nil {
				errs = append(errs, &stepError{"relabelling EndpointSlice " + s.Name, err})
				continue
			}
			memo.set(applied, k.Chunk, k.Part, k.Hints)
		}
	}
	// Records of slices that should no longer exist, whoever deleted them.
	memo.retain(planned)
	// Slices of clusters that left the import.
	for cluster, ss := range existing {
		if handled[cluster] {
			continue
		}
		for name := range ss {
			if err := r.deleteSlice(ctx, key.Namespace, name); err != nil {
				errs = append(errs, &stepError{"deleting EndpointSlice " + name, err})
			}
			memo.forget(name)
		}
	}
	return errors.Join(errs...)
}

// The label and annotation keys the agent sets on imported slices; the
// others belong to whoever added them.
var (
	sliceLabelKeys = []string{discoveryv1.LabelServiceName, mcsv1beta1.LabelServiceName, mcsv1beta1.LabelSourceCluster,
		discoveryv1.LabelManagedBy, corev1.LabelTopologyRegion}
	sliceAnnotationKeys = []string{keys.AnnotationWeight, keys.AnnotationRegionalFrontend, keys.AnnotationPrivateLinkService, keys.AnnotationPLSApproval}
)

// ownedMatch reports whether have holds exactly want's values for the keys
// the agent owns: present with the value, or absent when want leaves it
// out (a cleared region or frontend must go).
func ownedMatch(have, want map[string]string, owned []string) bool {
	for _, k := range owned {
		h, hok := have[k]
		w, wok := want[k]
		if hok != wok || h != w {
			return false
		}
	}
	return true
}

// hasAll reports whether have holds every key of want with its value.
func hasAll(have, want map[string]string) bool {
	for k, v := range want {
		if cur, ok := have[k]; !ok || cur != v {
			return false
		}
	}
	return true
}

// applySlice applies one slice, owned by the derived Service svc as a
// Service's own slices are, and returns it as the API server stored it.
func (r *Reconciler) applySlice(ctx context.Context, svc *corev1.Service, s Slice, labels, annotations map[string]string) (*discoveryv1.EndpointSlice, error) {
	es := &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: svc.Namespace, Name: s.Name, Labels: labels, Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{serviceOwner(svc)},
		},
		AddressType: s.AddressType,
		Endpoints:   s.Endpoints,
		Ports:       s.Ports,
	}
	if es.Endpoints == nil {
		es.Endpoints = []discoveryv1.Endpoint{}
	}
	out := &discoveryv1.EndpointSlice{}
	if err := r.apply(ctx, es, out, ""); err != nil {
		return nil, err
	}
	return out, nil
}

func (r *Reconciler) deleteSlice(ctx context.Context, namespace, name string) error {
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	return client.IgnoreNotFound(r.Client.Delete(ctx, es))
}

// applyStatus writes the ServiceImport's status when it changed, and emits
// a Warning event on failure.
func (r *Reconciler) applyStatus(ctx context.Context, si *mcsv1beta1.ServiceImport, imp *registryv1.Import, reason string, failure error, loc *locality.Decision, networks *metav1.Condition) error {
	st := mcsv1beta1.ServiceImportStatus{EndpointSliceObjects: mcsv1beta1.EndpointSliceObjectsAbsent}
	for _, c := range imp.GetClusters() {
		st.Clusters = append(st.Clusters, mcsv1beta1.ClusterStatus{Cluster: c.GetClusterId()})
	}
	cond := metav1.Condition{Type: string(mcsv1beta1.ServiceImportConditionReady), Status: metav1.ConditionTrue, Reason: string(mcsv1beta1.ServiceImportReasonReady), Message: "the derived Service and EndpointSlices are applied", ObservedGeneration: si.Generation}
	if failure != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, reason, failure.Error()
	} else {
		st.EndpointSliceObjects = mcsv1beta1.EndpointSliceObjectsPresent
	}
	st.Conditions = append([]metav1.Condition(nil), si.Status.Conditions...)
	meta.SetStatusCondition(&st.Conditions, cond)
	meta.SetStatusCondition(&st.Conditions, conflictCondition(imp, si.Generation))
	r.setLocality(si, &st.Conditions, loc, failure)
	if networks != nil {
		meta.SetStatusCondition(&st.Conditions, *networks)
	} else {
		meta.RemoveStatusCondition(&st.Conditions, keys.ConditionNetworks)
	}
	if equality.Semantic.DeepEqual(st, si.Status) {
		return nil
	}
	// One event per change of status, not per reconcile.
	if failure != nil {
		r.Recorder.Eventf(si, nil, corev1.EventTypeWarning, reason, "Import", "%s", failure.Error())
	}
	patch := &mcsv1beta1.ServiceImport{
		TypeMeta:   metav1.TypeMeta{APIVersion: mcsv1beta1.GroupVersion.String(), Kind: "ServiceImport"},
		ObjectMeta: metav1.ObjectMeta{Namespace: si.Namespace, Name: si.Name},
		Status:     st,
	}
	out := &mcsv1beta1.ServiceImport{}
	if err := r.apply(ctx, patch, out, "status"); err != nil {
		return fmt.Errorf("applying status of ServiceImport %s/%s: %w", si.Namespace, si.Name, err)
	}
	r.written.record(si, out, time.Now())
	return nil
}

// conflictCondition reports the conflicts between the exporting clusters,
// as the registry found them.
func conflictCondition(imp *registryv1.Import, generation int64) metav1.Condition {
	c := metav1.Condition{Type: keys.ConditionConflict, Status: metav1.ConditionFalse, Reason: keys.ReasonNoConflicts,
		Message: "the exporting clusters agree", ObservedGeneration: generation}
	if len(imp.GetConflicts()) == 0 {
		return c
	}
	msgs := make([]string, 0, len(imp.GetConflicts()))
	for _, cc := range imp.GetConflicts() {
		msgs = append(msgs, cc.GetMessage())
	}
	c.Status = metav1.ConditionTrue
	c.Reason = imp.GetConflicts()[0].GetReason() + "Conflict"
	c.Message = strings.Join(msgs, "; ")
	return c
}

// remove deletes an import's objects; owner references take the derived
// Service and slices, but they are deleted explicitly so nothing waits for
// the garbage collector.
func (r *Reconciler) remove(ctx context.Context, key types.NamespacedName) error {
	r.memo.drop(key)
	r.written.forget(key)
	if r.EastWest != nil {
		r.EastWest.Publisher.DeleteRoute(key)
		r.EastWest.Ports.Release(key)
	}
	si := &mcsv1beta1.ServiceImport{}
	if err := r.Client.Get(ctx, key, si); err == nil && si.Labels[keys.LabelManagedBy] == keys.ManagedByAgent {
		if err := r.Client.Delete(ctx, si); client.IgnoreNotFound(err) != nil {
			return err
		}
		r.Log.Info("removed import", "import", key.String())
	} else if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	svc := &corev1.Service{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: DerivedName(key.Namespace, key.Name)}, svc); err == nil && svc.Labels[keys.LabelManagedBy] == keys.ManagedByAgent {
		if err := r.Client.Delete(ctx, svc); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return client.IgnoreNotFound(r.Client.DeleteAllOf(ctx, &discoveryv1.EndpointSlice{}, client.InNamespace(key.Namespace), client.MatchingLabels{
		mcsv1beta1.LabelServiceName: key.Name, discoveryv1.LabelManagedBy: keys.EndpointSliceManagedBy,
	}))
}

// apply server-side applies obj (typed, with TypeMeta set) as the agent and
// decodes the result into out. subresource "status" applies the status
// with the status field manager.
func (r *Reconciler) apply(ctx context.Context, obj runtime.Object, out runtime.Object, subresource string) error {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	unstructured.RemoveNestedField(content, "metadata", "creationTimestamp")
	if subresource == "" {
		delete(content, "status")
	} else {
		delete(content, "spec")
	}
	u := &unstructured.Unstructured{Object: content}
	ac := client.ApplyConfigurationFromUnstructured(u)
	if subresource == "status" {
		err = r.Client.Status().Apply(ctx, ac, client.FieldOwner(keys.FieldManagerAgentStatus), client.ForceOwnership)
	} else {
		err = r.Client.Apply(ctx, ac, client.FieldOwner(keys.FieldManagerAgent), client.ForceOwnership)
	}
	if err != nil {
		return err
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out)
}

// serviceOwner is the owner reference of an imported slice to its derived
// Service: deleting the Service takes its slices.
func serviceOwner(svc *corev1.Service) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(false),
	}
}

// ownedBy reports whether o's controller is the object with uid.
func ownedBy(o metav1.Object, uid types.UID) bool {
	ref := metav1.GetControllerOfNoCopy(o)
	return ref != nil && ref.UID == uid
}

// eventTarget is what an import's events are about: its ServiceImport, or
// a reference to the one it will have when none exists yet.
func eventTarget(si *mcsv1beta1.ServiceImport, key types.NamespacedName) runtime.Object {
	if si != nil && si.UID != "" {
		return si
	}
	return &mcsv1beta1.ServiceImport{
		TypeMeta:   metav1.TypeMeta{APIVersion: mcsv1beta1.GroupVersion.String(), Kind: "ServiceImport"},
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
	}
}

// PendingTracker counts imports that wait for their namespace.
type PendingTracker struct {
	gauge   prometheus.Gauge
	mu      sync.Mutex
	pending map[types.NamespacedName]bool
}

// NewPendingTracker registers the fleetnet_agent_imports_pending gauge.
func NewPendingTracker(reg prometheus.Registerer) *PendingTracker {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "fleetnet_agent_imports_pending", Help: "Imports waiting for their namespace to exist."})
	if reg != nil {
		reg.MustRegister(g)
	}
	return &PendingTracker{gauge: g, pending: map[types.NamespacedName]bool{}}
}

// Wait marks an import as pending.
func (p *PendingTracker) Wait(k types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending[k] = true
	p.gauge.Set(float64(len(p.pending)))
}

// Done marks an import as no longer pending.
func (p *PendingTracker) Done(k types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.pending, k)
	p.gauge.Set(float64(len(p.pending)))
}

// metadataApplied reports whether the object (a ServiceImport or a derived
// Service) carries the desired labels and annotations and no key the agent
// applied earlier that is no longer desired (read from the agent's managed
// fields, so that keys others added are left alone and never fought over).
func metadataApplied(o metav1.Object, labels, annotations map[string]string) bool {
	if !hasAll(o.GetLabels(), labels) || !hasAll(o.GetAnnotations(), annotations) {
		return false
	}
	owned := appliedFields(o, keys.FieldManagerAgent)
	if owned == nil {
		return true
	}
	for k := range o.GetLabels() {
		if _, want := labels[k]; !want && owned.Has(fieldpath.MakePathOrDie("metadata", "labels", k)) {
			return false
		}
	}
	for k := range o.GetAnnotations() {
		if _, want := annotations[k]; !want && owned.Has(fieldpath.MakePathOrDie("metadata", "annotations", k)) {
			return false
		}
	}
	return true
}

// withoutForeign leaves out of the wanted annotations those that o holds
// with another value set by someone else (not in the agent's applied
// fields): an operator's topology-mode on a derived Service stays, rather
// than the agent forcing its own back after each change and a GitOps tool
// putting the operator's back.
func withoutForeign(o metav1.Object, annotations map[string]string) map[string]string {
	var owned *fieldpath.Set
	out, cloned := annotations, false
	for k, v := range annotations {
		have, ok := o.GetAnnotations()[k]
		if !ok || have == v {
			continue
		}
		if owned == nil {
			if owned = appliedFields(o, keys.FieldManagerAgent); owned == nil {
				owned = &fieldpath.Set{}
			}
		}
		if owned.Has(fieldpath.MakePathOrDie("metadata", "annotations", k)) {
			continue // ours, changed since: applied again
		}
		if !cloned {
			out, cloned = maps.Clone(annotations), true
		}
		delete(out, k)
	}
	return out
}

// appliedFields returns the fields manager owns through server-side apply,
// or nil when it owns none (or they cannot be read).
func appliedFields(o metav1.Object, manager string) *fieldpath.Set {
	for _, mf := range o.GetManagedFields() {
		if mf.Manager != manager || mf.Operation != metav1.ManagedFieldsOperationApply || mf.FieldsV1 == nil || mf.Subresource != "" {
			continue
		}
		set := &fieldpath.Set{}
		if err := set.FromJSON(mf.FieldsV1.GetRawReader()); err != nil {
			return nil
		}
		return set
	}
	return nil
}
