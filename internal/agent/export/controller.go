package export

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/agent/publish"
	registryclient "github.com/fleetnet/fleetnet/internal/registry/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Reconciler publishes ServiceExports.
type Reconciler struct {
	Client    client.Client
	Cluster   string
	Publisher *publish.Publisher
	Status    *StatusWatcher
	Recorder  events.EventRecorder
	Log       *slog.Logger
	// InScope says whether a namespace is watched (--watch-namespaces);
	// exports outside are withdrawn and their finalizer released.
	InScope func(namespace string) bool
	// Registered reports whether the cluster holds a lease.
	Registered func() bool
	// AzureLoadBalancerID is the cluster's public Azure load balancer
	// (--azure-load-balancer-id), for exports' regional frontends.
	AzureLoadBalancerID string

	retryOnce sync.Once
	retry     workqueue.TypedRateLimiter[reconcile.Request]
	chunks    chunkCache
}

// SetupWithManager registers the controller: ServiceExports, their Services
// and EndpointSlices, and the registry's status events.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	sameName := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}}}
	})
	byServiceLabel := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		name := o.GetLabels()[discoveryv1.LabelServiceName]
		if name == "" || o.GetLabels()[discoveryv1.LabelManagedBy] == keys.EndpointSliceManagedBy {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("serviceexport").
		For(&mcsv1beta1.ServiceExport{}).
		Watches(&corev1.Service{}, sameName).
		Watches(&discoveryv1.EndpointSlice{}, byServiceLabel).
		WatchesRawSource(source.Channel(r.Status.Events, &handler.EnqueueRequestForObject{})).
		Complete(r)
}

// Reconcile compares the ServiceExport, its Service and EndpointSlices with
// what the registry holds, and writes the difference.
//
// An unreachable registry is waited for, not an error: the export is tried
// again after a backoff of its own (at most retryMax), and at once when the
// registrar sees the registry answer again (see lease.Registrar.OnRecovered).
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	r.retryOnce.Do(func() {
		r.retry = workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](200*time.Millisecond, retryMax)
	})
	res, err := r.reconcile(ctx, req)
	if registryclient.Unreachable(err) {
		wait := r.retry.When(req)
		r.Log.Info("registry unreachable; export waits", "export", req.String(), "err", err, "retryIn", wait)
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	r.retry.Forget(req)
	return res, err
}

// retryMax bounds the wait between attempts while the registry is away.
const retryMax = 30 * time.Second

