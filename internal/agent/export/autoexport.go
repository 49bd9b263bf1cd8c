package export

import (
	"context"
	"log/slog"

	"github.com/fleetnet/fleetnet/api/keys"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// AutoExporter gives every Service labelled fleetnet.dev/export=true a
// managed ServiceExport, and removes the managed one when the label goes. A
// hand-made ServiceExport is never changed or removed; when it is deleted
// from a labelled Service, a managed one takes its place.
type AutoExporter struct {
	Client  client.Client
	Log     *slog.Logger
	InScope func(namespace string) bool
}

// SetupWithManager watches Services and ServiceExports of the same name.
func (a *AutoExporter) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("autoexport").
		For(&corev1.Service{}).
		Watches(&mcsv1beta1.ServiceExport{}, &handler.EnqueueRequestForObject{}).
		Complete(a)
}

// Reconcile makes the managed ServiceExport match the Service's label.
func (a *AutoExporter) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if !a.InScope(req.Namespace) {
		return reconcile.Result{}, nil
	}
	svc := &corev1.Service{}
	want := false
	if err := a.Client.Get(ctx, req.NamespacedName, svc); err == nil {
		want = svc.DeletionTimestamp.IsZero() && svc.Labels[keys.LabelExport] == "true"
	} else if !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	se := &mcsv1beta1.ServiceExport{}
	err := a.Client.Get(ctx, req.NamespacedName, se)
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	exists := err == nil
	managed := exists && se.Labels[keys.LabelAutoExport] == "true"
	switch {
	case want && !exists:
		se = &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{
			Namespace: req.Namespace, Name: req.Name,
			Labels: map[string]string{keys.LabelAutoExport: "true"},
		}}
		if err := a.Client.Create(ctx, se); err != nil && !apierrors.IsAlreadyExists(err) {
			return reconcile.Result{}, err
		}
		a.Log.Info("created managed ServiceExport for labelled Service", "service", req.String())
	case !want && managed && se.DeletionTimestamp.IsZero():
		if err := a.Client.Delete(ctx, se); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, err
		}
		a.Log.Info("removed managed ServiceExport; the Service is no longer labelled", "service", req.String())
	}
	return reconcile.Result{}, nil
}
