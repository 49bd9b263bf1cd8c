package load

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/registry/client"
	"google.golang.org/grpc"
)

// Watcher watches the registry's imports as an agent does: a snapshot, then
// deltas, resuming from the last revision it holds after every
// interruption. It keeps only what a load test checks (which imports exist,
// and per endpoint chunk its endpoint count and the version the load
// generator wrote into it), and reads only those fields off the wire (see
// decodeEvent): a hundred watchers of 300,000 endpoints then fit in one
// test process, and the machine's CPU goes to the registry under test, not
// to decoding endpoints the load generator does not look at.
type Watcher struct {
	// Conn is the registry connection, as a cluster.
	Conn grpc.ClientConnInterface
	// OnChunk, when set, is called for every chunk delta received after the
	// first snapshot, with the version it carries and when it arrived.
	OnChunk func(version int64, at time.Time)
	// OnSynced, when set, is called at every synced mark.
	OnSynced func(at time.Time)

	mu        sync.Mutex
	rev       int64
	imports   map[string]bool
	chunks    map[string]chunkState
	staged    *state
	synced    bool
	snapshots int
	resumes   int
	bytes     int64
	events    int64
}

type chunkState struct {
	version   int64
	endpoints int
}

type state struct {
	imports map[string]bool
	chunks  map[string]chunkState
}

// WatcherStats is what a watcher counted.
type WatcherStats struct {
	// Revision is the last revision the watcher holds.
	Revision int64
	// Synced is true while the watcher holds a complete state.
	Synced bool
	// Snapshots counts the snapshots received (resets); a watcher that
	// resumed every time has 1.
	Snapshots int
	// Resumes counts the watches reopened from a revision.
	Resumes int
	// Imports and Endpoints are what the watcher holds.
	Imports, Endpoints int
	// Events and Bytes count what was received (Bytes: encoded event sizes).
	Events, Bytes int64
}

// Stats returns the watcher's counts.
func (w *Watcher) Stats() WatcherStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := WatcherStats{Revision: w.rev, Synced: w.synced, Snapshots: w.snapshots, Resumes: w.resumes, Imports: len(w.imports), Events: w.events, Bytes: w.bytes}
	for _, c := range w.chunks {
		s.Endpoints += c.endpoints
	}
	return s
}

// Versions returns the version of every chunk the watcher holds, by chunk
// key (namespace/name/cluster/chunk).
func (w *Watcher) Versions() map[string]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int64, len(w.chunks))
	for k, c := range w.chunks {
		out[k] = c.version
	}
	return out
}

// Imports returns the keys (namespace/name) of the imports the watcher holds.
func (w *Watcher) Imports() map[string]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]bool, len(w.imports))
	for k := range w.imports {
		out[k] = true
	}
	return out
}

// Run watches until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	w.mu.Lock()
	if w.imports == nil {
		w.imports, w.chunks = map[string]bool{}, map[string]chunkState{}
	}
	w.mu.Unlock()
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		got := w.watch(ctx)
		if ctx.Err() != nil {
			return
		}
		if got {
			backoff = 50 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

func (w *Watcher) watch(ctx context.Context) bool {
	w.mu.Lock()
	resume := w.rev
	if resume > 0 {
		w.resumes++
	}
	w.mu.Unlock()
	s, err := w.Conn.NewStream(ctx, &registryv1.Registry_ServiceDesc.Streams[0], registryv1.Registry_Watch_FullMethodName,
		client.WaitForConnection(), grpc.ForceCodecV2(wireCodec{}))
	if err != nil {
		return false
	}
	if err := s.SendMsg(&registryv1.WatchRequest{ResumeRevision: resume}); err != nil {
		return false
	}
	if err := s.CloseSend(); err != nil {
		return false
	}
	got := false
	for {
		var b []byte
		err := s.RecvMsg(&b)
		var ev event
		if err == nil {
			ev, err = decodeEvent(b)
		}
		if err != nil {
			w.mu.Lock()
			w.synced = false
			w.staged = nil
			w.mu.Unlock()
			return got
		}
		got = true
		w.apply(ev, len(b), time.Now())
	}
}

// ChunkKey is how the watcher names a chunk: namespace/name/cluster/chunk.
func ChunkKey(k *registryv1.ChunkKey) string {
	return k.GetNamespace() + "/" + k.GetName() + "/" + k.GetClusterId() + "/" + k.GetChunk()
}

func (w *Watcher) apply(ev event, size int, at time.Time) {
	w.mu.Lock()
	w.events++
	w.bytes += int64(size)
	var synced, delta bool
	var version int64 = -1
	target := state{imports: w.imports, chunks: w.chunks}
	if w.staged != nil {
		target = *w.staged
	}
	switch ev.kind {
	case kindReset:
		w.staged = &state{imports: map[string]bool{}, chunks: map[string]chunkState{}}
		w.snapshots++
	case kindSynced:
		if w.staged != nil {
			w.imports, w.chunks, w.staged = w.staged.imports, w.staged.chunks, nil
		}
		w.rev, w.synced, synced = ev.revision, true, true
	case kindImportUpsert:
		target.imports[ev.key] = true
		delta = true
	case kindImportDelete:
		delete(target.imports, ev.key)
		delta = true
	case kindChunkUpsert:
		version = ev.version
		target.chunks[ev.key] = chunkState{version: version, endpoints: ev.endpoints}
		delta = true
	case kindChunkDelete:
		delete(target.chunks, ev.key)
		delta = true
	}
	live := w.staged == nil && delta
	if live {
		w.rev = max(w.rev, ev.revision)
	}
	onChunk, onSynced := w.OnChunk, w.OnSynced
	w.mu.Unlock()
	if live && version >= 0 && onChunk != nil {
		onChunk(version, at)
	}
	if synced && onSynced != nil {
		onSynced(at)
	}
}

// versionPrefix starts the hostname of a chunk's first endpoint: the load
// generator writes the chunk's version there, so that a watcher can tell
// which write it received.
const versionPrefix = "v"

func chunkVersion(c *registryv1.EndpointChunk) int64 {
	eps := c.GetEndpoints()
	if len(eps) == 0 {
		return 0
	}
	h := eps[0].GetHostname()
	if !strings.HasPrefix(h, versionPrefix) {
		return 0
	}
	v, err := strconv.ParseInt(h[len(versionPrefix):], 10, 64)
	if err != nil {
		return 0
	}
	return v
}
