package provider

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/testkit"
)

// panicking panics on the models it is told to.
type panicking struct {
	recorder
	on string
}

func (p *panicking) Deploy(ctx context.Context, m *edgev1.Model) error {
	if m.Version == p.on {
		panic("injected")
	}
	return p.recorder.Deploy(ctx, m)
}

// A provider that panics on one model fails that model's deployment (its
// error is the queue's LastError, which the status shows); the queue goes
// on with the next model.
func TestQueueRecoversAProviderPanic(t *testing.T) {
	p := &panicking{on: "v1"}
	var changes atomic.Int32
	q := &Queue{Provider: p, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), RetryMax: time.Hour, OnChange: func() { changes.Add(1) }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { q.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	q.Set(&edgev1.Model{Version: "v1"})
	testkit.Until(t, 10*time.Second, "the panic reported as the queue's error", func() bool {
		err := q.LastError()
		return err != nil && strings.Contains(err.Error(), "panic")
	})
	q.Set(&edgev1.Model{Version: "v2"})
	testkit.Until(t, 10*time.Second, "v2 deployed after the panic", func() bool {
		m := p.last()
		return m != nil && m.Version == "v2" && q.LastError() == nil
	})
}

// hanging waits on v1 until its context ends, as a cloud provider waiting
// for one object's long operation does.
type hanging struct{ recorder }

func (p *hanging) Deploy(ctx context.Context, m *edgev1.Model) error {
	if m.Version == "v1" {
		<-ctx.Done()
		return ctx.Err()
	}
	return p.recorder.Deploy(ctx, m)
}

// A newer model cancels the deploy in progress instead of waiting for it,
// and a superseded deploy is no failure.
func TestQueueNewerModelSupersedesAHangingDeploy(t *testing.T) {
	p := &hanging{}
	q := &Queue{Provider: p, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), RetryMax: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { q.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	q.Set(&edgev1.Model{Version: "v1"})
	testkit.Until(t, 10*time.Second, "v1 deploying", func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.deploying == "v1"
	})
	q.Set(&edgev1.Model{Version: "v1"}) // the same model again: no cancel
	q.Set(&edgev1.Model{Version: "v2"})
	testkit.Until(t, 10*time.Second, "v2 deployed", func() bool {
		m := p.last()
		return m != nil && m.Version == "v2"
	})
	if err := q.LastError(); err != nil {
		t.Errorf("LastError = %v, want nil: a superseded deploy did not fail", err)
	}
}
