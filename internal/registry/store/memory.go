package store

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Memory is a Store in memory, for tests. Leases expire by the injected
// clock; history is kept for the last historyLimit revisions.
type Memory struct {
	clock        clock.WithTicker
	historyLimit int

	mu       sync.Mutex
	rev      int64
	data     map[string]KV
	history  []Event // every event after compacted, in revision order
	oldest   int64   // the oldest revision a watch may start after
	leases   map[LeaseID]*memLease
	nextID   LeaseID
	changed  chan struct{} // closed and replaced on every write
	stop     chan struct{}
	stopOnce sync.Once
}

type memLease struct {
	ttl     time.Duration
	expires time.Time
	keys    map[string]struct{}
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty memory store that keeps historyLimit events of
// history for watches.
func NewMemory(clk clock.WithTicker, historyLimit int) *Memory {
	m := &Memory{
		clock:        clk,
		historyLimit: historyLimit,
		data:         map[string]KV{},
		leases:       map[LeaseID]*memLease{},
		changed:      make(chan struct{}),
		stop:         make(chan struct{}),
	}
	ticker := clk.NewTicker(100 * time.Millisecond)
	go func() {
		defer ticker.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-ticker.C():
				m.ExpireLeases()
			}
		}
	}()
	return m
}

// ExpireLeases removes every lease whose time has come, and its keys.
func (m *Memory) ExpireLeases() {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	ids := make([]LeaseID, 0)
	for id, l := range m.leases {
		if !now.Before(l.expires) {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		keys := make([]string, 0, len(m.leases[id].keys))
		for k := range m.leases[id].keys {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		delete(m.leases, id)
		if len(keys) == 0 {
			continue
		}
		m.rev++
		for _, k := range keys {
			m.deleteLocked(k)
		}
		m.notifyLocked()
	}
}

func (m *Memory) Get(_ context.Context, key string) (*KV, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	kv, ok := m.data[key]
	if !ok {
		return nil, m.rev, nil
	}
	kv.Value = clone(kv.Value)
	return &kv, m.rev, nil
}

func (m *Memory) List(_ context.Context, prefix string) ([]KV, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []KV
	for k, kv := range m.data {
		if strings.HasPrefix(k, prefix) {
			kv.Value = clone(kv.Value)
			out = append(out, kv)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, m.rev, nil
}

func (m *Memory) Put(_ context.Context, key string, value []byte, lease LeaseID) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if lease != 0 {
		if _, ok := m.leases[lease]; !ok {
			return 0, ErrLeaseNotFound
		}
	}
	if old, ok := m.data[key]; ok && old.Lease != 0 && old.Lease != lease {
		if l, ok := m.leases[old.Lease]; ok {
			delete(l.keys, key)
		}
	}
	m.rev++
	kv := KV{Key: key, Value: clone(value), ModRevision: m.rev, Lease: lease}
	m.data[key] = kv
	if lease != 0 {
		m.leases[lease].keys[key] = struct{}{}
	}
	m.appendLocked(Event{Type: EventPut, KV: kv})
	m.notifyLocked()
	return m.rev, nil
}

func (m *Memory) PutAll(_ context.Context, kvs []KV) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rev++
	for _, kv := range kvs {
		if old, ok := m.data[kv.Key]; ok && old.Lease != 0 {
			if l, ok := m.leases[old.Lease]; ok {
				delete(l.keys, kv.Key)
			}
		}
		kv := KV{Key: kv.Key, Value: clone(kv.Value), ModRevision: m.rev}
		m.data[kv.Key] = kv
		m.appendLocked(Event{Type: EventPut, KV: kv})
	}
	m.notifyLocked()
	return m.rev, nil
}

func (m *Memory) Delete(_ context.Context, key string, ifRevision int64) (bool, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	kv, ok := m.data[key]
	if !ok || (ifRevision != 0 && kv.ModRevision != ifRevision) {
		return false, m.rev, nil
	}
	m.rev++
	m.deleteLocked(key)
	m.notifyLocked()
	return true, m.rev, nil
}

func (m *Memory) DeletePrefix(_ context.Context, prefix string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var keys []string
	for k := range m.data {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return m.rev, nil
	}
	sort.Strings(keys)
	m.rev++
	for _, k := range keys {
		m.deleteLocked(k)
	}
	m.notifyLocked()
	return m.rev, nil
}

// deleteLocked removes key at the current revision.
func (m *Memory) deleteLocked(key string) {
	kv := m.data[key]
	delete(m.data, key)
	if kv.Lease != 0 {
		if l, ok := m.leases[kv.Lease]; ok {
			delete(l.keys, key)
		}
	}
	m.appendLocked(Event{Type: EventDelete, KV: KV{Key: key, ModRevision: m.rev}})
}

func (m *Memory) appendLocked(e Event) {
	m.history = append(m.history, e)
	if over := len(m.history) - m.historyLimit; over > 0 {
		// Compact whole revisions only.
		cut := m.history[over-1].KV.ModRevision
		i := over
		for i < len(m.history) && m.history[i].KV.ModRevision == cut {
			i++
		}
		m.history = append([]Event(nil), m.history[i:]...)
		m.oldest = cut
	}
}

func (m *Memory) notifyLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}

func (m *Memory) Watch(ctx context.Context, prefix string, fromRevision int64) <-chan WatchResponse {
	out := make(chan WatchResponse)
	go func() {
		defer close(out)
		cursor := fromRevision
		for {
			m.mu.Lock()
			if cursor < m.oldest {
				m.mu.Unlock()
				select {
				case out <- WatchResponse{Err: ErrCompacted}:
				case <-ctx.Done():
				}
				return
			}
			var events []Event
			for _, e := range m.history {
				if e.KV.ModRevision > cursor && strings.HasPrefix(e.KV.Key, prefix) {
					e.KV.Value = clone(e.KV.Value)
					events = append(events, e)
				}
			}
			cursor = m.rev
			changed := m.changed
			m.mu.Unlock()
			if len(events) > 0 {
				select {
				case out <- WatchResponse{Events: events}:
				case <-ctx.Done():
					return
				}
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return
			case <-m.stop:
				return
			}
		}
	}()
	return out
}

func (m *Memory) GrantLease(_ context.Context, ttlSeconds int64) (LeaseID, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nextID++
	ttl := time.Duration(ttlSeconds) * time.Second
	m.leases[m.nextID] = &memLease{ttl: ttl, expires: m.clock.Now().Add(ttl), keys: map[string]struct{}{}}
	return m.nextID, nil
}

func (m *Memory) KeepAlive(_ context.Context, id LeaseID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.leases[id]
	if !ok || !m.clock.Now().Before(l.expires) {
		return ErrLeaseNotFound
	}
	l.expires = m.clock.Now().Add(l.ttl)
	return nil
}

// RequestProgress does nothing: only the registry writes a Memory store,
// so its watches reach every revision with events.
func (m *Memory) RequestProgress(context.Context) error { return nil }

func (m *Memory) Revision(context.Context) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rev, nil
}

func (m *Memory) Close() error {
	m.stopOnce.Do(func() { close(m.stop) })
	return nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}
