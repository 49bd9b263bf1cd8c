package proxy

import (
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetnet/fleetnet/internal/gateway/model"
)

// Health is kept per checked unit: an endpoint and the health check
// settings of a backend that uses it. Backends with the same check on an
// endpoint share one unit (one probe, one state); a backend with another
// check on the same endpoint has its own, so each backend's picks follow
// its own check. A pick reads a unit's state with one atomic load through
// the pointer its table holds: no map and no lock per request.

// maxProbes bounds the probes in flight over every unit, so that a model
// of thousands of endpoints, or many that stopped answering and hold a
// probe for its whole timeout, does not open as many sockets at once.
const maxProbes = 256

// checkKey names a checked unit.
type checkKey struct {
	addr  string
	port  int32
	check model.HealthCheck
	// h2c: an HTTP check speaks HTTP/2 with prior knowledge, as the
	// backend's appProtocol says its endpoints do.
	h2c bool
}

// target is the health of one checked unit.
type target struct {
	key checkKey
	// hostport is what a TCP check dials, url what an HTTP check gets.
	hostport, url string
	// down takes the unit out of picks. Written under mu, read without.
	down atomic.Bool
	// consecutive5xx counts failed answers in a row, whichever backend
	// sharing the unit sent the requests.
	consecutive5xx atomic.Int32
	// wake makes the checker probe at once.
	wake chan struct{}
	stop context.CancelFunc

	mu sync.Mutex
	// oks and fails are the active check's streaks.
	oks, fails int
	// ejectedUntil is the end of a passive ejection for 5xx answers:
	// until then no active check brings the unit back.
	ejectedUntil time.Time
}

func (tg *target) healthy() bool { return !tg.down.Load() }

// health runs the active checks of every unit of the served model and
// keeps their state.
type health struct {
	// ctx ends every check when the proxy closes.
	ctx context.Context
	// now is the clock of passive ejections; tests set it.
	now func() time.Time
	// probes is a semaphore of maxProbes.
	probes chan struct{}
	// http1 and h2c send HTTP checks; they keep a connection per
	// endpoint between probes, as a checked server's clients do.
	http1, h2c *http.Transport

	mu      sync.Mutex
	targets map[checkKey]*target
}

func newHealth(ctx context.Context) *health {
	tr := &http.Transport{
		Proxy:               nil,
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	h2c := tr.Clone()
	h2c.Protocols = new(http.Protocols)
	h2c.Protocols.SetUnencryptedHTTP2(true)
	return &health{ctx: ctx, now: time.Now, probes: make(chan struct{}, maxProbes), http1: tr, h2c: h2c, targets: map[checkKey]*target{}}
}

// track makes the units of t the ones checked and points every ready
// endpoint of t at its unit's state. New units start healthy (the model
// says their endpoints are ready); known ones keep their state, so a
// model swap neither revives nor ejects anything. The checks of units
// that t no longer has stop.
func (h *health) track(t *table) {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := make(map[*target]bool, len(h.targets))
	for b := range t.backends() {
		for _, c := range b.clusters {
			for i := range c.ready {
				e := &c.ready[i]
				k := checkKey{addr: e.Address, port: e.Port, check: b.policy.check, h2c: b.h2c && b.policy.check.Type == model.HealthCheckHTTP}
				tg := h.targets[k]
				if tg == nil {
					tg = h.start(k)
					h.targets[k] = tg
				}
				e.health = tg
				seen[tg] = true
			}
		}
	}
	for k, tg := range h.targets {
		if !seen[tg] {
			tg.stop()
			delete(h.targets, k)
		}
	}
}

// start begins checking a unit. Callers hold h.mu.
func (h *health) start(k checkKey) *target {
	ctx, cancel := context.WithCancel(h.ctx)
	hostport := net.JoinHostPort(k.addr, strconv.Itoa(int(k.port)))
	tg := &target{key: k, hostport: hostport, url: "http://" + hostport + k.check.Path, wake: make(chan struct{}, 1), stop: cancel}
	go h.run(ctx, tg)
	return tg
}

// run probes a unit every interval, and at once when woken, until ctx
// ends.
func (h *health) run(ctx context.Context, tg *target) {
	interval := millis(tg.key.check.IntervalMillis)
	// The first probe comes anywhere in the first interval, so that the
	// units of a new model are not all probed at the same moment.
	timer := time.NewTimer(rand.N(interval))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-tg.wake:
		}
		select {
		case h.probes <- struct{}{}:
		case <-ctx.Done():
			return
		}
		ok := h.probe(ctx, tg)
		<-h.probes
		if ctx.Err() != nil {
			return
		}
		tg.observe(ok, h.now())
		timer.Reset(interval)
	}
}

