// Package health is fleetnet-edge's endpoint health: one Checker runs the
// active checks (a TCP connect, or an HTTP GET) of every endpoint that the
// edge's data planes (the HTTP proxy, the L4 load balancers) forward to,
// and keeps the state that their passive checks (failed connections, 5xx
// answers) change.
//
// Health is kept per checked unit (Key): an endpoint and the check
// settings of the backends that use it. Users with the same check on an
// endpoint share one unit (one probe, one state), whichever data plane
// they belong to; a user with another check on the same endpoint has its
// own. A pick reads a unit's state with one atomic load through the
// *Target its table holds: no map and no lock per request.
//
// Each data plane tracks the units of the model it serves through a Set;
// a unit is checked while any Set holds it.
package health

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

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
)

// MaxProbes bounds the probes in flight over every unit, so that a model
// of thousands of endpoints, or many that stopped answering and hold a
// probe for its whole timeout, does not open as many sockets at once.
const MaxProbes = 256

// Key names a checked unit. Check must have every field set (the data
// plane fills in defaults); a TCP check should have no Path or Hostname,
// so that users of the same TCP check share the unit.
type Key struct {
	Address string
	Port    int32
	Check   edgev1.HealthCheck
	// H2C: an HTTP check speaks HTTP/2 with prior knowledge, as the
	// backend's appProtocol says its endpoints do.
	H2C bool
}

// Target is the health of one checked unit. The zero Target is healthy
// and has no active check (tests build their own).
type Target struct {
	key Key
	// hostport is what a TCP check dials, url what an HTTP check gets.
	hostport, url string
	// now is the checker's clock; time.Now when nil.
	now func() time.Time
	// down takes the unit out of picks. Written under mu, read without.
	down atomic.Bool
	// consecutive5xx counts failed answers in a row, whichever user
	// sharing the unit sent the requests.
	consecutive5xx atomic.Int32
	// wake makes the checker probe at once.
	wake chan struct{}
	stop context.CancelFunc
	// sets counts the Sets that hold the unit; under the checker's mu.
	sets int

	mu sync.Mutex
	// oks and fails are the active check's streaks.
	oks, fails int
	// ejectedUntil is the end of a passive ejection for 5xx answers:
	// until then no active check brings the unit back.
	ejectedUntil time.Time
}

// Healthy reports whether picks may choose the unit.
func (tg *Target) Healthy() bool { return !tg.down.Load() }

// Key returns the unit's name.
func (tg *Target) Key() Key { return tg.key }

// Checker runs the active checks of every unit that a Set holds.
type Checker struct {
	// ctx ends every check when the checker closes.
	ctx    context.Context
	cancel context.CancelFunc
	// now is the clock of passive ejections; tests set it.
	now func() time.Time
	// probes is a semaphore of MaxProbes.
	probes chan struct{}
	// http1 and h2c send HTTP checks; they keep a connection per
	// endpoint between probes, as a checked server's clients do.
	http1, h2c *http.Transport

	mu      sync.Mutex
	targets map[Key]*Target
}

// New returns a checker that probes until Close.
func New() *Checker {
	tr := &http.Transport{
		Proxy:               nil,
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	h2c := tr.Clone()
	h2c.Protocols = new(http.Protocols)
	h2c.Protocols.SetUnencryptedHTTP2(true)
	ctx, cancel := context.WithCancel(context.Background())
	return &Checker{ctx: ctx, cancel: cancel, now: time.Now, probes: make(chan struct{}, MaxProbes), http1: tr, h2c: h2c, targets: map[Key]*Target{}}
}

// SetNow makes the checker read the time of passive ejections from now,
// so that a test decides when an ejection ends. Call it before the first
// Track.
func (c *Checker) SetNow(now func() time.Time) { c.now = now }

// Close stops every check. The units keep their last state.
func (c *Checker) Close() {
	c.cancel()
	c.http1.CloseIdleConnections()
	c.h2c.CloseIdleConnections()
}

// Units returns how many units are checked.
func (c *Checker) Units() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.targets)
}

// Set is the units one user (a data plane) holds.
type Set struct {
	c    *Checker
	held map[Key]*Target
}

// NewSet returns an empty set of units of c.
func (c *Checker) NewSet() *Set { return &Set{c: c, held: map[Key]*Target{}} }

