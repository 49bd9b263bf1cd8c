package deployloop

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/testkit"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func model(v string) *edgev1.Model { return &edgev1.Model{Version: v} }

// Deploy records the version only when the provider's deploy succeeded,
// and notifies after a failed deployment as well.
func TestDeployVersionAndNotify(t *testing.T) {
	fail := errors.New("403 AuthorizationFailed")
	var bad atomic.Bool
	l := New(Hooks{Log: quiet, Deploy: func(context.Context, *edgev1.Model) error {
		if bad.Load() {
			return fail
		}
		return nil
	}})
	var notified atomic.Int32
	l.SetOnProgress(func() { notified.Add(1) })

	if err := l.Deploy(context.Background(), model("v1")); err != nil {
		t.Fatal(err)
	}
	bad.Store(true)
	if err := l.Deploy(context.Background(), model("v2")); !errors.Is(err, fail) {
		t.Fatalf("Deploy = %v, want the provider's error", err)
	}
	version, last := l.Deployed()
	if version != "v1" || last == nil || last.Version != "v2" {
		t.Errorf("Deployed = %q, %v; want v1 deployed and v2 last", version, last)
	}
	if n := notified.Load(); n != 2 {
		t.Errorf("notified %d times, want 2 (the failure as well)", n)
	}
}

// A resync of the last model is cancelled by a newer model, which is then
// deployed; a resync's failure through cancellation is not logged.
func TestDeployCancelsResync(t *testing.T) {
	var logged strings.Builder
	var mu sync.Mutex
	started := make(chan struct{})
	var deployed []string
	l := New(Hooks{Log: slog.New(slog.NewTextHandler(&lockedWriter{w: &logged, mu: &mu}, nil)), Deploy: func(ctx context.Context, m *edgev1.Model) error {
		mu.Lock()
		deployed = append(deployed, m.Version)
		resync := len(deployed) == 2
		mu.Unlock()
		if resync { // it runs until cancelled
			close(started)
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}})
	if err := l.Deploy(context.Background(), model("v1")); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		l.Resync(context.Background())
		close(done)
	}()
	<-started
	if err := l.Deploy(context.Background(), model("v2")); err != nil {
		t.Fatal(err)
	}
	<-done
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(deployed, ",") != "v1,v1,v2" {
		t.Errorf("deployed %v, want v1, its resync, v2", deployed)
	}
	if logged.Len() != 0 {
		t.Errorf("a cancelled resync was logged: %s", logged.String())
	}
	if v, _ := l.Deployed(); v != "v2" {
		t.Errorf("version %q, want v2", v)
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(b)
}

// Resync gives way to a running deployment, Refresh does not (it skips
// the objects whose jobs run, so that one object's long operation does not
// stop the others' progress); without a model Resync does nothing.
func TestBackgroundWorkYields(t *testing.T) {
	var deploys, refreshes atomic.Int32
	release := make(chan struct{})
	inDeploy := make(chan struct{})
	l := New(Hooks{Log: quiet,
		Deploy: func(context.Context, *edgev1.Model) error {
			if deploys.Add(1) == 1 {
				close(inDeploy)
				<-release
			}
			return nil
		},
		Refresh: func(context.Context) error { refreshes.Add(1); return nil }})
	l.Resync(context.Background())
	if deploys.Load() != 0 {
		t.Fatal("a resync without a model deployed")
	}
	done := make(chan error, 1)
	go func() { done <- l.Deploy(context.Background(), model("v1")) }()
	<-inDeploy
	l.Resync(context.Background())
	if err := l.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if deploys.Load() != 1 || refreshes.Load() != 1 {
		t.Errorf("during a deployment: %d deploys, %d refreshes; want 1, 1", deploys.Load(), refreshes.Load())
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := l.Refresh(context.Background()); err != nil || refreshes.Load() != 2 {
		t.Errorf("refresh after the deployment: %v, %d", err, refreshes.Load())
	}
}

// Run resyncs and refreshes on their tickers until its context ends.
func TestRun(t *testing.T) {
	var deploys, refreshes atomic.Int32
	l := New(Hooks{Log: quiet, Resync: time.Millisecond, RefreshEvery: time.Millisecond,
		Deploy:  func(context.Context, *edgev1.Model) error { deploys.Add(1); return nil },
		Refresh: func(context.Context) error { refreshes.Add(1); return nil }})
	if err := l.Deploy(context.Background(), model("v1")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		l.Run(ctx)
		close(done)
	}()
	testkit.Until(t, 10*time.Second, "Run's tickers: 2 deploys and a refresh", func() bool {
		return deploys.Load() >= 2 && refreshes.Load() >= 1
	})
	cancel()
	<-done
}

func TestSleep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep on an ended context = %v", err)
	}
	if err := Sleep(context.Background(), time.Microsecond); err != nil {
		t.Errorf("Sleep = %v", err)
	}
}

// A panic in a provider's deploy, resync or job fails that work with an
// error and leaves the loop working.
func TestPanicsAreFailures(t *testing.T) {
	var boom atomic.Bool
	boom.Store(true)
	l := New(Hooks{Log: quiet, Deploy: func(context.Context, *edgev1.Model) error {
		if boom.Load() {
			panic("injected")
		}
		return nil
	}})
	if err := l.Deploy(context.Background(), model("v1")); err == nil || !strings.Contains(err.Error(), "panic") {
		t.Fatalf("Deploy: %v, want the panic as an error", err)
	}
	l.Resync(context.Background()) // recovered, logged
	boom.Store(false)
	if err := l.Deploy(context.Background(), model("v2")); err != nil {
		t.Fatal(err)
	}
	if v, _ := l.Deployed(); v != "v2" {
		t.Errorf("deployed %q, want v2", v)
	}
	lanes := NewLanes(2, quiet)
	jobs := []*Job{lanes.Start("a", "1", func(context.Context) error { panic("injected in a job") }),
		lanes.Start("b", "1", func(context.Context) error { return nil })}
	if err := Wait(context.Background(), jobs); err == nil || !strings.Contains(err.Error(), "injected in a job") {
		t.Errorf("Lanes: %v, want the job's panic as an error", err)
	}
}
