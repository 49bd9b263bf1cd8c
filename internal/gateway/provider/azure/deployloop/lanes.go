package deployloop

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/fleetnet/fleetnet/internal/recovered"
)

// Lanes runs the jobs of a provider's objects (a Gateway's, a load
// balancer's), each object's in a lane of its own, at most n at once.
//
// A job runs under the lanes' context, not its caller's: a deployment that
// stops waiting (a newer model arrived) leaves it running, and a job that
// hangs on one object's operation holds that object only. A job for the
// input its object's lane already runs is joined rather than started
// again; a job for another input (the object changed) cancels the running
// one and starts once it has ended, so an object never has two jobs
// writing at once.
type Lanes struct {
	log *slog.Logger
	sem chan struct{}

	mu    sync.Mutex
	ctx   context.Context
	stop  context.CancelFunc
	lanes map[string]*Job
}

// Job is one object's job.
type Job struct {
	key, input string
	cancel     context.CancelFunc
	done       chan struct{}
	err        error // set before done closes
}

// NewLanes runs at most n jobs at once (at least 1); log gets a job's
// recovered panic.
func NewLanes(n int, log *slog.Logger) *Lanes {
	ctx, stop := context.WithCancel(context.Background())
	return &Lanes{log: log, sem: make(chan struct{}, max(n, 1)), ctx: ctx, stop: stop, lanes: map[string]*Job{}}
}

// Start runs f as key's job for input (e.g. a hash of the object's model
// entry), unless key's running job is for input already: that job is
// returned.
func (l *Lanes) Start(key, input string, f func(ctx context.Context) error) *Job {
	l.mu.Lock()
	defer l.mu.Unlock()
	prev := l.lanes[key]
	if prev != nil && prev.input == input && !prev.ended() {
		return prev
	}
	ctx, cancel := context.WithCancel(l.ctx)
	j := &Job{key: key, input: input, cancel: cancel, done: make(chan struct{})}
	l.lanes[key] = j
	go func() {
		defer close(j.done)
		defer cancel()
		if prev != nil {
			prev.cancel() // superseded
			<-prev.done
		}
		select {
		case l.sem <- struct{}{}:
		case <-ctx.Done():
			j.err = ctx.Err()
			return
		}
		defer func() { <-l.sem }()
		// A job's goroutine is its own: a panic there would end the
		// process whatever the caller recovers.
		j.err = recovered.Do("azure-job", l.log, func() error { return f(ctx) })
	}()
	return j
}

func (j *Job) ended() bool {
	select {
	case <-j.done:
		return true
	default:
		return false
	}
}

// Running says whether key has a job that has not ended.
func (l *Lanes) Running(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	j := l.lanes[key]
	return j != nil && !j.ended()
}

// Stop cancels every job, running or to come (the provider stopped), and
// returns once the running ones ended.
func (l *Lanes) Stop() {
	l.stop()
	l.mu.Lock()
	jobs := make([]*Job, 0, len(l.lanes))
	for _, j := range l.lanes {
		jobs = append(jobs, j)
	}
	l.mu.Unlock()
	for _, j := range jobs {
		<-j.done
	}
}

// Wait waits for jobs until they end or ctx does, and returns their errors
// in a stable order (by message), joined; ctx's error, naming the objects,
// for jobs still running when it ended. Nil when all ended without error.
func Wait(ctx context.Context, jobs []*Job) error {
	var errs []error
	var running []string
	for _, j := range jobs {
		select {
		case <-j.done:
			if j.err != nil {
				errs = append(errs, j.err)
			}
		case <-ctx.Done():
			running = append(running, j.key)
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	if len(running) > 0 {
		errs = append(errs, &StillRunning{Keys: running, Err: ctx.Err()})
	}
	return errors.Join(errs...)
}

// StillRunning is Wait's error for the jobs it stopped waiting for: they
// go on in their lanes.
type StillRunning struct {
	Keys []string
	Err  error
}

func (e *StillRunning) Error() string {
	return "still deploying " + strings.Join(e.Keys, ", ") + ": " + e.Err.Error()
}

func (e *StillRunning) Unwrap() error { return e.Err }
