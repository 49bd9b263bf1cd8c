package server

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
	"github.com/fleetnet/fleetnet/internal/discovery/store"
)

// Content types of the watch stream.
const (
	ContentTypeNDJSON = "application/x-ndjson"
	ContentTypeSSE    = "text/event-stream"
)

// maxBatch bounds how many events are written between two flushes, so that
// a long backlog still reaches the client in pieces.
const maxBatch = 256

func (s *Server) watch(w http.ResponseWriter, r *http.Request, id Identity) {
	q, qerr := query(r, "revision", "namespace", "labelSelector")
	if qerr != nil {
		writeJSON(w, http.StatusBadRequest, qerr)
		return
	}
	from, ok := parseRevision(w, q.Get("revision"), "revision")
	if !ok {
		return
	}
	if !q.Has("revision") {
		// Browsers' EventSource resumes with the id of the last event.
		if from, ok = parseRevision(w, r.Header.Get("Last-Event-ID"), "Last-Event-ID"); !ok {
			return
		}
	}
	f, ferr := parseFilters(q)
	if ferr != nil {
		writeJSON(w, http.StatusBadRequest, ferr)
		return
	}
	sse := acceptsSSE(r.Header.Get("Accept"))
	if sse {
		w.Header().Set("Content-Type", ContentTypeSSE)
	} else {
		w.Header().Set("Content-Type", ContentTypeNDJSON)
	}
	w.Header().Set("Cache-Control", "no-cache")
	// Proxies such as nginx would otherwise hold the stream back.
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()

	// A snapshot taken before the source has loaded would end with a synced
	// mark on partial knowledge, and a client would drop what it holds.
	select {
	case <-s.cfg.Backend.Synced():
	case <-r.Context().Done():
		return
	case <-s.stopping:
		return
	}

	viewer := id.viewer()
	watchFrom := from
	if !viewer.EveryPool() {
		// What a cluster held at from cannot be told from the history
		// (pools enter and leave its sight): it starts afresh, with a
		// reset and a snapshot of what it may see, rather than be sent
		// deletes of pools it never saw, which would name them.
		watchFrom = 0
	}
	sub, initial := s.cfg.Store.Watch(watchFrom)
	defer sub.Stop()
	if watchFrom != from {
		initial = append([]*store.Event{{Event: discoveryv1.Event{Type: discoveryv1.EventReset, Revision: initial[len(initial)-1].Revision}}}, initial...)
	}
	s.metrics.watchers.Inc()
	defer s.metrics.watchers.Dec()

	st := &stream{w: w, rc: rc, sse: sse, last: from, timeout: s.cfg.WriteTimeout,
		filter: newWatchFilter(viewer, f.namespace, f.selector, watchFrom > 0)}
	st.arm()
	for _, e := range initial {
		st.send(e)
	}
	if err := st.flush(); err != nil {
		return
	}
	bookmarks := time.NewTicker(s.cfg.BookmarkInterval)
	defer bookmarks.Stop()
	idle := true
	for {
		select {
		case e := <-sub.C():
			st.arm()
			st.send(e)
			// Take what else is waiting before flushing: one flush for a
			// burst of changes.
		batch:
			for n := 1; n < maxBatch; n++ {
				select {
				case e := <-sub.C():
					st.send(e)
				default:
					break batch
				}
			}
			if err := st.flush(); err != nil {
				return
			}
			s.metrics.observeDelivery(st.delivered)
			st.delivered = st.delivered[:0]
			idle = false
		case <-sub.CutOff():
			// What is buffered is whole changes: send it, so that the
			// client resumes from as late as possible.
			st.arm()
			for len(sub.C()) > 0 {
				st.send(<-sub.C())
			}
			_ = st.flush()
			s.metrics.cutOffs.Inc()
			s.cfg.Log.Info("watcher fell behind and was cut off; it resumes from its last revision", "remote", r.RemoteAddr, "revision", st.last)
			return
		case <-bookmarks.C:
			if idle {
				st.arm()
				st.send(&store.Event{Event: discoveryv1.Event{Type: discoveryv1.EventBookmark, Revision: st.last}})
				if err := st.flush(); err != nil {
					return
				}
			}
			idle = true
		case <-r.Context().Done():
			return
		case <-s.stopping:
			return
		}
	}
}

func parseRevision(w http.ResponseWriter, v, field string) (int64, bool) {
	if v == "" {
		return 0, true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err != nil:
		badRequest(w, field, v, "not a number: the revision of the last event received, or 0")
		return 0, false
	case n < 0:
		badRequest(w, field, v, "must not be negative")
		return 0, false
	}
	return n, true
}

func acceptsSSE(accept string) bool {
	for part := range strings.SplitSeq(accept, ",") {
		mt, _, _ := strings.Cut(part, ";")
		if strings.EqualFold(strings.TrimSpace(mt), ContentTypeSSE) {
			return true
		}
	}
	return false
}

// stream writes one watch's events. The ResponseWriter buffers small writes
// itself; no buffer of our own, as a thousand watchers would each hold one.
type stream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	sse     bool
	filter  *watchFilter
	timeout time.Duration
	// last is the revision up to which the client has everything: where a
	// bookmark points.
	last int64
	// delivered holds the change times of the events written since the
	// last flush.
	delivered []time.Time
	err       error
}

func (st *stream) send(e *store.Event) {
	switch e.Type {
	case discoveryv1.EventUpsert, discoveryv1.EventDelete, discoveryv1.EventSynced:
		// A filtered-out change still moves the client's resume point.
		st.last = e.Revision
	}
	e = st.filter.apply(e)
	if e == nil || st.err != nil {
		return
	}
	if !e.At.IsZero() {
		st.delivered = append(st.delivered, e.At)
	}
	if !st.sse {
		st.write(e.JSON())
		st.write(newline)
		return
	}
	switch e.Type {
	case discoveryv1.EventUpsert, discoveryv1.EventDelete, discoveryv1.EventSynced, discoveryv1.EventBookmark:
		// Only where resuming from this event's revision is safe: not in
		// the middle of a snapshot.
		st.write([]byte("id: " + strconv.FormatInt(e.Revision, 10) + "\n"))
	}
	st.write([]byte("event: " + string(e.Type) + "\ndata: "))
	st.write(e.JSON())
	st.write(blankLine)
}

var (
	newline   = []byte("\n")
	blankLine = []byte("\n\n")
)

// write keeps the first error; later writes are skipped.
func (st *stream) write(b []byte) {
	if st.err == nil {
		_, st.err = st.w.Write(b)
	}
}

// arm starts the write timeout of the batch of events that follows (the
// buffer may write out while they are sent).
func (st *stream) arm() {
	// Not every ResponseWriter supports deadlines; then the client's
	// connection timeout is the only bound.
	_ = st.rc.SetWriteDeadline(time.Now().Add(st.timeout))
}

// flush writes out what send buffered.
func (st *stream) flush() error {
	if st.err != nil {
		return st.err
	}
	if err := st.rc.Flush(); err != nil {
		st.err = err
		return err
	}
	return nil
}
