package server

import (
	"sync"

	"github.com/fleetnet/fleetnet/internal/registry/auth"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Defaults of what one identity, and everyone together, may hold of the
// registry (Config; fleetnet-registry's flags).
//
// An agent's leader holds two watches (its imports, its exports' status),
// a fleetnet-discovery or fleetnet-console replica one each. Sixteen per
// identity is room for those, for a leader handing over, and for streams a
// lost connection still holds until keepalive finds it dead (40 s). A
// 1,000-cluster fleet holds about 2,000 watches, twice that while every
// agent reconnects, plus discovery replicas and consoles: 8,000 in all
// leaves room for them and bounds what the watches' goroutines and HTTP/2
// streams take (tens of KiB each, some hundreds of MiB in all).
const (
	DefaultMaxWatchesPerIdentity = 16
	DefaultMaxWatches            = 8000
	// DefaultWatcherBufferBytes is a few thousand endpoint chunks: a whole
	// cluster's endpoints changing at once reach a watcher that reads.
	// Watchers share the encodings they queue (with each other and with
	// the history), so this bounds how much of the past one slow watcher
	// keeps alive, not a sum over watchers.
	DefaultWatcherBufferBytes = 32 << 20
)

// watchLimit names the cap that refused a watch: the label of
// fleetnet_registry_watchers_refused_total.
type watchLimit string

const (
	limitPerIdentity watchLimit = "per_identity"
	limitTotal       watchLimit = "total"
)

// watchSlots counts the watches each identity holds, and all of them, and
// admits one more only within both caps. The caps apply alike to clusters
// and administrators: a cap bounds memory, which a leaked or looping
// administrator's client takes as much as a cluster's.
type watchSlots struct {
	perIdentity, total int

	mu   sync.Mutex
	held map[auth.Identity]int
	open int
}

func newWatchSlots(perIdentity, total int) *watchSlots {
	return &watchSlots{perIdentity: perIdentity, total: total, held: map[auth.Identity]int{}}
}

// acquire takes a slot for id and returns the func that gives it back
// (call it once). Past a cap it returns which, and ResourceExhausted
// naming id and the cap.
func (s *watchSlots) acquire(id auth.Identity) (release func(), refused watchLimit, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.held[id]; n >= s.perIdentity {
		return nil, limitPerIdentity, status.Errorf(codes.ResourceExhausted,
			"%s holds %d watches, the most one identity may hold at once (--max-watches-per-identity=%d): close one first", id, n, s.perIdentity)
	}
	if s.open >= s.total {
		return nil, limitTotal, status.Errorf(codes.ResourceExhausted,
			"the registry holds %d watches, the most it serves at once (--max-watches=%d), %d of them %s's: retry later or on another replica", s.open, s.total, s.held[id], id)
	}
	s.held[id]++
	s.open++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.open--
		if s.held[id]--; s.held[id] == 0 {
			delete(s.held, id)
		}
	}, "", nil
}
