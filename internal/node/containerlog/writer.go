package containerlog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Writer appends the records of one run of a container to its log file.
// Its streams may be written from different goroutines; each record reaches
// the file in one write, so records of stdout and stderr never mix within a
// line.
type Writer struct {
	// Now stamps records; nil means time.Now. Set it before the first
	// Stream.
	Now func() time.Time
	// MaxLine is the longest message of one record, longer lines being
	// split; zero means DefaultMaxLine. Set it before the first Stream.
	MaxLine int

	path string

	// mu guards the fields below. A stream takes its own lock before this
	// one, never after.
	mu      sync.Mutex
	f       *os.File
	buf     []byte
	streams map[*stream]struct{}
	closing bool
	closed  bool
}

// Open opens the log file at path for appending, creating it and its
// directory if needed. Appending rather than truncating keeps what an
// earlier Writer of the same run wrote, for a node that restarts while the
// container keeps its restart count.
func Open(path string) (*Writer, error) {
	// Logs can hold anything the workload prints, so they are not world
	// readable.
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("open container log: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("open container log: %w", err)
	}
	return &Writer{path: path, f: f, streams: make(map[*stream]struct{})}, nil
}

// Stream returns the writer of stream name, Stdout or Stderr. It buffers an
// unfinished line until its newline, until it exceeds MaxLine (then a P
// record is written) or until Close (then the rest is written as P). Another
// name gives a writer whose writes fail. Two streams of the same name are
// independent: each keeps its own unfinished line.
func (w *Writer) Stream(name string) io.WriteCloser {
	s := &stream{w: w, name: name}
	if name != Stdout && name != Stderr {
		s.err = fmt.Errorf("container log %s: unknown stream %q", w.path, name)
		return s
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closing {
		s.err = fmt.Errorf("container log %s: %w", w.path, os.ErrClosed)
		return s
	}
	w.streams[s] = struct{}{}
	return s
}

// Close writes what each open stream holds of an unfinished line, as Close
// of the stream does, and closes the file. Writes after Close fail.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closing {
		w.mu.Unlock()
		return nil
	}
	w.closing = true
	streams := make([]*stream, 0, len(w.streams))
	for s := range w.streams {
		streams = append(streams, s)
	}
	w.mu.Unlock()

	// Outside w.mu: a stream takes its own lock first.
	var errs []error
	for _, s := range streams {
		errs = append(errs, s.Close())
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if err := w.f.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close container log: %w", err))
	}
	return errors.Join(errs...)
}

func (w *Writer) maxLine() int {
	if w.MaxLine > 0 {
		return w.MaxLine
	}
	return DefaultMaxLine
}

// chunk is a record's message and tag before it is stamped.
type chunk struct {
	msg     []byte
	partial bool
}

// write appends the records of chunks in one write. The clock is read under
// the lock so that the order of records and of their timestamps agree (as
// far as the clock does), which the since filters rely on.
func (w *Writer) write(stream string, chunks []chunk) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fmt.Errorf("container log %s: %w", w.path, os.ErrClosed)
	}
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	t := now()
	w.buf = w.buf[:0]
	for _, c := range chunks {
		w.buf = appendRecord(w.buf, t, stream, c.partial, c.msg)
	}
	if _, err := w.f.Write(w.buf); err != nil {
		return fmt.Errorf("write container log: %w", err)
	}
	return nil
}

// stream is the io.WriteCloser of one stream.
type stream struct {
	w    *Writer
	name string
	// err, when set at creation, fails every write.
	err error

	mu      sync.Mutex
	pending []byte // the unfinished line, no newline in it
	chunks  []chunk
	closed  bool
}

// Write cuts p, after what is pending, into records and writes those that
// are complete. It reports len(p) once they are written: the rest is held,
// not lost.
func (s *stream) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, fmt.Errorf("container log %s %s: %w", s.w.path, s.name, os.ErrClosed)
	}
	maxLine := s.w.maxLine()
	s.chunks = s.chunks[:0]
	data := append(s.pending, p...)
	// Only p can hold a newline: pending never does.
	scanFrom := len(s.pending)
	for {
		i := bytes.IndexByte(data[scanFrom:], '\n')
		if i < 0 {
			break
		}
		line := data[:scanFrom+i]
		for len(line) > maxLine {
			s.chunks = append(s.chunks, chunk{msg: line[:maxLine], partial: true})
			line = line[maxLine:]
		}
		s.chunks = append(s.chunks, chunk{msg: line})
		data = data[scanFrom+i+1:]
		scanFrom = 0
	}
	// A line may stay unfinished for long (a progress bar, a prompt), so
	// only what exceeds MaxLine is written now, as containerd does.
	for len(data) > maxLine {
		s.chunks = append(s.chunks, chunk{msg: data[:maxLine], partial: true})
		data = data[maxLine:]
	}
	if len(s.chunks) > 0 {
		if err := s.w.write(s.name, s.chunks); err != nil {
			return 0, err
		}
	}
	// data and the chunks share s.pending's array: move the rest to its
	// front only once the chunks are written.
	s.pending = append(s.pending[:0], data...)
	return len(p), nil
}

// Close writes the unfinished line, if any, as a P record: the process ended
// it without a newline, and a reader gives it back without one.
func (s *stream) Close() error {
	if s.err != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var err error
	if len(s.pending) > 0 {
		err = s.w.write(s.name, []chunk{{msg: s.pending, partial: true}})
		s.pending = nil
	}
	s.w.mu.Lock()
	delete(s.w.streams, s)
	s.w.mu.Unlock()
	return err
}
