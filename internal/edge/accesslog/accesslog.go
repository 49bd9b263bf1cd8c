// Package accesslog is the edge's access log: one JSON line per request,
// buffered and written by a goroutine of its own, so that a request never
// waits for the log's pipe or file (nginx's access_log buffer= and
// flush=). When the output falls behind by more than the buffer's bound,
// lines are dropped and counted rather than slowing requests down.
package accesslog

import (
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

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

// Logger returns a JSON logger onto w, for lines other than requests'.
func (w *Writer) Logger() *slog.Logger { return slog.New(slog.NewJSONHandler(w, nil)) }

// Entry is one request's line.
type Entry struct {
	// Time is when the request ended.
	Time               time.Time
	Method, Host, Path string
	Code               int
	Route, Backend     string
	Cluster            string
	Duration           time.Duration
}

// lineBuffers hold lines of the unbuffered mode while they are encoded.
var lineBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// Log writes e's line: the line slog's JSON handler writes for
// Info("request", "method", e.Method, "host", e.Host, ...), encoded
// straight into the buffer. Through slog each line cost more than the
// rest of a request on the edge's fast path: its arguments boxed, the
// caller's PC taken, the record copied into a handler's buffer and then
// into the Writer's.
func (w *Writer) Log(e *Entry) {
	if w.opts.Buffer <= 0 {
		bp := lineBuffers.Get().(*[]byte)
		*bp = e.append((*bp)[:0])
		_, _ = w.out.Write(*bp)
		lineBuffers.Put(bp)
		return
	}
	w.mu.Lock()
	n := len(w.filling)
	w.filling = e.append(w.filling)
	if len(w.filling)+w.writing > w.opts.Max {
		w.filling = w.filling[:n]
		w.mu.Unlock()
		Dropped.Inc()
		return
	}
	full := len(w.filling) >= w.opts.Buffer
	w.mu.Unlock()
	if full {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

// append appends e's JSON line, newline included.
func (e *Entry) append(b []byte) []byte {
	b = append(b, `{"time":"`...)
	b = e.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":"INFO","msg":"request","method":`...)
	b = appendString(b, e.Method)
	b = append(b, `,"host":`...)
	b = appendString(b, e.Host)
	b = append(b, `,"path":`...)
	b = appendString(b, e.Path)
	b = append(b, `,"code":`...)
	b = strconv.AppendInt(b, int64(e.Code), 10)
	b = append(b, `,"route":`...)
	b = appendString(b, e.Route)
	b = append(b, `,"backend":`...)
	b = appendString(b, e.Backend)
	b = append(b, `,"cluster":`...)
	b = appendString(b, e.Cluster)
	b = append(b, `,"duration":`...)
	b = strconv.AppendInt(b, int64(e.Duration), 10)
	return append(b, "}\n"...)
}

// appendString appends s as a JSON string, escaped as slog's JSON
// handler escapes it.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

const hex = "0123456789abcdef"

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
