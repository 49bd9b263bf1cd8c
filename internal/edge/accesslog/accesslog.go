// Package accesslog is the edge's access log: one JSON line per request,
// buffered and written by a goroutine of its own, so that a request never
// waits for the log's pipe or file (nginx's access_log buffer= and
// flush=). When the output falls behind by more than the buffer's bound,
// lines are dropped and counted rather than slowing requests down.
package accesslog

import (
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Dropped counts the lines left out because the output fell behind.
var Dropped = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "fleetnet_edge_access_log_dropped_total",
	Help: "Access log lines left out because the log's output fell behind the requests.",
})

// Options configure a Writer.
type Options struct {
	// Buffer is how many bytes are collected before they are written;
	// 0 writes each line at once, on the request's goroutine.
	Buffer int
	// Flush is the longest a line waits in the buffer.
	Flush time.Duration
	// Max bounds what may wait to be written (the buffer being filled
	// and the one being written); past it lines are dropped. Default 16
	// times Buffer.
	Max int
}

// Writer is an io.Writer for a slog handler, which writes each record
// with one call.
type Writer struct {
	out  io.Writer
	opts Options

	mu      sync.Mutex
	filling []byte
	writing int // bytes of the batch being written
	kick    chan struct{}
	done    chan struct{}
	stopped chan struct{}
	once    sync.Once
}

// New returns a Writer onto out; Close it to write what is left.
func New(out io.Writer, o Options) *Writer {
	if o.Flush <= 0 {
		o.Flush = time.Second
	}
	if o.Max <= 0 {
		o.Max = 16 * o.Buffer
	}
	w := &Writer{out: out, opts: o, kick: make(chan struct{}, 1), done: make(chan struct{}), stopped: make(chan struct{})}
	if o.Buffer > 0 {
		w.filling = make([]byte, 0, o.Buffer)
		go w.run()
	} else {
		close(w.stopped)
	}
	return w
}

// Logger returns a JSON logger of the requests onto w.
func (w *Writer) Logger() *slog.Logger { return slog.New(slog.NewJSONHandler(w, nil)) }

// Write takes one whole line.
func (w *Writer) Write(p []byte) (int, error) {
	if w.opts.Buffer <= 0 {
		return w.out.Write(p)
	}
	w.mu.Lock()
	if len(w.filling)+w.writing+len(p) > w.opts.Max {
		w.mu.Unlock()
		Dropped.Inc()
		return len(p), nil
	}
	w.filling = append(w.filling, p...)
	full := len(w.filling) >= w.opts.Buffer
	w.mu.Unlock()
	if full {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}

func (w *Writer) run() {
	defer close(w.stopped)
	t := time.NewTicker(w.opts.Flush)
	defer t.Stop()
	spare := make([]byte, 0, w.opts.Buffer)
	for {
		stop := false
		select {
		case <-w.done:
			stop = true
		case <-t.C:
		case <-w.kick:
		}
		w.mu.Lock()
		batch := w.filling
		w.filling, w.writing = spare[:0], len(batch)
		w.mu.Unlock()
		if len(batch) > 0 {
			_, _ = w.out.Write(batch)
		}
		w.mu.Lock()
		w.writing = 0
		w.mu.Unlock()
		spare = batch
		if stop {
			return
		}
	}
}

// Close writes what is buffered and stops the writer.
func (w *Writer) Close() error {
	w.once.Do(func() { close(w.done) })
	<-w.stopped
	return nil
}
