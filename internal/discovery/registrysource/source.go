// Package registrysource is fleetnet-discovery's "registry" pool source:
// the fleetnet registry's watch, read directly (no cluster needed), makes
// one pool per import with its endpoints by source cluster. The exporting
// Pod's name, which the agent sends with each endpoint, is the instance id.
//
// The watch is an administrator's: it holds every import as administrators
// see it, the merge of every export, and every export's status. Each pool
// goes to the clusters the registry sends that same import
// (registry/view.SameImport over the statuses, the registry's own rule):
// a cluster that some participating export is scoped away from
// (fleetnet.dev/export-to, export-to-selector) is sent another merge, or
// nothing, and does not see the pool here. The registry sends a
// revision's statuses before its imports, so a scope that narrows takes
// effect before the content written with it.
//
// The watch starts with a snapshot, which is staged and handed to the
// store whole at its synced mark; deltas follow one import at a time. A
// broken watch keeps everything served as it is (fail static) and resumes
// from the last revision seen; the registry sends a fresh snapshot when it
// no longer holds that revision, and only that snapshot's synced mark
// removes what is gone.
package registrysource

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/discovery/store"
	"github.com/fleetnet/fleetnet/internal/registry/client"
	"github.com/fleetnet/fleetnet/internal/registry/view"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// SourceName is the name under which the source contributes to the store.
const SourceName = "registry"

// Config configures a Source.
type Config struct {
	Client registryv1.RegistryClient
	Store  *store.Store
	// Routers is a static list of router replicas (the registry knows
	// none).
	Routers []discoveryv1.Router
	Log     *slog.Logger
	// MinBackoff and MaxBackoff bound the wait before the watch is opened
	// again (doubling); zero are 200ms and 10s.
	MinBackoff, MaxBackoff time.Duration
	// Registerer receives the source's metrics; nil registers none.
	Registerer prometheus.Registerer
}

// Source feeds the store from the registry's watch.
type Source struct {
	cfg      Config
	syncedCh chan struct{}

	mu      sync.Mutex
	imports map[store.Key]*Import
	// statuses holds every export's status, by service, then exporting
	// cluster: they say who each export goes to.
	statuses map[store.Key]map[string]*registryv1.ExportStatus
	// rev is the registry revision to resume from: the last synced mark or
	// delta applied.
	rev int64
	// brokenSince is when the watch broke, zero while it runs.
	brokenSince time.Time
	lastErr     error

	connected prometheus.Gauge
}

// New returns a source; Run watches.
func New(cfg Config) *Source {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 200 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 10 * time.Second
	}
	s := &Source{
		cfg: cfg, syncedCh: make(chan struct{}), imports: map[store.Key]*Import{}, statuses: map[store.Key]map[string]*registryv1.ExportStatus{},
		connected: prometheus.NewGauge(prometheus.GaugeOpts{Name: "fleetnet_discovery_registry_watch_synced", Help: "1 while the registry watch is open and past its snapshot."}),
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(s.connected)
	}
	return s
}

// Run follows the registry's watch until ctx ends, resuming after every
// interruption. Only permanent refusals (bad credentials, no permission)
// end it with an error.
func (s *Source) Run(ctx context.Context) error {
	backoff := s.cfg.MinBackoff
	for ctx.Err() == nil {
		got, err := s.watch(ctx)
		s.connected.Set(0)
		if ctx.Err() != nil {
			return nil
		}
		switch status.Code(err) {
		case codes.Unauthenticated:
			return fmt.Errorf("registry watch refused: %w", err)
		case codes.PermissionDenied:
			return fmt.Errorf("registry watch refused (the source reads every export's status, to apply each export's scope to the callers: it needs an administrator's identity, organization fleetnet:admins): %w", err)
		}
		if got {
			backoff = s.cfg.MinBackoff
		}
		s.mu.Lock()
		if s.brokenSince.IsZero() {
			s.brokenSince = time.Now()
		}
		s.lastErr = err
		rev := s.rev
		s.mu.Unlock()
		s.cfg.Log.Info("registry watch ended; serving the pools as they are and resuming", "code", status.Code(err).String(), "err", err, "revision", rev, "retryIn", backoff.String())
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, s.cfg.MaxBackoff)
	}
	return nil
}

