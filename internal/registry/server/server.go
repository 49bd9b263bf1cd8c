// Package server is the registry's gRPC service: it validates and
// authorizes writes into a Store, keeps a View of the store current by
// watching it, and streams the view's changes to watchers.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/registry/store"
	"github.com/fleetnet/fleetnet/internal/registry/view"
	"github.com/fleetnet/fleetnet/internal/tracing"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"k8s.io/utils/clock"
)

// Config tunes a registry.
type Config struct {
	// LeaseTTL is how long a cluster stays live without renewing.
	LeaseTTL time.Duration
	// GracePeriod is how long the records of a cluster whose lease expired
	// are kept before they are collected.
	GracePeriod time.Duration
	// HistoryLimit is how many watch events are kept for resuming watchers.
	HistoryLimit int
	// WatcherBuffer is how many events a watcher may lag behind before it is
	// cut off and must resume.
	WatcherBuffer int
	// WatcherBufferBytes is how many bytes of encoded events a watcher may
	// lag behind before it is cut off and must resume, whatever their
	// number (DefaultWatcherBufferBytes when zero).
	WatcherBufferBytes int
	// MaxWatchesPerIdentity caps the watches one identity (a cluster, or an
	// administrator) holds open at once; one more is refused with
	// ResourceExhausted (DefaultMaxWatchesPerIdentity when zero).
	MaxWatchesPerIdentity int
	// MaxWatches caps the watches the registry holds open at once, of
	// every identity (DefaultMaxWatches when zero).
	MaxWatches int
	// Clock drives garbage collection; the real clock when nil.
	Clock clock.WithTicker
	// Logger logs progress and failures; slog.Default when nil.
	Logger *slog.Logger
	// Registerer receives the registry's metrics; none when nil.
	Registerer prometheus.Registerer
	// TracerProvider traces writes and fan-outs (internal/tracing); none
	// when nil.
	TracerProvider trace.TracerProvider
}

