package client

import (
	"cmp"
	"maps"
	"slices"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
)

// Pools is a client's view of the pools, kept by applying a watch's events
// in order. It is not safe for concurrent use; a router typically applies
// events in the watch's handler and publishes what it needs from there.
//
// A snapshot replaces the view only when its synced mark arrives: until
// then (also after a reset) the previous view stays in place, so a router
// keeps routing on what it knew rather than on half a snapshot.
type Pools struct {
	// Revision is the revision the view reflects.
	Revision int64
	// Synced turns true at the first complete snapshot.
	Synced bool

	pools map[poolKey]discoveryv1.Pool
	// pending collects a snapshot until its synced mark; nil when no
	// snapshot is in progress.
	pending map[poolKey]discoveryv1.Pool
}

type poolKey struct{ namespace, name string }

func keyOf(p *discoveryv1.Pool) poolKey { return poolKey{p.Namespace, p.Name} }

// Apply applies one event and reports whether the view changed.
func (s *Pools) Apply(e discoveryv1.Event) bool {
	if s.pools == nil {
		s.pools = map[poolKey]discoveryv1.Pool{}
	}
	switch e.Type {
	case discoveryv1.EventReset:
		s.pending = map[poolKey]discoveryv1.Pool{}
		return false
	case discoveryv1.EventSnapshot:
		if s.pending == nil {
			s.pending = map[poolKey]discoveryv1.Pool{}
		}
		if e.Pool != nil {
			s.pending[keyOf(e.Pool)] = *e.Pool
		}
		return false
	case discoveryv1.EventSynced:
		// A snapshot of an empty store is a synced mark alone.
		next := s.pending
		if next == nil {
			next = map[poolKey]discoveryv1.Pool{}
		}
		changed := !s.Synced || !maps.EqualFunc(s.pools, next, func(a, b discoveryv1.Pool) bool { return a.Revision == b.Revision })
		s.pools, s.pending, s.Synced, s.Revision = next, nil, true, e.Revision
		return changed
	case discoveryv1.EventUpsert:
		s.Revision = e.Revision
		if e.Pool != nil {
			s.pools[keyOf(e.Pool)] = *e.Pool
		}
		return true
	case discoveryv1.EventDelete:
		s.Revision = e.Revision
		if e.Pool == nil {
			return false
		}
		_, had := s.pools[keyOf(e.Pool)]
		delete(s.pools, keyOf(e.Pool))
		return had
	case discoveryv1.EventBookmark:
		s.Revision = e.Revision
	}
	return false
}

// Get returns one pool.
func (s *Pools) Get(namespace, name string) (discoveryv1.Pool, bool) {
	p, ok := s.pools[poolKey{namespace, name}]
	return p, ok
}

// List returns every pool, sorted by namespace and name.
func (s *Pools) List() []discoveryv1.Pool {
	out := slices.Collect(maps.Values(s.pools))
	slices.SortFunc(out, func(a, b discoveryv1.Pool) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}