// probe checks a unit once: a TCP connect, or an HTTP GET answered with
// 200–399, within the check's timeout.
func (h *health) probe(ctx context.Context, tg *target) bool {
	ctx, cancel := context.WithTimeout(ctx, millis(tg.key.check.TimeoutMillis))
	defer cancel()
	if tg.key.check.Type != model.HealthCheckHTTP {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", tg.hostport)
		if err != nil {
			return false
		}
		_ = conn.Close()
		return true
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, tg.url, nil)
	if err != nil {
		return false
	}
	// Without a Hostname, Host is the URL's: the endpoint's address:port.
	req.Host = tg.key.check.Hostname
	req.Header.Set("User-Agent", "fleetnet-edge-health-check")
	tr := h.http1
	if tg.key.h2c {
		tr = h.h2c
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return false
	}
	// Read a little of the body so that the connection can serve the
	// next probe; a longer body costs a new connection, not a long read.
	_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
	_ = resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 400
}

// observe applies an active check's result: UnhealthyThreshold failures
// in a row take the unit out, HealthyThreshold successes bring it back,
// but only successes after a passive ejection's time count.
func (tg *target) observe(ok bool, now time.Time) {
	hc := tg.key.check
	tg.mu.Lock()
	defer tg.mu.Unlock()
	if !ok {
		tg.oks = 0
		tg.fails++
		if tg.fails >= int(hc.UnhealthyThreshold) {
			tg.down.Store(true)
		}
		return
	}
	tg.fails = 0
	if now.Before(tg.ejectedUntil) {
		tg.oks = 0
		return
	}
	tg.oks = min(tg.oks+1, int(hc.HealthyThreshold))
	if tg.oks >= int(hc.HealthyThreshold) {
		tg.down.Store(false)
	}
}

// eject takes the unit out until the active check brings it back, and
// not before until.
func (tg *target) eject(until time.Time) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	if until.After(tg.ejectedUntil) {
		tg.ejectedUntil = until
	}
	// Only successes after the ejection bring the unit back.
	tg.oks = 0
	tg.down.Store(true)
}

// failedToConnect ejects the unit after a failed connection, and wakes
// its check: the endpoint is back as soon as the check passes again.
func (tg *target) failedToConnect() {
	tg.eject(time.Time{})
	select {
	case tg.wake <- struct{}{}:
	default:
	}
}

// answered counts an attempt sent to the unit for the passive check:
// failed is a 5xx answer or a failure after connecting. The backend's
// Consecutive5xx failures in a row eject the unit for its EjectionMillis.
func (tg *target) answered(failed bool, p *policy, now func() time.Time) {
	if !failed {
		// Load first: most answers succeed, and a store on every one
		// would bounce the cache line between cores.
		if tg.consecutive5xx.Load() != 0 {
			tg.consecutive5xx.Store(0)
		}
		return
	}
	if n := tg.consecutive5xx.Add(1); p.consecutive5xx > 0 && n >= p.consecutive5xx {
		tg.consecutive5xx.Store(0)
		tg.eject(now().Add(p.ejection))
	}
}