func (c *Config) defaults() {
	if c.LeaseTTL == 0 {
		c.LeaseTTL = 30 * time.Second
	}
	if c.GracePeriod == 0 {
		c.GracePeriod = 10 * time.Minute
	}
	if c.HistoryLimit == 0 {
		c.HistoryLimit = 100000
	}
	if c.WatcherBuffer == 0 {
		c.WatcherBuffer = 10000
	}
	if c.WatcherBufferBytes == 0 {
		c.WatcherBufferBytes = DefaultWatcherBufferBytes
	}
	if c.MaxWatchesPerIdentity == 0 {
		c.MaxWatchesPerIdentity = DefaultMaxWatchesPerIdentity
	}
	if c.MaxWatches == 0 {
		c.MaxWatches = DefaultMaxWatches
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.TracerProvider == nil {
		c.TracerProvider = noop.NewTracerProvider()
	}
}

// Registry implements registryv1.RegistryServer.
type Registry struct {
	registryv1.UnimplementedRegistryServer

	cfg     Config
	store   store.Store
	log     *slog.Logger
	metrics *metrics
	tracer  trace.Tracer

	mu   sync.Mutex
	cond *sync.Cond // signalled when the view advances or sync state changes
	view *view.View
	// synced is true once the view was loaded from the store.
	synced bool
	hub    *hub
	// watches admits watches within the caps per identity and in total.
	watches *watchSlots
	// snapshots encodes snapshots, sharing encodings between them.
	snapshots snapshotEncoder
	// shutdown is closed when the registry stops serving watchers.
	shutdown chan struct{}
	stopOnce sync.Once
}

// New returns a registry on s. Call Run to keep its view current.
func New(s store.Store, cfg Config) *Registry {
	cfg.defaults()
	r := &Registry{
		cfg:      cfg,
		store:    s,
		log:      cfg.Logger,
		tracer:   cfg.TracerProvider.Tracer(tracing.Scope),
		view:     view.New(),
		hub:      newHub(cfg.HistoryLimit, cfg.WatcherBuffer, cfg.WatcherBufferBytes),
		watches:  newWatchSlots(cfg.MaxWatchesPerIdentity, cfg.MaxWatches),
		shutdown: make(chan struct{}),
	}
	r.cond = sync.NewCond(&r.mu)
	r.metrics = newMetrics(cfg.Registerer, r)
	r.store = instrumentedStore{Store: s, ops: r.metrics.storeOps}
	return r
}

// Run keeps the view in step with the store until ctx ends: it loads the
// store, then applies every change and publishes the resulting events. A
// broken store watch (an etcd member lost, a leader election) is resumed
// from the view's revision, so the registry's own watchers see nothing of
// it; only a compaction past the view's revision, or a change the view
// cannot apply, loads the view again (and sends watchers a snapshot).
func (r *Registry) Run(ctx context.Context) error {
	go r.collectGarbage(ctx)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := r.follow(ctx, func() { backoff = 100 * time.Millisecond })
		if ctx.Err() != nil {
			break
		}
		r.log.Warn("store watch ended; reloading the view", "err", err, "retryIn", backoff)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
	return nil
}

// Stop cuts every watcher off; they resume from their last revision
// elsewhere or after a restart.
func (r *Registry) Stop() {
	r.stopOnce.Do(func() { close(r.shutdown) })
}

// errReload ends follow: the view must be loaded again.
var errReload = errors.New("the view must be loaded again")

// follow loads the view, then follows the store's watch, resuming it from
// the view's revision whenever it breaks for a reason other than
// compaction. progressed is called whenever the view advanced.
func (r *Registry) follow(ctx context.Context, progressed func()) error {
	kvs, rev, err := r.store.List(ctx, "")
	if err != nil {
		return fmt.Errorf("loading the store: %w", err)
	}
	v := view.New()
	if err := v.Load(kvs, rev); err != nil {
		return err
	}
	r.mu.Lock()
	r.view, r.synced = v, true
	r.snapshots = snapshotEncoder{} // a new view: nothing encoded from the old one is known to hold
	r.hub.reset(rev)
	r.cond.Broadcast()
	r.mu.Unlock()
	r.log.Info("registry view loaded", "revision", rev, "records", len(kvs))
	progressed()

	backoff := 50 * time.Millisecond
	for {
		err := r.watchFrom(ctx, v.Revision(), func() {
			backoff = 50 * time.Millisecond
			progressed()
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, store.ErrCompacted) || errors.Is(err, errReload) {
			return err
		}
		r.log.Warn("store watch broke; resuming it from the view's revision", "revision", v.Revision(), "err", err, "retryIn", backoff)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// watchFrom applies the store's changes after rev until the watch ends.
func (r *Registry) watchFrom(ctx context.Context, rev int64, progressed func()) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for resp := range r.store.Watch(ctx, "", rev) {
		if resp.Err != nil {
			return resp.Err
		}
		r.mu.Lock()
		var events []view.Event
		var err error
		if len(resp.Events) > 0 {
			events, err = r.view.Apply(resp.Events)
		} else {
			r.view.Advance(resp.Progress)
		}
		if err == nil && len(events) > 0 {
			r.fanout(ctx, events)
		}
		r.cond.Broadcast()
		r.mu.Unlock()
		if err != nil {
			return fmt.Errorf("applying store events: %w: %w", err, errReload)
		}
		progressed()
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.New("store watch closed")
}

// waitForRevision blocks until the view reflects rev, so a client reads its
// own writes.
func (r *Registry) waitForRevision(ctx context.Context, rev int64) error {
	r.mu.Lock()
	caughtUp := r.synced && r.view.Revision() >= rev
	r.mu.Unlock()
	if caughtUp {
		return nil // the common case: no timer, no goroutine
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		r.mu.Lock()
		r.cond.Broadcast()
		r.mu.Unlock()
	})
	defer stop()
	// The store's revision also moves with writes outside the registry's
	// prefix (an etcd shared with others): ask for a progress notification
	// while the view is behind, or a quiet registry would wait in vain.
	go r.requestProgress(ctx, rev)
	r.mu.Lock()
	defer r.mu.Unlock()
	for !r.synced || r.view.Revision() < rev {
		if ctx.Err() != nil {
			return fmt.Errorf("the registry's view is at revision %d, waiting for %d: %w", r.view.Revision(), rev, ctx.Err())
		}
		r.cond.Wait()
	}
	return nil
}

// requestProgress asks the store for progress notifications until the
// view reaches rev or ctx ends.
func (r *Registry) requestProgress(ctx context.Context, rev int64) {
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		r.mu.Lock()
		behind := !r.synced || r.view.Revision() < rev
		r.mu.Unlock()
		if !behind {
			return
		}
		if err := r.store.RequestProgress(ctx); err != nil && ctx.Err() == nil {
			r.log.Debug("asking the store for its progress", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// currentView waits until the view has caught up with the store, then
// calls fn with it under the lock.
func (r *Registry) currentView(ctx context.Context, fn func(v *view.View)) error {
	rev, err := r.store.Revision(ctx)
	if err != nil {
		return err
	}
	if err := r.waitForRevision(ctx, rev); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	fn(r.view)
	return nil
}
