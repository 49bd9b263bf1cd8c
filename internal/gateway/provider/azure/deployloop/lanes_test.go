package deployloop

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// Lanes run at most n jobs at once and Wait returns every error, sorted.
func TestLanesParallelismAndErrors(t *testing.T) {
	l := NewLanes(2, quiet)
	var running, most atomic.Int32
	var jobs []*Job
	for _, name := range []string{"c", "a", "", "b"} {
		jobs = append(jobs, l.Start("key-"+name, "1", func(context.Context) error {
			n := running.Add(1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(time.Millisecond)
			running.Add(-1)
			if name == "" {
				return nil
			}
			return errors.New(name)
		}))
	}
	if err := Wait(context.Background(), jobs); err == nil || err.Error() != "a\nb\nc" {
		t.Errorf("Wait = %v, want a, b and c in order", err)
	}
	if most.Load() > 2 {
		t.Errorf("%d jobs at once, want at most 2", most.Load())
	}
	if err := Wait(context.Background(), nil); err != nil {
		t.Errorf("no jobs: %v", err)
	}
}

// One object's job that hangs holds neither another object's job nor a
// caller that stops waiting; a job for the same input is joined, one for
// another input supersedes it.
func TestLanesIsolateAHangingJob(t *testing.T) {
	l := NewLanes(4, quiet)
	t.Cleanup(l.Stop)
	var starts atomic.Int32
	hang := func(ctx context.Context) error {
		starts.Add(1)
		<-ctx.Done()
		return ctx.Err()
	}
	stuck := l.Start("web/a", "v1", hang)
	if err := Wait(context.Background(), []*Job{l.Start("web/b", "v1", func(context.Context) error { return nil })}); err != nil {
		t.Fatalf("web/b: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	var still *StillRunning
	if err := Wait(ctx, []*Job{l.Start("web/a", "v1", hang)}); !errors.As(err, &still) || len(still.Keys) != 1 || still.Keys[0] != "web/a" {
		t.Fatalf("Wait on the hanging job = %v, want StillRunning web/a", err)
	}
	if !l.Running("web/a") || starts.Load() != 1 {
		t.Fatalf("the same input started again (%d starts) or stopped", starts.Load())
	}

	// A new input cancels the hanging job, then runs.
	if err := Wait(context.Background(), []*Job{l.Start("web/a", "v2", func(context.Context) error { return nil })}); err != nil {
		t.Fatalf("web/a v2: %v", err)
	}
	if err := Wait(context.Background(), []*Job{stuck}); !errors.Is(err, context.Canceled) {
		t.Errorf("the superseded job ended with %v, want cancelled", err)
	}
	if l.Running("web/a") {
		t.Error("web/a still running")
	}
}