func (r *Reconciler) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	key := publish.ExportKey{Namespace: req.Namespace, Name: req.Name}
	se := &mcsv1beta1.ServiceExport{}
	if err := r.Client.Get(ctx, req.NamespacedName, se); apierrors.IsNotFound(err) {
		return reconcile.Result{}, r.withdraw(ctx, key)
	} else if err != nil {
		return reconcile.Result{}, err
	}
	if !se.DeletionTimestamp.IsZero() || !r.InScope(se.Namespace) {
		// Withdrawn even without the finalizer: it is added after the
		// first publish, so a deletion may come between the two.
		if err := r.withdraw(ctx, key); err != nil {
			return reconcile.Result{}, err
		}
		if !controllerutil.ContainsFinalizer(se, keys.FinalizerServiceExport) {
			return reconcile.Result{}, nil
		}
		patch := client.MergeFrom(se.DeepCopy())
		controllerutil.RemoveFinalizer(se, keys.FinalizerServiceExport)
		return reconcile.Result{}, client.IgnoreNotFound(r.Client.Patch(ctx, se, patch))
	}

	orig := se.DeepCopy()
	svc := &corev1.Service{}
	if err := r.Client.Get(ctx, req.NamespacedName, svc); apierrors.IsNotFound(err) {
		svc = nil
	} else if err != nil {
		return reconcile.Result{}, err
	}
	exp, invalid := BuildExport(r.Cluster, se, svc, r.AzureLoadBalancerID)
	if invalid != nil {
		setCondition(se, mcsv1beta1.ServiceExportConditionValid, metav1.ConditionFalse, invalid.Reason, invalid.Message)
		setCondition(se, mcsv1beta1.ServiceExportConditionReady, metav1.ConditionFalse, string(mcsv1beta1.ServiceExportReasonPending), "not exported: "+invalid.Message)
		meta.RemoveStatusCondition(&se.Status.Conditions, string(mcsv1beta1.ServiceExportConditionConflict))
		if err := r.withdraw(ctx, key); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, r.updateStatus(ctx, orig, se, invalid.Reason, invalid.Message)
	}
	setCondition(se, mcsv1beta1.ServiceExportConditionValid, metav1.ConditionTrue, string(mcsv1beta1.ServiceExportReasonValid), "the Service can be exported")

	if r.Registered != nil && !r.Registered() {
		setCondition(se, mcsv1beta1.ServiceExportConditionReady, metav1.ConditionFalse, keys.ReasonRegistryUnavailable, "waiting for this cluster's registration with the registry")
		return reconcile.Result{}, r.updateStatus(ctx, orig, se, "", "")
	}
	sliceList := &discoveryv1.EndpointSliceList{}
	// The cache's own objects, not copies (they are only read): a Service
	// of 50,000 endpoints would otherwise be copied on every change.
	if err := r.Client.List(ctx, sliceList, client.InNamespace(se.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: se.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, err
	}
	writes, err := r.Publisher.Publish(ctx, exp, r.chunks.build(r.Cluster, se, sliceList.Items))
	if err != nil {
		reason, ready := keys.ReasonRegistryUnavailable, "publishing to the registry failed: "+err.Error()
		if status.Code(err) == codes.InvalidArgument {
			reason = keys.ReasonRegistryRejected
			setCondition(se, mcsv1beta1.ServiceExportConditionValid, metav1.ConditionFalse, reason, "the registry refused the export: "+status.Convert(err).Message())
		}
		setCondition(se, mcsv1beta1.ServiceExportConditionReady, metav1.ConditionFalse, string(mcsv1beta1.ServiceExportReasonFailed), ready)
		if serr := r.updateStatus(ctx, orig, se, reason, ready); serr != nil {
			return reconcile.Result{}, serr
		}
		if reason == keys.ReasonRegistryRejected {
			return reconcile.Result{}, nil // retrying the same input will not help
		}
		return reconcile.Result{}, err
	}
	if writes > 0 {
		r.Log.Info("published export", "export", req.String(), "writes", writes)
	}
	// The finalizer comes after the first publish, off the path from a new
	// ServiceExport to its importers. Nothing published is left behind
	// without it: a ServiceExport deleted before it is added is withdrawn
	// when the reconcile finds it gone (or being deleted), and one whose
	// agent stopped in between by the Resyncer, which deletes registry
	// exports that have no ServiceExport.
	if !controllerutil.ContainsFinalizer(orig, keys.FinalizerServiceExport) {
		// Patched on a copy: the answer would replace the conditions
		// computed so far in se.
		withFinalizer := orig.DeepCopy()
		controllerutil.AddFinalizer(withFinalizer, keys.FinalizerServiceExport)
		if err := r.Client.Patch(ctx, withFinalizer, client.MergeFrom(orig)); err != nil {
			return reconcile.Result{}, err
		}
		orig.Finalizers, se.Finalizers = withFinalizer.Finalizers, slices.Clone(withFinalizer.Finalizers)
	}

	st, synced := r.Status.Status(key)
	switch {
	case st != nil && st.GetParticipating():
		setCondition(se, mcsv1beta1.ServiceExportConditionReady, metav1.ConditionTrue, string(mcsv1beta1.ServiceExportReasonReady), readyMessage(exp, st))
	default:
		setCondition(se, mcsv1beta1.ServiceExportConditionReady, metav1.ConditionFalse, string(mcsv1beta1.ServiceExportReasonPending), "published; waiting for the registry to confirm")
	}
	if st != nil || synced {
		if len(st.GetConflicts()) == 0 {
			setCondition(se, mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionFalse, string(mcsv1beta1.ServiceExportReasonNoConflicts), "no conflicts with other clusters' exports")
		} else {
			var reasons, msgs []string
			for _, c := range st.GetConflicts() {
				reasons = append(reasons, c.GetReason())
				msgs = append(msgs, c.GetMessage())
			}
			setCondition(se, mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionTrue, reasons[0]+"Conflict", strings.Join(msgs, "; "))
			// A Warning event when the conflict appears or changes (updateStatus
			// emits one per change of the conditions, not per reconcile).
			if c := meta.FindStatusCondition(orig.Status.Conditions, string(mcsv1beta1.ServiceExportConditionConflict)); c == nil || c.Message != strings.Join(msgs, "; ") {
				return reconcile.Result{}, r.updateStatus(ctx, orig, se, reasons[0]+"Conflict", strings.Join(msgs, "; "))
			}
		}
	}
	return reconcile.Result{}, r.updateStatus(ctx, orig, se, "", "")
}

