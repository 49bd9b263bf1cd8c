// Package registryfeed keeps fleetnet-console's model up to date with the
// fleet registry: the watch brings the merged imports and their endpoint
// chunks as they change; the clusters (with their leases) and the exports
// (with their statuses: participation, conflicts, importers) are listed
// again at an interval, since the watch carries an export's status only to
// the exporting cluster itself.
//
// Like every registry client in fleetnet it is fail-static: a broken watch
// or a failed list keeps what the console shows (with the error on the
// page) and resumes; a snapshot replaces the imports whole only at its
// synced mark.
package registryfeed

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/console/model"
	"github.com/fleetnet/fleetnet/internal/registry/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Config configures a Feed.
type Config struct {
	Client registryv1.RegistryClient
	Model  *model.Model
	Log    *slog.Logger
	// ClustersEvery and ExportsEvery are how often clusters and exports
	// are listed; zero are 1s and 3s.
	ClustersEvery, ExportsEvery time.Duration
	// MinBackoff and MaxBackoff bound the wait before the watch is opened
	// again; zero are 200ms and 10s.
	MinBackoff, MaxBackoff time.Duration
}

// Feed follows the registry.
type Feed struct {
	cfg Config
	// errs carries each part's outcome (watch, clusters, exports) to the
	// goroutine that reports the feed's state.
	errs chan feedErr
}

type feedErr struct {
	part string
	err  error
}

// New returns a feed; Run follows the registry.
func New(cfg Config) *Feed {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.ClustersEvery <= 0 {
		cfg.ClustersEvery = time.Second
	}
	if cfg.ExportsEvery <= 0 {
		cfg.ExportsEvery = 3 * time.Second
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 200 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 10 * time.Second
	}
	return &Feed{cfg: cfg, errs: make(chan feedErr, 16)}
}

// Run follows the registry until ctx ends. Only a refusal of the console's
// credentials ends it early, with an error.
func (f *Feed) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go f.poll(ctx, cancel, "clusters", f.cfg.ClustersEvery, f.listClusters)
	go f.poll(ctx, cancel, "exports", f.cfg.ExportsEvery, f.listExports)
	go f.report(ctx)
	err := f.watch(ctx)
	if cause := context.Cause(ctx); err == nil && cause != nil && cause != ctx.Err() {
		err = cause
	}
	return err
}

// report turns the parts' failures into the registry feed's state: the
// first unresolved failure is shown, synced once the watch's snapshot is
// in and the lists have answered.
func (f *Feed) report(ctx context.Context) {
	failing := map[string]error{}
	seen := map[string]bool{}
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-f.errs:
			if e.err == nil {
				delete(failing, e.part)
				seen[e.part] = true
			} else {
				failing[e.part] = e.err
			}
		}
		state := model.Feed{Synced: seen["watch"] && seen["clusters"] && seen["exports"]}
		for _, part := range []string{"watch", "clusters", "exports"} {
			if err := failing[part]; err != nil {
				state.Error, state.Since = fmt.Sprintf("%s: %v", part, err), time.Now()
				break
			}
		}
		f.cfg.Model.SetFeed(model.FeedRegistry, state)
	}
}

func (f *Feed) set(ctx context.Context, part string, err error) {
	select {
	case f.errs <- feedErr{part, err}:
	case <-ctx.Done():
	}
}

// poll calls list at every interval.
func (f *Feed) poll(ctx context.Context, stop context.CancelCauseFunc, part string, every time.Duration, list func(context.Context) error) {
	t := time.NewTicker(every)
	defer t.Stop()
	failing := false
	for {
		callCtx, cancel := context.WithTimeout(ctx, max(every, 5*time.Second))
		err := list(callCtx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		switch {
		case refused(err):
			stop(fmt.Errorf("registry refused listing %s: %w", part, err))
			return
		case err != nil && !failing:
			f.cfg.Log.Info("listing from the registry failed; showing the last answer and trying again", "part", part, "err", err)
		case err == nil && failing:
			f.cfg.Log.Info("listing from the registry works again", "part", part)
		}
		failing = err != nil
		f.set(ctx, part, err)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (f *Feed) listClusters(ctx context.Context) error {
	resp, err := f.cfg.Client.ListClusters(ctx, &registryv1.ListClustersRequest{})
	if err != nil {
		return err
	}
	f.cfg.Model.SetClusters(resp.GetClusters())
	return nil
}

func (f *Feed) listExports(ctx context.Context) error {
	resp, err := f.cfg.Client.ListExports(ctx, &registryv1.ListExportsRequest{})
	if err != nil {
		return err
	}
	f.cfg.Model.SetExports(resp.GetExports(), resp.GetStatuses())
	return nil
}

// watch follows the registry's watch, resuming after every interruption.
func (f *Feed) watch(ctx context.Context) error {
	backoff := f.cfg.MinBackoff
	var rev int64
	for ctx.Err() == nil {
		got, last, err := f.watchOnce(ctx, rev)
		rev = max(rev, last)
		if ctx.Err() != nil {
			return nil
		}
		if refused(err) {
			return fmt.Errorf("registry refused the watch: %w", err)
		}
		if got {
			backoff = f.cfg.MinBackoff
		}
		f.cfg.Log.Info("registry watch ended; showing the imports as they are and resuming", "code", status.Code(err).String(), "err", err, "revision", rev, "retryIn", backoff.String())
		f.set(ctx, "watch", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, f.cfg.MaxBackoff)
	}
	return nil
}

// watchOnce runs one watch from resume; it returns whether it received
// anything and the last revision applied.
func (f *Feed) watchOnce(ctx context.Context, resume int64) (bool, int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := f.cfg.Client.Watch(ctx, &registryv1.WatchRequest{ResumeRevision: resume}, client.WaitForConnection())
	if err != nil {
		return false, resume, err
	}
	// A snapshot being received; from zero the stream starts as one.
	var staged *model.ImportState
	if resume == 0 {
		staged = model.NewImportState()
	}
	rev, got := resume, false
	for {
		ev, err := w.Recv()
		if err != nil {
			return got, rev, err
		}
		got = true
		switch ev.GetEvent().(type) {
		case *registryv1.WatchEvent_Reset_:
			staged = model.NewImportState()
		case *registryv1.WatchEvent_Synced:
			if staged != nil {
				f.cfg.Model.ReplaceImports(staged)
				f.cfg.Log.Info("registry snapshot shown", "imports", len(staged.Imports), "revision", ev.GetRevision())
			}
			staged = nil
			rev = ev.GetRevision()
			f.set(ctx, "watch", nil)
		default:
			if staged != nil {
				staged.Apply(ev)
				continue
			}
			f.cfg.Model.ApplyImportEvent(ev)
			rev = max(rev, ev.GetRevision())
		}
	}
}

func refused(err error) bool {
	switch status.Code(err) {
	case codes.Unauthenticated, codes.PermissionDenied:
		return true
	}
	return false
}
