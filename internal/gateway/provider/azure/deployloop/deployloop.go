// Package deployloop is what the Azure providers (azure-cross-region and
// azure-front-door) do around their cloud work, once: one deployment at a
// time; the last model kept and deployed again every Hooks.Resync, so that
// drift is repaired and failed operations are tried again; a newer model
// cancelling such a resync rather than waiting for it; the version of the
// last model deployed without error; and the progress callback
// (SetOnProgress), told after every deployment, failed ones included.
//
// A provider plugs in, through Hooks:
//   - Deploy: make the cloud match a model, level-based (observe, write
//     what differs, delete what it owns and no longer needs). Its error is
//     Loop.Deploy's; a resync logs it. azure-cross-region deploys a
//     model's load balancers of its class, azure-front-door its Gateways
//     of the configured GatewayClasses.
//   - Refresh (optional) and RefreshEvery: re-read what is still
//     deploying between deployments. azure-front-door refreshes the
//     Gateways not yet served (deployment status, domain validation,
//     Private Link approvals); azure-cross-region has none, as its
//     operations end within Deploy.
//
// The provider keeps its own state (per load balancer or Gateway) under
// its own lock, calls Notify when it changes, and reads Deployed to say
// whether that state is the newest model's. Lanes runs one deployment's
// jobs, an object's each in a lane of its own, so that one object's
// operation that hangs holds neither the others nor the next model.
package deployloop

import (
	"context"
	"log/slog"
	"sync"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/recovered"
)

// Defaults of Hooks.
const (
	DefaultResync       = 10 * time.Minute
	DefaultRefreshEvery = 10 * time.Second
)

// Hooks are what a provider plugs into a Loop.
type Hooks struct {
	// Deploy makes the cloud match m and returns once its work ended;
	// ctx ends when the caller's does, or for a resync when a newer
	// model arrives. Required.
	Deploy func(ctx context.Context, m *edgev1.Model) error
	// Refresh, when set, is run every RefreshEvery (default
	// DefaultRefreshEvery) by Run, and by Loop.Refresh, unless a
	// deployment runs.
	Refresh      func(ctx context.Context) error
	RefreshEvery time.Duration
	// Resync is how often Run deploys the last model again (default
	// DefaultResync).
	Resync time.Duration
	// Log gets the resync's and refresh's failures (default
	// slog.Default()).
	Log *slog.Logger
}

// Loop runs one provider's deployments.
type Loop struct {
	hooks Hooks

	busy       sync.Mutex // one deployment or resync at a time
	refreshing sync.Mutex // one refresh at a time

	mu           sync.Mutex
	version      string        // of the last model deployed without error
	last         *edgev1.Model // the last model given
	onProgress   func()
	cancelResync context.CancelFunc
}

// New is a Loop with hooks h, their zero fields defaulted.
func New(h Hooks) *Loop {
	if h.Resync <= 0 {
		h.Resync = DefaultResync
	}
	if h.RefreshEvery <= 0 {
		h.RefreshEvery = DefaultRefreshEvery
	}
	if h.Log == nil {
		h.Log = slog.Default()
	}
	return &Loop{hooks: h}
}

// SetOnProgress sets a function called whenever the provider's progress
// may have changed (the controller's trigger).
func (l *Loop) SetOnProgress(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onProgress = f
}

// Notify calls the SetOnProgress function, if any.
func (l *Loop) Notify() {
	l.mu.Lock()
	f := l.onProgress
	l.mu.Unlock()
	if f != nil {
		f()
	}
}

// Deployed is, read together, the version of the last model Deploy
// finished without error ("" none) and the last model given (nil none).
func (l *Loop) Deployed() (version string, last *edgev1.Model) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.version, l.last
}

// Deploy keeps m as the last model, cancels a resync in progress, waits
// for any other deployment to end, runs Hooks.Deploy, records m's version
// when it succeeded, and notifies either way.
func (l *Loop) Deploy(ctx context.Context, m *edgev1.Model) error {
	l.mu.Lock()
	l.last = m
	if l.cancelResync != nil {
		l.cancelResync() // a newer model supersedes a resync of the last
	}
	l.mu.Unlock()
	l.busy.Lock()
	defer l.busy.Unlock()
	err := recovered.Do("azure-deploy", l.hooks.Log, func() error { return l.hooks.Deploy(ctx, m) })
	if err == nil {
		l.mu.Lock()
		l.version = m.Version
		l.mu.Unlock()
	}
	l.Notify()
	return err
}

// Run resyncs every Hooks.Resync and, with a Hooks.Refresh, refreshes
// every Hooks.RefreshEvery, until ctx ends. Run it on the leader only.
func (l *Loop) Run(ctx context.Context) {
	resync := time.NewTicker(l.hooks.Resync)
	defer resync.Stop()
	var refresh <-chan time.Time // nil: never
	if l.hooks.Refresh != nil {
		t := time.NewTicker(l.hooks.RefreshEvery)
		defer t.Stop()
		refresh = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-refresh:
			if err := l.Refresh(ctx); err != nil && ctx.Err() == nil {
				l.hooks.Log.Info("refresh incomplete", "err", err)
			}
		case <-resync.C:
			l.Resync(ctx)
		}
	}
}

// Resync deploys the last model again, unless there is none or a
// deployment runs (it is as good as a resync), and notifies. A Deploy
// cancels it; its failure is logged, not returned.
func (l *Loop) Resync(ctx context.Context) {
	if !l.busy.TryLock() {
		return
	}
	defer l.busy.Unlock()
	l.mu.Lock()
	m := l.last
	rctx, cancel := context.WithCancel(ctx)
	l.cancelResync = cancel
	l.mu.Unlock()
	defer func() {
		cancel()
		l.mu.Lock()
		l.cancelResync = nil
		l.mu.Unlock()
	}()
	if m == nil {
		return
	}
	if err := recovered.Do("azure-resync", l.hooks.Log, func() error { return l.hooks.Deploy(rctx, m) }); err != nil && rctx.Err() == nil {
		l.hooks.Log.Error("resync failed", "version", m.Version, "err", err)
	}
	l.Notify()
}

// Refresh runs Hooks.Refresh, unless there is none or a refresh runs,
// and notifies. It may run while a deployment waits for its jobs: a
// refresh skips the objects whose jobs run (Lanes.Running), so that one
// object's long operation does not stop the others' progress.
func (l *Loop) Refresh(ctx context.Context) error {
	if l.hooks.Refresh == nil || !l.refreshing.TryLock() {
		return nil
	}
	defer l.refreshing.Unlock()
	defer l.Notify()
	return recovered.Do("azure-refresh", l.hooks.Log, func() error { return l.hooks.Refresh(ctx) })
}

// Sleep waits d, or until ctx ends (its error then): the pause between two
// reads of a resource whose operation runs.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
