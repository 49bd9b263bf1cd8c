package containerlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// DefaultPollInterval is how often a following Read looks for new records
// when Reader.PollInterval is zero.
const DefaultPollInterval = 200 * time.Millisecond

// Reader reads log files. Its zero value is ready to use; the fields are
// hooks for tests.
type Reader struct {
	// Now is the clock of Options.SinceSeconds; nil means time.Now.
	Now func() time.Time
	// PollInterval is how often Follow looks for new records; zero means
	// DefaultPollInterval. Polling rather than watching the file keeps the
	// package free of dependencies, and a few hundred milliseconds is within
	// what kubectl logs -f users notice.
	PollInterval time.Duration
}

// Read writes the log file at path to w as kubelet does for kubectl logs:
// the messages of its records, a record's P pieces joined back into one
// line, filtered and cut as opts asks. A missing file is an error wrapping
// os.ErrNotExist that names the path.
//
// With opts.Follow, Read goes on after the end of the file, writing records
// as they are appended, until ctx ends (it returns ctx's error) or running
// reports false and all that was written before is read. The node must
// therefore close a run's Writer before running reports false. Read calls
// running at each poll; a nil running, or opts.Previous, means the run has
// ended.
func Read(ctx context.Context, path string, opts Options, w io.Writer, running func() bool) error {
	var r Reader
	return r.Read(ctx, path, opts, w, running)
}

// Read is the package's Read with r's clock and poll interval.
func (r *Reader) Read(ctx context.Context, path string, opts Options, w io.Writer, running func() bool) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read container log: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("read container log: %w", err)
	}
	size := fi.Size()

	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	out := &output{w: w, since: opts.since(now()), timestamps: opts.Timestamps, remain: -1}
	if opts.LimitBytes > 0 {
		out.remain = opts.LimitBytes
	}
	var start int64
	if opts.Tail > 0 {
		if start, err = tailStart(f, size, opts.Tail, tailBlock); err != nil {
			return err
		}
		// tailStart can start early; count what reading from there gives
		// to skip the excess.
		n, err := countSegments(ctx, f, start, size)
		if err != nil {
			return err
		}
		out.skip = max(0, n-opts.Tail)
	}

	asm := &assembler{emit: out.write}
	lr := &lineReader{f: f, off: start, limit: size}
	// The file as it was opened comes first, so that the count above holds.
	if err := readLines(ctx, lr, asm); err != nil {
		return out.result(err)
	}
	if opts.Follow && !opts.Previous && running != nil {
		if err := r.follow(ctx, lr, asm, running); err != nil {
			return out.result(err)
		}
	}
	return out.result(asm.flush())
}

// follow reads what is appended to the file until running reports false.
func (r *Reader) follow(ctx context.Context, lr *lineReader, asm *assembler, running func() bool) error {
	interval := r.PollInterval
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	lr.limit = -1
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		// Asked before reading: what the run wrote before it ended is in
		// the file when running turns false, so one more read gets it all.
		alive := running()
		if err := readLines(ctx, lr, asm); err != nil {
			return err
		}
		if !alive {
			return nil
		}
		t.Reset(interval)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// readLines passes the complete records lr has to asm, skipping lines that
// are not records as kubelet does.
func readLines(ctx context.Context, lr *lineReader, asm *assembler) error {
	for n := 0; ; n++ {
		// A large file can take a while: stop when the client went away.
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		line, ok, err := lr.next()
		if err != nil || !ok {
			return err
		}
		r, err := parseRecord(line)
		if err != nil {
			continue
		}
		if err := asm.add(r); err != nil {
			return err
		}
	}
}

// countSegments counts the segments an assembler passes on when reading
// f from start to end and flushing, as Read does without Follow.
func countSegments(ctx context.Context, f io.ReaderAt, start, end int64) (int, error) {
	n := 0
	asm := &assembler{emit: func(segment) error { n++; return nil }}
	if err := readLines(ctx, &lineReader{f: f, off: start, limit: end}, asm); err != nil {
		return 0, err
	}
	if err := asm.flush(); err != nil {
		return 0, err
	}
	return n, nil
}

// errLimit stops reading once Options.LimitBytes are written.
var errLimit = errors.New("byte limit reached")

// output writes segments to the client as Options ask.
type output struct {
	w          io.Writer
	since      time.Time
	timestamps bool
	// skip is how many segments to drop first, for Tail.
	skip int
	// remain is how many bytes may still be written, -1 for no limit.
	remain int
	buf    []byte
}

func (o *output) write(s segment) error {
	// Tail before since, as kubelet does; since timestamps only grow the
	// order does not change the result.
	if o.skip > 0 {
		o.skip--
		return nil
	}
	if s.time.Before(o.since) {
		return nil
	}
	o.buf = o.buf[:0]
	if o.timestamps && s.head {
		o.buf = s.time.AppendFormat(o.buf, timeFormat)
		o.buf = append(o.buf, ' ')
	}
	o.buf = append(o.buf, s.data...)
	if s.end {
		o.buf = append(o.buf, '\n')
	}
	b := o.buf
	if o.remain >= 0 && len(b) > o.remain {
		b = b[:o.remain]
	}
	n, err := o.w.Write(b)
	if o.remain >= 0 {
		o.remain -= n
	}
	if err != nil {
		return fmt.Errorf("write container log: %w", err)
	}
	if n < len(b) {
		return fmt.Errorf("write container log: %w", io.ErrShortWrite)
	}
	if o.remain == 0 {
		return errLimit
	}
	return nil
}

// result is Read's error for err: reaching the byte limit is success.
func (o *output) result(err error) error {
	if errors.Is(err, errLimit) {
		return nil
	}
	return err
}

// lineReader reads the lines of a file from an offset, keeping an unfinished
// last line until its newline is written.
type lineReader struct {
	f io.ReaderAt
	// off is the offset of the first byte not yet read.
	off int64
	// limit is where reading stops, -1 for the end of the file.
	limit int64

	buf        []byte
	start, end int // buf[start:end] is read but not returned
	scanned    int // buf[start:scanned] has no newline
}

// next returns the next line without its newline, valid until the next
// call, or false when no complete line is left for now.
func (lr *lineReader) next() ([]byte, bool, error) {
	for {
		if i := bytes.IndexByte(lr.buf[lr.scanned:lr.end], '\n'); i >= 0 {
			line := lr.buf[lr.start : lr.scanned+i]
			lr.start = lr.scanned + i + 1
			lr.scanned = lr.start
			return line, true, nil
		}
		lr.scanned = lr.end
		if lr.start > 0 {
			copy(lr.buf, lr.buf[lr.start:lr.end])
			lr.end -= lr.start
			lr.scanned = lr.end
			lr.start = 0
		}
		if lr.end == len(lr.buf) {
			lr.buf = append(lr.buf, make([]byte, max(32<<10, len(lr.buf)))...)
		}
		p := lr.buf[lr.end:]
		if lr.limit >= 0 {
			if lr.off >= lr.limit {
				return nil, false, nil
			}
			if rest := lr.limit - lr.off; int64(len(p)) > rest {
				p = p[:rest]
			}
		}
		n, err := lr.f.ReadAt(p, lr.off)
		lr.end += n
		lr.off += int64(n)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, false, fmt.Errorf("read container log: %w", err)
		}
		if n == 0 {
			return nil, false, nil
		}
	}
}
