package importer

import (
	"context"
	"time"

	"github.com/fleetnet/fleetnet/api/keys"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Resyncer reconciles every import the registry holds, every managed
// ServiceImport and every derived Service every Period, so repair is
// bounded even if an event is missed (a derived Service is not owned by
// its ServiceImport, so one left behind is found here).
type Resyncer struct {
	Stream *Stream
	Cache  cache.Cache
	Reader client.Reader
	Events chan event.GenericEvent
	Period time.Duration
}

// Start implements manager.Runnable.
func (r *Resyncer) Start(ctx context.Context) error {
	if !r.Cache.WaitForCacheSync(ctx) {
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(r.Period):
		}
		wanted, _ := r.Stream.Keys()
		for _, k := range wanted {
			r.enqueue(ctx, k.Namespace, k.Name)
		}
		list := &mcsv1beta1.ServiceImportList{}
		if err := r.Reader.List(ctx, list, client.MatchingLabels{keys.LabelManagedBy: keys.ManagedByAgent}); err == nil {
			for _, si := range list.Items {
				r.enqueue(ctx, si.Namespace, si.Name)
			}
		}
		services := &corev1.ServiceList{}
		if err := r.Reader.List(ctx, services, client.MatchingLabels{keys.LabelManagedBy: keys.ManagedByAgent}); err == nil {
			for _, svc := range services.Items {
				if name := svc.Labels[mcsv1beta1.LabelServiceName]; name != "" {
					r.enqueue(ctx, svc.Namespace, name)
				}
			}
		}
	}
}

func (r *Resyncer) enqueue(ctx context.Context, namespace, name string) {
	si := &mcsv1beta1.ServiceImport{}
	si.Namespace, si.Name = namespace, name
	select {
	case r.Events <- event.GenericEvent{Object: si}:
	case <-ctx.Done():
	}
}

// NeedLeaderElection: only the leader writes imports.
func (r *Resyncer) NeedLeaderElection() bool { return true }
