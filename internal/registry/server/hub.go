package server

import (
	"sync"

	"github.com/fleetnet/fleetnet/internal/registry/view"
)

// hub fans watch events out to watchers and keeps a bounded history so that
// a watcher can resume from its last revision. A slow watcher never holds up
// the others: when its queue would pass bufferSize events or bufferBytes
// bytes it is cut off, and it resumes from its last revision (from
// history, or with a fresh snapshot).
type hub struct {
	mu sync.Mutex
	// history holds every event after revision start, in order.
	history      []*encoded
	start        int64
	historyLimit int
	bufferSize   int
	bufferBytes  int
	watchers     map[*watcher]struct{}
}

type watcher struct {
	// statusCluster selects the export statuses the watcher gets: its own
	// cluster's, every cluster's ("*"), or none ("").
	statusCluster string
	// cluster is the watching cluster, whose exports' scopes decide what it
	// gets; empty (view.Admins) for an administrator, who is in the
	// audience of what administrators see: every export.
	cluster string
	// namespaces, when set, are the only namespaces whose imports and
	// endpoints the watcher gets (a member's import policy).
	namespaces map[string]bool
	// cut is closed when the watcher fell behind.
	cut  chan struct{}
	once sync.Once

	// mu guards the queue: the events published for the watcher and not
	// yet taken by its stream. It grows with what is queued, nothing is
	// allocated ahead.
	mu    sync.Mutex
	queue []*encoded
	// pending and pendingBytes count the events queued or taken and not
	// yet written to the stream, and their encoded bytes: what the watcher
	// holds, which the hub bounds.
	pending, pendingBytes int
	// ready holds a token when events were queued since the last take.
	ready chan struct{}
}

func newHub(historyLimit, bufferSize, bufferBytes int) *hub {
	return &hub{historyLimit: historyLimit, bufferSize: bufferSize, bufferBytes: bufferBytes, watchers: map[*watcher]struct{}{}}
}

// reset drops history: the next resume needs a snapshot taken at rev. Every
// watcher is cut off.
func (h *hub) reset(rev int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.history, h.start = nil, rev
	for w := range h.watchers {
		w.cutOff()
		delete(h.watchers, w)
	}
}

func (w *watcher) cutOff() { w.once.Do(func() { close(w.cut) }) }

func (w *watcher) wants(e *encoded) bool {
	if e.status {
		return w.statusCluster == "*" || (w.statusCluster != "" && w.statusCluster == e.statusCluster)
	}
	if w.namespaces != nil && e.namespace != "" && !w.namespaces[e.namespace] {
		return false
	}
	return e.audience.Includes(w.cluster)
}

// publish appends events to history and hands them to every watcher. Each
// event is marshaled once, before the lock, whatever the number of
// watchers: fan-out costs one encoding per change plus one send of the
// changed chunk per watcher. When reached is not nil (one count per
// event, for the fan-out's traces) it counts the watchers each event was
// queued to; nil, it costs nothing.
func (h *hub) publish(events []view.Event, reached []int) {
	if len(events) == 0 {
		return
	}
	enc := make([]*encoded, len(events))
	for i, e := range events {
		enc[i] = encodeEvent(e)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.history = append(h.history, enc...)
	if over := len(h.history) - h.historyLimit; over > 0 {
		// Drop whole revisions so a resume never sees half of one.
		cut := h.history[over-1].revision
		i := over
		for i < len(h.history) && h.history[i].revision == cut {
			i++
		}
		h.history = append([]*encoded(nil), h.history[i:]...)
		h.start = cut
	}
	for w := range h.watchers {
		var mine []*encoded
		for _, e := range enc {
			if w.wants(e) {
				mine = append(mine, e)
			}
		}
		// All or nothing, so a watcher always holds whole revisions and can
		// resume from the last one it received.
		if !w.push(mine, h.bufferSize, h.bufferBytes) {
			w.cutOff()
			delete(h.watchers, w)
			continue
		}
		if reached != nil {
			for i, e := range enc {
				if w.wants(e) {
					reached[i]++
				}
			}
		}
	}
}

// subscribe registers a watcher. When resume is within history, it returns
// the events after it (replay is true); otherwise the caller sends a
// snapshot. Callers hold the registry's view lock so that nothing is
// published between the snapshot and the subscription.
func (h *hub) subscribe(statusCluster, cluster string, namespaces map[string]bool, resume, current int64) (w *watcher, replay []*encoded, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w = &watcher{statusCluster: statusCluster, cluster: cluster, namespaces: namespaces, cut: make(chan struct{}), ready: make(chan struct{}, 1)}
	h.watchers[w] = struct{}{}
	if resume <= 0 || resume < h.start || resume > current {
		return w, nil, false
	}
	for _, e := range h.history {
		if e.revision > resume && w.wants(e) {
			replay = append(replay, e)
		}
	}
	return w, replay, true
}

func (h *hub) unsubscribe(w *watcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.watchers, w)
}

func (h *hub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.watchers)
}

// push queues events, all of them or, when the watcher would then hold
// more than maxEvents events or maxBytes bytes, none (false: it fell
// behind).
func (w *watcher) push(events []*encoded, maxEvents, maxBytes int) bool {
	if len(events) == 0 {
		return true
	}
	size := 0
	for _, e := range events {
		size += e.size()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pending+len(events) > maxEvents || w.pendingBytes+size > maxBytes {
		return false
	}
	w.queue = append(w.queue, events...)
	w.pending += len(events)
	w.pendingBytes += size
	select {
	case w.ready <- struct{}{}:
	default: // a token is there already
	}
	return true
}

// spareLimit is the largest slice a watcher keeps for its next events: a
// burst's larger one goes when it was written.
const spareLimit = 1024

// take returns the queued events and makes spare, a slice take returned
// before whose events were written and cleared, the queue: a stream's two
// slices take turns, and an idle watcher holds no events. The events
// stay counted until written (see written).
func (w *watcher) take(spare []*encoded) []*encoded {
	if cap(spare) > spareLimit {
		spare = nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.queue
	w.queue = spare[:0]
	return out
}

// written counts e out of what the watcher holds.
func (w *watcher) written(e *encoded) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending--
	w.pendingBytes -= e.size()
}
