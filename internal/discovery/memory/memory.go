// Package memory is fleetnet-discovery's "memory" pool source: pool
// members register themselves through the API under a lease, renew it, and
// are removed when they deregister or stop renewing. Nothing is kept on
// disk: a restarted server starts empty, and says so in its readiness until
// the first registration arrives or a grace period has passed (long enough
// for the registrants, which renew within a lease TTL, to be back).
package memory

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
	"github.com/fleetnet/fleetnet/internal/discovery/server"
	"github.com/fleetnet/fleetnet/internal/discovery/store"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"
)

// Source is the name under which registrations contribute to the store.
const Source = "memory"

// Limits on one registration, so that one registrant cannot make the
// server hold or send arbitrarily much.
const (
	MaxEndpoints = 1000
	MaxTTL       = time.Hour
)

// DefaultMaxPerOwner is how many live registrations one identity may hold
// unless Config says otherwise: a registrant holds one per pool and
// cluster it serves (or one per instance, when each registers itself with
// a shared identity), and one that registers without end is stopped here
// rather than fill the server's memory.
const DefaultMaxPerOwner = 1000

// Config configures a Memory.
type Config struct {
	Store *store.Store
	// TTL is the lease of a registration that names none.
	TTL time.Duration
	// Grace is how long after the start the source says it is synced
	// without any registration; zero means at once.
	Grace time.Duration
	// Tick is how often leases are checked for expiry; zero is a tenth of
	// TTL (at least 100ms).
	Tick time.Duration
	// Routers is the static list of router replicas.
	Routers []discoveryv1.Router
	// MaxPerOwner caps the live registrations of one owner (the identity
	// that registered them); zero is DefaultMaxPerOwner.
	MaxPerOwner int
	// Clock is injected by tests; nil is the real clock.
	Clock clock.WithTicker
	// Registerer receives the source's metrics; nil registers none.
	Registerer prometheus.Registerer
}

// Memory holds leased registrations and puts the pools they make into the
// store.
type Memory struct {
	cfg     Config
	started time.Time
	routers []discoveryv1.Router

	mu     sync.Mutex
	leases map[string]*lease
	byPool map[store.Key]map[string]*lease
	// byOwner counts each owner's live registrations.
	byOwner map[string]int
	seq     int64
	synced  chan struct{}

	expired, refused prometheus.Counter
}

type lease struct {
	id    string
	owner string
	seq   int64 // registration order: the oldest wins a label or an instance id
	reg   discoveryv1.Registration
	// endpoints are reg's, defaulted.
	endpoints []discoveryv1.Endpoint
	ttl       time.Duration
	expires   time.Time
}

// New returns a source that starts empty.
func New(cfg Config) *Memory {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Tick <= 0 {
		cfg.Tick = max(cfg.TTL/10, 100*time.Millisecond)
	}
	if cfg.MaxPerOwner <= 0 {
		cfg.MaxPerOwner = DefaultMaxPerOwner
	}
	m := &Memory{
		cfg: cfg, started: cfg.Clock.Now(), routers: sortRouters(cfg.Routers),
		leases: map[string]*lease{}, byPool: map[store.Key]map[string]*lease{}, byOwner: map[string]int{}, synced: make(chan struct{}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{Name: "fleetnet_discovery_registrations_expired_total", Help: "Registrations removed because their lease expired."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "fleetnet_discovery_registrations_refused_total", Help: "Registrations refused because their identity held as many live ones as one may (--max-registrations-per-identity)."}),
	}
	if cfg.Grace <= 0 {
		close(m.synced)
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(m.expired, m.refused, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fleetnet_discovery_registrations", Help: "Live registrations."}, func() float64 {
			m.mu.Lock()
			defer m.mu.Unlock()
			return float64(len(m.leases))
		}))
	}
	return m
}

func sortRouters(rs []discoveryv1.Router) []discoveryv1.Router {
	out := slices.Clone(rs)
	slices.SortFunc(out, func(a, b discoveryv1.Router) int {
		return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.InstanceID, b.InstanceID))
	})
	return out
}

// Run expires leases until ctx ends.
func (m *Memory) Run(ctx context.Context) error {
	t := m.cfg.Clock.NewTicker(m.cfg.Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			m.Expire()
		}
	}
}

// Synced is closed once the source may be taken as complete: at the first
// registration, or when the grace period after the start has passed.
func (m *Memory) Synced() <-chan struct{} { return m.synced }