// readyMessage says where a participating export goes: the clusterset,
// or, scoped to the clusters named (keys.AnnotationExportTo) and those a
// selector matches (keys.AnnotationExportToSelector), the ones the
// registry sends it to.
func readyMessage(exp *registryv1.Export, st *registryv1.ExportStatus) string {
	var scope, annotations []string
	if to := exp.GetExportTo(); len(to) > 0 {
		scope, annotations = append(scope, strings.Join(to, ", ")), append(annotations, keys.AnnotationExportTo)
	}
	if sel := exp.GetExportToSelector(); sel != "" {
		scope, annotations = append(scope, "the clusters matching "+sel), append(annotations, keys.AnnotationExportToSelector)
	}
	if len(scope) == 0 {
		return "exported to the clusterset"
	}
	sent := "none registered yet"
	if by := st.GetImportedBy(); len(by) > 0 {
		sent = strings.Join(by, ", ")
	}
	return fmt.Sprintf("exported to %s only (%s); imported by: %s", strings.Join(scope, " and "), strings.Join(annotations, ", "), sent)
}

func (r *Reconciler) withdraw(ctx context.Context, key publish.ExportKey) error {
	r.chunks.forget(key)
	if _, _, ok := r.Publisher.Acknowledged(key); !ok {
		if st, _ := r.Status.Status(key); st == nil {
			return nil // nothing of ours in the registry
		}
	}
	if err := r.Publisher.Withdraw(ctx, key, 0); err != nil {
		return err
	}
	r.Log.Info("withdrew export", "export", key.Namespace+"/"+key.Name)
	return nil
}

// updateStatus writes the conditions when they changed and then, when a
// reason is given, emits a Warning event: one per change, not per reconcile.
func (r *Reconciler) updateStatus(ctx context.Context, orig, se *mcsv1beta1.ServiceExport, warnReason, warnMessage string) error {
	if conditionsEqual(orig.Status.Conditions, se.Status.Conditions) {
		return nil
	}
	if warnReason != "" && r.Recorder != nil {
		r.Recorder.Eventf(se, nil, corev1.EventTypeWarning, warnReason, "Export", "%s", warnMessage)
	}
	if err := r.Client.Status().Patch(ctx, se, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("updating status of ServiceExport %s/%s: %w", se.Namespace, se.Name, err)
	}
	return nil
}

func setCondition(se *mcsv1beta1.ServiceExport, t mcsv1beta1.ServiceExportConditionType, s metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&se.Status.Conditions, metav1.Condition{
		Type: string(t), Status: s, Reason: reason, Message: message, ObservedGeneration: se.Generation,
	})
}

func conditionsEqual(a, b []metav1.Condition) bool {
	if len(a) != len(b) {
		return false
	}
	for _, c := range a {
		d := meta.FindStatusCondition(b, c.Type)
		if d == nil || d.Status != c.Status || d.Reason != c.Reason || d.Message != c.Message || d.ObservedGeneration != c.ObservedGeneration {
			return false
		}
	}
	return true
}