// Track makes the units that walk asks for the ones s holds: walk calls
// unit for every endpoint the user forwards to and keeps the *Target it
// returns. New units start healthy (the model says their endpoints are
// ready); known ones, of this set or another, keep their state, so a
// model swap neither revives nor ejects anything. The units that no set
// holds any longer stop being checked.
func (s *Set) Track(walk func(unit func(Key) *Target)) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	held := make(map[Key]*Target, len(s.held))
	walk(func(k Key) *Target {
		if tg := held[k]; tg != nil {
			return tg
		}
		tg := c.targets[k]
		if tg == nil {
			tg = c.start(k)
			c.targets[k] = tg
		}
		if s.held[k] == nil {
			tg.sets++
		}
		held[k] = tg
		return tg
	})
	for k, tg := range s.held {
		if held[k] != nil {
			continue
		}
		if tg.sets--; tg.sets == 0 {
			tg.stop()
			delete(c.targets, k)
		}
	}
	s.held = held
}

// Release drops every unit of s.
func (s *Set) Release() { s.Track(func(func(Key) *Target) {}) }

// start begins checking a unit. Callers hold c.mu.
func (c *Checker) start(k Key) *Target {
	ctx, cancel := context.WithCancel(c.ctx)
	hostport := net.JoinHostPort(k.Address, strconv.Itoa(int(k.Port)))
	tg := &Target{key: k, hostport: hostport, url: "http://" + hostport + k.Check.Path, now: c.now, wake: make(chan struct{}, 1), stop: cancel}
	go c.run(ctx, tg)
	return tg
}

// run probes a unit every interval, and at once when woken, until ctx
// ends.
func (c *Checker) run(ctx context.Context, tg *Target) {
	interval := millis(tg.key.Check.IntervalMillis)
	if interval <= 0 {
		interval = millis(edgev1.DefaultBackendPolicy().HealthCheck.IntervalMillis)
	}
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
		case c.probes <- struct{}{}:
		case <-ctx.Done():
			return
		}
		ok := c.probe(ctx, tg)
		<-c.probes
		if ctx.Err() != nil {
			return
		}
		tg.observe(ok, c.now())
		timer.Reset(interval)
	}
}

// probe checks a unit once: a TCP connect, or an HTTP GET answered with
// 200–399, within the check's timeout.
func (c *Checker) probe(ctx context.Context, tg *Target) bool {
	ctx, cancel := context.WithTimeout(ctx, millis(tg.key.Check.TimeoutMillis))
	defer cancel()
	if tg.key.Check.Type != edgev1.HealthCheckHTTP {
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
	req.Host = tg.key.Check.Hostname
	req.Header.Set("User-Agent", "fleetnet-edge-health-check")
	tr := c.http1
	if tg.key.H2C {
		tr = c.h2c
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
func (tg *Target) observe(ok bool, now time.Time) {
	hc := tg.key.Check
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

// Eject takes the unit out until the active check brings it back, and
// not before until.
func (tg *Target) Eject(until time.Time) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	if until.After(tg.ejectedUntil) {
		tg.ejectedUntil = until
	}
	// Only successes after the ejection bring the unit back.
	tg.oks = 0
	tg.down.Store(true)
}

// FailedToConnect ejects the unit after a failed connection, and wakes
// its check: the endpoint is back as soon as the check passes again.
func (tg *Target) FailedToConnect() {
	tg.Eject(time.Time{})
	select {
	case tg.wake <- struct{}{}:
	default:
	}
}

// Answered counts an attempt sent to the unit for the passive check:
// failed is a 5xx answer or a failure after connecting. threshold
// failures in a row (0: never) eject the unit for ejection.
func (tg *Target) Answered(failed bool, threshold int32, ejection time.Duration) {
	if !failed {
		// Load first: most answers succeed, and a store on every one
		// would bounce the cache line between cores.
		if tg.consecutive5xx.Load() != 0 {
			tg.consecutive5xx.Store(0)
		}
		return
	}
	if n := tg.consecutive5xx.Add(1); threshold > 0 && n >= threshold {
		tg.consecutive5xx.Store(0)
		now := time.Now
		if tg.now != nil {
			now = tg.now
		}
		tg.Eject(now().Add(ejection))
	}
}

func millis(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