// Status says why the source is not synced yet, or what it holds.
func (m *Memory) Status() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-m.synced:
		return fmt.Sprintf("%d registrations", len(m.leases))
	default:
		return fmt.Sprintf("no registrations yet: this server started empty at %s; ready at the first registration or at %s (the registration grace period)",
			m.started.UTC().Format(time.RFC3339), m.started.Add(m.cfg.Grace).UTC().Format(time.RFC3339))
	}
}

// Routers returns the static router replicas.
func (m *Memory) Routers() []discoveryv1.Router { return m.routers }

func (m *Memory) markSyncedLocked() {
	select {
	case <-m.synced:
	default:
		close(m.synced)
	}
}

// Register adds a registration of owner (the identity that registers)
// and returns its lease. An invalid registration gives a
// *discoveryv1.Error naming the field; one beyond the owner's
// Config.MaxPerOwner live registrations an error wrapping
// server.ErrTooManyRegistrations, counted.
func (m *Memory) Register(_ context.Context, owner string, reg discoveryv1.Registration) (discoveryv1.Lease, error) {
	l, err := m.prepare(reg)
	if err != nil {
		return discoveryv1.Lease{}, err
	}
	if l.id, err = newID(); err != nil {
		return discoveryv1.Lease{}, err
	}
	l.owner = owner
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byOwner[owner] >= m.cfg.MaxPerOwner {
		// Leases that ran out but were not collected yet do not count.
		m.expireLocked(m.cfg.Clock.Now())
	}
	if n := m.byOwner[owner]; n >= m.cfg.MaxPerOwner {
		m.refused.Inc()
		return discoveryv1.Lease{}, fmt.Errorf("%w: %s holds %d live registrations, the most one identity may (--max-registrations-per-identity); renew or deregister them, or register with another identity", server.ErrTooManyRegistrations, owner, n)
	}
	m.byOwner[owner]++
	m.seq++
	l.seq = m.seq
	l.expires = m.cfg.Clock.Now().Add(l.ttl)
	k := store.Key{Namespace: reg.Namespace, Name: reg.Name}
	m.leases[l.id] = l
	if m.byPool[k] == nil {
		m.byPool[k] = map[string]*lease{}
	}
	m.byPool[k][l.id] = l
	rev := m.applyLocked(k)
	// Synced only once the registration is in the store: a watch waiting
	// for the sync takes its snapshot right after and must see it.
	m.markSyncedLocked()
	return m.leaseOf(l, rev), nil
}

