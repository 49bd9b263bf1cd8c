package importer

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/registry/client"
	"github.com/fleetnet/fleetnet/internal/registry/importstate"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"
)

// Desired is what the registry says one import should be: its spec and
// its endpoints by source cluster and chunk.
type Desired = importstate.Import

// Stream follows the registry's watch and holds the desired state of every
// import. It keeps what it holds while the registry is unreachable (fail
// static) and says whether it is synced, so that nothing is deleted on
// partial knowledge.
type Stream struct {
	Client registryv1.RegistryClient
	Log    *slog.Logger
	// Changed is called with every import whose desired state changed.
	Changed func(types.NamespacedName)
	// Synced, when set, is 1 while the stream holds a synced snapshot.
	Synced prometheus.Gauge
	// Namespaces, when set, are the only namespaces the registry is asked
	// to send imports of (the cluster's import policy).
	Namespaces []string

	mu      sync.Mutex
	imports map[types.NamespacedName]*Desired
	rev     int64
	synced  bool
	// traces holds, per import, the trace_parent of the last traced
	// change received and not yet applied (see TakeTraceParent).
	traces map[types.NamespacedName]string
}

// TakeTraceParent returns the trace_parent of the last change of key the
// registry sent (the registry's fan-out of a traced write), and forgets
// it: the apply that takes it is that change's span. "" when no traced
// change is waiting.
func (s *Stream) TakeTraceParent(key types.NamespacedName) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	tp := s.traces[key]
	delete(s.traces, key)
	return tp
}

// ReturnTraceParent gives back a trace_parent taken for an apply that
// failed, so that the retry joins the same trace, unless a newer change
// came meanwhile.
func (s *Stream) ReturnTraceParent(key types.NamespacedName, tp string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, newer := s.traces[key]; !newer && tp != "" {
		s.noteTrace(key, tp)
	}
}

// noteTrace records a traced change of key; callers hold s.mu.
func (s *Stream) noteTrace(key types.NamespacedName, tp string) {
	if tp == "" {
		return
	}
	if s.traces == nil {
		s.traces = map[types.NamespacedName]string{}
	}
	s.traces[key] = tp
}

// eventTraceParent is the trace_parent an import or chunk upsert carries.
func eventTraceParent(ev *registryv1.WatchEvent) string {
	switch e := ev.GetEvent().(type) {
	case *registryv1.WatchEvent_ImportUpsert:
		return e.ImportUpsert.GetTraceParent()
	case *registryv1.WatchEvent_EndpointsUpsert:
		return e.EndpointsUpsert.GetTraceParent()
	}
	return ""
}

// desiredTraceParent is the trace_parent of an import received in a
// snapshot: the import's, else one of its chunks'.
func desiredTraceParent(d *Desired) string {
	if d == nil {
		return ""
	}
	if tp := d.Import.GetTraceParent(); tp != "" {
		return tp
	}
	for _, chunks := range d.Chunks {
		for _, c := range chunks {
			if tp := c.GetTraceParent(); tp != "" {
				return tp
			}
		}
	}
	return ""
}

// Get returns the desired state of an import (nil when the registry has
// none) and whether the stream is synced.
func (s *Stream) Get(key types.NamespacedName) (*Desired, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.imports[key]
	if d == nil {
		return nil, s.synced
	}
	chunks := make(map[string]map[string]*registryv1.EndpointChunk, len(d.Chunks))
	for c, m := range d.Chunks {
		chunks[c] = make(map[string]*registryv1.EndpointChunk, len(m))
		for n, ch := range m {
			chunks[c][n] = ch
		}
	}
	return &Desired{Import: d.Import, Chunks: chunks}, s.synced
}

// Len returns how many imports the stream holds.
func (s *Stream) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.imports)
}

// Keys returns every import the stream holds, and whether it is synced.
func (s *Stream) Keys() ([]types.NamespacedName, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]types.NamespacedName, 0, len(s.imports))
	for k := range s.imports {
		out = append(out, k)
	}
	return out, s.synced
}

// Start watches until ctx ends, resuming after every interruption.
func (s *Stream) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.imports == nil {
		s.imports = map[types.NamespacedName]*Desired{}
	}
	s.mu.Unlock()
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		got, err := s.watch(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if got {
			backoff = 200 * time.Millisecond
		}
		s.Log.Info("registry watch ended; keeping imports as they are and resuming", "code", status.Code(err).String(), "err", err, "retryIn", backoff)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
	return nil
}

// NeedLeaderElection: only the leader writes imports.
func (s *Stream) NeedLeaderElection() bool { return true }

