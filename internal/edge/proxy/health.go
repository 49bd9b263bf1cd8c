package proxy

import (
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetnet/fleetnet/internal/gateway/model"
)

// HealthOptions set the active health checks of every endpoint: a TCP
// connect every Interval, failing after Timeout; UnhealthyAfter failures in
// a row take an endpoint out, HealthyAfter successes bring it back. A
// connection failure while forwarding takes it out at once (passive
// ejection); the active check brings it back.
type HealthOptions struct {
	Interval       time.Duration
	Timeout        time.Duration
	UnhealthyAfter int
	HealthyAfter   int
}

// DefaultHealth finds a stopped endpoint within about a second, well
// before a registry lease or a DNS TTL would.
var DefaultHealth = HealthOptions{Interval: 500 * time.Millisecond, Timeout: 300 * time.Millisecond, UnhealthyAfter: 2, HealthyAfter: 1}

type endpointKey struct {
	addr string
	port int32
}

func keyOf(e model.Endpoint) endpointKey { return endpointKey{e.Address, e.Port} }

type endpointHealth struct {
	down atomic.Bool
	// streaks of the active check, owned by the checker goroutine.
	fails, oks int
}

// health tracks every endpoint of the served model.
type health struct {
	opts HealthOptions
	mu   sync.RWMutex
	eps  map[endpointKey]*endpointHealth
	// wake makes the checker probe at once (an endpoint was ejected).
	wake chan struct{}
}

func newHealth(o HealthOptions) *health {
	return &health{opts: o, eps: map[endpointKey]*endpointHealth{}, wake: make(chan struct{}, 1)}
}

// track makes the endpoints of t the ones checked; new ones start healthy
// (the model says they are ready), known ones keep their state.
func (h *health) track(t *table) {
	want := map[endpointKey]bool{}
	for _, p := range t.ports {
		for _, vh := range p.allHosts() {
			for _, r := range vh.routes {
				for _, b := range r.backends {
					for _, c := range b.clusters {
						for _, e := range c.ready {
							want[keyOf(e)] = true
						}
					}
				}
			}
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for k := range h.eps {
		if !want[k] {
			delete(h.eps, k)
		}
	}
	for k := range want {
		if h.eps[k] == nil {
			h.eps[k] = &endpointHealth{}
		}
	}
}

// healthy reports whether an endpoint may be picked.
func (h *health) healthy(e model.Endpoint) bool {
	h.mu.RLock()
	s := h.eps[keyOf(e)]
	h.mu.RUnlock()
	return s == nil || !s.down.Load()
}

// failed ejects an endpoint after a connection failure.
func (h *health) failed(e model.Endpoint) {
	h.mu.RLock()
	s := h.eps[keyOf(e)]
	h.mu.RUnlock()
	if s != nil && !s.down.Swap(true) {
		select {
		case h.wake <- struct{}{}:
		default:
		}
	}
}

// run probes every endpoint each interval until ctx ends.
func (h *health) run(ctx context.Context) {
	t := time.NewTicker(h.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-h.wake:
		}
		h.probeAll(ctx)
	}
}

func (h *health) probeAll(ctx context.Context) {
	h.mu.RLock()
	keys := make([]endpointKey, 0, len(h.eps))
	states := make([]*endpointHealth, 0, len(h.eps))
	for k, s := range h.eps {
		keys = append(keys, k)
		states = append(states, s)
	}
	h.mu.RUnlock()
	results := make([]bool, len(keys))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i, k := range keys {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			d := net.Dialer{Timeout: h.opts.Timeout}
			conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(k.addr, strconv.Itoa(int(k.port))))
			if err == nil {
				conn.Close()
			}
			results[i] = err == nil
		})
	}
	wg.Wait()
	for i, s := range states {
		if results[i] {
			s.fails, s.oks = 0, s.oks+1
			if s.down.Load() && s.oks >= h.opts.HealthyAfter {
				s.down.Store(false)
			}
		} else {
			s.oks, s.fails = 0, s.fails+1
			if s.fails >= h.opts.UnhealthyAfter {
				s.down.Store(true)
			}
		}
	}
}