// Renew extends a registration's lease; with reg, it also replaces the
// registration's members, labels, region and TTL (its pool and cluster
// stay). An unknown or expired registration gives an error wrapping
// fs.ErrNotExist: register again.
func (m *Memory) Renew(_ context.Context, id string, reg *discoveryv1.Registration) (discoveryv1.Lease, error) {
	var next *lease
	if reg != nil {
		var err error
		if next, err = m.prepare(*reg); err != nil {
			return discoveryv1.Lease{}, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l, err := m.liveLocked(id)
	if err != nil {
		return discoveryv1.Lease{}, err
	}
	k := store.Key{Namespace: l.reg.Namespace, Name: l.reg.Name}
	if next != nil {
		for _, f := range []struct{ field, was, now string }{
			{"namespace", l.reg.Namespace, next.reg.Namespace}, {"name", l.reg.Name, next.reg.Name}, {"cluster", l.reg.Cluster, next.reg.Cluster},
		} {
			if f.was != f.now {
				return discoveryv1.Lease{}, &discoveryv1.Error{Field: f.field, Value: f.now, Message: fmt.Sprintf("registration %s is for %q; a renewal cannot move it: deregister and register anew", id, f.was)}
			}
		}
		l.reg, l.endpoints, l.ttl = next.reg, next.endpoints, next.ttl
	}
	l.expires = m.cfg.Clock.Now().Add(l.ttl)
	return m.leaseOf(l, m.applyLocked(k)), nil
}

// Deregister removes a registration now. An unknown or expired one gives an
// error wrapping fs.ErrNotExist.
func (m *Memory) Deregister(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, err := m.liveLocked(id)
	if err != nil {
		return err
	}
	m.removeLocked(l)
	m.applyLocked(store.Key{Namespace: l.reg.Namespace, Name: l.reg.Name})
	return nil
}

// liveLocked returns a registration whose lease has not expired. One whose
// lease ran out is gone even when Expire has not collected it yet, so that
// the answer does not depend on when the last tick was.
func (m *Memory) liveLocked(id string) (*lease, error) {
	l := m.leases[id]
	if l == nil || !m.cfg.Clock.Now().Before(l.expires) {
		return nil, fmt.Errorf("registration %q: %w (expired or deregistered: register again)", id, fs.ErrNotExist)
	}
	return l, nil
}

func (m *Memory) removeLocked(l *lease) {
	k := store.Key{Namespace: l.reg.Namespace, Name: l.reg.Name}
	if m.byOwner[l.owner]--; m.byOwner[l.owner] <= 0 {
		delete(m.byOwner, l.owner)
	}
	delete(m.leases, l.id)
	delete(m.byPool[k], l.id)
	if len(m.byPool[k]) == 0 {
		delete(m.byPool, k)
	}
}

// Expire removes every registration whose lease has run out, and marks the
// source synced once the grace period has passed. Run calls it every tick.
func (m *Memory) Expire() {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Clock.Now()
	m.expireLocked(now)
	// After the expiries are in the store, as in Register.
	if !now.Before(m.started.Add(m.cfg.Grace)) {
		m.markSyncedLocked()
	}
}

// expireLocked removes the registrations whose lease ran out by now.
func (m *Memory) expireLocked(now time.Time) {
	touched := map[store.Key]bool{}
	for _, l := range m.leases {
		if !now.Before(l.expires) {
			m.removeLocked(l)
			m.expired.Inc()
			touched[store.Key{Namespace: l.reg.Namespace, Name: l.reg.Name}] = true
		}
	}
	// In key order, so that the same leases expiring give the same
	// revisions.
	for _, k := range slices.SortedFunc(maps.Keys(touched), func(a, b store.Key) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	}) {
		m.applyLocked(k)
	}
}

// applyLocked puts pool k, as its live registrations make it, into the
// store, and returns the store's revision. It runs under m.mu so that the
// store sees one pool's states in the order they happened.
func (m *Memory) applyLocked(k store.Key) int64 {
	regs := slices.SortedFunc(maps.Values(m.byPool[k]), func(a, b *lease) int { return cmp.Compare(a.seq, b.seq) })
	if len(regs) == 0 {
		return m.cfg.Store.Delete(Source, k)
	}
	p := discoveryv1.Pool{Namespace: k.Namespace, Name: k.Name}
	clusters := map[string]int{}
	seen := map[string]bool{}
	for _, l := range regs {
		for lk, lv := range l.reg.Labels {
			if _, ok := p.Labels[lk]; !ok {
				if p.Labels == nil {
					p.Labels = map[string]string{}
				}
				p.Labels[lk] = lv
			}
		}
		i, ok := clusters[l.reg.Cluster]
		if !ok {
			i = len(p.Clusters)
			clusters[l.reg.Cluster] = i
			p.Clusters = append(p.Clusters, discoveryv1.PoolCluster{Cluster: l.reg.Cluster, Region: l.reg.Region})
		}
		for _, e := range l.endpoints {
			if id := l.reg.Cluster + "\x00" + e.InstanceID; !seen[id] {
				seen[id] = true
				p.Clusters[i].Endpoints = append(p.Clusters[i].Endpoints, e)
			}
		}
	}
	return m.cfg.Store.Replace(Source, p)
}

func (m *Memory) leaseOf(l *lease, rev int64) discoveryv1.Lease {
	return discoveryv1.Lease{
		ID: l.id, Namespace: l.reg.Namespace, Name: l.reg.Name, Cluster: l.reg.Cluster,
		TTLSeconds: int64(l.ttl / time.Second), ExpiresAt: l.expires.UTC(), Revision: rev,
	}
}

func newID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making a registration id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// prepare validates reg and makes its lease (without id, order or expiry).
func (m *Memory) prepare(reg discoveryv1.Registration) (*lease, error) {
	if err := Validate(reg); err != nil {
		return nil, err
	}
	l := &lease{reg: reg, ttl: m.cfg.TTL}
	if reg.TTLSeconds > 0 {
		l.ttl = time.Duration(reg.TTLSeconds) * time.Second
	}
	l.reg.Labels = maps.Clone(reg.Labels)
	l.reg.Endpoints = nil // the defaulted copy in endpoints is what is used
	for _, e := range reg.Endpoints {
		ready := e.Ready == nil || *e.Ready
		serving := ready
		if e.Serving != nil {
			serving = *e.Serving
		}
		l.endpoints = append(l.endpoints, discoveryv1.Endpoint{
			InstanceID: e.InstanceID, Addresses: slices.Clone(e.Addresses), Ports: defaultPorts(e.Ports),
			Ready: ready, Serving: serving, Terminating: e.Terminating, Hostname: e.Hostname, Zone: e.Zone,
		})
	}
	return l, nil
}

func defaultPorts(ps []discoveryv1.Port) []discoveryv1.Port {
	out := slices.Clone(ps)
	for i := range out {
		if out[i].Protocol == "" {
			out[i].Protocol = "TCP"
		}
	}
	return out
}

// Validate checks a registration and returns the first problem as a
// *discoveryv1.Error naming the field (a JSON path) and its value.
func Validate(reg discoveryv1.Registration) error {
	bad := func(field, value, msg string) error {
		return &discoveryv1.Error{Field: field, Value: value, Message: msg}
	}
	if err := dnsLabel("namespace", reg.Namespace); err != nil {
		return err
	}
	if err := dnsLabel("name", reg.Name); err != nil {
		return err
	}
	if reg.Cluster == "" {
		return bad("cluster", "", "is required: the cluster these members run in")
	}
	if msgs := validation.IsDNS1123Subdomain(reg.Cluster); len(msgs) > 0 {
		return bad("cluster", reg.Cluster, msgs[0])
	}
	if msgs := validation.IsValidLabelValue(reg.Region); len(msgs) > 0 {
		return bad("region", reg.Region, msgs[0])
	}
	for _, k := range slices.Sorted(maps.Keys(reg.Labels)) {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			return bad("labels", k, "invalid label key: "+msgs[0])
		}
		if msgs := validation.IsValidLabelValue(reg.Labels[k]); len(msgs) > 0 {
			return bad("labels."+k, reg.Labels[k], msgs[0])
		}
	}
	if reg.TTLSeconds < 0 || time.Duration(reg.TTLSeconds)*time.Second > MaxTTL {
		return bad("ttlSeconds", strconv.FormatInt(reg.TTLSeconds, 10), fmt.Sprintf("must be from 0 (the server's default) to %d", int64(MaxTTL/time.Second)))
	}
	if len(reg.Endpoints) == 0 {
		return bad("endpoints", "", "at least one endpoint is required; deregister to leave the pool")
	}
	if len(reg.Endpoints) > MaxEndpoints {
		return bad("endpoints", strconv.Itoa(len(reg.Endpoints)), fmt.Sprintf("at most %d endpoints per registration", MaxEndpoints))
	}
	ids := map[string]bool{}
	for i, e := range reg.Endpoints {
		f := fmt.Sprintf("endpoints[%d]", i)
		switch {
		case e.InstanceID == "":
			return bad(f+".instanceID", "", "is required: a name stable for the instance's life (its Pod's name, or <cluster>/<address>)")
		case len(e.InstanceID) > 253:
			return bad(f+".instanceID", e.InstanceID, "must be at most 253 characters")
		case ids[e.InstanceID]:
			return bad(f+".instanceID", e.InstanceID, "is given twice")
		}
		ids[e.InstanceID] = true
		if len(e.Addresses) == 0 {
			return bad(f+".addresses", "", "at least one address is required")
		}
		for j, a := range e.Addresses {
			if _, err := netip.ParseAddr(a); err != nil {
				return bad(fmt.Sprintf("%s.addresses[%d]", f, j), a, "not an IPv4 or IPv6 address")
			}
		}
		names := map[string]bool{}
		for j, p := range e.Ports {
			pf := fmt.Sprintf("%s.ports[%d]", f, j)
			if msgs := validation.IsDNS1123Label(p.Name); len(msgs) > 0 {
				return bad(pf+".name", p.Name, msgs[0])
			}
			if names[p.Name] {
				return bad(pf+".name", p.Name, "is given twice")
			}
			names[p.Name] = true
			if p.Port < 1 || p.Port > 65535 {
				return bad(pf+".port", strconv.Itoa(int(p.Port)), "must be from 1 to 65535")
			}
			if p.Protocol != "" && p.Protocol != "TCP" && p.Protocol != "UDP" && p.Protocol != "SCTP" {
				return bad(pf+".protocol", p.Protocol, "must be TCP, UDP or SCTP (empty is TCP)")
			}
		}
		if e.Hostname != "" {
			if msgs := validation.IsDNS1123Label(e.Hostname); len(msgs) > 0 {
				return bad(f+".hostname", e.Hostname, msgs[0])
			}
		}
		if msgs := validation.IsValidLabelValue(e.Zone); len(msgs) > 0 {
			return bad(f+".zone", e.Zone, msgs[0])
		}
	}
	return nil
}

func dnsLabel(field, v string) error {
	if v == "" {
		return &discoveryv1.Error{Field: field, Message: "is required"}
	}
	if msgs := validation.IsDNS1123Label(v); len(msgs) > 0 {
		return &discoveryv1.Error{Field: field, Value: v, Message: msgs[0]}
	}
	return nil
}
