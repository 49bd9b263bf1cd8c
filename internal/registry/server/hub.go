package server

import (
	"sync"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
)

// hub fans watch events out to watchers and keeps a bounded history so that
// a watcher can resume from its last revision. A slow watcher never holds up
// the others: when its buffer is full it is cut off, and it resumes from its
// last revision (from history, or with a fresh snapshot).
type hub struct {
	mu sync.Mutex
	// history holds every event after revision start, in order.
	history      []*registryv1.WatchEvent
	start        int64
	historyLimit int
	bufferSize   int
	watchers     map[*watcher]struct{}
}

type watcher struct {
	// statusCluster selects the export statuses the watcher gets: its own
	// cluster's, every cluster's ("*"), or none ("").
	statusCluster string
	ch            chan *registryv1.WatchEvent
	// cut is closed when the watcher fell behind.
	cut  chan struct{}
	once sync.Once
}

func newHub(historyLimit, bufferSize int) *hub {
	return &hub{historyLimit: historyLimit, bufferSize: bufferSize, watchers: map[*watcher]struct{}{}}
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

func (w *watcher) wants(e *registryv1.WatchEvent) bool {
	var cluster string
	switch ev := e.GetEvent().(type) {
	case *registryv1.WatchEvent_ExportStatus:
		cluster = ev.ExportStatus.GetKey().GetClusterId()
	case *registryv1.WatchEvent_ExportStatusDelete:
		cluster = ev.ExportStatusDelete.GetClusterId()
	default:
		return true
	}
	return w.statusCluster == "*" || (w.statusCluster != "" && w.statusCluster == cluster)
}

// publish appends events to history and hands them to every watcher.
func (h *hub) publish(events []*registryv1.WatchEvent) {
	if len(events) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.history = append(h.history, events...)
	if over := len(h.history) - h.historyLimit; over > 0 {
		// Drop whole revisions so a resume never sees half of one.
		cut := h.history[over-1].GetRevision()
		i := over
		for i < len(h.history) && h.history[i].GetRevision() == cut {
			i++
		}
		h.history = append([]*registryv1.WatchEvent(nil), h.history[i:]...)
		h.start = cut
	}
	for w := range h.watchers {
		var mine []*registryv1.WatchEvent
		for _, e := range events {
			if w.wants(e) {
				mine = append(mine, e)
			}
		}
		// All or nothing, so a watcher always holds whole revisions and can
		// resume from the last one it received.
		if len(w.ch)+len(mine) > cap(w.ch) {
			w.cutOff()
			delete(h.watchers, w)
			continue
		}
		for _, e := range mine {
			w.ch <- e
		}
	}
}

// subscribe registers a watcher. When resume is within history, it returns
// the events after it (replay is true); otherwise the caller sends a
// snapshot. Callers hold the registry's view lock so that nothing is
// published between the snapshot and the subscription.
func (h *hub) subscribe(statusCluster string, resume, current int64) (w *watcher, replay []*registryv1.WatchEvent, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w = &watcher{statusCluster: statusCluster, ch: make(chan *registryv1.WatchEvent, h.bufferSize), cut: make(chan struct{})}
	h.watchers[w] = struct{}{}
	if resume <= 0 || resume < h.start || resume > current {
		return w, nil, false
	}
	for _, e := range h.history {
		if e.GetRevision() > resume && w.wants(e) {
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
