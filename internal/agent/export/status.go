package export

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/agent/publish"
	"github.com/fleetnet/fleetnet/internal/registry/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"sigs.k8s.io/controller-runtime/pkg/event"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// StatusWatcher follows the registry's status of this cluster's exports.
// It feeds the Conflict condition, and it notices when the registry stopped
// holding an export or some of its endpoints that we had written: it then
// forgets them in the publisher and triggers a reconcile, which writes them
// again. It compares only once the stream has passed the revision of our
// write, so a status that merely lags is never taken for a loss.
type StatusWatcher struct {
	Client    registryv1.RegistryClient
	Cluster   string
	Publisher *publish.Publisher
	Log       *slog.Logger
	// Events triggers reconciles of ServiceExports.
	Events chan event.GenericEvent
	// Changed, when set, is called after an export's status changed (the
	// east-west gateway's model carries each export's audience).
	Changed func()

	mu       sync.Mutex
	statuses map[publish.ExportKey]*registryv1.ExportStatus
	rev      int64
	synced   bool
}

// Status returns the registry's status of an export, and whether the
// watcher holds a synced view.
func (w *StatusWatcher) Status(k publish.ExportKey) (*registryv1.ExportStatus, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.statuses[k], w.synced
}

// Start watches until ctx ends, resuming after every interruption.
func (w *StatusWatcher) Start(ctx context.Context) error {
	w.statuses = map[publish.ExportKey]*registryv1.ExportStatus{}
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		err := w.watch(ctx)
		if ctx.Err() != nil {
			return nil
		}
		w.Log.Info("registry status watch ended; resuming", "cluster", w.Cluster, "code", status.Code(err).String(), "err", err, "retryIn", backoff)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
		if status.Code(err) == codes.OK {
			backoff = 200 * time.Millisecond
		}
	}
	return nil
}

// NeedLeaderElection: statuses matter only where exports are written.
func (w *StatusWatcher) NeedLeaderElection() bool { return true }

func (w *StatusWatcher) watch(ctx context.Context) error {
	w.mu.Lock()
	resume := w.rev
	w.mu.Unlock()
	stream, err := w.Client.Watch(ctx, &registryv1.WatchRequest{ResumeRevision: resume, ExportStatusClusterId: w.Cluster}, client.WaitForConnection())
	if err != nil {
		return err
	}
	var pending map[publish.ExportKey]*registryv1.ExportStatus // a snapshot being received
	for {
		ev, err := stream.Recv()
		if err != nil {
			return err
		}
		switch e := ev.GetEvent().(type) {
		case *registryv1.WatchEvent_Reset_:
			pending = map[publish.ExportKey]*registryv1.ExportStatus{}
		case *registryv1.WatchEvent_ExportStatus:
			k := publish.ExportKey{Namespace: e.ExportStatus.GetKey().GetNamespace(), Name: e.ExportStatus.GetKey().GetName()}
			if pending != nil {
				pending[k] = e.ExportStatus
			} else {
				w.set(ctx, k, e.ExportStatus, ev.GetRevision())
			}
		case *registryv1.WatchEvent_ExportStatusDelete:
			k := publish.ExportKey{Namespace: e.ExportStatusDelete.GetNamespace(), Name: e.ExportStatusDelete.GetName()}
			if pending != nil {
				delete(pending, k)
			} else {
				w.set(ctx, k, nil, ev.GetRevision())
			}
		case *registryv1.WatchEvent_Synced:
			w.mu.Lock()
			var changed []publish.ExportKey
			if pending != nil {
				for k := range w.statuses {
					if _, ok := pending[k]; !ok {
						changed = append(changed, k)
					}
				}
				for k := range pending {
					changed = append(changed, k)
				}
				w.statuses = pending
				pending = nil
			}
			w.rev, w.synced = ev.GetRevision(), true
			w.mu.Unlock()
			for _, k := range changed {
				w.trigger(ctx, k)
			}
			w.checkLosses(ctx)
		default:
			w.mu.Lock()
			w.rev = max(w.rev, ev.GetRevision())
			w.mu.Unlock()
		}
	}
}

func (w *StatusWatcher) set(ctx context.Context, k publish.ExportKey, st *registryv1.ExportStatus, rev int64) {
	w.mu.Lock()
	if st == nil {
		delete(w.statuses, k)
	} else {
		w.statuses[k] = st
	}
	w.rev = max(w.rev, rev)
	w.mu.Unlock()
	w.trigger(ctx, k)
	w.checkLosses(ctx)
}

// checkLosses compares what the publisher believes the registry holds with
// what the registry reports, for every write the stream has passed.
func (w *StatusWatcher) checkLosses(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.synced {
		return
	}
	for _, k := range w.Publisher.Keys() {
		exportRev, chunkRevs, ok := w.Publisher.Acknowledged(k)
		if !ok || exportRev > w.rev {
			continue
		}
		st := w.statuses[k]
		lost := st == nil
		if !lost {
			held := map[string]bool{}
			for _, c := range st.GetEndpointChunks() {
				held[c] = true
			}
			for _, name := range slices.Sorted(maps.Keys(chunkRevs)) {
				if chunkRevs[name] <= w.rev && !held[name] {
					lost = true
				}
			}
		}
		if lost {
			w.Log.Info("the registry lost records of this export; republishing", "export", k.Namespace+"/"+k.Name)
			w.Publisher.Forget(&k)
			go w.trigger(ctx, k)
		}
	}
}

// trigger asks for a reconcile of the export. It gives up when ctx ends:
// the controller stops reading Events at shutdown.
func (w *StatusWatcher) trigger(ctx context.Context, k publish.ExportKey) {
	if w.Changed != nil {
		w.Changed()
	}
	se := &mcsv1beta1.ServiceExport{}
	se.Namespace, se.Name = k.Namespace, k.Name
	select {
	case w.Events <- event.GenericEvent{Object: se}:
	case <-ctx.Done():
	}
}