// watch runs one watch; got says whether it received anything.
func (s *Source) watch(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	resume := s.rev
	s.mu.Unlock()
	w, err := s.cfg.Client.Watch(ctx, &registryv1.WatchRequest{ResumeRevision: resume, ExportStatusClusterId: "*"}, client.WaitForConnection())
	if err != nil {
		return false, err
	}
	// A snapshot being received; from zero the whole stream starts as one.
	var staged *snapshot
	if resume == 0 {
		staged = newSnapshot()
	}
	got := false
	for {
		ev, err := w.Recv()
		if err != nil {
			return got, err
		}
		got = true
		switch ev.GetEvent().(type) {
		case *registryv1.WatchEvent_Reset_:
			staged = newSnapshot()
		case *registryv1.WatchEvent_Synced:
			s.synced(ev.GetRevision(), staged)
			staged = nil
		default:
			if staged != nil {
				staged.apply(ev)
				continue
			}
			s.mu.Lock()
			k, ok := apply(s.imports, ev)
			if !ok {
				k, ok = applyStatus(s.statuses, ev)
			}
			s.rev = max(s.rev, ev.GetRevision())
			var p discoveryv1.Pool
			var aud store.Audience
			d := s.imports[k]
			if ok && d != nil && d.Import != nil {
				p, aud = BuildPool(k, d), view.SameImport(d.Import, s.statuses[k])
			}
			s.mu.Unlock()
			if !ok {
				continue
			}
			before := s.cfg.Store.Revision()
			var rev int64
			if d != nil && d.Import != nil {
				rev = s.cfg.Store.ReplaceScoped(SourceName, p, aud)
			} else {
				rev = s.cfg.Store.Delete(SourceName, k)
			}
			switch {
			case rev == before:
			case d != nil && d.Import != nil:
				s.cfg.Log.Info("pool changed", "pool", k.String(), "clusters", len(p.Clusters), "audience", aud.String(), "registryRevision", ev.GetRevision(), "revision", rev)
			default:
				s.cfg.Log.Info("pool removed", "pool", k.String(), "registryRevision", ev.GetRevision(), "revision", rev)
			}
		}
	}
}

// synced ends a snapshot (staged, nil after a resume that needed none):
// the source's whole state is replaced by it.
func (s *Source) synced(rev int64, staged *snapshot) {
	s.mu.Lock()
	s.rev = rev
	s.brokenSince, s.lastErr = time.Time{}, nil
	var pools []store.Scoped
	if staged != nil {
		s.imports, s.statuses = staged.imports, staged.statuses
		for k, d := range staged.imports {
			if d.Import != nil {
				pools = append(pools, store.Scoped{Pool: BuildPool(k, d), Audience: view.SameImport(d.Import, staged.statuses[k])})
			}
		}
	}
	s.mu.Unlock()
	if staged != nil {
		storeRev := s.cfg.Store.ReplaceSourceScoped(SourceName, pools)
		s.cfg.Log.Info("registry snapshot applied", "pools", len(pools), "registryRevision", rev, "revision", storeRev)
	} else {
		s.cfg.Log.Info("registry watch resumed", "registryRevision", rev)
	}
	s.connected.Set(1)
	select {
	case <-s.syncedCh:
	default:
		close(s.syncedCh)
	}
}

// Synced is closed once the first snapshot is in the store.
func (s *Source) Synced() <-chan struct{} { return s.syncedCh }

// Routers returns the static router replicas.
func (s *Source) Routers() []discoveryv1.Router { return s.cfg.Routers }

// Status says what the source waits for, or what it serves.
func (s *Source) Status() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.syncedCh:
	default:
		if s.lastErr != nil {
			return fmt.Sprintf("waiting for the registry's first snapshot: %v", s.lastErr)
		}
		return "waiting for the registry's first snapshot"
	}
	msg := fmt.Sprintf("%d imports from the registry at revision %d", len(s.imports), s.rev)
	if !s.brokenSince.IsZero() {
		msg += fmt.Sprintf("; watch broken since %s (%v): serving them as they were", s.brokenSince.UTC().Format(time.RFC3339), s.lastErr)
	}
	return msg
}
