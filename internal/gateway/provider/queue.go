package provider

import (
	"context"
	"log/slog"
	"sync"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/recovered"
)

// Queue deploys the newest model it was given, one at a time, off the
// caller's path: Set never waits for a provider. Models are level state,
// so a model superseded while another deploys is skipped, and a newer
// model cancels the context of the deploy in progress (a cloud provider
// then stops waiting for it; the jobs it started go on, see
// deployloop.Lanes), so that one slow object never holds the next model.
// A failed deploy is retried with a backoff (at most RetryMax apart) until
// it succeeds or a newer model arrives; the provider meanwhile serves what
// it had.
type Queue struct {
	Provider Provider
	Log      *slog.Logger
	RetryMax time.Duration
	// OnChange is called after every deploy attempt, so the controller can
	// write the status it leads to.
	OnChange func()
	// Class labels Metrics (nil: none).
	Class   string
	Metrics *Metrics

	mu      sync.Mutex
	want    *edgev1.Model
	lastErr error
	wake    chan struct{}
	// deploying is the version being deployed, with its context's cancel.
	deploying       string
	cancelDeploying context.CancelFunc
}

// Set makes m the model to deploy.
func (q *Queue) Set(m *edgev1.Model) {
	q.mu.Lock()
	q.want = m
	wake := q.wake
	if q.cancelDeploying != nil && q.deploying != m.Version {
		q.cancelDeploying()
	}
	q.mu.Unlock()
	if wake != nil {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

// wanted is the newest model given, nil none.
func (q *Queue) wanted() *edgev1.Model {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.want
}

// LastError is the error of the last deploy attempt, nil after a success.
func (q *Queue) LastError() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.lastErr
}

// Run deploys until ctx ends.
func (q *Queue) Run(ctx context.Context) {
	q.mu.Lock()
	q.wake = make(chan struct{}, 1)
	q.mu.Unlock()
	retryMax := q.RetryMax
	if retryMax <= 0 {
		retryMax = 30 * time.Second
	}
	var deployed string
	wait := time.Duration(0)
	backoff := 200 * time.Millisecond
	for {
		var timer <-chan time.Time
		if wait > 0 {
			timer = time.After(wait)
		}
		if wait != 0 || q.pendingVersion() == deployed {
			select {
			case <-ctx.Done():
				return
			case <-q.wake:
			case <-timer:
			}
		}
		q.mu.Lock()
		m := q.want
		q.mu.Unlock()
		if m == nil || m.Version == deployed {
			q.Metrics.setWaiting(q.Class, false)
			wait = 0
			continue
		}
		q.Metrics.setWaiting(q.Class, true)
		start := time.Now()
		dctx, cancel := context.WithCancel(ctx)
		q.mu.Lock()
		q.deploying, q.cancelDeploying = m.Version, cancel
		q.mu.Unlock()
		// A panic in a provider is that model's failure, reported like any
		// other, not the controller's end.
		err := recovered.Do("provider-queue", q.Log, func() error { return q.Provider.Deploy(dctx, m) })
		superseded := dctx.Err() != nil && ctx.Err() == nil
		cancel()
		q.mu.Lock()
		q.deploying, q.cancelDeploying = "", nil
		if !superseded {
			q.lastErr = err
		}
		q.mu.Unlock()
		result := ResultSuccess
		switch {
		case superseded:
			result = ResultSuperseded
		case err != nil:
			result = ResultFailure
		}
		q.Metrics.observe(q.Class, result, time.Since(start))
		switch {
		case ctx.Err() != nil:
			return
		case superseded:
			// a newer model is waiting: deploy it now
			q.Log.Info("a newer model superseded the deploy in progress", "version", m.Version)
			wait = 0
			continue
		}
		if err != nil {
			q.Log.Error("deploying the model failed; the previous one stays", "version", m.Version, "err", err, "retryIn", backoff)
			wait, backoff = backoff, min(backoff*2, retryMax)
		} else {
			deployed, wait, backoff = m.Version, 0, 200*time.Millisecond
			q.Metrics.setWaiting(q.Class, q.pendingVersion() != deployed)
		}
		if q.OnChange != nil {
			q.OnChange()
		}
	}
}

func (q *Queue) pendingVersion() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.want == nil {
		return ""
	}
	return q.want.Version
}
