package identity

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"

	aboutv1alpha1 "github.com/fleetnet/fleetnet/api/about/v1alpha1"
	"github.com/fleetnet/fleetnet/api/keys"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/registry/validate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Ignored is a ClusterProperty the agent does not publish, and why.
type Ignored struct {
	Name, Value string
	Why         string
}

func (i Ignored) String() string {
	return fmt.Sprintf("ClusterProperty %s=%q is not published: %s", i.Name, i.Value, i.Why)
}

// Properties are the cluster's properties as the agent publishes them with
// its registration, so that exports' fleetnet.dev/export-to-selector can
// match them: the ClusterProperty objects whose name is a label key and
// value a label value (what a label selector can match; KEP-2149 allows
// values of 128k characters, which no selector could name), in name order
// up to the registry's bounds; and the well-known cluster.clusterset.k8s.io
// and clusterset.k8s.io always, with the identity the agent registers
// under (from flags or from those very objects). It is a pure function of
// its inputs.
func Properties(props []aboutv1alpha1.ClusterProperty, c *registryv1.Cluster) (map[string]string, []Ignored) {
	out := map[string]string{
		aboutv1alpha1.ClusterIDPropertyName:  c.GetId(),
		aboutv1alpha1.ClusterSetPropertyName: c.GetClustersetId(),
	}
	size := 0
	for k, v := range out {
		size += len(k) + len(v)
	}
	sorted := slices.Clone(props)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var ignored []Ignored
	for _, p := range sorted {
		name, value := p.Name, p.Spec.Value
		if name == aboutv1alpha1.ClusterIDPropertyName || name == aboutv1alpha1.ClusterSetPropertyName {
			if own := out[name]; value != own {
				ignored = append(ignored, Ignored{name, value, fmt.Sprintf("the agent registers as %q (its identity comes from flags, or changed since it started)", own)})
			}
			continue
		}
		if errs := validate.ClusterProperty(name, value, nil); len(errs) > 0 {
			var why []string
			for _, e := range errs {
				why = append(why, e.Detail)
			}
			ignored = append(ignored, Ignored{name, value, strings.Join(why, "; ")})
			continue
		}
		if len(out) >= validate.MaxClusterProperties || size+len(name)+len(value) > validate.MaxClusterPropertiesBytes {
			ignored = append(ignored, Ignored{name, value, fmt.Sprintf("beyond the registry's bounds of %d properties and %d bytes", validate.MaxClusterProperties, validate.MaxClusterPropertiesBytes)})
			continue
		}
		out[name] = value
		size += len(name) + len(value)
	}
	return out, ignored
}

// PropertyWatcher keeps the cluster's published properties up to date: on
// every change of a ClusterProperty it computes Properties again and hands
// them to Update (the registrar, which registers again when they differ),
// and records a Warning event on each ClusterProperty it newly ignores.
type PropertyWatcher struct {
	Client   client.Client
	Cluster  *registryv1.Cluster
	Update   func(map[string]string)
	Recorder events.EventRecorder
	Log      *slog.Logger

	// ignored are the messages already reported, by property name.
	ignored map[string]string
}

// SetupWithManager watches ClusterProperties: every event maps to one
// request, so that a burst of changes is one recomputation.
func (w *PropertyWatcher) SetupWithManager(mgr ctrl.Manager) error {
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: "properties"}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("clusterproperties").
		Watches(&aboutv1alpha1.ClusterProperty{}, one).
		Complete(w)
}

// Reconcile lists the ClusterProperties and publishes what Properties makes
// of them.
func (w *PropertyWatcher) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	list := &aboutv1alpha1.ClusterPropertyList{}
	if err := w.Client.List(ctx, list); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing ClusterProperties: %w", err)
	}
	props, ignored := Properties(list.Items, w.Cluster)
	w.report(list.Items, ignored)
	w.Update(props)
	return reconcile.Result{}, nil
}

// report logs each ignored property and records a Warning event on it,
// once per property and message.
func (w *PropertyWatcher) report(items []aboutv1alpha1.ClusterProperty, ignored []Ignored) {
	byName := map[string]*aboutv1alpha1.ClusterProperty{}
	for i := range items {
		byName[items[i].Name] = &items[i]
	}
	now := map[string]string{}
	for _, ig := range ignored {
		msg := ig.String()
		now[ig.Name] = msg
		if w.ignored[ig.Name] == msg {
			continue
		}
		w.Log.Info(msg)
		if obj := byName[ig.Name]; obj != nil && w.Recorder != nil {
			w.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, keys.ReasonClusterPropertyIgnored, "Publish", "%s", msg)
		}
	}
	w.ignored = now
}
