package export

import (
	"context"
	"log/slog"
	"time"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/agent/publish"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Resyncer runs at start (once the cache is synced) and every Period: it
// reconciles every ServiceExport and deletes registry exports that have no
// local ServiceExport. Each delete is
// conditional on the revision it listed, so an export written while the
// resync runs is never deleted by it.
type Resyncer struct {
	Client    registryv1.RegistryClient
	Cache     cache.Cache
	Reader    client.Reader
	Cluster   string
	Publisher *publish.Publisher
	Events    chan event.GenericEvent
	Period    time.Duration
	Log       *slog.Logger
	// Completed counts finished resyncs.
	Completed prometheus.Counter
	// Registered reports whether the cluster holds a lease.
	Registered func() bool
}

// Start implements manager.Runnable.
func (r *Resyncer) Start(ctx context.Context) error {
	if !r.Cache.WaitForCacheSync(ctx) {
		return nil
	}
	first := true
	for {
		if r.Registered() {
			if err := r.resync(ctx); err != nil {
				r.Log.Info("resync did not complete; will retry", "cluster", r.Cluster, "err", err)
			} else {
				first = false
				r.Completed.Inc()
			}
		}
		wait := r.Period
		if first {
			wait = time.Second // not registered yet, or the registry failed
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// NeedLeaderElection: only the leader writes.
func (r *Resyncer) NeedLeaderElection() bool { return true }

func (r *Resyncer) resync(ctx context.Context) error {
	resp, err := r.Client.ListExports(ctx, &registryv1.ListExportsRequest{ClusterId: r.Cluster})
	if err != nil {
		return err
	}
	local := &mcsv1beta1.ServiceExportList{}
	if err := r.Reader.List(ctx, local); err != nil {
		return err
	}
	have := map[types.NamespacedName]bool{}
	for i := range local.Items {
		se := &local.Items[i]
		have[types.NamespacedName{Namespace: se.Namespace, Name: se.Name}] = true
		select {
		case r.Events <- event.GenericEvent{Object: se}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	deleted := 0
	for _, e := range resp.GetExports() {
		k := types.NamespacedName{Namespace: e.GetKey().GetNamespace(), Name: e.GetKey().GetName()}
		if have[k] {
			continue
		}
		if err := r.Publisher.Withdraw(ctx, publish.ExportKey{Namespace: k.Namespace, Name: k.Name}, e.GetRevision()); err != nil {
			return err
		}
		deleted++
	}
	r.Log.Info("export resync complete", "cluster", r.Cluster, "local", len(local.Items), "registry", len(resp.GetExports()), "deletedStale", deleted)
	return nil
}
