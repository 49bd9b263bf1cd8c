package importer

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
)

// Progress counts the imports in place (their last reconcile applied the
// derived Service, the ServiceImport and every slice) against the imports
// the registry holds for the cluster: two gauges, and while they differ a
// log line every Interval rather than one per object, which a join of
// thousands of imports would bury the log in.
type Progress struct {
	Stream *Stream
	Log    *slog.Logger
	// Interval is how often progress is logged while imports are not all
	// in place (5 s when zero).
	Interval time.Duration

	mu      sync.Mutex
	inPlace map[types.NamespacedName]bool
}

// NewProgress registers fleetnet_agent_imports and
// fleetnet_agent_imports_in_place on reg (none when nil).
func NewProgress(reg prometheus.Registerer, stream *Stream, log *slog.Logger) *Progress {
	p := &Progress{Stream: stream, Log: log, inPlace: map[types.NamespacedName]bool{}}
	if reg != nil {
		reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fleetnet_agent_imports", Help: "Imports the registry holds for this cluster."},
				func() float64 { return float64(stream.Len()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fleetnet_agent_imports_in_place", Help: "Imports whose ServiceImport, derived Service and EndpointSlices are applied."},
				func() float64 { return float64(p.count()) }),
		)
	}
	return p
}

// Set records whether the import key is in place. A nil Progress records
// nothing.
func (p *Progress) Set(key types.NamespacedName, in bool) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if in {
		p.inPlace[key] = true
	} else {
		delete(p.inPlace, key)
	}
}

func (p *Progress) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.inPlace)
}

// NeedLeaderElection: only the leader reconciles imports.
func (p *Progress) NeedLeaderElection() bool { return true }

// Start logs progress until ctx ends: every Interval while imports are
// missing, once when they are all in place again, nothing while nothing
// changes.
func (p *Progress) Start(ctx context.Context) error {
	interval := p.Interval
	if interval <= 0 {
		interval = 5 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var since time.Time // when imports were first seen missing
	lastIn, lastOf := -1, -1
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		in, of := p.count(), p.Stream.Len()
		switch {
		case in < of:
			if since.IsZero() {
				since = time.Now()
			}
			if in != lastIn || of != lastOf {
				p.Log.Info("importing", "inPlace", in, "of", of, "for", time.Since(since).Round(time.Second))
			}
		case !since.IsZero():
			p.Log.Info("every import in place", "imports", of, "took", time.Since(since).Round(time.Second))
			since = time.Time{}
		}
		lastIn, lastOf = in, of
	}
}