func (s *Stream) watch(ctx context.Context) (bool, error) {
	s.mu.Lock()
	resume := s.rev
	s.mu.Unlock()
	w, err := s.Client.Watch(ctx, &registryv1.WatchRequest{ResumeRevision: resume, Namespaces: s.Namespaces}, client.WaitForConnection())
	if err != nil {
		return false, err
	}
	var staged map[types.NamespacedName]*Desired // a snapshot being received
	// held are imports changed by events of a revision whose last event
	// (the one without more) has yet to come: an export written with its
	// endpoints is applied once, whole.
	var held []types.NamespacedName
	release := func() {
		for _, k := range held {
			s.Changed(k)
		}
		held = held[:0]
	}
	got := false
	for {
		ev, err := w.Recv()
		if err != nil {
			release() // applied already: their imports must not wait for a resync
			s.setSynced(false)
			return got, err
		}
		got = true
		switch ev.GetEvent().(type) {
		case *registryv1.WatchEvent_Reset_:
			staged = map[types.NamespacedName]*Desired{}
		case *registryv1.WatchEvent_Synced:
			var changed []types.NamespacedName
			s.mu.Lock()
			if staged != nil {
				for k, d := range s.imports {
					if n, ok := staged[k]; ok {
						keepEqualChunks(d, n)
					}
					if n, ok := staged[k]; !ok || !sameDesired(d, n) {
						changed = append(changed, k)
					}
				}
				for k := range staged {
					if _, ok := s.imports[k]; !ok {
						changed = append(changed, k)
					}
				}
				s.imports, staged = staged, nil
				smallestFirst(changed, s.imports)
				for _, k := range changed {
					s.noteTrace(k, desiredTraceParent(s.imports[k]))
				}
			}
			s.rev = ev.GetRevision()
			s.mu.Unlock()
			s.setSynced(true)
			for _, k := range changed {
				s.Changed(k)
			}
		default:
			target := staged
			s.mu.Lock()
			if target == nil {
				target = s.imports
			}
			k, ok := apply(target, ev)
			if staged == nil {
				s.rev = max(s.rev, ev.GetRevision())
				if ok {
					s.noteTrace(k, eventTraceParent(ev))
				}
			}
			s.mu.Unlock()
			if ok && staged == nil {
				held = append(held, k)
			}
		}
		// Whatever the event (a resume's synced mark shares the revision
		// of the last change replayed before it), the revision is whole.
		if !ev.GetMore() {
			release()
		}
	}
}

// smallestFirst orders keys by their imports' endpoints, fewest first
// (removed imports, which have none, first of all), then by name: a
// cluster that joins a fleet has most of its imports in place soonest, and
// an import of 50,000 endpoints does not hold back thousands of small ones.
func smallestFirst(keys []types.NamespacedName, imports map[types.NamespacedName]*Desired) {
	size := make(map[types.NamespacedName]int, len(keys))
	for _, k := range keys {
		if d := imports[k]; d != nil {
			for _, chunks := range d.Chunks {
				for _, c := range chunks {
					size[k] += len(c.GetEndpoints())
				}
			}
		}
	}
	slices.SortFunc(keys, func(a, b types.NamespacedName) int {
		return cmp.Or(cmp.Compare(size[a], size[b]), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
}

func (s *Stream) setSynced(v bool) {
	s.mu.Lock()
	s.synced = v
	s.mu.Unlock()
	if s.Synced != nil {
		if v {
			s.Synced.Set(1)
		} else {
			s.Synced.Set(0)
		}
	}
}

// apply applies one delta to m and returns the import it touched.
func apply(m map[types.NamespacedName]*Desired, ev *registryv1.WatchEvent) (types.NamespacedName, bool) {
	return importstate.Apply(m, ev, func(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} })
}

// keepEqualChunks puts the chunk objects held before a new snapshot in
// place of their equal copies in it: the import planner trusts slices it
// verified against a chunk object (see verifiedSlices), so keeping the
// objects keeps a reconnect from costing a full comparison of every large
// import, and keeps the old and new copies from both staying in memory.
func keepEqualChunks(held, next *Desired) {
	for cluster, chunks := range next.Chunks {
		for name, c := range chunks {
			if h := held.Chunks[cluster][name]; h != nil && registryv1.EqualIgnoringTrace(h, c) {
				chunks[name] = h
			}
		}
	}
}

// sameDesired compares two states of an import, trace_parents aside (a
// snapshot that only carries other traces changes nothing).
func sameDesired(a, b *Desired) bool {
	if !registryv1.EqualIgnoringTrace(a.Import, b.Import) || len(a.Chunks) != len(b.Chunks) {
		return false
	}
	for c, m := range a.Chunks {
		if len(m) != len(b.Chunks[c]) {
			return false
		}
		for n, ch := range m {
			if !registryv1.EqualIgnoringTrace(ch, b.Chunks[c][n]) {
				return false
			}
		}
	}
	return true
}
